"""Benchmark: the server's ``/metrics`` at fleet size — series, bytes and scrape time.

    python -m benchmarks.bench_metrics --json [--workspace WS] [--nodes 10000]

Without ``--workspace`` a small one is built with ``predops demo --no-serve`` (60 nodes x
12 days, both models trained and registered). The workspace is copied and the copy's
online store grown to ``--nodes`` nodes (the simulated nodes' feature rows repeated under
new ids, last sample = now, as ``bench_serving`` does), so every node is fresh and scored.
The application runs in process (``create_app``, the wall clock) and ``/metrics`` is
fetched three times: cold (scoring the fleet and rendering the per-node text), then warm
(the cached text copied).

Reported: series per family (samples, HELP/TYPE lines excluded), the per-node series, the
exposition's bytes raw and gzip-compressed (Prometheus asks for gzip), the bytes of the
per-node families per node, and the cold / warm scrape times. The reference is the
family's own arithmetic: ``nodes x (horizons + 1)`` per-node series.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.bench_serving import ROOT, build_workspace, grow_online

NODE_FAMILIES = ("predops_node_failure_probability", "predops_node_running_pods")


def series_per_family(text: str) -> dict[str, int]:
    """Sample lines per metric name (a histogram's buckets count under their own name)."""
    names = (ln.split("{", 1)[0].split(" ", 1)[0] for ln in text.splitlines())
    return dict(Counter(n for n in names if n and not n.startswith("#")))


def measure(ws: Path, nodes: int) -> tuple[dict[str, Any], str]:
    """Grow a copy of ``ws`` to ``nodes`` online nodes and measure its ``/metrics``;
    returns the report and the exposition."""
    from fastapi.testclient import TestClient

    from predops.pipelines.workspace.settings import Settings
    from predops.serving.app import create_app
    from predops.serving.config import ServeConfig

    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "ws"
        shutil.copytree(ws, copy)
        grown = grow_online(copy, nodes)
        settings = Settings(copy, ROOT.parent / "shared" / "data")
        app = create_app(settings, ServeConfig(), reload_in_background=False)
        with TestClient(app) as client:
            times, text = [], ""
            for _ in range(3):
                t0 = time.perf_counter()
                r = client.get("/metrics")
                times.append(time.perf_counter() - t0)
                r.raise_for_status()
                text = r.text
    per_family = series_per_family(text)
    node_lines = [ln for ln in text.splitlines() if ln.startswith(NODE_FAMILIES)]
    node_bytes = sum(len(ln) + 1 for ln in node_lines)
    risk = [ln for ln in node_lines if ln.startswith(NODE_FAMILIES[0])]
    horizons = len({ln.split('horizon="', 1)[1].split('"', 1)[0] for ln in risk})
    raw = text.encode()
    report = {
        "benchmark": "metrics_cardinality",
        "nodes": grown["nodes"],
        "horizons": horizons,
        "series": per_family,
        "series_total": sum(per_family.values()),
        "node_series": len(node_lines),
        "node_series_expected": grown["nodes"] * (horizons + 1),
        "bytes": len(raw),
        "bytes_gzip": len(gzip.compress(raw)),
        "node_family_bytes": node_bytes,
        "node_family_bytes_per_node": round(node_bytes / max(grown["nodes"], 1), 1),
        "scrape_cold_s": round(times[0], 3),
        "scrape_warm_s": round(min(times[1:]), 4),
    }
    return report, text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workspace", type=Path, default=None)
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--json", action="store_true", help="print JSON (the only output)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ws = args.workspace
        if ws is None:
            ws = Path(tmp) / "built"
            build_workspace(ws)
        report, _ = measure(ws, args.nodes)
    print(json.dumps(report, indent=None if args.json else 1))


if __name__ == "__main__":
    main()
