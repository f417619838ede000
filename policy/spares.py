"""Spare-part stocking rules and the weekly inventory they produce over a failure trace.

A rule gives, at the start of each week ``t``, an order-up-to level ``S_t`` computed
from the demand of weeks ``< t`` only. The inventory (:func:`simulate`), per week:

1. the order placed ``lead`` weeks earlier arrives;
2. the rule's ``S_t`` is read and ``max(0, S_t - (on hand + on order))`` is ordered
   (it lands at the start of week ``t + lead``, so the position must cover weeks
   ``t .. t + lead``: ``lead + 1`` weeks of demand, the newsvendor window of
   :mod:`policy.buying` with a one-week review period);
3. the week's failures take spares from stock; what stock cannot cover is *short*
   (replaced by other means: expedited or cannibalised, not back-ordered), and the week
   is a *stock-out week*.

*Spares held* is the mean on-hand stock at the end of the weeks. The simulation starts
with the rule's own first level on hand and nothing on order.

Rules (:func:`levels`):

- ``forecast``: newsvendor on the forecast: the ``service``-quantile of the
  :class:`models.demand.spares.CountForecaster` demand over ``lead + 1`` weeks (the
  critical ratio ``shortage / (shortage + idle)`` of :mod:`policy.buying` is that
  service level);
- ``poisson``: the same quantile of a constant-rate Poisson (mean weekly rate of the
  past);
- ``fixed``: a constant stock of ``ceil(share x installed base)`` (5 % is the figure
  NCSA's Delta study reports for GPUs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from predops.models.demand.spares import CountForecaster, poisson_quantile


@dataclass(frozen=True)
class Rule:
    """One stocking rule: ``kind`` in forecast / poisson / fixed and its knobs."""

    kind: str
    service: float = 0.9
    half_life_weeks: float = 13.0
    fixed_units: int = 0

    def describe(self) -> dict[str, float | str | int]:
        if self.kind == "fixed":
            return {"kind": "fixed", "units": self.fixed_units}
        out: dict[str, float | str | int] = {"kind": self.kind, "service_level": self.service}
        if self.kind == "forecast":
            out["half_life_weeks"] = self.half_life_weeks
        return out


KINDS = ("forecast", "poisson", "fixed")


def fixed_units(installed_base: float, share: float) -> int:
    return math.ceil(share * installed_base - 1e-9)


def levels(rule: Rule, counts: np.ndarray, start: int, end: int, lead: int) -> np.ndarray:
    """``S_t`` for weeks ``start <= t < end`` of ``counts``, each from ``counts[:t]``."""
    if rule.kind not in KINDS:
        raise ValueError(f"rule kind must be one of {KINDS}, got {rule.kind!r}")
    if not 0 <= start <= end <= counts.size:
        raise ValueError(f"weeks {start}..{end} outside a series of {counts.size}")
    window = lead + 1
    out = np.zeros(end - start, dtype=np.int64)
    if rule.kind == "fixed":
        out[:] = rule.fixed_units
        return out
    fc = CountForecaster(window=window, half_life_weeks=rule.half_life_weeks)
    for i, t in enumerate(range(start, end)):
        past = counts[:t]
        if rule.kind == "forecast":
            out[i] = fc.quantile(past, rule.service)
        else:
            out[i] = poisson_quantile(past, window, rule.service)
    return out


@dataclass(frozen=True)
class Inventory:
    """Week-by-week outcome of :func:`simulate`."""

    on_hand_end: np.ndarray
    short: np.ndarray
    ordered: np.ndarray

    def summary(self) -> dict[str, float | int]:
        return {
            "weeks": int(self.short.size),
            "stock_out_weeks": int((self.short > 0).sum()),
            "units_short": int(self.short.sum()),
            "spares_held_mean": float(self.on_hand_end.mean()) if self.short.size else 0.0,
            "units_ordered": int(self.ordered.sum()),
        }


def simulate(demand: np.ndarray, level: np.ndarray, lead: int) -> Inventory:
    """Order-up-to inventory over ``demand`` (weekly units) with levels ``level`` and
    orders landing ``lead >= 1`` weeks after they are placed (module doc)."""
    if lead < 1:
        raise ValueError(f"the lead time must be at least one week, got {lead}")
    if demand.shape != level.shape:
        raise ValueError(f"demand {demand.shape} and levels {level.shape} differ")
    if (demand < 0).any() or (level < 0).any():
        raise ValueError("demand and levels must be non-negative")
    n = demand.size
    arriving = np.zeros(n + lead, dtype=np.int64)
    on_hand = int(level[0]) if n else 0
    on_order = 0
    end = np.zeros(n, dtype=np.int64)
    short = np.zeros(n, dtype=np.int64)
    ordered = np.zeros(n, dtype=np.int64)
    for t in range(n):
        on_hand += int(arriving[t])
        on_order -= int(arriving[t])
        q = max(0, int(level[t]) - on_hand - on_order)
        if q:
            arriving[t + lead] += q
            on_order += q
            ordered[t] = q
        used = min(on_hand, int(demand[t]))
        short[t] = int(demand[t]) - used
        on_hand -= used
        end[t] = on_hand
    return Inventory(end, short, ordered)
