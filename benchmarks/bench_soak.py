"""Soak: ``predops serve`` under a steady mixed load for minutes, its memory sampled.

    python -m benchmarks.bench_soak --json [--minutes 10] [--workspace WS] [--clients 4]
    python -m benchmarks.bench_soak --json --minutes 0.5      # smoke

The server runs on 127.0.0.1 on a copy of WS (or of a workspace built with
``predops demo --no-serve``), started as ``benchmarks/bench_reliability.py`` starts it (its
TOML: operator / viewer tokens, alias check every second). A second process
(``benchmarks/soak_load.py``) keeps ``--clients`` keep-alive connections busy (closed
loop) with a fixed mix, 60 % single-node scoring (``POST /v1/failure/score``: a feature
vector without reasons, and a node id with them), the rest fleet risk pages, demand
forecasts for a few series, ``/readyz``, ``/metrics`` and the dashboards ``/`` and
``/plans/latest``, for a warm-up (default one minute) and then ``--minutes``; it stops by
itself at that time or at ``--max-requests``.

Memory is the server process's resident set (``VmRSS`` of ``/proc/<pid>/status``),
sampled before the load, at the end of the warm-up (the start figure: imports, models,
caches and allocator arenas are in place by then), every ``--sample-seconds`` (default
30 s) and at the end. Printed: per-endpoint request counts, errors (must be 0), p50 / p99
latency (ms); per window (a minute, or a fifth of a short run) requests per minute, errors,
p50 / p99; the RSS samples, the peak (``VmHWM``), ``rss_growth_mib`` (end - start) and the
growth over the second half of the soak.

The bound, ``rss_growth_mib`` < 50 MiB after warm-up (``within_bound``): a leak grows
with the request count. Ten minutes on 2 shared cores is 40,000-80,000 requests (70-135
per second measured; 81,430 after warm-up in the first full run); keeping one ~1 KiB
object per request (a dict of a few entries, a log record, a metrics label set per
distinct value) then costs 40-80 MiB, and keeping a request's body or answer (a feature
vector is a few KiB, a dashboard page tens of KiB) costs hundreds of MiB. Memory that is
not a leak — the allocator's arenas settling, the per-version caches, the metrics
registry's fixed series — levels off during the warm-up and moves by a few MiB after it
(+1.0 MiB in that run). ``growth_bytes_per_request`` (growth / requests after warm-up)
says how small a leak the run could have missed; a leak also grows in the second half of
the soak as much as in the first (``rss_growth_second_half_mib``), where settling does not.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

# Run as a module from the repository root (``python -m benchmarks.bench_soak``), as
# bench_reliability is: the server helpers are imported from it.
from benchmarks import bench_reliability as reliability
from benchmarks import bench_serving

HERE = Path(__file__).resolve().parent

BOUND_MIB = 50.0
MIB = 1024 * 1024


# ---------------------------------------------------------------- the mix
def request_mix(ws: Path, port: int) -> list[dict[str, Any]]:
    """The requests and their weights (of 100); bodies checked once (each must answer 200)."""
    import httpx
    import polars as pl

    node_id = pl.read_ipc(ws / "features" / "online" / "node.arrow")["node_id"][0]
    base = f"http://127.0.0.1:{port}"
    forecast = httpx.post(f"{base}/v1/demand/forecast", json={}, timeout=120)
    forecast.raise_for_status()
    series = [s["series_id"] for s in forecast.json()["series"][:3]]
    wanted = httpx.get(f"{base}/v1/failure/features", timeout=60).json()
    vector = bench_serving.online_vector(ws, [*wanted["numeric"], *wanted["categorical"]])
    mix = [
        (
            "score_vector",
            40,
            "POST",
            "/v1/failure/score",
            {"nodes": [{"features": vector}], "explain": 0},
        ),
        ("score_node_id", 20, "POST", "/v1/failure/score", {"node_ids": [node_id]}),
        ("risk_page_1", 4, "GET", "/v1/failure/risk?limit=20&offset=0", None),
        ("risk_page_2", 3, "GET", "/v1/failure/risk?limit=20&offset=20", None),
        ("demand_forecast", 8, "POST", "/v1/demand/forecast", {"series_ids": series}),
        ("readyz", 8, "GET", "/readyz", None),
        ("metrics", 5, "GET", "/metrics", None),
        ("dashboard_fleet", 6, "GET", "/", None),
        ("dashboard_plan", 6, "GET", "/plans/latest", None),
    ]
    headers = reliability.auth("viewer")
    out = []
    for name, weight, method, path, body in mix:
        r = httpx.request(method, base + path, json=body, headers=headers, timeout=120)
        if r.status_code != 200:
            raise RuntimeError(f"{name}: {method} {path} answered {r.status_code}: {r.text[:300]}")
        out.append(dict(name=name, weight=weight, method=method, path=path, body=body))
        out[-1]["headers"] = {**headers, "Content-Type": "application/json"} if body else headers
    return out


# ---------------------------------------------------------------- memory
def rss_mib(pid: int, field: str = "VmRSS") -> float:
    """``field`` (VmRSS, VmHWM) of ``/proc/<pid>/status``, in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024 / MIB
    raise RuntimeError(f"no {field} in /proc/{pid}/status")


def sample_memory(
    pid: int, load: subprocess.Popen[bytes], start_at: float, times: list[float], budget_s: float
) -> list[dict[str, float]]:
    """RSS at each of ``times`` (seconds after ``start_at``) while the load runs, then once
    more when the load process has ended (by itself; killed after ``budget_s``)."""
    samples = []
    for t in times:
        time.sleep(max(0.0, start_at + t - time.time()))
        if load.poll() is not None:
            break
        samples.append({"t_s": round(time.time() - start_at, 1), "rss_mib": rss_mib(pid)})
    try:
        load.wait(timeout=max(1.0, start_at + budget_s - time.time()))
    except subprocess.TimeoutExpired:
        load.kill()
        load.wait()
    samples.append({"t_s": round(time.time() - start_at, 1), "rss_mib": rss_mib(pid)})
    return samples


# ---------------------------------------------------------------- figures
def latency_stats(latency_ms: np.ndarray, status: np.ndarray) -> dict[str, Any]:
    return {
        "requests": int(latency_ms.size),
        "errors": int(np.sum(status != 200)),
        "p50_ms": round(float(np.percentile(latency_ms, 50)), 2) if latency_ms.size else None,
        "p99_ms": round(float(np.percentile(latency_ms, 99)), 2) if latency_ms.size else None,
    }


def windows(rec: dict[str, Any], warmup_s: float, soak_s: float, width_s: float) -> list[Any]:
    """Requests per minute, errors and p50 / p99 per window of ``width_s`` seconds."""
    t, lat, status = (np.asarray(rec[k]) for k in ("t_s", "latency_ms", "status"))
    edges = [0.0, warmup_s] if warmup_s > 0 else [0.0]
    while edges[-1] + width_s < warmup_s + soak_s - 1e-6:
        edges.append(edges[-1] + width_s)
    edges.append(warmup_s + soak_s)
    out = []
    for lo, hi in itertools.pairwise(edges):
        inside = (t >= lo) & (t < hi) if hi < edges[-1] else t >= lo
        stats = latency_stats(lat[inside], status[inside])
        out.append(
            {
                "from_s": round(lo, 1),
                "to_s": round(hi, 1),
                "phase": "warmup" if hi <= warmup_s else "soak",
                "requests_per_minute": round(stats["requests"] * 60 / (hi - lo)),
                **stats,
            }
        )
    return out


def summarise(
    rec: dict[str, Any], samples: list[dict[str, float]], warmup_s: float, soak_s: float
) -> dict[str, Any]:
    kind, lat, status = (np.asarray(rec[k]) for k in ("kind", "latency_ms", "status"))
    t = np.asarray(rec["t_s"])
    endpoints = {
        name: latency_stats(lat[kind == i], status[kind == i])
        for i, name in enumerate(rec["kinds"])
    }
    per_window = windows(rec, warmup_s, soak_s, min(60.0, soak_s / 5))
    soaked = [w for w in per_window if w["phase"] == "soak"]
    start = next(s for s in samples if s["t_s"] >= warmup_s - 1)
    end = samples[-1]
    mid = min(samples, key=lambda s: abs(s["t_s"] - (warmup_s + soak_s / 2)))
    growth = end["rss_mib"] - start["rss_mib"]
    after_warmup = int(np.sum(t >= warmup_s))
    return {
        "requests": int(lat.size),
        "requests_after_warmup": after_warmup,
        "errors": int(np.sum(status != 200)),
        "error_messages": rec["error_messages"],
        "endpoints": endpoints,
        "windows": per_window,
        "first_vs_last_window": {
            "first": soaked[0],
            "last": soaked[-1],
            "throughput_last_vs_first": round(
                soaked[-1]["requests_per_minute"] / max(1, soaked[0]["requests_per_minute"]), 2
            ),
        },
        "rss": {
            "before_load_mib": round(samples[0]["rss_mib"], 1),
            "start_mib": round(start["rss_mib"], 1),
            "end_mib": round(end["rss_mib"], 1),
            "samples": [{**s, "rss_mib": round(s["rss_mib"], 1)} for s in samples],
        },
        "rss_growth_mib": round(growth, 1),
        "rss_growth_second_half_mib": round(end["rss_mib"] - mid["rss_mib"], 1),
        "growth_bytes_per_request": round(growth * MIB / max(1, after_warmup), 1),
        "bound_mib": BOUND_MIB,
        "within_bound": growth < BOUND_MIB,
    }


# ---------------------------------------------------------------- soak
def soak(ws: Path, tmp: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Serve ``ws``, drive the mix for warm-up + soak, sample memory; the figures."""
    soak_s = args.minutes * 60
    warmup_s = args.warmup_seconds if args.warmup_seconds is not None else min(60, soak_s / 4)
    every_s = args.sample_seconds if args.sample_seconds is not None else min(30, soak_s / 5)
    port, log = bench_serving.free_port(), tmp / "server.log"
    server = reliability.start_server(ws, port, log)
    try:
        mix = request_mix(ws, port)
        (tmp / "mix.json").write_text(json.dumps(mix))
        start_at = time.time() + 2  # the load process is up by then
        total_s = warmup_s + soak_s
        cmd = [sys.executable, str(HERE / "soak_load.py"), str(tmp / "mix.json")]
        cmd += [str(tmp / "load.json"), "--port", str(port), "--start-at", str(start_at)]
        cmd += ["--seconds", str(total_s), "--clients", str(args.clients)]
        cmd += ["--max-requests", str(args.max_requests or int(total_s * 2000))]
        load = subprocess.Popen(cmd, cwd=HERE.parent)
        times = [0.0, *np.arange(warmup_s, total_s + 1e-6, every_s)]
        samples = sample_memory(server.pid, load, start_at, times, total_s + 60)
        peak = rss_mib(server.pid, "VmHWM")
        alive = server.poll() is None
    finally:
        server_cpu = bench_serving.stop(server)
    if load.returncode != 0:
        raise RuntimeError(f"the load process exited with status {load.returncode}")
    rec = json.loads((tmp / "load.json").read_text())
    out = summarise(rec, samples, warmup_s, soak_s)
    out["rss"]["peak_mib"] = round(peak, 1)
    tracebacks = log.read_text(errors="replace").count("Traceback")
    out["server_log_tracebacks"] = tracebacks
    out["server_alive_at_end"] = alive
    out["ok"] = out["errors"] == 0 and out["within_bound"] and tracebacks == 0 and alive
    out["settings"] = {
        "clients": args.clients,
        "warmup_s": warmup_s,
        "soak_s": soak_s,
        "sample_every_s": every_s,
        "mix": {m["name"]: f"{m['weight']}% {m['method']} {m['path']}" for m in mix},
    }
    out["cpu_seconds"] = {"server": round(server_cpu, 1), "load_process": rec["cpu_seconds"]}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=10.0, help="soak after the warm-up")
    ap.add_argument("--workspace", type=Path, default=None, help="a served workspace to copy")
    ap.add_argument("--clients", type=int, default=4, help="concurrent connections")
    ap.add_argument("--warmup-seconds", type=float, default=None, help="default min(60, T/4)")
    ap.add_argument("--sample-seconds", type=float, default=None, help="default min(30, T/5)")
    ap.add_argument("--max-requests", type=int, default=None, help="default 2000 per second")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    wall = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="predops-bench-soak-"))
    try:
        ws = reliability.served_copy(args.workspace, tmp)
        out = {"benchmark": "soak", **soak(ws, tmp, args)}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    out["cpu_seconds"]["bench_and_children"] = round(reliability.cpu_now(), 1)
    out["cpu_count"] = os.cpu_count()
    out["seconds"] = round(time.perf_counter() - wall, 1)
    print(json.dumps(out, indent=None if args.json else 2))


if __name__ == "__main__":
    main()
