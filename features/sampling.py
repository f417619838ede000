"""The negative-sampling rule of the node training frame, applied before it is stored.

Failures are rare (0.1-2 % of hourly node rows), and the failure classifier keeps only a
share of its training negatives anyway (``negative_rate``). At fleet scale the frame is
sampled before it is materialised, by one stated, seeded rule:

- every row gets a number ``u`` in [0, 1) from a stable hash of its node id, its time
  and the seed (:func:`sample_u`; the same row gets the same ``u`` whatever partition of
  nodes it is built in, on any machine, in any polars version);
- a row is kept when ``u < rate``, or when any of its labels is positive (every
  positive is kept), or when its time is at or after ``keep_from`` (the latest rows,
  which the backtest and the promotion judge, stay whole);
- ``u`` is stored with the row (column ``sample_u``), so a trainer can take, for each
  horizon, exactly the rows ``label == 1 or u < rate``: a uniform ``rate`` share of that
  horizon's negatives and all of its positives (a row kept for another horizon's
  positive is not a free extra negative).

``rate = 1`` keeps every row: the frame is then the unsampled one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import polars as pl

SAMPLE_U = "sample_u"
_MASK = np.uint64(0xFFFFFFFFFFFFFFFF)


@dataclass(frozen=True, slots=True)
class NegativeSampling:
    """``rate`` of negatives kept (0 < rate <= 1), the ``seed`` of ``u``, and the time from
    which every row is kept (None: the rule applies to every row)."""

    rate: float
    seed: int = 0
    keep_from: datetime | None = None

    def __post_init__(self) -> None:
        if not 0.0 < self.rate <= 1.0:
            raise ValueError(f"negative sampling rate must be in (0, 1], got {self.rate}")

    @property
    def samples(self) -> bool:
        return self.rate < 1.0

    def to_dict(self) -> dict[str, object]:
        return {
            "rate": self.rate,
            "seed": self.seed,
            "keep_from": self.keep_from.isoformat() if self.keep_from else None,
            "rule": "keep if sample_u < rate, any label positive, or ts >= keep_from",
        }


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser (wrapping uint64 arithmetic)."""
    with np.errstate(over="ignore"):
        x = x ^ (x >> np.uint64(30))
        x = (x * np.uint64(0xBF58476D1CE4E5B9)) & _MASK
        x = x ^ (x >> np.uint64(27))
        x = (x * np.uint64(0x94D049BB133111EB)) & _MASK
        return x ^ (x >> np.uint64(31))


def _node_keys(ids: pl.Series, seed: int) -> np.ndarray:
    """A 64-bit key per row from a keyed BLAKE2b of its node id (hashed once per id)."""
    uniq = ids.unique()
    salt = seed.to_bytes(8, "little", signed=True)
    keys = [
        int.from_bytes(hashlib.blake2b(str(v).encode(), digest_size=8, key=salt).digest(), "little")
        for v in uniq.to_list()
    ]
    table = pl.DataFrame(
        {"__id": uniq, "__key": pl.Series(keys, dtype=pl.UInt64)},
        schema={"__id": ids.dtype, "__key": pl.UInt64},
    )
    joined = pl.DataFrame({"__id": ids}).join(table, on="__id", how="left", maintain_order="left")
    return joined["__key"].to_numpy()


def sample_u(node_ids: pl.Series, ts: pl.Series, seed: int) -> np.ndarray:
    """The rule's number in [0, 1) for each (node id, time) row (float64)."""
    if node_ids.len() != ts.len():
        raise ValueError("node_ids and ts must have one value per row")
    if node_ids.len() == 0:
        return np.zeros(0, dtype=np.float64)
    t = ts.dt.epoch("us").to_numpy().astype(np.int64).view(np.uint64)
    x = _mix(_node_keys(node_ids, seed) ^ _mix(t))
    out: np.ndarray = (x >> np.uint64(11)).astype(np.float64) / float(1 << 53)
    return out


def apply_negative_sampling(
    frame: pl.DataFrame,
    rule: NegativeSampling,
    *,
    label_columns: Sequence[str],
    node: str = "node_id",
    time: str = "ts",
) -> pl.DataFrame:
    """``frame`` with its ``sample_u`` column, keeping only the rows the rule keeps."""
    u = pl.Series(SAMPLE_U, sample_u(frame[node], frame[time], rule.seed))
    out = frame.with_columns(u)
    if not rule.samples:
        return out
    keep = pl.col(SAMPLE_U) < rule.rate
    for c in label_columns:
        keep = keep | (pl.col(c) == 1).fill_null(False)
    if rule.keep_from is not None:
        keep = keep | (pl.col(time) >= pl.lit(rule.keep_from, dtype=frame.schema[time]))
    return out.filter(keep)


def horizon_rows(
    frame: pl.DataFrame, label: str, rate: float, *, column: str = SAMPLE_U
) -> pl.DataFrame:
    """The rows a trainer takes for one horizon from a frame sampled at ``rate``: its
    positives and the negatives with ``u < rate`` (a uniform share of its negatives)."""
    if rate >= 1.0:
        return frame
    if column not in frame.columns:
        raise ValueError(f"a frame sampled at rate {rate} must carry its {column!r} column")
    return frame.filter((pl.col(label) == 1) | (pl.col(column) < rate))


__all__ = [
    "SAMPLE_U",
    "NegativeSampling",
    "apply_negative_sampling",
    "horizon_rows",
    "sample_u",
]
