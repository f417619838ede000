"""Benchmark: the node-count estimate for a pool's demand, at 1,000 and 10,000 nodes.

Prints one JSON object. For each pool size ``n`` (``--nodes``, default 1,000 and
10,000), GPU demand that fills about ``n`` 8-GPU nodes (90 % of their GPUs) is sampled
from the Alibaba openb default pod mix, and its node count is estimated two ways:

- ``full_pack`` (the peer, today's estimator on the whole demand): every pod placed
  one by one with the packing policy by :class:`~allocator.estimator.NodeCountEstimator`;
- ``sizing`` (what pool sizing runs every round,
  :meth:`~policy.sizing.PoolSizingPolicy.nodes_for` on an idle pool of that SKU): the
  same demand sampled from the same mix, at most ``max_packed_pods`` of it packed and
  the new nodes scaled by the GPUs of the rest — once per ``--max-packed-pods`` value
  (default 200, the sizing default, and 1,000).

For each: wall and CPU seconds and the node count; for each sizing run the speed-up
over ``full_pack`` (wall and CPU) and the relative difference of the node counts
(positive: sizing asks for more nodes than the full pack). All pack with ``--policy``
(default FGD) and ``--seed``. One seed's difference is mostly sampling noise, so
``sizing_error_over_seeds`` repeats the comparison (counts only) for ``--error-seeds``
seeds (default 0-4) at ``--error-nodes`` (default 1,000) and gives the mean and the
largest absolute relative difference per ``max_packed_pods``.

    python -m benchmarks.bench_estimator --json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
from typing import Any

import numpy as np

from benchmarks.bench_allocator import _shared_data, _timed
from predops.allocator.estimator import NodeCountEstimator, sample_pods
from predops.allocator.requests import PodBatch, PodRequest
from predops.allocator.snapshot import ClusterSnapshot
from predops.allocator.topology import GPU_MILLI, NodeSpec
from predops.core.schemas import PODS
from predops.core.validation import validate
from predops.pipelines.ingest.traces.openb import read_pods
from predops.policy.config import SizingConfig
from predops.policy.sizing import PoolSizingPolicy

SKU = NodeSpec("sku", cpu_milli=96_000, memory_mib=393_216, gpus=8, gpu_model="G2", sku="G2x8")


def _sized(
    mix: PodBatch, requests: list[PodRequest], gpus: float, policy: str, seed: int, k: int
) -> tuple[int, dict[str, Any]]:
    """Pool sizing's node count for ``gpus`` on an idle pool of :data:`SKU`."""
    cfg = SizingConfig(packing_policy=policy, seed=seed, max_packed_pods=k)
    return PoolSizingPolicy(cfg).nodes_for(ClusterSnapshot([SKU]), [SKU], requests, gpus, 0.0)


def error_over_seeds(
    mix: PodBatch, nodes: int, policy: str, seeds: list[int], packed: list[int]
) -> dict[str, Any]:
    gpus = nodes * SKU.gpus * 0.9
    requests = [mix.request(i) for i in range(len(mix))]
    diffs: dict[int, list[float]] = {k: [] for k in packed}
    for seed in seeds:
        demand = sample_pods(mix, np.random.default_rng(seed), gpu_milli=gpus * GPU_MILLI)
        full = NodeCountEstimator([SKU], policy, seed=seed).estimate(demand).total_nodes
        for k in packed:
            sized, _ = _sized(mix, requests, gpus, policy, seed, k)
            diffs[k].append((sized - full) / full)
    return {
        "nodes": nodes,
        "seeds": seeds,
        "by_max_packed_pods": {
            str(k): {
                "rel_diff": [round(d, 4) for d in v],
                "mean_rel_diff": round(float(np.mean(v)), 4),
                "max_abs_rel_diff": round(float(np.max(np.abs(v))), 4),
            }
            for k, v in diffs.items()
        },
    }


def bench_pool(
    mix: PodBatch, nodes: int, policy: str, seed: int, packed: list[int]
) -> dict[str, Any]:
    gpus = nodes * SKU.gpus * 0.9
    # the demand pool sizing samples (cpu_cores=0: the mix's GPU pods bring their CPU)
    demand = sample_pods(mix, np.random.default_rng(seed), gpu_milli=gpus * GPU_MILLI)
    full, full_wall, full_cpu = _timed(
        lambda: NodeCountEstimator([SKU], policy, seed=seed, order="random").estimate(demand)
    )
    requests = [mix.request(i) for i in range(len(mix))]
    sizing: dict[str, Any] = {}
    for k in packed:
        (sized, evidence), wall, cpu = _timed(
            lambda k=k: _sized(mix, requests, gpus, policy, seed, k)
        )
        if evidence.get("growth_pods") != len(demand):
            raise RuntimeError("the sizing path sampled another demand than the full pack")
        sizing[str(k)] = {
            "nodes": sized,
            "packed_pods": evidence.get("packed_pods"),
            "wall_s": round(wall, 3),
            "cpu_s": round(cpu, 3),
            "speedup_wall": round(full_wall / wall, 1) if wall > 0 else None,
            "speedup_cpu": round(full_cpu / cpu, 1) if cpu > 0 else None,
            "nodes_rel_diff": round((sized - full.total_nodes) / full.total_nodes, 4),
        }
    return {
        "pods": len(demand),
        "demand_gpus": round(gpus, 1),
        "full_pack": {
            "nodes": full.total_nodes,
            "wall_s": round(full_wall, 3),
            "cpu_s": round(full_cpu, 3),
            "unplaceable": full.unplaceable,
        },
        "sizing_by_max_packed_pods": sizing,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[1_000, 10_000])
    ap.add_argument("--policy", default="fgd")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--max-packed-pods", type=int, nargs="+", default=[200, 1_000])
    ap.add_argument("--error-nodes", type=int, default=1_000)
    ap.add_argument("--error-seeds", type=int, nargs="*", default=[0, 1, 2, 3, 4])
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    csv = _shared_data() / "alibaba-clusterdata" / "cluster-trace-gpu-v2023" / "csv"
    pods = validate(read_pods(csv / "openb_pod_list_default.csv"), PODS)
    if pods.quarantined.height:
        raise SystemExit("the openb pod list has bad rows; check the shared data")
    mix = PodBatch.from_frame(pods.good)
    report = {
        "benchmark": "estimator",
        "sku": "G2x8 (8 GPUs, 96 cores, 384 GiB)",
        "mix": "openb_pod_list_default",
        "policy": args.policy,
        "seed": args.seed,
        "sizing_default_max_packed_pods": SizingConfig().max_packed_pods,
        "cpu_count": os.cpu_count(),
        "load_average_1m_at_start": round(os.getloadavg()[0], 2),
        "pools": {
            str(n): bench_pool(mix, n, args.policy, args.seed, args.max_packed_pods)
            for n in args.nodes
        },
        "sizing_error_over_seeds": error_over_seeds(
            mix, args.error_nodes, args.policy, args.error_seeds, args.max_packed_pods
        ),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    print(json.dumps(report, sort_keys=True, indent=None if args.json else 2))


if __name__ == "__main__":
    main()
