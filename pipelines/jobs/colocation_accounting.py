"""Accounting of ``predops eval colocation`` (violations and reclaimed capacity of
each method's decisions, its curve and the value at a violation rate), and the most any
round-by-round lending rule could reclaim at a given violation rate.

The bound. A rule decides, once per round and node, a loan ``L`` in ``[0, cap]`` (``cap`` = what
is unused at the decision); the round then costs ``#(steps with usage > 1 - L)``
violations and reclaims ``L x observed hours x allocatable``. With every round's usage
known in advance, the best loans under a total violation budget form a multiple-choice
knapsack. Its linear relaxation is solved exactly by taking, round by round, the upper
concave hull of (violations, reclaimed) over the round's useful loans (``1 - u`` for
each step's usage ``u``, and ``cap``), and spending the budget on hull segments in
order of reclaimed per violation. The curve of those prefixes is:

- **an upper bound**: no rule that decides once per round reaches above it at any
  violation rate, and no linear interpolation between a rule's knob points either
  (the relaxation's value is concave in the budget);
- **reached** at each of its points (a prefix takes a round's hull segments in order,
  so it is an integral choice of loans).

:func:`budget_curve` returns it as (violations, reclaimed) points, most cautious first,
starting at the rounds' own peaks (0 violations: the zero-violation oracle).
Memory: the rounds' usage (pairs x round steps) and one hull per pair, a few points
each.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

RATES = (0.001, 0.01, 0.05)
"""The violation rates every method is read at."""
EPS = 1e-9
"""Usage must exceed what was left by more than this (share) to count: ``1 - (1 - p)``
is not always ``p`` in floating point, and a rule lending exactly to the peak holds."""


def round_origins(start: int, stop: int, round_steps: int) -> np.ndarray:
    """Origin columns of the rounds covering steps ``[start, stop)``: a round decided
    at the end of step ``c`` covers steps ``c + 1 .. c + round_steps``."""
    return np.arange(start - 1, stop - round_steps, round_steps)


def account(
    future: np.ndarray, reclaimed: np.ndarray, allocatable: np.ndarray, step_h: float
) -> dict[str, np.ndarray]:
    """Violations and reclaimed capacity of decisions ``reclaimed`` (pairs, knobs;
    shares) over the rounds' usage ``future`` (pairs, round steps; shares, NaN =
    unobserved) on nodes of ``allocatable`` (pairs,). Returns per knob ``violations``
    (steps with usage > 1 - reclaimed + :data:`EPS`) and ``reclaimed`` (allocatable units x hours,
    over observed steps), and the totals ``steps`` and ``allocatable`` (units x h)."""
    obs = np.isfinite(future)
    viol = np.zeros(reclaimed.shape[1], dtype=np.int64)
    for lo in range(0, future.shape[0], 4096):
        sl = slice(lo, lo + 4096)
        left = 1.0 - reclaimed[sl][:, None, :] + EPS
        viol += ((future[sl][:, :, None] > left) & obs[sl][:, :, None]).sum(axis=(0, 1))
    hours = obs.sum(axis=1) * step_h * allocatable
    return {
        "violations": viol,
        "reclaimed": (reclaimed * hours[:, None]).sum(axis=0),
        "steps": np.array(int(obs.sum())),
        "allocatable": np.array(float(hours.sum())),
    }


def add_accounts(
    a: dict[str, np.ndarray] | None, b: dict[str, np.ndarray]
) -> dict[str, np.ndarray]:
    return b if a is None else {k: a[k] + b[k] for k in a}


def curve(acc: dict[str, np.ndarray], knob: tuple[float, ...]) -> list[dict[str, float]]:
    """The (knob, violation rate, reclaimed) points of one method."""
    steps, alloc = max(int(acc["steps"]), 1), max(float(acc["allocatable"]), 1e-12)
    return [
        {
            "knob": float(k),
            "violation_rate": float(acc["violations"][i]) / steps,
            "reclaimed_share": float(acc["reclaimed"][i]) / alloc,
            "reclaimed_core_hours": float(acc["reclaimed"][i]),
        }
        for i, k in enumerate(knob)
    ]


def at_rate(points: list[dict[str, float]], rate: float, key: str = "reclaimed_share") -> float:
    """``key`` at violation rate ``rate``, linear between the curve's points (most
    cautious first, from lend-nothing (0, 0)); the last point's value past its end."""
    v = np.maximum.accumulate(np.array([0.0] + [p["violation_rate"] for p in points]))
    r = np.maximum.accumulate(np.array([0.0] + [p[key] for p in points]))
    i = int(np.searchsorted(v, rate, side="right")) - 1
    if i >= v.size - 1:
        return float(r[-1])
    return float(r[i] + (r[i + 1] - r[i]) * (rate - v[i]) / (v[i + 1] - v[i]))


def summary_at_rates(points: list[dict[str, float]]) -> dict[str, Any]:
    return {
        f"{r:g}": {
            "reclaimed_share": at_rate(points, r),
            "reclaimed_core_hours": at_rate(points, r, "reclaimed_core_hours"),
        }
        for r in RATES
    }


# ---------------------------------------------------------------- the bound
def _hull(viol: np.ndarray, gain: np.ndarray) -> list[tuple[int, float]]:
    """Upper concave hull of points (violations ascending, gain), from the first point:
    the breakpoints where reclaimed per extra violation drops."""
    best: dict[int, float] = {}
    for v, g in zip(viol.tolist(), gain.tolist(), strict=True):
        if g > best.get(v, -np.inf):
            best[v] = g
    pts: list[tuple[int, float]] = []
    for v in sorted(best):
        g = best[v]
        if pts and g <= pts[-1][1]:
            continue  # more violations for no more reclaimed
        while len(pts) >= 2:
            (v1, g1), (v2, g2) = pts[-2], pts[-1]
            if (g2 - g1) * (v - v1) <= (g - g1) * (v2 - v1):
                pts.pop()  # the middle point sits under the chord
            else:
                break
        pts.append((v, g))
    return pts


def budget_curve(
    future: np.ndarray, cap: np.ndarray, allocatable: np.ndarray, step_h: float
) -> tuple[np.ndarray, np.ndarray, float, int]:
    """The bound's curve over rounds ``future`` (pairs, round steps; shares of
    allocatable, NaN = unobserved) whose loans may not exceed ``cap`` (pairs,; shares).

    Returns cumulative violations and reclaimed (allocatable units x hours) at each
    point, most cautious first (the first point is every round lending to its own
    peak), the allocatable units x hours and the observed steps."""
    if future.ndim != 2 or cap.shape != (future.shape[0],) or allocatable.shape != cap.shape:
        raise ValueError(
            f"future {future.shape}, cap {cap.shape} and allocatable {allocatable.shape} "
            "must be (pairs, steps), (pairs,), (pairs,)"
        )
    obs = np.isfinite(future)
    hours = obs.sum(axis=1) * step_h * allocatable
    cap = np.clip(np.nan_to_num(cap, nan=0.0), 0.0, 1.0)
    base_v, base_g = 0, 0.0
    seg_v: list[int] = []
    seg_g: list[float] = []
    for p in range(future.shape[0]):
        u = future[p][obs[p]]
        if u.size == 0 or cap[p] <= 0:
            continue
        loans = np.clip(np.append(1.0 - u, cap[p]), 0.0, cap[p])
        viol = (u[None, :] > 1.0 - loans[:, None] + EPS).sum(axis=1)
        hull = _hull(viol, loans * hours[p])
        base_v += hull[0][0]
        base_g += hull[0][1]
        for (v0, g0), (v1, g1) in itertools.pairwise(hull):
            seg_v.append(v1 - v0)
            seg_g.append(g1 - g0)
    sv, sg = np.asarray(seg_v, dtype=np.int64), np.asarray(seg_g, dtype=np.float64)
    order = np.argsort(-(sg / np.maximum(sv, 1)), kind="stable")
    viols = np.concatenate([[base_v], base_v + np.cumsum(sv[order])])
    gains = np.concatenate([[base_g], base_g + np.cumsum(sg[order])])
    return viols, gains, float(hours.sum()), int(obs.sum())


def share_at(
    viols: np.ndarray, gains: np.ndarray, allocatable_h: float, steps: int, rate: float
) -> float:
    """The bound's reclaimed share at violation rate ``rate``, read as every method's
    curve is (:func:`at_rate`)."""
    points = [
        {"violation_rate": v / max(steps, 1), "reclaimed_share": g / max(allocatable_h, 1e-12)}
        for v, g in zip(viols.tolist(), gains.tolist(), strict=True)
    ]
    return at_rate(points, rate)
