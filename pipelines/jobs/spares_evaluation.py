"""``predops eval spares``: stocking spares from real failure records, four rules.

Per source, weekly replacement demand per hardware group:

- ``alibaba-ssd``: failed SSDs per drive model (A1..C2);
- ``lanl``: hardware-caused node failures (planned ``Maintenance`` left out) per
  system; a system takes part in a window when it has at least ``MIN_HISTORY_WEEKS``
  of records before it and is in service to its end (``node decom``);
- ``olcf-disk``: Alpine disk failures of the whole population (no disk model column).

Installed base for the fixed rule (never in the trace as a count except LANL):

- ``lanl``: the system's ``nodes`` column (its node count);
- ``olcf-disk``: distinct (SSC, SSU, enclosure) positions that lost a disk before the
  window x the highest slot number seen (106): 32,648 disks over the whole trace;
- ``alibaba-ssd``: no denominator in the snapshot; the FAST '21 paper's "nearly one
  million SSDs" split across models in proportion to each model's failures before the
  window (a proxy that assumes one failure rate for every model).

Rules (:mod:`predops.policy.spares`): ``forecast``, the newsvendor on the forecast,
budgeted: the groups taking part share the fixed rule's total level each week (the
*budget*: what ``ceil(share x installed base)`` stocks, summed over the groups, known
before the window) and stock one common service level, the highest that fits it and
no higher than the level chosen on validation; ``forecast_unbudgeted``, the same
newsvendor per group without the budget (knobs chosen on its own); ``poisson``;
``fixed``; ``forecast_reference`` (0.95, 13 weeks, the group's own dispersion, no
budget).

Windows: the **test** window is the last ``test_weeks`` of the trace, simulated with
history before each week only; the **validation** window is the ``test_weeks`` before
it, simulated the same way, with nothing from the test window. Knobs (the forecast
rules' service level in :data:`SERVICE_GRID`, half-life and dispersion, own or pooled
over the groups; the Poisson rule's service level) are chosen on the validation
window: among the candidates that hold no more spares there than the fixed rule, the
fewest stock-out weeks, then the fewest units short, then the highest service level
(when the window cannot tell candidates apart, the safest), then the fewest spares.
The service grid runs to ``1 - 1e-8``: beyond ``0.999`` the levels are a safety-stock
knob more than a probability (the negative binomial's tail is thinner than one-week
batch failures of one drive model), and the grid has to reach the level at which the
validation window stops telling candidates apart, or the choice is cut at the grid's
edge. Memory: the weekly count arrays (groups x weeks integers) and the input trace;
a few MB.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from predops.models.demand.spares import week_index, week_start, weekly_counts
from predops.pipelines.ingest.traces.alibaba_ssd import FLEET_SSDS, read_alibaba_ssd
from predops.pipelines.ingest.traces.lanl_failures import is_hardware_replacement, read_lanl
from predops.pipelines.ingest.traces.olcf_alpine import read_olcf_alpine
from predops.policy.spares import Rule, fixed_units, fleet_levels, fleet_params, simulate

SOURCES = ("alibaba-ssd", "lanl", "olcf-disk")
DEFAULT_TEST_WEEKS = {"alibaba-ssd": 26, "lanl": 52, "olcf-disk": 52}
MIN_HISTORY_WEEKS = 26
SERVICE_GRID = (
    *(0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995, 0.999, 0.9995),
    *(1 - 10.0**-j for j in range(4, 9)),
)
HALF_LIFE_GRID = (4.0, 8.0, 13.0, 26.0, 52.0)
DISPERSION_GRID = ("group", "pooled")
REFERENCE = Rule("forecast", service=0.95, half_life_weeks=13.0)
FAMILIES = ("forecast", "forecast_unbudgeted", "poisson")


@dataclass(frozen=True)
class SparesInput:
    """Weekly demand per group and what each window may know about the installed base."""

    source: str
    counts: dict[str, np.ndarray]
    first_week: int
    active: dict[str, tuple[int, int]]
    """Per group, the first week index (into ``counts``) with history and the end
    (exclusive) of its service."""
    base: Callable[[str, int], float]
    """Installed base of a group as known before week index ``t``."""
    base_how: str
    info: dict[str, Any]


def _last_full_week(events: pl.DataFrame, time: str) -> int:
    """Index of the last week that the trace covers to its end."""
    last = events[time].max()
    return int(events.select(week_index(pl.lit(last) + timedelta(days=1))).item()) - 1


def _first_week(events: pl.DataFrame, time: str) -> int:
    return int(events.select(week_index(pl.col(time).min())).item())


def _frame_info(frame: pl.DataFrame, time: str, quarantine: dict[str, Any]) -> dict[str, Any]:
    return {
        "rows": frame.height,
        "quarantined": quarantine,
        "from": frame[time].min(),
        "to": frame[time].max(),
    }


def load(source: str, path: str) -> SparesInput:
    """Weekly replacement demand of ``source`` read from ``path`` (module doc)."""
    if source == "alibaba-ssd":
        ssd = read_alibaba_ssd(path)
        ev = ssd.frame
        first, last = _first_week(ev, "at"), _last_full_week(ev, "at")
        counts = weekly_counts(ev, group="model", first=first, last=last)
        share_cum = {g: np.cumsum(c) for g, c in counts.items()}

        def base(g: str, t: int) -> float:
            total = sum(float(c[t - 1]) for c in share_cum.values()) if t > 0 else 0.0
            return FLEET_SSDS * float(share_cum[g][t - 1]) / total if total else 0.0

        n = last - first + 1
        return SparesInput(
            source,
            counts,
            first,
            {g: (0, n) for g in counts},
            base,
            "1,000,000 SSDs (FAST '21: 'nearly one million') split by each model's share "
            "of failures before the window (proxy: no denominator in the trace)",
            _frame_info(ev, "at", ssd.quarantine.to_dict()),
        )
    if source == "lanl":
        rec = read_lanl(path)
        df = rec.frame
        repl = df.filter(is_hardware_replacement(df)).rename({"start": "at"})
        first, last = (
            _first_week(df.rename({"start": "at"}), "at"),
            _last_full_week(df.rename({"start": "at"}), "at"),
        )
        counts = weekly_counts(repl, group="system", first=first, last=last)
        per_sys = df.group_by("system").agg(
            pl.col("nodes").max(),
            week_index(pl.col("start").min()).alias("w0"),
            pl.col("in_service").any(),
            week_index(pl.col("decommissioned").max()).alias("w_end"),
        )
        active: dict[str, tuple[int, int]] = {}
        nodes: dict[str, float] = {}
        n = last - first + 1
        for s, nd, w0, in_service, w_end in per_sys.iter_rows():
            g = str(s)
            if g not in counts:
                counts[g] = np.zeros(n, dtype=np.int64)
            end = n if in_service or w_end is None else min(n, int(w_end) - first)
            active[g] = (int(w0) - first, end)
            nodes[g] = float(nd)
        return SparesInput(
            source,
            counts,
            first,
            active,
            lambda g, t: nodes[g],
            "the system's node count (column 'nodes')",
            {
                **_frame_info(df, "start", rec.quarantine.to_dict()),
                "replacement_rows": repl.height,
                "replacement": "hardware root cause, 'Maintenance' left out",
            },
        )
    if source == "olcf-disk":
        disks = read_olcf_alpine(path)
        ev = disks.frame.with_columns(pl.lit("alpine").alias("population"))
        first, last = _first_week(ev, "at"), _last_full_week(ev, "at")
        counts = weekly_counts(ev, group="population", first=first, last=last)
        widx = ev.select(week_index(pl.col("at"))).to_series().to_numpy() - first
        slots = int(ev["slot"].max())  # type: ignore[arg-type]

        def alpine_base(g: str, t: int) -> float:
            seen = ev.filter(pl.Series(widx < t)).select("ssc", "ssu", "enclosure").unique()
            return float(seen.height * slots)

        return SparesInput(
            source,
            counts,
            first,
            {"alpine": (0, last - first + 1)},
            alpine_base,
            "distinct (SSC, SSU, enclosure) that lost a disk before the window x "
            f"{slots} slots (the highest slot seen)",
            {**_frame_info(ev, "at", disks.quarantine.to_dict()), **disks.installed_base_proxy()},
        )
    raise ValueError(f"source must be one of {SOURCES}, got {source!r}")


def _window_groups(data: SparesInput, start: int, end: int) -> list[str]:
    return [
        g
        for g, (a, b) in sorted(data.active.items())
        if a + MIN_HISTORY_WEEKS <= start and b >= end
    ]


def run_window(
    data: SparesInput, rules: dict[str, Rule], start: int, end: int, lead: int, share: float
) -> dict[str, Any]:
    """Every rule simulated over weeks ``start..end`` of each taking-part group; the
    budgeted rules share the fixed rule's total level over those groups each week."""
    groups = _window_groups(data, start, end)
    fixed_level = {g: fixed_units(data.base(g, start), share) for g in groups}
    hists = [data.counts[g][data.active[g][0] :] for g in groups]
    offsets = [start - data.active[g][0] for g in groups]
    weeks = end - start
    budget = np.full(weeks, float(sum(fixed_level.values())))
    per_group: dict[str, dict[str, Any]] = {
        g: {"demand": int(data.counts[g][start:end].sum()), "installed_base": data.base(g, start)}
        for g in groups
    }
    totals: dict[str, dict[str, float]] = {}
    fleet: dict[str, dict[str, float | int]] = {}
    params: dict[tuple[str, float, str], tuple[np.ndarray, np.ndarray]] = {}
    for name, rule in rules.items():
        if rule.kind == "fixed":
            lv = np.array([np.full(weeks, fixed_level[g], dtype=np.int64) for g in groups])
        else:
            key = (rule.kind, rule.half_life_weeks, rule.dispersion)
            if key not in params:
                params[key] = fleet_params(rule, hists, offsets, weeks, lead)
            fl = fleet_levels(rule, params[key], budget if rule.budgeted else None)
            lv = fl.levels
            if rule.budgeted:
                fleet[name] = fl.summary()
        tot = totals.setdefault(name, {})
        for g, h, s, lg in zip(groups, hists, offsets, lv, strict=True):
            res = simulate(h[s : s + weeks], lg, lead).summary()
            res["level_mean"] = float(lg.mean()) if weeks else 0.0
            per_group[g][name] = res
            for k in ("stock_out_weeks", "units_short", "spares_held_mean"):
                tot[k] = tot.get(k, 0.0) + float(res[k])
    return {
        "from": week_start(data.first_week + start).date().isoformat(),
        "to": week_start(data.first_week + end).date().isoformat(),
        "groups": len(per_group),
        "demand": int(sum(v["demand"] for v in per_group.values())),
        "budget_units": float(budget[0]) if weeks else 0.0,
        "totals": totals,
        "budgeted": fleet,
        "per_group": per_group,
    }


def _pick(candidates: list[tuple[Rule, dict[str, float]]], fixed: dict[str, float]) -> Rule:
    """Validation choice (module doc): within the fixed rule's spares held, the fewest
    stock-out weeks, then the fewest units short, then the highest service level (the
    window cannot tell those apart: take the safest), then the fewest spares. When no
    candidate fits the fixed rule's spares, the fewest spares."""
    within = [c for c in candidates if c[1]["spares_held_mean"] <= fixed["spares_held_mean"]]
    if not within:
        return min(candidates, key=lambda c: c[1]["spares_held_mean"])[0]
    return min(
        within,
        key=lambda c: (
            c[1]["stock_out_weeks"],
            c[1]["units_short"],
            -c[0].service,
            c[1]["spares_held_mean"],
        ),
    )[0]


def _key(rule: Rule) -> str:
    """A grid rule's name in the validation totals."""
    q = f"{rule.service:.10g}"
    if rule.kind == "poisson":
        return f"poisson@{q}"
    family = "forecast" if rule.budgeted else "forecast_unbudgeted"
    return f"{family}@{q}/hl{rule.half_life_weeks:g}/{rule.dispersion}"


def _family(rule: Rule) -> str:
    if rule.kind == "forecast":
        return "forecast" if rule.budgeted else "forecast_unbudgeted"
    return rule.kind


def _grid() -> dict[str, Rule]:
    rules = [Rule("poisson", service=q) for q in SERVICE_GRID]
    rules += [
        Rule("forecast", service=q, half_life_weeks=h, dispersion=d, budgeted=b)
        for b in (True, False)
        for d in DISPERSION_GRID
        for h in HALF_LIFE_GRID
        for q in SERVICE_GRID
    ]
    return {"fixed": Rule("fixed")} | {_key(r): r for r in rules}


def _bar(f: dict[str, float], x: dict[str, float]) -> dict[str, bool]:
    fewer_out = f["stock_out_weeks"] < x["stock_out_weeks"] and (
        f["spares_held_mean"] <= x["spares_held_mean"]
    )
    fewer_spares = f["spares_held_mean"] < x["spares_held_mean"] and (
        f["stock_out_weeks"] <= x["stock_out_weeks"]
    )
    return {
        "fewer_stock_out_weeks_at_no_more_spares": bool(fewer_out),
        "fewer_spares_at_no_more_stock_out_weeks": bool(fewer_spares),
        "met": bool(fewer_out or fewer_spares),
    }


def evaluate_spares(
    source: str,
    path: str,
    *,
    lead_weeks: int = 4,
    test_weeks: int | None = None,
    fixed_share: float = 0.05,
    stage: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """The rules on the validation and test windows of ``source`` (module doc);
    ``stage(name)`` is called as each stage begins (progress)."""
    if source not in SOURCES:
        raise ValueError(f"source must be one of {SOURCES}, got {source!r}")
    if lead_weeks < 1:
        raise ValueError(f"lead_weeks must be at least 1, got {lead_weeks}")
    if test_weeks is not None and test_weeks < 1:
        raise ValueError(f"test_weeks must be at least 1, got {test_weeks}")
    if not 0 <= fixed_share <= 1:
        raise ValueError(f"fixed_share must be in [0, 1], got {fixed_share}")

    def begin(name: str) -> None:
        if stage is not None:
            stage(name)

    begin(f"read {source}")
    data = load(source, path)
    n = next(iter(data.counts.values())).size
    tw = test_weeks or DEFAULT_TEST_WEEKS[source]
    t_start, v_start = n - tw, n - 2 * tw
    if v_start < MIN_HISTORY_WEEKS:
        raise ValueError(
            f"{source}: {n} weeks are too few for a {tw}-week validation and test window "
            f"after {MIN_HISTORY_WEEKS} weeks of history"
        )
    grid = _grid()
    begin(f"validation window: {len(grid)} rules")
    val = run_window(data, grid, v_start, t_start, lead_weeks, fixed_share)
    if not val["groups"]:
        raise ValueError(f"{source}: no group has {MIN_HISTORY_WEEKS} weeks before validation")
    vt = val["totals"]
    chosen = {
        fam: _pick([(r, vt[k]) for k, r in grid.items() if _family(r) == fam], vt["fixed"])
        for fam in FAMILIES
    }
    rules = {**chosen, "fixed": grid["fixed"], "forecast_reference": REFERENCE}
    f = chosen["forecast"]
    by_service = {f"{q:.10g}": vt[_key(replace(f, service=q))] for q in SERVICE_GRID}
    begin("test window")
    test = run_window(data, rules, t_start, n, lead_weeks, fixed_share)
    tt = test["totals"]
    return {
        "source": source,
        "path": str(Path(path)),
        "input": data.info,
        "weeks": n,
        "groups": sorted(data.counts),
        "lead_weeks": lead_weeks,
        "review_weeks": 1,
        "demand_window_weeks": lead_weeks + 1,
        "installed_base": {"how": data.base_how, "fixed_share": fixed_share},
        "budget": {
            "how": "the fixed rule's total level over the groups taking part, each week",
            "validation_units": val["budget_units"],
            "test_units": test["budget_units"],
        },
        "rules": {k: r.describe() for k, r in rules.items() if k != "fixed"}
        | {"fixed": {"kind": "fixed", "units": f"ceil({fixed_share:g} x installed base)"}},
        "selection": {
            "window": {"from": val["from"], "to": val["to"], "groups": val["groups"]},
            "criterion": "validation window: within the fixed rule's spares held, fewest "
            "stock-out weeks, then fewest units short, then highest service level, then "
            "fewest spares",
            "service_grid": [float(q) for q in SERVICE_GRID],
            "validation_totals": {"fixed": vt["fixed"]}
            | {fam: vt[_key(r)] for fam, r in chosen.items()},
            "validation_budgeted": val["budgeted"][_key(f)],
            "forecast_by_service": by_service,
        },
        "test": test,
        "bar": _bar(tt["forecast"], tt["fixed"]),
        "bar_unbudgeted": _bar(tt["forecast_unbudgeted"], tt["fixed"]),
    }
