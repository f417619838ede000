"""Placement policies: small interchangeable strategies behind one interface.

``make_policy(name, distribution=...)`` builds one by name; FGD (and the topology-aware
scorer over FGD) needs the target workload's pod-type distribution.
"""

from __future__ import annotations

import numpy as np

from predops.allocator.distribution import PodTypeDistribution
from predops.allocator.policies.base import NodeScores, PlacementContext, Policy, PolicyBase
from predops.allocator.policies.best_fit import BestFit
from predops.allocator.policies.dot_product import DotProduct
from predops.allocator.policies.fgd import FGD
from predops.allocator.policies.gpu_clustering import GpuClustering
from predops.allocator.policies.gpu_packing import GpuPacking
from predops.allocator.policies.random_fit import RandomFit
from predops.allocator.policies.topology_aware import TopologyAware

POLICY_NAMES = (
    "random",
    "best_fit",
    "dot_product",
    "gpu_packing",
    "gpu_clustering",
    "fgd",
    "topology_aware",
)
_ALIASES = {
    "bestfit": "best_fit",
    "dotprod": "dot_product",
    "dotproduct": "dot_product",
    "gpupacking": "gpu_packing",
    "gpuclustering": "gpu_clustering",
    "randomfit": "random",
    "topology": "topology_aware",
}


def canonical_name(name: str) -> str:
    key = name.strip().lower().replace("-", "_")
    key = _ALIASES.get(key.replace("_", ""), key)
    if key not in POLICY_NAMES:
        raise ValueError(f"unknown policy {name!r}; known: {', '.join(POLICY_NAMES)}")
    return key


def make_policy(
    name: str,
    distribution: PodTypeDistribution | None = None,
    rng: np.random.Generator | None = None,
) -> Policy:
    """A policy by name. ``fgd`` and ``topology_aware`` (over FGD when a distribution is
    given, else over BestFit) use ``distribution``; ``random`` draws from ``rng``
    (default: a generator seeded with 0)."""
    key = canonical_name(name)
    if key == "random":
        return RandomFit(rng if rng is not None else np.random.default_rng(0))
    if key == "fgd":
        if distribution is None:
            raise ValueError("the fgd policy needs the target workload's pod-type distribution")
        return FGD(distribution)
    if key == "topology_aware":
        return TopologyAware(FGD(distribution) if distribution is not None else None)
    simple: dict[str, type[BestFit | DotProduct | GpuPacking | GpuClustering]] = {
        "best_fit": BestFit,
        "dot_product": DotProduct,
        "gpu_packing": GpuPacking,
        "gpu_clustering": GpuClustering,
    }
    return simple[key]()


__all__ = [
    "FGD",
    "POLICY_NAMES",
    "BestFit",
    "DotProduct",
    "GpuClustering",
    "GpuPacking",
    "NodeScores",
    "PlacementContext",
    "Policy",
    "PolicyBase",
    "RandomFit",
    "TopologyAware",
    "canonical_name",
    "make_policy",
]
