"""The peak estimates co-location systems reclaim capacity from, as rules on a node's
trailing usage, each with the knob that trades capacity against violations.

Every rule gives, at an origin, an *effective peak* (share of allocatable) per knob
value; the capacity lent to batch work is then ``allocatable - peak`` (never below 0,
never above what is unused now; see :func:`reclaimable`).

- ``koordinator``: Koordinator's batch resource, ``reclaimRatio x allocated - peak``,
  with the peak the p-th percentile of the usage over the last H hours (the node-metric
  aggregation); knob ``reclaimRatio``. With the node's online work allocated the whole
  node, the effective peak is ``peak + (1 - ratio)``.
- ``nsigma``: ``mean + N x std`` of the usage over the last H hours; knob ``N``.
- ``crane``: Crane's resource recommendation, the 99th percentile over the last 168 h
  plus a margin (``x (1 + m)``, Crane's default m = 0.15); knob ``m``.
- ``trailing_max``: the highest usage over the last H hours ``x (1 + m)``; knob ``m``.

Pure numpy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from predops.models.usage.design import BATCH, Design, quiet, row_quantiles


@dataclass(frozen=True)
class Rule:
    """One rule with its fixed settings and its knob's grid (most to least cautious)."""

    name: str
    settings: dict[str, float] = field(default_factory=dict)
    knob: str = ""
    grid: tuple[float, ...] = ()

    def label(self) -> str:
        inner = ", ".join(f"{k}={v:g}" for k, v in self.settings.items())
        return f"{self.name}({inner})" if inner else self.name


RATIO_GRID = tuple(float(v) for v in np.round(np.linspace(0.0, 1.0, 101), 3))
SIGMA_GRID = tuple(
    float(v) for v in np.round(np.concatenate([np.arange(0, 4, 0.25), np.arange(4, 21, 1.0)]), 3)
)
MARGIN_GRID = tuple(
    float(v)
    for v in np.round(np.concatenate([np.arange(-0.5, 1.0, 0.05), np.arange(1.0, 10.01, 0.25)]), 3)
)


def rules() -> list[Rule]:
    """Every baseline with each candidate setting (chosen on validation windows)."""
    out: list[Rule] = []
    for p in (0.9, 0.95, 0.99):
        for h in (1.0, 6.0, 24.0):
            out.append(
                Rule("koordinator", {"percentile": p, "hours": h}, "reclaim_ratio", RATIO_GRID)
            )
    for h in (6.0, 24.0, 168.0):
        out.append(Rule("nsigma", {"hours": h}, "n_sigma", SIGMA_GRID[::-1]))
    out.append(Rule("crane", {"percentile": 0.99, "hours": 168.0}, "margin", MARGIN_GRID[::-1]))
    for h in (1.0, 6.0, 24.0, 168.0):
        out.append(Rule("trailing_max", {"hours": h}, "margin", MARGIN_GRID[::-1]))
    return out


def _batched(
    design: Design, rows: np.ndarray, cols: np.ndarray, steps: int, fn: Callable[[np.ndarray], Any]
) -> np.ndarray:
    """``fn`` of the (pairs, steps) trailing usage windows, in bounded batches."""
    per = max(1, BATCH * 288 // max(steps, 1))
    out: list[np.ndarray] = []
    with quiet():
        for lo in range(0, rows.size, per):
            sl = slice(lo, lo + per)
            out.append(np.asarray(fn(design.trailing(design.u, rows[sl], cols[sl], steps))))
    return np.concatenate(out, axis=-1) if out else np.empty(0)


def peaks(rule: Rule, design: Design, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """(pairs, len(rule.grid)) effective peaks (shares) of ``rule`` at the origins."""
    steps = max(1, round(rule.settings.get("hours", 1.0) * design.hour))
    knob = np.asarray(rule.grid, dtype=np.float64)[None, :]
    if rule.name in ("koordinator", "crane"):
        p = rule.settings["percentile"]
        base = _batched(design, rows, cols, steps, lambda w: row_quantiles(w, p))
        base = base[:, None]
        if rule.name == "koordinator":
            out: np.ndarray = base + (1.0 - knob)
            return out
        return base * (1.0 + knob)
    if rule.name == "nsigma":
        m, s = design.mean_std(steps, rows, cols)
        ns: np.ndarray = m[:, None] + knob * s[:, None]
        return ns
    if rule.name == "trailing_max":
        base = _batched(design, rows, cols, steps, lambda w: np.nanmax(w, axis=1))
        return base[:, None] * (1.0 + knob)
    raise ValueError(f"unknown rule {rule.name!r}")


def reclaimable(peak: np.ndarray, usage_now: np.ndarray) -> np.ndarray:
    """Capacity (share of allocatable) batch work may use: ``1 - peak``, at least 0 and
    at most what is unused now (``1 - usage_now``); a node with no usage reading (NaN)
    lends nothing. ``peak`` (pairs, knobs), ``usage_now`` (pairs,)."""
    free = np.maximum(1.0 - np.nan_to_num(usage_now, nan=1.0), 0.0)[:, None]
    out: np.ndarray = np.clip(1.0 - np.nan_to_num(peak, nan=1.0), 0.0, free)
    return out
