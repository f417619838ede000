"""Round trip through a real Prometheus: telemetry -> the exporters' raw series (OpenMetrics)
-> ``promtool tsdb create-blocks-from openmetrics`` -> ``prometheus`` on 127.0.0.1 with no
scrape targets -> ``predops ingest prometheus`` -> lake, compared row by row with the source.

Needs Debian's ``prometheus`` package (it brings ``promtool``); CI installs it. Without it
the tests fail, they do not skip.

Tolerances: gauges read one series (memory, hottest GPU, counters, Ready) come back
exactly; gauges that Prometheus averages or sums over GPUs (utilisation, power) within
1e-6 relative (float order of summation); ``cpu_util_pct`` comes from ``rate()`` of the
idle-seconds counters and is compared within 1e-3 percentage points. The XID total is
rebuilt from changes of the last-XID gauge, so it counts from the start of the range:
the comparison is with the source total minus its value at the first row.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import requests
from click.testing import CliRunner

from core.schemas import TELEMETRY, UTC_TS
from pipelines.cli import main
from pipelines.lake import Lake
from tests.fakes.exporters import write_openmetrics

pytestmark = pytest.mark.integration

STEP = timedelta(minutes=5)
START = datetime(2026, 1, 5, tzinfo=UTC)
GPU_COLUMNS = (
    "gpu_util_pct",
    "gpu_temp_c",
    "gpu_power_w",
    "ecc_sbe_total",
    "ecc_dbe_total",
    "xid_errors_total",
    "pcie_replay_total",
)
INSTALL_HINT = (
    "Debian's prometheus package is not installed (it provides prometheus and "
    "promtool); install it with: apt-get update && apt-get install -y "
    "--no-install-recommends prometheus"
)


def _cumulative(
    rng: np.random.Generator, shape: tuple[int, ...], lam: float, cap: int
) -> np.ndarray:
    return np.cumsum(np.minimum(rng.poisson(lam, shape), cap), axis=-1) + rng.integers(
        0, 50, (*shape[:-1], 1)
    )


def source_fleet(seed: int = 7, hours: int = 12) -> tuple[pl.DataFrame, dict[str, int]]:
    """Telemetry of a small fleet (4 eight-GPU nodes, 4 CPU nodes) on a 5-minute grid and
    the GPU count per node. Stand-in for the synthetic fleet until its
    ``simulate_frames`` lands."""
    rng = np.random.default_rng(seed)
    gpus = {f"gpu-{i:02d}.r1.dc1": 8 for i in range(4)} | {
        f"cpu-{i:02d}.r2.dc1": 0 for i in range(4)
    }
    n = hours * 12
    ts = [START + STEP * k for k in range(n)]
    frames = []
    for node, g in gpus.items():
        gpu = g > 0
        col: dict[str, object] = {
            "ts": ts,
            "node_id": [node] * n,
            "cpu_util_pct": rng.uniform(0, 100, n).astype(np.float32),
            "mem_used_bytes": rng.integers(1 << 30, 512 << 30, n),
            "nic_flaps_total": _cumulative(rng, (n,), 0.02, 3),
            "disk_realloc_total": _cumulative(rng, (n,), 0.05, 8),
            "mce_total": _cumulative(rng, (n,), 0.03, 2),
            "node_ready": rng.uniform(size=n) > 0.05,
        }
        for c, values in {
            "gpu_util_pct": rng.uniform(0, 100, n).astype(np.float32),
            "gpu_temp_c": rng.uniform(28, 92, n).astype(np.float32),
            "gpu_power_w": rng.uniform(400, 5600, n).astype(np.float32),
            "ecc_sbe_total": _cumulative(rng, (n,), 0.3, 20),
            "ecc_dbe_total": _cumulative(rng, (n,), 0.01, 1),
            "xid_errors_total": _cumulative(rng, (n,), 0.05, 3),
            "pcie_replay_total": _cumulative(rng, (n,), 0.2, 9),
        }.items():
            col[c] = values if gpu else [None] * n
        frames.append(pl.DataFrame(col, schema_overrides={"ts": UTC_TS}, strict=False))
    frame = pl.concat(frames, how="diagonal_relaxed")
    return frame.select(TELEMETRY.names).cast(TELEMETRY.polars_schema()), gpus


@dataclass(frozen=True)
class Backfilled:
    url: str
    source: pl.DataFrame
    timings: dict[str, float]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path, limit_s: float) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"prometheus exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if requests.get(f"{url}/-/ready", timeout=1).status_code == 200:
                return
        except requests.ConnectionError:
            pass
        time.sleep(0.1)
    pytest.fail(f"prometheus not ready after {limit_s}s:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def backfilled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backfilled]:
    prometheus, promtool = shutil.which("prometheus"), shutil.which("promtool")
    if prometheus is None or promtool is None:
        pytest.fail(INSTALL_HINT)
    root = tmp_path_factory.mktemp("prometheus")
    timings: dict[str, float] = {}
    t = time.perf_counter()
    source, gpus = source_fleet()
    exported = write_openmetrics(source, gpus, root / "fleet.om", step=STEP)
    timings["export_s"] = time.perf_counter() - t
    t = time.perf_counter()
    subprocess.run(
        [
            promtool,
            "tsdb",
            "create-blocks-from",
            "openmetrics",
            "--quiet",
            str(exported.path),
            str(root / "data"),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    timings["promtool_s"] = time.perf_counter() - t
    (root / "prometheus.yml").write_text("global:\n  scrape_interval: 1m\nscrape_configs: []\n")
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log = root / "prometheus.log"
    t = time.perf_counter()
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                prometheus,
                f"--config.file={root / 'prometheus.yml'}",
                f"--storage.tsdb.path={root / 'data'}",
                "--storage.tsdb.retention.time=100y",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        _wait_ready(url, proc, log, limit_s=60)
        timings["prometheus_ready_s"] = time.perf_counter() - t
        yield Backfilled(url, source, timings)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _ingest_cli(b: Backfilled, workspace: Path, *extra: str) -> dict[str, object]:
    end = b.source["ts"].max()
    assert isinstance(end, datetime)
    args = [
        "--workspace",
        str(workspace),
        "ingest",
        "prometheus",
        b.url,
        "--start",
        START.isoformat(),
        "--end",
        end.isoformat(),
        "--step",
        "5m",
        "--json",
    ]
    for kv in extra:
        args += ["-o", kv]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert isinstance(out, dict)
    return out


def expected_from(source: pl.DataFrame) -> pl.DataFrame:
    """What Prometheus can give back: XID totals count from the first row of the range."""
    first = pl.col("xid_errors_total").first().over("node_id")
    return source.sort("node_id", "ts").with_columns(
        (pl.col("xid_errors_total") - first).alias("xid_errors_total")
    )


def assert_round_trip(got: pl.DataFrame, source: pl.DataFrame) -> None:
    exp = expected_from(source)
    got = got.select(TELEMETRY.names).sort("node_id", "ts")
    assert got.height == exp.height
    joined = exp.join(got, on=["node_id", "ts"], how="full", suffix="_got", coalesce=True)
    assert joined.height == exp.height, "rows at other times or for other nodes came back"
    exact = [
        "mem_used_bytes",
        "gpu_temp_c",
        "ecc_sbe_total",
        "ecc_dbe_total",
        "xid_errors_total",
        "pcie_replay_total",
        "nic_flaps_total",
        "disk_realloc_total",
        "mce_total",
        "node_ready",
    ]
    for c in exact:
        a, b = joined[c], joined[f"{c}_got"]
        same = (a == b) | (a.is_null() & b.is_null())
        assert same.all(), f"{c}: {joined.filter(~same).select('node_id', 'ts', c, c + '_got')}"
    for c, rel, absolute in (
        ("gpu_util_pct", 1e-6, 1e-4),
        ("gpu_power_w", 1e-6, 1e-3),
        ("cpu_util_pct", 0.0, 1e-3),
    ):
        a, b = joined[c].cast(pl.Float64), joined[f"{c}_got"].cast(pl.Float64)
        assert (a.is_null() == b.is_null()).all(), c
        err = (a - b).abs() - (absolute + rel * a.abs())
        worst = (a - b).abs().max()
        assert (err.drop_nulls() <= 0).all(), f"{c}: worst error {worst!r}"


def test_round_trip_through_a_real_prometheus(backfilled: Backfilled, tmp_path: Path) -> None:
    t = time.perf_counter()
    out = _ingest_cli(backfilled, tmp_path / "ws")
    ingest_s = time.perf_counter() - t
    tel = out["tables"]["telemetry"]  # type: ignore[index]
    assert tel["rows_quarantined"] == 0 and tel["rows_written"] == backfilled.source.height
    got = Lake(tmp_path / "ws" / "lake").scan("telemetry").collect()
    assert_round_trip(got, backfilled.source)
    # GPU metrics are null on CPU-only nodes (no DCGM exporter there), as in the source.
    cpu_rows = got.filter(pl.col("node_id").str.starts_with("cpu-"))
    assert cpu_rows.height and all(cpu_rows[c].is_null().all() for c in GPU_COLUMNS)
    print(json.dumps({**backfilled.timings, "ingest_s": round(ingest_s, 2)}))

    # Re-ingesting the same range adds nothing.
    again = _ingest_cli(backfilled, tmp_path / "ws")
    assert again["tables"]["telemetry"]["rows_written"] == 0  # type: ignore[index]


def test_small_chunks_give_the_same_rows(backfilled: Backfilled, tmp_path: Path) -> None:
    # 3 nodes per request and 50 steps per window: 3 node batches x 3 windows per column.
    _ingest_cli(backfilled, tmp_path / "ws", "node_batch=3", "max_points=50")
    got = Lake(tmp_path / "ws" / "lake").scan("telemetry").collect()
    assert_round_trip(got, backfilled.source)


def test_plain_changes_over_a_step_would_miss_xids(backfilled: Backfilled, tmp_path: Path) -> None:
    """Why the default XID query subtracts two changes() windows: the plain one loses
    code changes that straddle a step boundary (the exporter places some there)."""
    naive = "sum by ($node) (changes(DCGM_FI_DEV_XID_ERRORS{$sel}[$step]))"
    _ingest_cli(backfilled, tmp_path / "ws", f"query.xid_errors_total={naive}")
    got = Lake(tmp_path / "ws" / "lake").scan("telemetry").collect()
    exp = expected_from(backfilled.source)

    def final(f: pl.DataFrame) -> pl.DataFrame:
        return f.sort("ts").group_by("node_id").agg(pl.col("xid_errors_total").last())

    cmp = final(exp).join(final(got), on="node_id", suffix="_got").drop_nulls()
    assert (cmp["xid_errors_total_got"] <= cmp["xid_errors_total"]).all()
    assert (cmp["xid_errors_total_got"] < cmp["xid_errors_total"]).any()
