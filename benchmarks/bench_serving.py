"""Serving benchmark: our server vs ``mlflow models serve`` on the same failure model.

    python benchmarks/bench_serving.py --json [--workspace WS] [--seconds 10]

Without ``--workspace`` a small one is built with ``predops demo --no-serve`` (60 nodes x
12 days, both models trained and registered). The workspace is copied, and the copy's online
store is grown to 10,000 nodes (the simulated nodes' feature rows repeated under new ids,
last sample = now) so the batch request is fleet-sized.

Each server is started in turn on 127.0.0.1 (one process, one worker each) and driven by
the same load generator in a second process (after the same unmeasured warm-up of
``WARMUP_S`` seconds at 4 clients): ``c`` keep-alive connections (asyncio, the
request bytes prepared once), each sending the next request when the answer arrived, for a
fixed time and at most a fixed request count. The request is single-node scoring with the
node's feature vector in the body — the only input ``mlflow models serve`` accepts — and
both answer P(failure) for every horizon (``explain: 0``: no reasons, as MLflow gives
none). Reported per level: requests/s, p50 / p99 latency (ms), errors, and
``throughput_ratio_vs_mlflow``. Then the batch: 10,000 node ids in one request to our
server (features from the online store; median of 5 warm requests), and in process the cold
cost of scoring those 10,000 nodes (what a request pays right after a new model or
snapshot when the background warm-up has not run yet).

The load generator shares the machine's cores with the server, so compare ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
PREDOPS = str(Path(PY).with_name("predops"))
LEVELS = (4, 32)
WARMUP_S = 3.0
"""Unmeasured load each server gets before its measured levels (seconds)."""
BATCH = 10_000


# ---------------------------------------------------------------- workspace
def build_workspace(dest: Path) -> None:
    cmd = [PREDOPS, "--workspace", str(dest), "demo", "--no-serve"]
    cmd += ["--nodes", "60", "--days", "12", "--json"]
    subprocess.run(cmd, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)


def grow_online(ws: Path, nodes: int) -> dict[str, Any]:
    """Repeat the online node rows under new ids up to ``nodes``, last sample = now."""
    import polars as pl

    from predops.pipelines.jobs.failure import LAST_SAMPLE
    from predops.pipelines.workspace.feature_store import FeatureStore

    store = FeatureStore(ws / "features")
    meta = json.loads((ws / "features" / "online" / "node.json").read_text())
    frame = pl.read_ipc(ws / "features" / "online" / "node.arrow")
    reps = -(-nodes // frame.height)
    now = datetime.now(UTC).replace(microsecond=0)
    grown = pl.concat(
        [frame.with_columns((pl.col("node_id") + f"-r{i}").alias("node_id")) for i in range(reps)]
    ).head(nodes)
    grown = grown.with_columns(
        pl.lit(now - timedelta(minutes=1)).cast(grown.schema[LAST_SAMPLE]).alias(LAST_SAMPLE)
    )
    store.materialise_online(
        "node", grown, as_of=now, feature_set_hash=meta["feature_set_hash"], key="node_id"
    )
    return {"nodes": grown.height, "from_simulated_nodes": frame.height}


def feature_vector(ws: Path) -> dict[str, Any]:
    """One node's model features (JSON-ready: NaN -> null)."""
    from predops.pipelines.jobs import failure as failure_jobs
    from predops.pipelines.workspace.settings import Settings

    model, _ = failure_jobs.load_model(Settings(ws, ROOT.parent / "shared" / "data"))
    return online_vector(ws, model.base_features)


def online_vector(ws: Path, features: list[str]) -> dict[str, Any]:
    """The first online node's ``features`` (JSON-ready: NaN -> null)."""
    import polars as pl

    row = pl.read_ipc(ws / "features" / "online" / "node.arrow").row(0, named=True)
    out = {}
    for f in features:
        v = row[f]
        out[f] = None if isinstance(v, float) and v != v else v
    return out


# ---------------------------------------------------------------- servers
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_http(port: int, path: str, proc: subprocess.Popen[bytes], timeout: float = 180) -> None:
    import httpx

    def ready() -> bool:
        try:
            return httpx.get(f"http://127.0.0.1:{port}{path}", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    deadline = time.monotonic() + timeout
    while not ready():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"server on {port} not ready (exit status {proc.poll()})")
        time.sleep(0.5)


def env_for(ws: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "PREDOPS_WORKSPACE": str(ws),
            "MLFLOW_TRACKING_URI": f"sqlite:///{ws / 'mlflow.db'}",
            "PREDOPS_SERVER__RELOAD_EVERY_S": "3600",
            # mlflow runs `uvicorn` from PATH and unpickles predops classes
            "PATH": f"{Path(PY).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            "PYTHONPATH": str(ROOT),
        }
    )
    return env


def start_ours(ws: Path, port: int) -> subprocess.Popen[bytes]:
    cmd = [PREDOPS, "--workspace", str(ws), "serve", "--port", str(port)]
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env_for(ws), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    wait_http(port, "/readyz", proc)
    return proc


def start_mlflow(ws: Path, port: int, version: str) -> subprocess.Popen[bytes]:
    mlflow = str(Path(PY).with_name("mlflow"))
    uri = f"models:/predops.node_failure/{version}"
    cmd = [mlflow, "models", "serve", "-m", uri, "-p", str(port), "-h", "127.0.0.1"]
    cmd += ["--env-manager", "local", "-w", "1"]
    proc = subprocess.Popen(
        cmd, cwd=ws, env=env_for(ws), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    wait_http(port, "/ping", proc)
    return proc


def stop(proc: subprocess.Popen[bytes]) -> float:
    """Stop a server; returns its CPU seconds (user + system) from /proc."""
    cpu = cpu_seconds(proc.pid)
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    return cpu


def cpu_seconds(pid: int) -> float:
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    pids = [pid]
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        pids += [int(c) for c in children]
    except OSError:
        pass
    for p in pids:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
        except (OSError, IndexError, ValueError):
            pass
    return total


# ---------------------------------------------------------------- load
LOAD_CLIENT = r"""
import asyncio, json, sys, time
port, path, body_file, clients, seconds, max_requests = sys.argv[1:7]
port, clients, seconds, max_requests = int(port), int(clients), float(seconds), int(max_requests)
body = open(body_file, "rb").read()
request = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
           f"Content-Length: {len(body)}\r\n\r\n").encode() + body
lat, errors, sent = [], 0, 0

async def one_connection():
    global errors, sent
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    while time.perf_counter() < stop_at and sent < max_requests:
        sent += 1
        t0 = time.perf_counter()
        writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        await reader.readexactly(length)
        lat.append(time.perf_counter() - t0)
        if status != 200:
            errors += 1
    writer.close()

async def main():
    global stop_at
    stop_at = time.perf_counter() + seconds
    t0 = time.perf_counter()
    await asyncio.gather(*(one_connection() for _ in range(clients)))
    return time.perf_counter() - t0

elapsed = asyncio.run(main())
print(json.dumps({"latencies": lat, "errors": errors, "elapsed": elapsed}))
"""


def drive(
    port: int, path: str, body: bytes, clients: int, seconds: float, cap: int
) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as fh:
        fh.write(body)
    try:
        out = subprocess.run(
            [PY, "-c", LOAD_CLIENT, str(port), path, fh.name, str(clients), str(seconds), str(cap)],
            check=True,
            capture_output=True,
            text=True,
        )
    finally:
        os.unlink(fh.name)
    res = json.loads(out.stdout)
    lat = np.asarray(res["latencies"]) * 1e3
    return {
        "clients": clients,
        "requests": int(lat.size),
        "errors": res["errors"],
        "seconds": round(res["elapsed"], 2),
        "requests_per_s": round(lat.size / res["elapsed"], 1),
        "p50_ms": round(float(np.percentile(lat, 50)), 2),
        "p99_ms": round(float(np.percentile(lat, 99)), 2),
    }


def check_same_answer(ours: int, theirs: int, vec: dict[str, Any]) -> dict[str, Any]:
    """Both servers' P(failure) for the benchmark's vector (they must agree)."""
    import httpx

    a = httpx.post(
        f"http://127.0.0.1:{ours}/v1/failure/score",
        json={"nodes": [{"features": vec}], "explain": 0},
    ).json()["results"][0]["risks"]
    cols = list(vec)
    b = httpx.post(
        f"http://127.0.0.1:{theirs}/invocations",
        json={"dataframe_split": {"columns": cols, "data": [[vec[c] for c in cols]]}},
    ).json()["predictions"][0]
    ps_ours = [r["p_fail"] for r in a]
    ps_mlflow = [float(v) for v in (b.values() if isinstance(b, dict) else b)]
    return {
        "ours": ps_ours,
        "mlflow": ps_mlflow,
        "max_abs_diff": float(np.max(np.abs(np.subtract(ps_ours, ps_mlflow)))),
    }


# ---------------------------------------------------------------- batch
def batch(port: int, ws: Path, repeats: int = 5) -> dict[str, Any]:
    import httpx
    import polars as pl

    ids = pl.read_ipc(ws / "features" / "online" / "node.arrow")["node_id"].to_list()[:BATCH]
    body = {"node_ids": ids, "explain": 0}
    times = []
    with httpx.Client(timeout=120) as c:
        for _ in range(repeats):
            t0 = time.perf_counter()
            r = c.post(f"http://127.0.0.1:{port}/v1/failure/score", json=body)
            times.append(time.perf_counter() - t0)
            r.raise_for_status()
    scored = sum(1 for x in r.json()["results"] if x["status"] == "scored")
    return {
        "nodes": len(ids),
        "scored": scored,
        "warm_request_seconds_median": round(float(np.median(times)), 3),
        "warm_request_seconds_max": round(max(times), 3),
    }


def cold_fleet_scoring(ws: Path) -> dict[str, Any]:
    """In process: design matrix + P(failure) for every online node, every horizon."""
    from datetime import timedelta as td

    from predops.models.failure.scorer import FailureScorer
    from predops.pipelines.jobs import failure as failure_jobs
    from predops.pipelines.workspace.settings import Settings
    from predops.serving.fleet import FleetRisk, OnlineNodes

    model, prov = failure_jobs.load_model(Settings(ws, ROOT.parent / "shared" / "data"))
    snap = OnlineNodes(ws / "features").snapshot(datetime.now(UTC), td(days=1))
    scorer = FailureScorer(model)
    t0, c0 = time.perf_counter(), time.process_time()
    fleet = FleetRisk.build(prov.model_version, snap, scorer)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {
        "nodes": len(snap.node_ids),
        "horizons": int(fleet.p_fail.shape[1]),
        "seconds": round(wall, 3),
        "cpu_seconds": round(cpu, 3),
    }


# ---------------------------------------------------------------- main
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workspace", type=Path, default=None, help="a served workspace to copy")
    ap.add_argument("--seconds", type=float, default=10.0, help="load time per level")
    ap.add_argument("--max-requests", type=int, default=50_000, help="cap per level")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    t_start = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="predops-bench-serving-"))
    try:
        src = args.workspace
        if src is None:
            src = tmp / "built"
            build_workspace(src)
        ws = tmp / "ws"
        shutil.copytree(src, ws, ignore=shutil.ignore_patterns("*.lock"))
        grown = grow_online(ws, BATCH)
        vec = feature_vector(ws)
        ours_body = json.dumps({"nodes": [{"features": vec}], "explain": 0}).encode()
        cols = list(vec)
        mlflow_body = json.dumps(
            {"dataframe_split": {"columns": cols, "data": [[vec[c] for c in cols]]}}
        ).encode()
        from predops.pipelines.workspace import registry

        version = registry.alias_version("node_failure", uri=f"sqlite:///{ws / 'mlflow.db'}")

        results: dict[str, Any] = {"ours": {}, "mlflow": {}}
        port_ours, port_mlflow = free_port(), free_port()
        ours = start_ours(ws, port_ours)
        try:
            theirs = start_mlflow(ws, port_mlflow, version)
        except Exception:
            stop(ours)  # never leave a server behind
            raise
        try:
            agreement = check_same_answer(port_ours, port_mlflow, vec)
        finally:
            results["mlflow_cpu_seconds_start"] = stop(theirs)
        # ours first, MLflow after, never both under load at once; each server gets the
        # same unmeasured warm-up first (first requests fill caches and allocate)
        drive(port_ours, "/v1/failure/score", ours_body, LEVELS[0], WARMUP_S, args.max_requests)
        for c in LEVELS:
            results["ours"][str(c)] = drive(
                port_ours, "/v1/failure/score", ours_body, c, args.seconds, args.max_requests
            )
        batch_res = batch(port_ours, ws)
        results["ours_cpu_seconds"] = stop(ours)
        theirs = start_mlflow(ws, port_mlflow, version)
        try:
            drive(port_mlflow, "/invocations", mlflow_body, LEVELS[0], WARMUP_S, args.max_requests)
            for c in LEVELS:
                results["mlflow"][str(c)] = drive(
                    port_mlflow, "/invocations", mlflow_body, c, args.seconds, args.max_requests
                )
        finally:
            results["mlflow_cpu_seconds"] = stop(theirs)
        levels = {}
        for c in LEVELS:
            o, m = results["ours"][str(c)], results["mlflow"][str(c)]
            levels[str(c)] = {
                "ours": o,
                "mlflow": m,
                "throughput_ratio_vs_mlflow": round(o["requests_per_s"] / m["requests_per_s"], 2),
            }
        out = {
            "benchmark": "serving",
            "request": "single-node failure scoring, feature vector in the body, all horizons",
            "model_version": version,
            "online_nodes": grown,
            "same_answer": agreement,
            "levels": levels,
            "targets": {
                "ratio_ge_3_at_4": levels["4"]["throughput_ratio_vs_mlflow"] >= 3,
                "ratio_ge_3_at_32": levels["32"]["throughput_ratio_vs_mlflow"] >= 3,
                "p99_lt_10ms_at_4": levels["4"]["ours"]["p99_ms"] < 10,
                "batch_lt_1s": batch_res["warm_request_seconds_median"] < 1,
            },
            "batch_10000_by_id": batch_res,
            "cold_fleet_scoring": cold_fleet_scoring(ws),
            "server_cpu_seconds": {
                "ours": round(results["ours_cpu_seconds"], 1),
                "mlflow": round(results["mlflow_cpu_seconds"], 1),
            },
            "cpu_count": os.cpu_count(),
            "bench_cpu_seconds": round(
                resource.getrusage(resource.RUSAGE_SELF).ru_utime
                + resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime,
                1,
            ),
            "seconds": round(time.perf_counter() - t_start, 1),
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(out, indent=None if args.json else 2))


if __name__ == "__main__":
    main()
