"""Slow, obvious implementations the fast allocator paths are checked against."""

from __future__ import annotations

from collections.abc import Sequence

from predops.allocator.distribution import PodTypeDistribution
from predops.allocator.requests import parse_gpu_spec


def node_fragmentation(
    free: Sequence[int], cpu_free: int, model: str | None, dist: PodTypeDistribution
) -> float:
    """The FGD paper's node fragmentation, written out per pod type (milli-GPU)."""
    idle = sum(free)
    frag = 0.0
    for t in range(len(dist)):
        p = float(dist.prob[t])
        k, m = int(dist.num_gpu[t]), int(dist.gpu_milli[t])
        if k == 0:  # a CPU-only pod can use no GPU: all idle GPU is fragment for it
            frag += p * idle
            continue
        allowed = parse_gpu_spec(dist.gpu_spec[t] or None)
        model_ok = model is not None and (allowed is None or model in allowed)
        enough = sum(1 for x in free if x >= m) >= k
        if model_ok and enough and cpu_free >= int(dist.cpu_milli[t]):
            frag += p * sum(x for x in free if x < m)
        else:
            frag += p * idle
    return frag
