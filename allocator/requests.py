"""What pods ask for: CPU, memory, whole or shared GPUs, GPU models, locality, gangs.

A pod asks for ``num_gpu`` whole GPUs (``gpu_milli == 1000``), or one share of one GPU
(``num_gpu == 1`` and ``0 < gpu_milli < 1000``, the Alibaba trace's GPU sharing), or no
GPU. ``gpu_models`` restricts the GPU models it may run on (None: any). With
``numa_aligned`` all its CPUs and GPUs come from one NUMA node; with ``nvlink`` its GPUs
are all in one NVLink domain. A :class:`Gang` is N pods placed all together, inside one
rack or one spine when asked, or not at all; each member may carry its gang's scope
(``gang_scope``), so a snapshot built from running pods keeps it for later what-ifs.

:class:`PodBatch` holds many requests as columns (numpy) for replays and estimates;
:meth:`PodBatch.from_frame` reads pods-contract rows (``core.schemas.PODS``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import polars as pl

from predops.allocator.topology import GPU_MILLI

GANG_SCOPES = (None, "rack", "spine")


@dataclass(frozen=True, slots=True)
class PodRequest:
    """One pod's request. CPU in milli-cores, memory in MiB, GPU share in milli-GPU."""

    pod_id: str
    cpu_milli: int = 0
    memory_mib: int = 0
    num_gpu: int = 0
    gpu_milli: int = 0
    gpu_models: frozenset[str] | None = None
    numa_aligned: bool = False
    nvlink: bool = False
    gang_id: str | None = None
    gang_scope: str | None = None
    """The gang's placement scope ('rack', 'spine' or None) when the pod is a member."""

    def __reduce__(self) -> tuple[Any, ...]:
        # through __init__ (and its checks): faster than the dataclass' __setstate__
        return (PodRequest, tuple(getattr(self, f) for f in _POD_FIELDS))

    def __post_init__(self) -> None:
        where = f"pod {self.pod_id!r}"
        if self.gang_scope not in GANG_SCOPES:
            raise ValueError(f"{where}: gang_scope must be 'rack', 'spine' or None")
        if self.gang_scope is not None and self.gang_id is None:
            raise ValueError(f"{where}: gang_scope {self.gang_scope!r} without gang_id")
        if self.cpu_milli < 0 or self.memory_mib < 0:
            raise ValueError(f"{where}: cpu_milli and memory_mib must be >= 0")
        if self.num_gpu < 0:
            raise ValueError(f"{where}: num_gpu must be >= 0, got {self.num_gpu}")
        if self.num_gpu == 0 and self.gpu_milli != 0:
            raise ValueError(f"{where}: gpu_milli {self.gpu_milli} without num_gpu")
        if self.num_gpu > 0 and not 0 < self.gpu_milli <= GPU_MILLI:
            raise ValueError(f"{where}: gpu_milli must be in 1..{GPU_MILLI}, got {self.gpu_milli}")
        if self.num_gpu > 1 and self.gpu_milli != GPU_MILLI:
            raise ValueError(f"{where}: a GPU share (gpu_milli {self.gpu_milli}) needs num_gpu 1")

    @property
    def is_share(self) -> bool:
        """True for a fractional share of one GPU."""
        return self.num_gpu == 1 and self.gpu_milli < GPU_MILLI

    @property
    def total_gpu_milli(self) -> int:
        return self.num_gpu * self.gpu_milli

    @property
    def constrained(self) -> bool:
        """True when placement needs the per-device topology check."""
        return self.numa_aligned or (self.nvlink and self.num_gpu > 1)


_POD_FIELDS = tuple(f.name for f in fields(PodRequest))


@dataclass(frozen=True, slots=True)
class Gang:
    """Pods that must all be placed or none; ``scope`` keeps them in one rack or spine."""

    gang_id: str
    pods: tuple[PodRequest, ...]
    scope: str | None = None

    def __post_init__(self) -> None:
        if not self.pods:
            raise ValueError(f"gang {self.gang_id!r} has no pods")
        if self.scope not in GANG_SCOPES:
            raise ValueError(
                f"gang {self.gang_id!r}: scope must be 'rack', 'spine' or None, got {self.scope!r}"
            )


def parse_gpu_spec(spec: str | None) -> frozenset[str] | None:
    """'A10|T4' -> {'A10', 'T4'}; empty or None -> None (any model)."""
    if spec is None:
        return None
    models = frozenset(s.strip() for s in spec.split("|") if s.strip())
    return models or None


@dataclass(frozen=True, slots=True)
class PodBatch:
    """Many pod requests as columns. ``gpu_spec`` keeps the trace's text ('' = any)."""

    pod_id: tuple[str, ...]
    cpu_milli: np.ndarray
    memory_mib: np.ndarray
    num_gpu: np.ndarray
    gpu_milli: np.ndarray
    gpu_spec: tuple[str, ...]

    def __post_init__(self) -> None:
        n = len(self.pod_id)
        for name in ("cpu_milli", "memory_mib", "num_gpu", "gpu_milli"):
            if len(getattr(self, name)) != n:
                raise ValueError(
                    f"PodBatch column {name} has {len(getattr(self, name))} rows, expected {n}"
                )
        if len(self.gpu_spec) != n:
            raise ValueError(
                f"PodBatch column gpu_spec has {len(self.gpu_spec)} rows, expected {n}"
            )

    def __len__(self) -> int:
        return len(self.pod_id)

    @property
    def total_gpu_milli(self) -> np.ndarray:
        return np.asarray(self.num_gpu.astype(np.int64) * self.gpu_milli)

    def request(self, i: int, pod_id: str | None = None) -> PodRequest:
        """Row ``i`` as a :class:`PodRequest` (``pod_id`` overrides the id, for clones)."""
        spec = self.gpu_spec[i]
        return PodRequest(
            pod_id=self.pod_id[i] if pod_id is None else pod_id,
            cpu_milli=int(self.cpu_milli[i]),
            memory_mib=int(self.memory_mib[i]),
            num_gpu=int(self.num_gpu[i]),
            gpu_milli=int(self.gpu_milli[i]),
            gpu_models=parse_gpu_spec(spec) if spec else None,
        )

    @classmethod
    def of(cls, pods: Sequence[PodRequest]) -> PodBatch:
        return cls(
            pod_id=tuple(p.pod_id for p in pods),
            cpu_milli=np.array([p.cpu_milli for p in pods], dtype=np.int64),
            memory_mib=np.array([p.memory_mib for p in pods], dtype=np.int64),
            num_gpu=np.array([p.num_gpu for p in pods], dtype=np.int64),
            gpu_milli=np.array([p.gpu_milli for p in pods], dtype=np.int64),
            gpu_spec=tuple("|".join(sorted(p.gpu_models)) if p.gpu_models else "" for p in pods),
        )

    @classmethod
    def from_frame(cls, frame: pl.DataFrame, *, source: str = "pods") -> PodBatch:
        """Requests from pods-contract rows (``core.schemas.PODS`` columns, typed).

        A row whose GPU request is not one of the three shapes (none, whole GPUs, one
        share of one GPU) raises ``ValueError`` naming ``source``, the row and field.
        """
        need = ("pod_id", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
        missing = [c for c in need if c not in frame.columns]
        if missing:
            raise ValueError(f"{source}: pods frame lacks column(s) {', '.join(missing)}")
        num = frame["num_gpu"].cast(pl.Int64).to_numpy()
        milli = frame["gpu_milli"].cast(pl.Int64).to_numpy()
        cpu = frame["cpu_milli"].cast(pl.Int64).to_numpy()
        mem = frame["memory_mib"].cast(pl.Int64).to_numpy()
        for name, col in (("cpu_milli", cpu), ("memory_mib", mem), ("num_gpu", num)):
            bad = np.flatnonzero(col < 0)
            if bad.size:
                raise ValueError(
                    f"{source} row {bad[0] + 1}: field {name} is negative ({col[bad[0]]})"
                )
        # A GPU-less pod may carry any gpu_milli in the trace (it means nothing there).
        milli = np.where(num == 0, 0, milli)
        bad_share = (num > 1) & (milli != GPU_MILLI)
        bad_range = (num > 0) & ((milli <= 0) | (milli > GPU_MILLI))
        for mask, why in (
            (bad_range, f"must be in 1..{GPU_MILLI} for a GPU pod"),
            (bad_share, "must be 1000 when num_gpu > 1 (shares are 1 GPU)"),
        ):
            bad = np.flatnonzero(mask)
            if bad.size:
                i = int(bad[0])
                raise ValueError(
                    f"{source} row {i + 1} (pod {frame['pod_id'][i]!r}): field "
                    f"gpu_milli {milli[i]} {why}"
                )
        if "gpu_spec" in frame.columns:
            spec = tuple(s or "" for s in frame["gpu_spec"].cast(pl.String).to_list())
        else:
            spec = ("",) * frame.height
        return cls(
            pod_id=tuple(frame["pod_id"].cast(pl.String).to_list()),
            cpu_milli=cpu,
            memory_mib=mem,
            num_gpu=num,
            gpu_milli=milli,
            gpu_spec=spec,
        )
