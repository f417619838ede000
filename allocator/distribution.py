"""The target workload's pod-size distribution ("typical pods" in the FGD paper).

A pod type is (CPU milli-cores, milli-GPU per GPU, number of GPUs, GPU-model spec);
memory is not part of it, as in the paper's artifact. :meth:`PodTypeDistribution.
from_batch` counts the types in a workload, keeps the most popular ones until they
cover ``popularity`` of all pods (the artifact uses 95 %), and renormalises their
frequencies to sum to 1. FGD measures fragmentation against this distribution.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from predops.allocator.requests import PodBatch, parse_gpu_spec


@dataclass(frozen=True, slots=True)
class PodTypeDistribution:
    """Pod types and their probabilities (columns, one row per type, most popular first)."""

    cpu_milli: np.ndarray
    gpu_milli: np.ndarray
    num_gpu: np.ndarray
    gpu_spec: tuple[str, ...]
    prob: np.ndarray
    count: np.ndarray

    def __len__(self) -> int:
        return len(self.prob)

    @classmethod
    def from_batch(cls, batch: PodBatch, popularity: float = 0.95) -> PodTypeDistribution:
        """Most popular pod types of ``batch`` covering ``popularity`` (0-1] of its pods.

        Ties in popularity are ordered by (CPU, milli-GPU, GPUs, spec) descending, the
        artifact's order, so the cut-off keeps the same types.
        """
        if len(batch) == 0:
            raise ValueError("cannot build a pod-type distribution from an empty workload")
        if not 0 < popularity <= 1:
            raise ValueError(f"popularity must be in (0, 1], got {popularity}")
        counts: dict[tuple[int, int, int, str], int] = {}
        milli = np.where(batch.num_gpu > 0, batch.gpu_milli, 0)
        for key in zip(
            batch.cpu_milli.tolist(),
            milli.tolist(),
            batch.num_gpu.tolist(),
            batch.gpu_spec,
            strict=True,
        ):
            counts[key] = counts.get(key, 0) + 1
        ordered = sorted(counts.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
        total = len(batch)
        need = popularity * total
        kept: list[tuple[tuple[int, int, int, str], int]] = []
        cum = 0
        for key, c in ordered:
            if cum >= need:
                break
            kept.append((key, c))
            cum += c
        cnt = np.array([c for _, c in kept], dtype=np.float64)
        return cls(
            cpu_milli=np.array([k[0] for k, _ in kept], dtype=np.int64),
            gpu_milli=np.array([k[1] for k, _ in kept], dtype=np.int64),
            num_gpu=np.array([k[2] for k, _ in kept], dtype=np.int64),
            gpu_spec=tuple(k[3] for k, _ in kept),
            prob=cnt / cnt.sum(),
            count=cnt,
        )

    def accessible(self, models: list[str]) -> np.ndarray:
        """Bool matrix (len(models) + 1, types): type t may run on GPU model m. The last
        row is a CPU-only node, where no GPU type can run."""
        out = np.zeros((len(models) + 1, len(self)), dtype=np.bool_)
        for t, spec in enumerate(self.gpu_spec):
            allowed = parse_gpu_spec(spec) if spec else None
            for m, name in enumerate(models):
                out[m, t] = allowed is None or name in allowed
        return out

    @property
    def mean_gpu_milli(self) -> float:
        """Expected GPU request of one pod, in milli-GPU."""
        return float((self.prob * self.num_gpu * self.gpu_milli).sum())
