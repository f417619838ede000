"""Reliability report: injected faults, a bounded load burst, API fuzzing and hostile
input, each with what was tried and what was lost (which must be nothing).

    python -m benchmarks.bench_reliability --json [--workspace WS] [--no-api | --no-faults]
        [--requests 1000] [--fuzz-examples 10]

Fault scenarios (``benchmarks/reliability_faults.py``, the same injections as
``tests/reliability/``): Prometheus unreachable / down / 500 / slow mid-ingest, a corrupt
Parquet file, the disk full while writing (a real tmpfs; root only), the Kubernetes API
failing during a drain, ``predops apply`` SIGKILLed mid-plan, ``predops ingest``
SIGKILLed before each of its publish steps in turn, the MLflow store locked or
unreachable. Hostile inputs (``benchmarks/reliability_inputs.py``): malformed files
(numeric times, ragged and cut CSV, repeated and nested columns, silent coercions, a bad
file late in a folder), a misbehaving Prometheus (trickle, huge, hang, malformed,
cross-origin redirect) and credentials in a Prometheus URL; each lists what it tried.

API scenarios, against ``predops serve`` on 127.0.0.1 (a copy of WS, or a workspace built
with ``predops demo --no-serve``) with an operator, an expired operator and a viewer token:

- load: single-node scoring (a feature vector) from a second process
  (``benchmarks/bench_serving.py``'s load generator) — a fixed request count at 1, 4 and
  16 connections, then at 4 while the ``champion`` alias moves to a new version, and at 4
  while the scheduler's pipeline job rebuilds features, scores and plans; throughput,
  p50 / p99 latency, errors (must be 0);
- fuzz: schemathesis against the server's own OpenAPI document (bounded examples per
  operation, with the operator token): 5xx answers and response-schema violations must be 0;
- hostile input: path traversal, oversized bodies and batches, NaN / inf / huge numbers,
  unknown ids, non-UTF-8, deeply nested JSON, a pickle, missing / wrong / expired tokens
  and a too-weak role — each must get a 4xx with a message, never echo a secret, never run
  the pickle; the server's log must hold no traceback and no secret.

A scenario that cannot run here says ``not_run`` and why; nothing is faked.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks import bench_serving
from benchmarks import reliability_faults as faults
from benchmarks import reliability_inputs as inputs

# Run as a module from the repository root (``python -m benchmarks.bench_reliability``):
# the fault scenarios reuse the helpers and fakes under ``tests/``.
ROOT = Path(__file__).resolve().parent.parent

SECRETS = {"operator": "op-7f3a91c2-secret", "expired": "old-22b8e0d4-secret"}
SECRETS["viewer"] = "view-5c6d1e9a-secret"
WRONG = "wrong-0b1c2d3e-secret"


def cpu_now() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def run_scenario(name: str, fn: Any, *args: Any) -> dict[str, Any]:
    """Run one scenario: its result plus wall and CPU seconds; ``ok`` when nothing lost."""
    wall, cpu = time.perf_counter(), cpu_now()
    try:
        out = fn(*args)
    except Exception as exc:  # a scenario that breaks is reported, not hidden
        out = {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()[-2000:]}
    out["seconds"] = round(time.perf_counter() - wall, 1)
    out["cpu_seconds"] = round(cpu_now() - cpu, 1)
    if "not_run" not in out:
        out["lost_total"] = sum(out.get("lost", {}).values()) if "error" not in out else None
        out["ok"] = out["lost_total"] == 0
    print(f"[reliability] {name}: {out.get('lost_total', out.get('not_run'))}", file=sys.stderr)
    return out


# ---------------------------------------------------------------- server
def serve_config(path: Path) -> Path:
    from predops.serving.config import token_digest

    expires = {"expired": "expires_at = 2020-01-01T00:00:00Z\n"}
    roles = {"operator": "operator", "expired": "operator", "viewer": "viewer"}
    text = "[server]\nreload_every_s = 1\n"
    for name, secret in SECRETS.items():
        text += (
            f'\n[[tokens]]\nname = "{name}"\nrole = "{roles[name]}"\n'
            f'sha256 = "{token_digest(secret)}"\n{expires.get(name, "")}'
        )
    path.write_text(text)
    return path


def env_for(ws: Path) -> dict[str, str]:
    """The serving benchmark's environment without its server override: this server's
    settings come from its TOML (reload every second)."""
    env = bench_serving.env_for(ws)
    env.pop("PREDOPS_SERVER__RELOAD_EVERY_S", None)
    return dict(env)


def start_server(ws: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    cmd = [bench_serving.PREDOPS, "--workspace", str(ws), "serve", "--port", str(port)]
    cmd += ["--config", str(serve_config(ws.parent / "serve.toml"))]
    env = env_for(ws)
    with open(log, "wb") as fh:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT)
    bench_serving.wait_http(port, "/readyz", proc)
    return proc


def auth(who: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {SECRETS.get(who, who)}"}


# ---------------------------------------------------------------- load
def served_version(port: int, body: bytes) -> str:
    import httpx

    r = httpx.post(
        f"http://127.0.0.1:{port}/v1/failure/score",
        content=body,
        headers={"Content-Type": "application/json"},
    )
    return str(r.json()["model"]["model_version"])


def move_champion(ws: Path) -> str:
    """Register the champion's object again as a new version and promote it (a backtest
    that prefers the new one): the alias moves, as after a real retrain."""
    from predops.pipelines.jobs import failure as failure_jobs
    from predops.pipelines.jobs.failure import FailureModel
    from predops.pipelines.workspace import registry

    uri = f"sqlite:///{ws / 'mlflow.db'}"
    obj, _, prov = registry.load_python_model("node_failure", uri=uri)
    new = registry.log_and_register(
        "node_failure",
        obj,
        predict=FailureModel.__call__,
        params={"copy_of": prov.model_version},
        metrics={},
        feature_set_hash=prov.feature_set_hash,
        data_cutoff=prov.data_cutoff,
        pip_requirements=failure_jobs.PIP_REQUIREMENTS,
        uri=uri,
    )
    registry.promote("node_failure", lambda u: 0.0 if u.endswith(f"/{new}") else 1.0, uri=uri)
    return new


def advance_telemetry(ws: Path) -> str:
    """Every node's latest telemetry row again, 5 minutes later (a new data cutoff)."""
    from datetime import timedelta

    import polars as pl

    from predops.pipelines.workspace.lake import Lake

    lake = Lake(ws / "lake")
    last = lake.scan("telemetry").filter(pl.col("ts") == pl.col("ts").max()).collect()
    later = last.with_columns(pl.col("ts") + timedelta(minutes=5))
    for (source,), part in later.partition_by("source", as_dict=True).items():
        lake.write("telemetry", str(source), part.drop("source"))
    return str(later["ts"].max())


def load(port: int, ws: Path, requests: int) -> dict[str, Any]:
    vector = bench_serving.feature_vector(ws)
    body = json.dumps({"nodes": [{"features": vector}], "explain": 0}).encode()

    def burst(clients: int) -> dict[str, Any]:
        return dict(bench_serving.drive(port, "/v1/failure/score", body, clients, 600.0, requests))

    levels = {str(c): burst(c) for c in (1, 4, 16)}
    before = served_version(port, body)
    moved: dict[str, Any] = {}

    def mover() -> None:
        time.sleep(1.0)
        moved["to"] = move_champion(ws)

    t = threading.Thread(target=mover)
    t.start()
    during_reload = burst(4)
    t.join()
    deadline = time.monotonic() + 30
    while served_version(port, body) != moved["to"] and time.monotonic() < deadline:
        time.sleep(0.5)
    after = served_version(port, body)
    new_cutoff = advance_telemetry(ws)  # new data: the pipeline job has a cutoff to run
    job = subprocess.Popen(
        [bench_serving.PREDOPS, "--workspace", str(ws), "schedule", "run", "pipeline", "--json"],
        cwd=ROOT,
        env=env_for(ws),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    during_job = burst(4)
    job_out, _ = job.communicate(timeout=900)
    ran = json.loads(job_out) if job_out.strip() else {"status": f"exit {job.returncode}"}
    job_status = {"cutoff": new_cutoff, **{k: ran.get(k) for k in ("status", "error", "rows")}}
    runs = [*levels.values(), during_reload, during_job]
    return {
        "tried": {
            "request": "POST /v1/failure/score, one node's feature vector, explain 0",
            "levels": levels,
            "during_alias_move": {**during_reload, "version_before": before, "after": after},
            "during_pipeline_job": {**during_job, "job": job_status},
        },
        "lost": {
            "failed_requests": sum(r["errors"] for r in runs),
            "requests_not_answered": sum(requests - r["requests"] for r in runs),
            "alias_move_not_served": int(after != moved.get("to")),
            "pipeline_job_not_done": int(job_status["status"] != "done"),
        },
    }


# ---------------------------------------------------------------- fuzz
def fuzz(port: int, tmp: Path, examples: int) -> dict[str, Any]:
    schemathesis = Path(sys.executable).with_name("schemathesis")
    if not schemathesis.exists():
        return {"not_run": "schemathesis is not installed (pip install -e '.[dev]')"}
    report = tmp / "schemathesis.json"
    cmd = [str(schemathesis), "run", f"http://127.0.0.1:{port}/openapi.json"]
    cmd += ["--checks", "not_a_server_error,response_schema_conformance"]
    cmd += ["--max-examples", str(examples), "--seed", "1", "--workers", "1", "--no-shrink"]
    cmd += ["-H", f"Authorization: Bearer {SECRETS['operator']}", "--suppress-health-check", "all"]
    cmd += ["--report", "json", "--report-json-path", str(report)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1200, cwd=tmp)
    if not report.exists():
        return {
            "error": f"schemathesis wrote no report (exit {proc.returncode})",
            "log": proc.stdout[-3000:],
        }
    doc = json.loads(report.read_text())
    failures = [json.dumps(f) for f in doc.get("failures", [])]
    return {
        "tried": {
            "operations_tested": doc["operations"]["tested"],
            "test_cases": doc["test_cases"]["generated"],
            "phases": {k: v["status"] for k, v in doc["phases"].items()},
            "max_examples_per_operation": examples,
            "warnings": {k: v for k, v in doc.get("warnings", {}).items() if v},
            "seconds": round(doc["running_time"], 1),
            "failures": [f[:600] for f in failures[:5]],
        },
        "lost": {
            "server_errors_5xx": sum("not_a_server_error" in f for f in failures),
            "schema_violations": sum("response_schema_conformance" in f for f in failures),
            "other_failures": sum(
                "not_a_server_error" not in f and "response_schema_conformance" not in f
                for f in failures
            ),
            "errors": len(doc.get("errors", [])),
        },
    }


# ---------------------------------------------------------------- hostile input
def hostile(port: int, ws: Path, log: Path) -> dict[str, Any]:
    import pickle

    import httpx

    base = f"http://127.0.0.1:{port}"
    number = httpx.get(f"{base}/v1/failure/features").json()["numeric"][0]
    vector = bench_serving.feature_vector(ws)

    def with_value(token: str) -> dict[str, Any]:
        """A full vector whose first number is ``token`` as written (NaN, 1e999...)."""
        text = json.dumps({"nodes": [{"features": {**vector, number: 0.5}}]})
        raw = text.replace(f'"{number}": 0.5', f'"{number}": {token}').encode()
        return {"content": raw, "headers": {"Content-Type": "application/json"}}

    plan_id = httpx.get(f"{base}/v1/plans/latest").json()["plan_id"]
    marker = ws.parent / "pickle-ran"

    class Boom:
        def __reduce__(self) -> tuple[Any, ...]:
            return (os.system, (f"touch {marker}",))

    big = b'{"node_ids": ["' + b"x" * (9 << 20) + b'"]}'
    nested = b'{"node_ids": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    score = "/v1/failure/score"
    cases: list[tuple[str, str, str, dict[str, Any]]] = [
        ("path traversal in a plan id", "GET", "/v1/plans/..%2F..%2Fmlflow.db", {}),
        ("dot-dot plan id", "GET", "/v1/plans/%2e%2e", {}),
        ("NUL byte in a plan id", "GET", "/v1/plans/p%00x", {}),
        ("10,000-character plan id", "GET", "/v1/plans/" + "a" * 10_000, {}),
        (
            "traversal as a series id",
            "POST",
            "/v1/demand/forecast",
            {"json": {"series_ids": ["../../etc/passwd"]}},
        ),
        (
            "body over the size limit (9 MiB)",
            "POST",
            score,
            {"content": big, "headers": {"Content-Type": "application/json"}},
        ),
        ("batch over max_batch", "POST", score, {"json": {"node_ids": ["n"] * 10_001}}),
        ("NaN in a feature vector", "POST", score, with_value("NaN")),
        ("-Infinity in a feature vector", "POST", score, with_value("-Infinity")),
        ("1e999 in a feature vector", "POST", score, with_value("1e999")),
        ("1e300 (beyond float32)", "POST", score, with_value("1e300")),
        ("a string for a number", "POST", score, with_value('"hot"')),
        ("unknown node id", "POST", score, {"json": {"node_ids": ["no-such-node-42"]}}),
        (
            "non-UTF-8 body",
            "POST",
            score,
            {
                "content": b'{"node_ids": ["\xff\xfe"]}',
                "headers": {"Content-Type": "application/json"},
            },
        ),
        (
            "deeply nested JSON (100,000 levels)",
            "POST",
            score,
            {"content": nested, "headers": {"Content-Type": "application/json"}},
        ),
        (
            "a pickle as the body",
            "POST",
            score,
            {
                "content": pickle.dumps(Boom()),
                "headers": {"Content-Type": "application/octet-stream"},
            },
        ),
        ("approve without a token", "POST", f"/v1/plans/{plan_id}/approve", {}),
        (
            "approve with a wrong token",
            "POST",
            f"/v1/plans/{plan_id}/approve",
            {"headers": auth(WRONG)},
        ),
        (
            "approve with an expired token",
            "POST",
            f"/v1/plans/{plan_id}/approve",
            {"headers": auth("expired")},
        ),
        (
            "apply with a viewer token",
            "POST",
            f"/v1/plans/{plan_id}/apply",
            {"headers": auth("viewer")},
        ),
        (
            "apply with a wrong token",
            "POST",
            f"/v1/plans/{plan_id}/apply",
            {"headers": auth(WRONG)},
        ),
    ]
    tried = []
    lost = Counter[str]()
    with httpx.Client(base_url=base, timeout=60) as client:
        for name, method, path, kw in cases:
            try:
                r = client.request(method, path, **kw)
            except httpx.TransportError as exc:  # e.g. closed while the body was sent
                tried.append({"input": name, "status": None, "answer": repr(exc)[:160]})
                lost["no_answer"] += 1
                continue
            text = r.text
            tried.append({"input": name, "status": r.status_code, "answer": text[:160]})
            lost["server_errors_5xx"] += r.status_code >= 500
            lost["accepted_not_4xx"] += r.status_code < 400
            lost["no_message"] += r.status_code >= 400 and len(text.strip()) < 10
            lost["secret_echoed"] += any(s in text for s in (*SECRETS.values(), WRONG))
    logged = log.read_text(errors="replace")
    lost["pickle_executed"] = int(marker.exists())
    lost["traceback_in_server_log"] = logged.count("Traceback")
    lost["secret_in_server_log"] = sum(s in logged for s in (*SECRETS.values(), WRONG))
    return {"tried": tried, "lost": dict(lost)}


# ---------------------------------------------------------------- main
def served_copy(src: Path | None, tmp: Path) -> Path:
    """``tmp/ws``: a copy of ``src`` (the server may move aliases and write plans), or of a
    workspace built there with ``predops demo --no-serve`` when ``src`` is None."""
    if src is None:
        src = tmp / "built"
        bench_serving.build_workspace(src)
    ws = tmp / "ws"
    shutil.copytree(src, ws, ignore=shutil.ignore_patterns("*.lock"))
    return ws


def api_scenarios(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    ws = served_copy(args.workspace, tmp)
    port, log = bench_serving.free_port(), tmp / "server.log"
    server = start_server(ws, port, log)
    out: dict[str, Any] = {}
    try:
        out["hostile_input"] = run_scenario("hostile_input", hostile, port, ws, log)
        out["api_fuzz_schemathesis"] = run_scenario(
            "api_fuzz_schemathesis", fuzz, port, tmp, args.fuzz_examples
        )
        out["load_burst"] = run_scenario("load_burst", load, port, ws, args.requests)
    finally:
        out["server_cpu_seconds"] = round(bench_serving.stop(server), 1)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workspace", type=Path, default=None, help="a served workspace to copy")
    ap.add_argument("--no-api", action="store_true", help="only the fault scenarios")
    ap.add_argument("--no-faults", action="store_true", help="only the API scenarios")
    ap.add_argument("--requests", type=int, default=1000, help="requests per load burst")
    ap.add_argument("--fuzz-examples", type=int, default=10, help="per API operation")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    wall = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="predops-bench-reliability-"))
    scenarios: dict[str, Any] = {}
    try:
        for name, fn in {**faults.SCENARIOS, **inputs.SCENARIOS}.items():
            if args.no_faults:
                scenarios[name] = {"not_run": "--no-faults"}
                continue
            (tmp / name).mkdir()
            scenarios[name] = run_scenario(name, fn, tmp / name)
        if args.no_api:
            for name in ("hostile_input", "api_fuzz_schemathesis", "load_burst"):
                scenarios[name] = {"not_run": "--no-api"}
        else:
            scenarios.update(api_scenarios(args, tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ran = {k: v for k, v in scenarios.items() if isinstance(v, dict) and "ok" in v}
    out = {
        "benchmark": "reliability",
        "scenarios": scenarios,
        "ran": len(ran),
        "not_run": sorted(
            k for k, v in scenarios.items() if isinstance(v, dict) and "not_run" in v
        ),
        "all_ok": all(v["ok"] for v in ran.values()),
        "lost_total": sum(v.get("lost_total") or 0 for v in ran.values()),
        "cpu_count": os.cpu_count(),
        "cpu_seconds": round(cpu_now(), 1),
        "seconds": round(time.perf_counter() - wall, 1),
    }
    print(json.dumps(out, indent=None if args.json else 2, default=str))


if __name__ == "__main__":
    main()
