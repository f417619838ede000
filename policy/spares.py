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

Rules (:func:`levels` for one group, :func:`fleet_levels` for the groups together):

- ``forecast``: newsvendor on the forecast: the ``service``-quantile of the
  :class:`models.demand.spares.CountForecaster` demand over ``lead + 1`` weeks (the
  critical ratio ``shortage / (shortage + idle)`` of :mod:`policy.buying` is that
  service level). Its dispersion is the group's own (``dispersion="group"``) or the
  fleet's (``"pooled"``, :func:`models.demand.spares.pooled_dispersion` over the groups'
  histories before ``t``: a group whose short history has not shown a batch yet gets
  the tail the other groups have shown);
- ``poisson``: the same quantile of a constant-rate Poisson (mean weekly rate of the
  past);
- ``fixed``: a constant stock of ``ceil(share x installed base)`` (5 % is the figure
  NCSA's Delta study reports for GPUs);
- *budgeted* (``budgeted=True``, forecast or Poisson): the groups share a weekly
  budget ``B_t`` of units known before week ``t`` (the evaluation uses the fixed rule's
  total level). The budgeted multi-item newsvendor (minimise the expected units short
  over the groups subject to ``sum_g S_g,t <= B_t``, a unit costing the same in every
  group) has the Lagrangian solution of one *common* critical ratio: every group stocks
  the same quantile ``q_t`` of its own forecast. :func:`common_service` finds the
  highest ``q_t <= service`` whose total level fits ``B_t`` (bisection on ``q``: the
  total is non-decreasing in ``q`` and ``q = 0`` stocks nothing), so the rule never
  stocks above its service level and never spends more than the budget; what the
  quantile steps leave of the budget is not spent. With a loose budget it is the
  unbudgeted rule.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from predops.models.demand.spares import (
    CountForecaster,
    count_quantiles,
    pooled_dispersion,
    window_dispersion,
)

KINDS = ("forecast", "poisson", "fixed")
DISPERSIONS = ("group", "pooled")


@dataclass(frozen=True)
class Rule:
    """One stocking rule: ``kind`` in forecast / poisson / fixed and its knobs (module
    doc); pooled and budgeted rules need every group: :func:`fleet_levels`."""

    kind: str
    service: float = 0.9
    half_life_weeks: float = 13.0
    fixed_units: int = 0
    budgeted: bool = False
    dispersion: str = "group"

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"rule kind must be one of {KINDS}, got {self.kind!r}")
        if not 0 < self.service < 1:
            raise ValueError(f"rule service level must be in (0, 1), got {self.service}")
        if not self.half_life_weeks > 0:
            raise ValueError(f"rule half_life_weeks must be positive, got {self.half_life_weeks}")
        if self.fixed_units < 0:
            raise ValueError(f"rule fixed_units must be non-negative, got {self.fixed_units}")
        if self.budgeted and self.kind == "fixed":
            raise ValueError("rule budgeted applies to forecast and poisson rules, not fixed")
        if self.dispersion not in DISPERSIONS:
            raise ValueError(
                f"rule dispersion must be one of {DISPERSIONS}, got {self.dispersion!r}"
            )
        if self.dispersion == "pooled" and self.kind != "forecast":
            raise ValueError("rule dispersion 'pooled' applies to forecast rules only")

    @property
    def per_group(self) -> bool:
        """Levels of one group need only that group's counts (:func:`levels`)."""
        return not self.budgeted and self.dispersion == "group"

    def describe(self) -> dict[str, float | str | int | bool]:
        if self.kind == "fixed":
            return {"kind": "fixed", "units": self.fixed_units}
        out: dict[str, float | str | int | bool] = {
            "kind": self.kind,
            "service_level": self.service,
        }
        if self.kind == "forecast":
            out["half_life_weeks"] = self.half_life_weeks
            out["dispersion"] = self.dispersion
        out["budgeted"] = self.budgeted
        return out


def fixed_units(installed_base: float, share: float) -> int:
    return math.ceil(share * installed_base - 1e-9)


def _check_weeks(counts: np.ndarray, start: int, end: int, lead: int) -> None:
    if lead < 1:
        raise ValueError(f"the lead time must be at least one week, got {lead}")
    if not 0 <= start <= end <= counts.size:
        raise ValueError(f"weeks {start}..{end} outside a series of {counts.size}")


def forecast_params(
    rule: Rule, counts: np.ndarray, start: int, end: int, lead: int
) -> tuple[np.ndarray, np.ndarray]:
    """Mean and the group's own negative-binomial size (``inf``: Poisson) of the demand
    over ``lead + 1`` weeks, for weeks ``start <= t < end`` of ``counts``, each from
    ``counts[:t]``."""
    if rule.kind == "fixed":
        raise ValueError("a fixed rule has no forecast")
    _check_weeks(counts, start, end, lead)
    window = lead + 1
    fc = CountForecaster(window=window, half_life_weeks=rule.half_life_weeks)
    mean = np.zeros(end - start)
    k = np.full(end - start, math.inf)
    for i, t in enumerate(range(start, end)):
        past = counts[:t]
        if rule.kind == "forecast":
            mean[i], k[i] = fc.mean(past), window_dispersion(past, window)
        else:
            mean[i] = float(past.mean()) * window if past.size else 0.0
    return mean, k


def levels(rule: Rule, counts: np.ndarray, start: int, end: int, lead: int) -> np.ndarray:
    """``S_t`` for weeks ``start <= t < end`` of ``counts``, each from ``counts[:t]``
    (one group on its own: pooled and budgeted rules need every group,
    :func:`fleet_levels`)."""
    if not rule.per_group:
        raise ValueError("a pooled or budgeted rule needs every group: use fleet_levels")
    _check_weeks(counts, start, end, lead)
    if rule.kind == "fixed":
        return np.full(end - start, rule.fixed_units, dtype=np.int64)
    mean, k = forecast_params(rule, counts, start, end, lead)
    return count_quantiles(mean, k, np.asarray(rule.service))


def fleet_params(
    rule: Rule, counts: Sequence[np.ndarray], starts: Sequence[int], weeks: int, lead: int
) -> tuple[np.ndarray, np.ndarray]:
    """Forecast mean and size, ``(groups, weeks)`` each, of several groups over the same
    ``weeks`` calendar weeks: group ``g``'s window is ``counts[g][starts[g] :
    starts[g] + weeks]`` and its week ``i`` is forecast from ``counts[g][: starts[g] +
    i]``; with pooled dispersion, every group's size in week ``i`` is the pool of all
    groups' histories up to that week."""
    if len(counts) != len(starts):
        raise ValueError(f"counts ({len(counts)} groups) and starts ({len(starts)}) differ")
    if weeks < 0:
        raise ValueError(f"weeks must be non-negative, got {weeks}")
    params = [
        forecast_params(rule, c, s, s + weeks, lead) for c, s in zip(counts, starts, strict=True)
    ]
    mean = np.array([p[0] for p in params], dtype=np.float64).reshape(len(counts), weeks)
    k = np.array([p[1] for p in params], dtype=np.float64).reshape(len(counts), weeks)
    if rule.dispersion == "pooled":
        for i in range(weeks):
            k[:, i] = pooled_dispersion(
                [c[: s + i] for c, s in zip(counts, starts, strict=True)], lead + 1
            )
    return mean, k


@dataclass(frozen=True)
class FleetLevels:
    """Levels of several groups: ``levels[g, i]`` for group ``g`` in week ``i``, the
    service level ``service[i]`` every group stocks to that week, and (budgeted rules)
    the ``budget[i]`` the levels fit."""

    levels: np.ndarray
    service: np.ndarray
    cap: float
    budget: np.ndarray | None = None

    def summary(self) -> dict[str, float | int]:
        n = self.service.size
        total = self.levels.sum(axis=0)
        out: dict[str, float | int] = {
            "level_total_mean": float(total.mean()) if n else 0.0,
            "service_mean": float(self.service.mean()) if n else 0.0,
            "service_min": float(self.service.min()) if n else 0.0,
        }
        if self.budget is not None:
            out["budget_mean"] = float(self.budget.mean()) if n else 0.0
            out["binding_weeks"] = int((self.service < self.cap).sum())
        return out


def common_service(
    mean: np.ndarray, k: np.ndarray, budget: np.ndarray, cap: float, *, steps: int = 50
) -> FleetLevels:
    """The highest common service level ``q_t <= cap`` whose levels (each group's
    ``q_t``-quantile of a negative binomial of ``mean[g, t]`` and size ``k[g, t]``) sum to
    at most ``budget[t]``, per week (module doc); ``steps`` halvings of ``[0, cap]``."""
    mean = np.asarray(mean, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    budget = np.asarray(budget, dtype=np.float64)
    if mean.ndim != 2 or k.shape != mean.shape:
        raise ValueError(f"mean {mean.shape} and k {k.shape} must be the same (groups, weeks)")
    if budget.shape != (mean.shape[1],):
        raise ValueError(f"budget {budget.shape} must have one value per week ({mean.shape[1]})")
    if not np.isfinite(budget).all() or (budget < 0).any():
        raise ValueError("budget must be finite and non-negative every week")
    if not 0 < cap < 1:
        raise ValueError(f"service cap must be in (0, 1), got {cap}")
    weeks = budget.size
    at_cap = count_quantiles(mean, k, np.full((1, weeks), cap))
    fits = at_cap.sum(axis=0) <= budget
    lo = np.where(fits, cap, 0.0)
    hi = np.full(weeks, cap)
    todo = np.flatnonzero(~fits)
    for _ in range(steps if todo.size else 0):
        mid = (lo[todo] + hi[todo]) / 2
        ok = count_quantiles(mean[:, todo], k[:, todo], mid[None, :]).sum(axis=0) <= budget[todo]
        lo[todo] = np.where(ok, mid, lo[todo])
        hi[todo] = np.where(ok, hi[todo], mid)
    lv = at_cap.copy()
    if todo.size:
        lv[:, todo] = count_quantiles(mean[:, todo], k[:, todo], lo[todo][None, :])
    return FleetLevels(lv, lo, cap, budget)


def fleet_levels(
    rule: Rule, params: tuple[np.ndarray, np.ndarray], budget: np.ndarray | None = None
) -> FleetLevels:
    """Levels of a forecast or Poisson rule for several groups from their
    :func:`fleet_params`: every group at ``rule.service``, or, budgeted, at the common
    service level that fits ``budget`` (one value per week; :func:`common_service`)."""
    if rule.kind == "fixed":
        raise ValueError("a fixed rule has no forecast: use levels")
    mean, k = params
    if rule.budgeted:
        if budget is None:
            raise ValueError("a budgeted rule needs a budget (units per week)")
        return common_service(mean, k, np.asarray(budget, dtype=np.float64), rule.service)
    if budget is not None:
        raise ValueError("budget given for a rule that is not budgeted")
    lv = count_quantiles(mean, k, np.asarray(rule.service))
    return FleetLevels(lv, np.full(lv.shape[1], rule.service), rule.service)


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
