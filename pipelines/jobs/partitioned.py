"""Partitions of rows on a Dask cluster, and batch scoring over them.

A leaf of the jobs room (it imports no other job), so the failure job can score on Dask
without importing the Dask training that imports it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import polars as pl

from predops.core.contracts import FailureRisk
from predops.models.failure.model import FailureModel


def partitions_of(client: Any, partitions: int | None) -> int:
    n = partitions if partitions is not None else 2 * max(1, len(client.nthreads()))
    if n < 1:
        raise ValueError(f"partitions must be at least 1, got {n}")
    return n


def blocks(items: Sequence[Any], n: int) -> list[Sequence[Any]]:
    """``items`` in at most ``n`` contiguous blocks of near-equal size (none empty)."""
    size = max(1, math.ceil(len(items) / n))
    return [items[i : i + size] for i in range(0, len(items), size)]


# ---------------------------------------------------------------- scoring
def _risk_part(model: FailureModel, frame: pl.DataFrame, kw: dict[str, Any]) -> list[FailureRisk]:
    return model.predict_risk(frame, **kw)


def predict_risk(
    client: Any,
    model: FailureModel,
    frame: pl.DataFrame,
    *,
    partitions: int | None = None,
    **kw: Any,
) -> list[FailureRisk]:
    """``model.predict_risk(frame, **kw)`` in contiguous partitions of rows on the
    workers, with the same result: risks in the same order (horizon, then row) and, with
    ``reasons_for``, reasons only for the riskiest rows of the whole frame (a partition
    explains its own riskiest ``reasons_for``, a superset, since a row's rank within its
    contiguous partition is at most its rank overall; the rest lose theirs here)."""
    rows = blocks(range(frame.height), partitions_of(client, partitions))
    slices = [frame.slice(b.start, len(b)) for b in rows if isinstance(b, range)]
    shared = client.scatter(model, broadcast=True)
    parts: list[list[FailureRisk]] = client.gather(
        [client.submit(_risk_part, shared, part, kw, pure=False) for part in slices]
    )
    wanted = kw.get("horizons")
    hs = [h for h in model.horizons if wanted is None or h in wanted]
    top = kw.get("reasons_for")
    out: list[FailureRisk] = []
    for k in range(len(hs)):
        col = [
            r
            for part, s in zip(parts, slices, strict=True)
            for r in part[k * s.height :][: s.height]
        ]
        if top is not None:
            p = np.array([r.p_fail for r in col])
            keep = set(np.argsort(-p, kind="stable")[:top].tolist())
            col = [r if i in keep else replace(r, reasons=()) for i, r in enumerate(col)]
        out.extend(col)
    return out
