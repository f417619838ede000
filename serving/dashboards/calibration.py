"""The calibration caveat shown beside the risks it qualifies (risk board, node page,
models page), computed from the served failure model's reliability table on its
held-out rows (:func:`registry_view.failure_reliability`), never written by hand.

Reading the table bottom up, a bin is *consistent* when its failure count is inside
the central 95 % of a binomial with its mean prediction (:func:`consistent`), or its
observed rate within a quarter of that prediction.
The model is "calibrated up to" the highest predicted risk of the last consistent bin
before the first one that is not; above that the caveat names the top bin's predicted
and observed rates and says to read higher risks as a ranking. No caveat when every
bin is consistent.

The table is recomputed only when the served version or the offline frame changes: the
caveat is cached by (version, the newest offline frame's ``as_of`` and its files' change
time), so a page does not read the offline frame to show it; the computation itself
reads only the held-out rows (from the model's data cutoff on), not the whole history.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from scipy.stats import binom

from predops.pipelines.jobs.features import NODE_TRAINING
from predops.serving.context import ServeContext
from predops.serving.dashboards import registry_view

TAIL = 0.025
"""Each tail of the binomial test a bin's failure count must stay out of."""
RELATIVE = 0.25
"""...or this relative difference between observed and predicted."""

_cache: dict[tuple[Any, ...], dict[str, Any] | None] = {}
_lock = threading.Lock()


def consistent(row: dict[str, float]) -> bool:
    """Whether one reliability bin's observed rate agrees with its mean prediction:
    its failure count inside the central 95 % of Binomial(rows, p_mean) (exact: failures
    are rare, a normal approximation would flag two failures where 0.4 were expected),
    or within a quarter of the prediction."""
    p, obs, n = float(row["p_mean"]), float(row["observed"]), max(int(row["rows"]), 1)
    if abs(obs - p) <= RELATIVE * max(p, 1e-12):
        return True
    k = round(obs * n)
    p = min(max(p, 1e-12), 1 - 1e-12)
    return bool(binom.cdf(k, n, p) > TAIL and binom.sf(k - 1, n, p) > TAIL)


def caveat_from_table(table: list[dict[str, float]], horizon_h: float) -> dict[str, Any] | None:
    """The caveat of one reliability table (bins sorted by predicted risk): ``up_to``
    (the last calibrated predicted risk), the top bin's ``top_predicted`` and
    ``top_observed``, and ``text``; None when every bin is consistent."""
    if not table:
        return None
    first_bad = next((i for i, row in enumerate(table) if not consistent(row)), None)
    if first_bad is None:
        return None
    up_to = float(table[first_bad - 1]["p_high"]) if first_bad > 0 else 0.0
    top = table[-1]
    pred, obs = float(top["p_mean"]), float(top["observed"])
    text = (
        f"calibrated up to {up_to:.1%}; above that the top bin predicted {pred:.1%} and "
        f"observed {obs:.1%} (failures within {horizon_h:g} h, held-out rows) — treat "
        f"risks above {up_to:.1%} as a ranking, not a probability"
        if up_to > 0
        else (
            f"not calibrated: the lowest bin already predicted {float(table[0]['p_mean']):.2%} "
            f"and observed {float(table[0]['observed']):.2%}; the top bin predicted "
            f"{pred:.1%} and observed {obs:.1%} — treat every risk as a ranking, not a "
            "probability"
        )
    )
    return {"up_to": up_to, "top_predicted": pred, "top_observed": obs, "text": text}


def _offline_state(ctx: ServeContext) -> tuple[str | None, int]:
    """The newest offline frame's ``as_of`` directory and its files' latest change."""
    parts = sorted((Path(ctx.settings.features_dir) / "offline" / NODE_TRAINING).glob("as_of=*/*"))
    newest = max((p.stat().st_mtime_ns for p in parts), default=0)
    return (parts[-1].parent.name if parts else None), newest


def caveat(ctx: ServeContext) -> dict[str, Any] | None:
    """The served failure model's caveat (see the module doc), with ``model``; None
    without a model, a reliability table, or anything to warn about."""
    loaded = ctx.failure.current
    if loaded is None:
        return None
    key = (loaded.name, loaded.version, *_offline_state(ctx))
    with _lock:
        if key in _cache:
            return _cache[key]
    rel = registry_view.failure_reliability(ctx)
    out = caveat_from_table(rel.get("table") or [], float(rel.get("horizon_h") or 0.0))
    if out is not None:
        out["model"] = rel.get("model")
    with _lock:
        _cache.clear()
        _cache[key] = out
    return out
