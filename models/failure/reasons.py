"""Feature contributions in words a platform engineer reads.

A reason is one feature's signed contribution to a node's failure log-odds (LightGBM
``pred_contrib``) plus a sentence built from the feature's definition (source column,
aggregation, window) and its value, with the unit the column name carries
(``gpu_temp_c`` -> C, ``_pct`` -> %, ``_w`` -> W, ``_bytes`` -> GiB):

    gpu_temp_c 9.1 C above rack peers over 1h (raises risk)
    12 new GPU single-bit ECC errors in the last 6h (raises risk)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import timedelta

import numpy as np

from predops.core.contracts import Reason
from predops.core.schemas import TELEMETRY
from predops.features.definitions import FeatureDef, window_label

_COUNTER_WHAT = {
    c.name.removesuffix("_total"): c.doc.split(" since")[0] for c in TELEMETRY.columns if c.counter
}


def _unit(column: str) -> tuple[str, float]:
    """(unit text, divisor) for a gauge column named with its unit."""
    if column.endswith("_bytes"):
        return " GiB", float(1 << 30)
    if column.endswith("_pct"):
        return " %", 1.0
    if column.endswith("_c"):
        return " C", 1.0
    if column.endswith("_w"):
        return " W", 1.0
    return "", 1.0


def _num(v: float) -> str:
    if not math.isfinite(v):
        return "n/a"
    a = abs(v)
    if a >= 100 or float(v).is_integer():
        return f"{v:,.0f}"
    if a >= 10:
        return f"{v:.1f}"
    return f"{v:.2g}"


def _win(w: timedelta | None) -> str:
    return window_label(w) if w is not None else ""


def describe(d: FeatureDef, value: float | str | None) -> str:
    """A short sentence for feature ``d`` at ``value`` (what it measures, with units)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return f"{d.name} unknown (no data)"
    if d.dtype == "category" or isinstance(value, str):
        return f"{d.name.split('__')[-1].replace('_', ' ')} {value}"
    v = float(value)
    src = d.source[0] if d.source else d.name
    w = _win(d.window)
    agg = d.aggregation
    if src.startswith("smart_"):
        return _smart(d, v)
    if agg in ("mean", "max", "std", "slope"):  # only the one sentence is built
        unit, div = _unit(src)
        x = v / div
        if agg == "mean":
            return f"{src} averaged {_num(x)}{unit} over {w}"
        if agg == "max":
            return f"{src} peaked at {_num(x)}{unit} over {w}"
        if agg == "std":
            return f"{src} varied by {_num(x)}{unit} (sd) over {w}"
        return f"{src} {'rising' if x >= 0 else 'falling'} {_num(abs(x))}{unit}/h over {w}"
    if agg == "mean_short_minus_mean_baseline":
        unit, div = _unit(src)
        x = v / div
        side = "above" if x >= 0 else "below"
        return f"{src} last hour {_num(abs(x))}{unit} {side} its own {w} mean"
    if agg == "zscore_short_vs_baseline":
        side = "above" if v >= 0 else "below"
        return f"{src} last hour {_num(abs(v))} sd {side} its own {w} mean"
    if agg == "minus_peer_median":
        unit, div = _unit(src)
        x = v / div
        group = d.source[1] if len(d.source) > 1 else "peer"
        side = "above" if x >= 0 else "below"
        return f"{src} {_num(abs(x))}{unit} {side} {group} peers over {w}"
    base = src.removesuffix("_total")
    what = _COUNTER_WHAT.get(base, base.replace("_", " "))
    if agg == "increase":
        return f"{_num(v)} new {what} in the last {w}"
    if agg == "last":
        return f"{_num(v)} {what} in total"
    if agg == "hours_since_last_increase":
        return f"last new {what} {_num(v)} h ago"
    if agg == "missing_fraction":
        return f"{_num(100 * v)} % of expected samples missing over {w}"
    if agg == "count" and src == "ts":
        return f"{_num(v)} samples over {w}"
    if agg == "false_fraction":
        return f"NotReady {_num(100 * v)} % of the last {w}"
    if agg == "minutes_since_last":
        return f"no sample for {_num(v)} min"
    if agg == "hours_since_false":
        return f"last NotReady {_num(v)} h ago"
    if agg == "hours_since_event":
        kind = d.name.removeprefix("events__hours_since_").replace("_", " ")
        return f"last {kind} {_num(v)} h ago"
    if agg == "count":
        return f"{_num(v)} failures in the last {w}"
    if agg == "days_since_snapshot":
        return f"last SMART snapshot {_num(v)} days ago"
    if agg == "age":
        return f"in service {_num(v)} days"
    if agg == "surprise":
        return f"{d.doc or d.name}: surprise {_num(v)} (1 in {_odds(v)})"
    return f"{d.name} = {_num(v)}"


def _odds(surprise: float) -> str:
    return f"{10 ** min(surprise, 12):,.0f}"


def _smart(d: FeatureDef, v: float) -> str:
    """Drive (SMART) features: ``SMART 5 reallocated sectors grew by 8 in 7 days``."""
    from predops.models.failure.drives import SMART_NAMES

    n = d.source[0].removeprefix("smart_").removesuffix("_raw")
    what = (
        "any SMART counter"
        if len(d.source) > 1
        else f"SMART {n} {SMART_NAMES.get(int(n), '') if n.isdigit() else ''}".rstrip()
    )
    days = d.window.days if d.window else 0
    span = f"{days} day{'' if days == 1 else 's'}"
    text = {
        "increase": f"{what} grew by {_num(v)} in {span}",
        "days_since_last_increase": f"{what} last grew {_num(v)} days ago",
        "days_since_first_nonzero": f"{what} nonzero for {_num(v)} days",
        "growth_count": f"{_num(v)} snapshots with a growing SMART counter in {span}",
        "count_nonzero": f"{_num(v)} of SMART 5/187/197/198 nonzero",
        "sum": f"{_num(v)} bad sectors and errors in SMART 5/187/197/198",
    }
    return text.get(d.aggregation, f"{what} = {_num(v)}")


def top_reasons(
    contributions: np.ndarray,
    values: Sequence[float | str | None],
    defs: Sequence[FeatureDef],
    *,
    top: int = 3,
    min_abs: float = 0.05,
) -> tuple[Reason, ...]:
    """The ``top`` features with the largest absolute contribution (log-odds) of one
    row, signed, each worded with :func:`describe`; contributions below ``min_abs`` are
    noise and left out."""
    if len(contributions) != len(defs) or len(values) != len(defs):
        raise ValueError("contributions, values and defs must align")
    order = np.argsort(-np.abs(contributions), kind="stable")
    return _worded(contributions, values, defs, order[:top], min_abs)


def _worded(
    contributions: np.ndarray,
    values: Sequence[float | str | None],
    defs: Sequence[FeatureDef],
    order: np.ndarray,
    min_abs: float,
) -> tuple[Reason, ...]:
    out = []
    for i in order:
        c = float(contributions[i])
        if abs(c) < min_abs:
            break
        effect = "raises risk" if c > 0 else "lowers risk"
        out.append(Reason(defs[i].name, c, f"{describe(defs[i], values[i])} ({effect})"))
    return tuple(out)


def top_reasons_rows(
    contributions: np.ndarray,
    values: np.ndarray,
    defs: Sequence[FeatureDef],
    *,
    top: int = 3,
    min_abs: float = 0.05,
) -> list[tuple[Reason, ...]]:
    """:func:`top_reasons` of every row of ``contributions`` and ``values`` (2-D, one
    row per prediction), the features of all rows ranked in one pass."""
    if contributions.shape[1] != len(defs) or values.shape[1] != len(defs):
        raise ValueError("contributions, values and defs must align")
    order = np.argsort(-np.abs(contributions), axis=1, kind="stable")[:, :top]
    return [
        _worded(contributions[k], values[k], defs, order[k], min_abs)
        for k in range(contributions.shape[0])
    ]


def defs_by_name(defs: Sequence[FeatureDef]) -> Mapping[str, FeatureDef]:
    return {d.name: d for d in defs}
