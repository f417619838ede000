"""Builders for allocator tests: ``make_node(gpus=8, rack="r1")`` and friends."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from predops.allocator.engine import Allocator
from predops.allocator.policies import Policy, make_policy
from predops.allocator.requests import PodRequest
from predops.allocator.snapshot import ClusterSnapshot
from predops.allocator.topology import NodeSpec

_ids = itertools.count()


def make_node(
    gpus: int = 8,
    *,
    node_id: str | None = None,
    model: str | None = "A100",
    cpu_milli: int = 64_000,
    memory_mib: int = 512 * 1024,
    numa_nodes: int = 1,
    nvlink: str | None = None,
    nvlink_groups: Sequence[int] | None = None,
    gpu_numa: Sequence[int] | None = None,
    rack: str = "r1",
    spine: str = "s1",
    zone: str = "z1",
    region: str = "eu",
    sku: str = "",
) -> NodeSpec:
    """A node; GPU-less nodes get no model."""
    return NodeSpec(
        node_id=node_id or f"n{next(_ids)}",
        cpu_milli=cpu_milli,
        memory_mib=memory_mib,
        gpus=gpus,
        gpu_model=model if gpus else None,
        numa_nodes=numa_nodes,
        gpu_numa=tuple(gpu_numa) if gpu_numa is not None else None,
        nvlink_groups=tuple(nvlink_groups) if nvlink_groups is not None else None,
        nvlink_domain=nvlink,
        region=region,
        zone=zone,
        spine=spine,
        rack=rack,
        sku=sku,
    )


def make_pod(
    pod_id: str | None = None,
    *,
    cpu: int = 1000,
    mem: int = 1024,
    gpus: int = 0,
    milli: int | None = None,
    models: Sequence[str] | None = None,
    numa: bool = False,
    nvlink: bool = False,
    gang: str | None = None,
) -> PodRequest:
    """A pod: ``gpus`` whole GPUs, or ``milli`` (< 1000) of one GPU."""
    if milli is not None and milli < 1000:
        gpus, gpu_milli = 1, milli
    else:
        gpu_milli = 1000 if gpus else 0
    return PodRequest(
        pod_id=pod_id or f"p{next(_ids)}",
        cpu_milli=cpu,
        memory_mib=mem,
        num_gpu=gpus,
        gpu_milli=gpu_milli,
        gpu_models=frozenset(models) if models else None,
        numa_aligned=numa,
        nvlink=nvlink,
        gang_id=gang,
    )


def make_cluster(*nodes: NodeSpec) -> ClusterSnapshot:
    return ClusterSnapshot(list(nodes))


def make_allocator(
    snap: ClusterSnapshot,
    policy: str | Policy = "best_fit",
    seed: int = 0,
    tie_break: str = "rank",
) -> Allocator:
    """An allocator with a seeded generator (a named policy gets its own stream)."""
    rng = np.random.default_rng(seed)
    if isinstance(policy, str):
        policy = make_policy(policy, rng=np.random.default_rng(seed + 1))
    pol = policy
    return Allocator(snap, pol, rng, tie_break=tie_break)
