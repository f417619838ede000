"""The soak's load generator, run by ``benchmarks/bench_soak.py`` as a second process.

    python benchmarks/soak_load.py MIX_JSON OUT_JSON --port P --start-at EPOCH
        --seconds S [--clients 4] [--max-requests N]

``MIX_JSON`` lists the requests (``name``, ``method``, ``path``, optional JSON ``body``,
``headers``, integer ``weight``). The mix is expanded into a fixed cycle (each request
``weight`` times, shuffled with a fixed seed), and ``clients`` keep-alive connections to
127.0.0.1 walk that cycle from different offsets, each sending its next request when the
answer arrived (closed loop, no pause). Load starts at ``--start-at`` (Unix seconds, so the
parent can line its memory samples up with the load) and stops by itself after
``--seconds`` or ``--max-requests`` requests in all, whichever comes first.

``OUT_JSON`` receives one record per request, as parallel lists: ``t_s`` (start of the
request, seconds after ``--start-at``), ``kind`` (index into ``kinds``), ``latency_ms``,
``status`` (HTTP status; 0 = no answer), plus the first few error messages and this
process's CPU seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import resource
import time
from pathlib import Path
from typing import Any

import httpx

TIMEOUT_S = 30.0
KEPT_ERROR_MESSAGES = 10


def cycle_of(mix: list[dict[str, Any]], seed: int = 7) -> list[int]:
    """Indices into ``mix``: each request ``weight`` times, in a fixed shuffled order."""
    order = [i for i, req in enumerate(mix) for _ in range(int(req["weight"]))]
    random.Random(seed).shuffle(order)
    return order


async def run(
    mix: list[dict[str, Any]],
    port: int,
    start_at: float,
    seconds: float,
    clients: int,
    max_requests: int,
) -> dict[str, Any]:
    order = cycle_of(mix)
    bodies = [None if r.get("body") is None else json.dumps(r["body"]).encode() for r in mix]
    out: dict[str, Any] = {"kinds": [r["name"] for r in mix], "t_s": [], "kind": []}
    out.update(latency_ms=[], status=[], error_messages=[])
    sent = 0

    def record(t: float, kind: int, latency_s: float, status: int, error: str = "") -> None:
        out["t_s"].append(round(t - start_at, 4))
        out["kind"].append(kind)
        out["latency_ms"].append(round(latency_s * 1e3, 3))
        out["status"].append(status)
        if error and len(out["error_messages"]) < KEPT_ERROR_MESSAGES:
            out["error_messages"].append(f"{mix[kind]['name']}: {error[:300]}")

    async def client(offset: int, http: httpx.AsyncClient) -> None:
        nonlocal sent
        step = offset
        while time.time() < start_at + seconds and sent < max_requests:
            sent += 1
            kind = order[step % len(order)]
            step += 1
            req = mix[kind]
            t_wall, t0 = time.time(), time.perf_counter()
            try:
                r = await http.request(
                    req["method"],
                    req["path"],
                    content=bodies[kind],
                    headers=req.get("headers", {}),
                )
            except httpx.HTTPError as exc:
                record(t_wall, kind, time.perf_counter() - t0, 0, repr(exc))
                continue
            latency = time.perf_counter() - t0
            record(t_wall, kind, latency, r.status_code, r.text if r.status_code != 200 else "")

    await asyncio.sleep(max(0.0, start_at - time.time()))
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{port}", timeout=TIMEOUT_S, limits=limits
    ) as http:
        spread = max(1, len(order) // clients)
        await asyncio.gather(*(client(i * spread, http) for i in range(clients)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mix", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--start-at", type=float, required=True, help="Unix seconds")
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--max-requests", type=int, required=True)
    args = ap.parse_args()
    mix = json.loads(args.mix.read_text())
    out = asyncio.run(
        run(mix, args.port, args.start_at, args.seconds, args.clients, args.max_requests)
    )
    usage = resource.getrusage(resource.RUSAGE_SELF)
    out["cpu_seconds"] = round(usage.ru_utime + usage.ru_stime, 1)
    args.out.write_text(json.dumps(out))


if __name__ == "__main__":
    main()
