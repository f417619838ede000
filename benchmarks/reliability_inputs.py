"""Hostile-input scenarios of ``benchmarks/bench_reliability.py`` (issue 19's classes):
malformed files through ``predops ingest files``, a misbehaving Prometheus, and
credentials in a Prometheus URL. Each lists every input it tried, by category, and
``lost``: counters that must all be 0 (a traceback or a silent exit 0 on a bad file, a
row neither stored nor quarantined, a value stored other than it was written, a run past
its own limit, a secret found in the workspace).

They reuse the tests' builders and servers (``tests/pipelines/ingest``,
``tests/fakes/misbehaving_http.py``), so the benchmark and the tests try the same inputs.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa


def _cli(ws: Path, path: Path, table: str) -> tuple[int, dict[str, Any], str]:
    from click.testing import CliRunner

    from predops.pipelines.cli.main import main

    args = ["--workspace", str(ws), "ingest", "files", str(path), "--table", table, "--json"]
    res = CliRunner().invoke(main, args)
    lines = [ln for ln in res.stdout.splitlines() if ln.strip()]
    out = json.loads(lines[0]) if len(lines) == 1 else {}
    return res.exit_code, out, res.output


def _file_cases(tmp: Path) -> list[tuple[str, str, Path, str]]:
    """(category, input, path, expected): ``refused`` (a clear error, nothing written) or
    ``quarantined`` (the bad rows kept aside with their reason, the rest stored)."""
    from tests.pipelines.ingest.test_files_malformed import (
        HEADER,
        ROW,
        telemetry_table,
        write_parquet,
    )

    d = tmp / "inputs"
    d.mkdir()
    one_ts = pa.array([datetime(2026, 3, 1, tzinfo=UTC)], pa.timestamp("us", "UTC"))

    def csv(name: str, text: str) -> Path:
        (d / name).write_text(text, encoding="utf-8")
        return d / name

    def pq_ts(name: str, ts: pa.Array) -> Path:
        return write_parquet(d / name, pa.table({"ts": ts, "node_id": pa.array(["gpu-0001"])}))

    folder = d / "folder"
    folder.mkdir()
    (folder / "a.csv").write_text(f"{HEADER}\n{ROW}\n", encoding="utf-8")
    write_parquet(folder / "z.parquet", telemetry_table(cpu_util_pct=pa.array([[1.0]])))
    dup = pa.Table.from_arrays([one_ts, pa.array(["gpu-0001"]), pa.array(["x"])],
                               names=["ts", "node_id", "node_id"])  # fmt: skip
    return [
        ("numeric_time", "int64 epoch seconds", pq_ts("s.parquet", pa.array([1_772_323_200])),
         "refused"),
        ("numeric_time", "int64 epoch milliseconds",
         pq_ts("ms.parquet", pa.array([1_772_323_200_000])), "refused"),
        ("numeric_time", "float epoch seconds",
         pq_ts("f.parquet", pa.array([1_772_323_200.5])), "refused"),
        ("ragged_csv", "a row with too few fields",
         csv("few.csv", f"{HEADER}\n{ROW}\n2026-03-01T00:05:00Z,gpu-0001,40\n"), "quarantined"),
        ("ragged_csv", "a row with too many fields",
         csv("many.csv", f"{HEADER}\n{ROW}\n{ROW.replace('00:00', '00:05')},9\n"),
         "quarantined"),
        ("ragged_csv", "a file cut mid-line",
         csv("cut.csv", f"{HEADER}\n{ROW}\n2026-03-01T00:05:00Z,gpu-00"), "quarantined"),
        ("duplicate_columns", "CSV naming a column twice",
         csv("dup.csv", f"{HEADER},node_ready\n{ROW},false\n"), "refused"),
        ("duplicate_columns", "Parquet naming a column twice",
         write_parquet(d / "dup.parquet", dup), "refused"),
        ("nested_columns", "a list column",
         write_parquet(d / "list.parquet", telemetry_table(cpu_util_pct=pa.array([[1.0]]))),
         "refused"),
        ("nested_columns", "a struct column",
         write_parquet(d / "struct.parquet",
                       telemetry_table(cpu_util_pct=pa.array([{"a": 1.0}]))), "refused"),
        ("coercions", "a counter of 2**53 + 1",
         csv("big.csv", f"{HEADER}\n{ROW.replace(',3,', f',{2**53 + 1},')}\n"), "exact"),
        ("coercions", "node_ready = 2",
         csv("bool.csv", f"{HEADER}\n{ROW.replace('true', '2')}\n"), "quarantined"),
        ("coercions", "a year-0001 timestamp",
         csv("y1.csv", f"{HEADER}\n{ROW.replace('2026', '0001')}\n"), "quarantined"),
        ("folder", "a bad file after a good one", folder, "refused"),
    ]  # fmt: skip


def hostile_files(tmp: Path) -> dict[str, Any]:
    """Malformed files through ``predops ingest files --json``, each into a fresh
    workspace: a clear error and nothing written, or every bad row quarantined."""
    from predops.pipelines.workspace.lake import Lake

    lost = Counter[str]()
    tried: dict[str, list[dict[str, Any]]] = {}
    for i, (category, name, path, expected) in enumerate(_file_cases(tmp)):
        ws = tmp / f"ws-{i}"
        code, out, output = _cli(ws, path, "telemetry")
        lake = Lake(ws / "lake")
        stored = lake.scan("telemetry").collect()
        quarantined = lake.read_quarantine("telemetry").height
        rows_in = out.get("tables", {}).get("telemetry", {}).get("rows_in", 0)
        unclear = "Traceback" in output or not out
        if expected == "refused":
            unclear |= code == 0 or "error" not in out
            lost["written_by_a_refused_input"] += stored.height + quarantined
        else:
            unclear |= code != 0
            lost["rows_neither_stored_nor_quarantined"] += rows_in - stored.height - quarantined
        if expected == "quarantined":
            lost["bad_rows_not_quarantined"] += quarantined == 0
        if expected == "exact":
            values = stored["ecc_sbe_total"].to_list() if stored.height else []
            lost["values_not_stored_exactly"] += values != [2**53 + 1]
        if category == "coercions" and "0001" in name:
            lost["ancient_partitions"] += any((ws / "lake" / "telemetry").rglob("date=0001-*"))
        lost["unclear_failures"] += bool(unclear)
        tried.setdefault(category, []).append(
            {
                "input": name,
                "expected": expected,
                "exit": code,
                "error": str(out.get("error", ""))[:160],
                "stored": stored.height,
                "quarantined": quarantined,
            }
        )
    return {"tried": tried, "lost": dict(lost)}


def prometheus_misbehaving(tmp: Path) -> dict[str, Any]:
    """Trickle, huge, hang, malformed and cross-origin redirect answers, each with small
    limits: one clear error within a bound derived from the limits, never a traceback."""
    from predops.pipelines.ingest.batch import IngestError
    from tests.fakes.misbehaving_http import (
        MisbehavingServer,
        answer,
        hang,
        huge,
        redirect,
        success,
        trickle,
    )
    from tests.pipelines.ingest.test_prometheus_limits import options, read_all

    limits = {"request_deadline": "1s", "ingest_deadline": "3s", "max_response_bytes": "1MiB"}
    bound_s = 8.0  # two attempts at most at the request deadline, plus start-up
    cases: list[tuple[str, str, Callable[[str], Any]]] = [
        ("slow", "one byte every 0.25 s", lambda _: trickle(0.25)),
        ("slow", "accepts and never answers", lambda _: hang),
        ("huge", "150 MiB with Content-Length", lambda _: huge(150 << 20, declare_length=True)),
        ("huge", "150 MiB until close", lambda _: huge(150 << 20, declare_length=False)),
        ("malformed", "result is an object", lambda _: success({"a": 1})),
        ("malformed", "value 'abc'",
         lambda _: success([{"metric": {"instance": "gpu-01.dc1"}, "values": [[1, "abc"]]}])),
        ("malformed", "a 3-element sample",
         lambda _: success([{"metric": {"instance": "gpu-01.dc1"}, "values": [[1, "1", 2]]}])),
        ("malformed", "not JSON", lambda _: answer(b"<html>proxy error</html>")),
        ("redirect", "to another port", lambda other: redirect(other + "/api/v1/query_range")),
    ]  # fmt: skip
    lost = Counter[str]()
    tried: dict[str, list[dict[str, Any]]] = {}
    with MisbehavingServer(answer({"status": "success"})) as elsewhere:
        for category, name, make in cases:
            with MisbehavingServer(make(elsewhere.url)) as server:
                t0 = time.monotonic()
                try:
                    read_all(server.url, options(retries="1", **limits))
                    error, kind = "", "no error"
                except IngestError as exc:
                    error, kind = str(exc), "IngestError"
                except Exception as exc:  # the class of fault this scenario looks for
                    error, kind = f"{type(exc).__name__}: {exc}", type(exc).__name__
                took = time.monotonic() - t0
            lost["unclear_failures"] += kind != "IngestError"
            lost["runs_past_their_limit"] += took > bound_s
            tried.setdefault(category, []).append(
                {"input": name, "error_type": kind, "seconds": round(took, 2),
                 "error": error[-200:]}
            )  # fmt: skip
        lost["redirects_followed"] += elsewhere.requests
    return {"tried": tried, "limits": limits, "bound_s": bound_s, "lost": dict(lost)}


def credentials(tmp: Path) -> dict[str, Any]:
    """``ingest prometheus`` with a password and a token in the URL, once succeeding (with
    quarantined rows) and once failing: the secret is nowhere in the workspace or the
    output, and it was sent."""
    from tests.fakes.prometheus_api import FakePrometheus, always
    from tests.pipelines.cli import test_ingest_credentials as t

    lost = Counter[str]()
    tried = []
    ws = tmp / "ws"
    for outcome in ("succeeds", "fails"):
        script = always("ok" if outcome == "succeeds" else "500")
        with FakePrometheus(t.INSTANCES, value_fn=t.hot_node, script=script) as fake:
            res = t.ingest(ws, t.with_credentials(fake.url))
        found = t.secrets_in(ws, res.output)
        lost["places_holding_the_secret"] += len(found)
        tried.append({"input": f"URL with user:password@ and ?token=, ingest {outcome}",
                      "exit": res.exit_code, "secret_found_in": found})  # fmt: skip
    return {"tried": tried, "lost": dict(lost)}


SCENARIOS = {
    "hostile_files": hostile_files,
    "prometheus_misbehaving": prometheus_misbehaving,
    "credentials_in_urls": credentials,
}
