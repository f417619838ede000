"""Benchmark: the served combination's rolling state at fleet scale, as predops keeps it
(``models.demand.rolling.RollingWindows``: float32 ring buffers) against the peer, the
Python lists of floats per (series, bucket, candidate) that the previous release kept,
in the same run.

The state is ``--series`` series x 4 horizon buckets x the combination's candidates
(``models.demand.selection.CANDIDATES``: six since the seasonal naive at the longest
season joined them), each window full (``--window`` errors, 720 by default: a month of
hourly updates), plus one window of
served residuals per (series, bucket). Measured per side: the bytes the state holds
(tracemalloc, which sees numpy's buffers), the bytes per (series, bucket) and that
figure scaled to 10,000 series; the seconds to append one hourly update (an error per
key and candidate and a residual per key); the seconds of the pool the ``shrunk`` and
``pooled`` weightings read on every combine (each key's mean error per candidate, the
median of ``--repeats`` runs). Prints one JSON object with the ratios predops / peer
(below 1: smaller or faster) and the largest difference of the means between the two.

    python benchmarks/bench_selection_state.py --json
    python benchmarks/bench_selection_state.py --series 10000 --skip-peer --json

The peer is left out with ``--skip-peer``: at 10,000 series its lists take 5.6 GB and
tracemalloc's record of each of their 170 M floats several times that (the run was
killed at 24 GB on a 24 GB machine), while predops' side is a few arrays.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
import tracemalloc
from typing import Any

import numpy as np

from predops.models.demand.rolling import RollingWindows
from predops.models.demand.selection import CANDIDATES

BUCKETS = ("1-6", "7-12", "13-24", "25-48")
FLEET = 10_000


def _keys(n: int) -> list[tuple[str, str]]:
    return [(f"node-{i:05d}/gpus", b) for i in range(n) for b in BUCKETS]


def build_predops(keys: list[tuple[str, str]], errors: np.ndarray) -> Any:
    errs = RollingWindows(CANDIDATES, errors.shape[2])
    resid = RollingWindows(("resid",), errors.shape[2])
    for t in range(errors.shape[2]):  # one hourly update at a time, as the service
        for j, c in enumerate(CANDIDATES):
            errs.extend(keys, c, errors[:, j, t])
        resid.extend(keys, "resid", errors[:, 0, t])
    return errs, resid


def build_peer(keys: list[tuple[str, str]], errors: np.ndarray) -> Any:
    errs = {
        k: {
            c: errors[i, j].astype(np.float32).astype(np.float64).tolist()
            for j, c in enumerate(CANDIDATES)
        }
        for i, k in enumerate(keys)
    }
    resid = {
        k: errors[i, 0].astype(np.float32).astype(np.float64).tolist() for i, k in enumerate(keys)
    }
    return errs, resid


def update_predops(state: Any, keys: list[tuple[str, str]], row: np.ndarray) -> None:
    errs, resid = state
    for j, c in enumerate(CANDIDATES):
        errs.extend(keys, c, row[:, j])
    resid.extend(keys, "resid", row[:, 0])


def update_peer(state: Any, keys: list[tuple[str, str]], row: np.ndarray, cap: int) -> None:
    errs, resid = state
    for j, c in enumerate(CANDIDATES):
        col = row[:, j].tolist()
        for i, k in enumerate(keys):
            lst = errs[k][c]
            lst.append(col[i])
            if len(lst) > cap:
                del lst[0]
    col = row[:, 0].tolist()
    for i, k in enumerate(keys):
        lst = resid[k]
        lst.append(col[i])
        if len(lst) > cap:
            del lst[0]


def means_predops(state: Any) -> np.ndarray:
    out: np.ndarray = state[0].means()
    return out


def means_peer(state: Any) -> np.ndarray:
    errs = state[0]
    return np.array(
        [[sum(v) / len(v) for v in (cols[c] for c in CANDIDATES)] for cols in errs.values()]
    )


def measure(side: str, keys: list[tuple[str, str]], errors: np.ndarray, repeats: int) -> dict:
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    state = build_predops(keys, errors) if side == "predops" else build_peer(keys, errors)
    held = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    rng = np.random.default_rng(1)
    row = rng.gamma(2.0, 5.0, (len(keys), len(CANDIDATES)))
    pool_s, update_s = [], []
    means = None
    for _ in range(repeats):
        t0 = time.perf_counter()
        means = means_predops(state) if side == "predops" else means_peer(state)
        pool_s.append(time.perf_counter() - t0)
    for _ in range(repeats):
        t0 = time.perf_counter()
        if side == "predops":
            update_predops(state, keys, row)
        else:
            update_peer(state, keys, row, errors.shape[2])
        update_s.append(time.perf_counter() - t0)
    per_key = held / len(keys)
    return {
        "bytes": int(held),
        "bytes_per_series_bucket": round(per_key, 1),
        "gb_at_10000_series": round(per_key * FLEET * len(BUCKETS) / 1e9, 3),
        "pool_seconds": round(statistics.median(pool_s), 4),
        "update_seconds": round(statistics.median(update_s), 4),
        "_means": means,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--series", type=int, default=1000)
    ap.add_argument("--window", type=int, default=720)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip-peer", action="store_true", help="measure predops' side only")
    ap.add_argument("--json", action="store_true", help="print JSON (the only output)")
    args = ap.parse_args(argv)
    keys = _keys(args.series)
    rng = np.random.default_rng(args.seed)
    # Errors spanning the scales of real series (0.01 .. 1000 units).
    scale = 10.0 ** rng.uniform(-2, 3, (len(keys), 1, 1))
    errors = rng.gamma(2.0, 1.0, (len(keys), len(CANDIDATES), args.window)) * scale
    out: dict[str, Any] = {
        "series": args.series,
        "keys": len(keys),
        "candidates": len(CANDIDATES),
        "window": args.window,
    }
    mine = measure("predops", keys, errors, args.repeats)
    m1 = mine.pop("_means")
    out["predops"] = mine
    if args.skip_peer:
        print(json.dumps(out, indent=None if args.json else 2))
        return 0
    peer = measure("peer", keys, errors, args.repeats)
    m2 = peer.pop("_means")
    out["peer_python_lists"] = peer
    out["ratio_bytes"] = round(mine["bytes"] / peer["bytes"], 3)
    out["ratio_pool_seconds"] = round(mine["pool_seconds"] / peer["pool_seconds"], 3)
    out["ratio_update_seconds"] = round(mine["update_seconds"] / peer["update_seconds"], 3)
    out["max_relative_mean_difference"] = float(np.max(np.abs(m1 - m2) / np.abs(m2)))
    print(json.dumps(out, indent=None if args.json else 2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
