"""The co-location forecasts of ``simulate-ops --sharing``: the per-node usage model
(:class:`predops.models.usage.forecaster.UsageForecaster`, what ``predops train usage``
registers and ``predops plan`` serves), on the simulator's hourly grid.

The forecaster is fitted once on the world's warm-up hours (every hour before the first
evaluated tick: nothing the evaluation scores is seen), with a one-hour window on a
one-hour step. Each evaluated hour ``t`` gets the conformal p50 / p95 / p99 of the
hour's use from the origin at the end of hour ``t - 1``, moved by the online
correction (:class:`~predops.models.usage.online.OnlineCorrection`): each hour, once
observed, updates its node's offsets before the next hour is forecast, as a served
model fed every resolved forecast would. Pure numpy + the model.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import numpy as np

from predops.models.usage.design import Design
from predops.models.usage.forecaster import UsageForecaster, corrected
from predops.models.usage.grid import UsageGrid, epoch_us
from predops.models.usage.online import OnlineCorrection

HOUR = timedelta(hours=1)
API_LEVELS = (0.5, 0.95, 0.99)


def model_quantiles(
    ids: list[str],
    use: np.ndarray,
    alloc: np.ndarray,
    start: datetime,
    first_tick: int,
    last_tick: int,
    *,
    seed: int = 0,
    n_estimators: int = 150,
) -> tuple[np.ndarray, dict[str, Any]]:
    """``q[node, tick, 3]``: p50 / p95 / p99 of each node's use (cores) in hour ``tick``
    for ``first_tick <= tick < last_tick`` (NaN elsewhere or when the origin has no
    usage), from ``use[node, tick]`` (cores, NaN: no sample) and ``alloc`` (cores);
    and what the fit was (rows, calibration, coverage on the evaluated hours)."""
    grid = UsageGrid(ids, epoch_us(start), int(HOUR.total_seconds() * 1e6), use, None, alloc)
    model = UsageForecaster(
        window=HOUR,
        step=HOUR,
        n_estimators=n_estimators,
        min_child_samples=20,
        random_state=seed,
        n_jobs=1,
    ).fit(grid.to_frame(stop=first_tick))
    n, ticks = use.shape
    pick = [model.levels.index(v) for v in API_LEVELS]
    design = Design(grid, 1)
    online = OnlineCorrection(model.levels, model.aci_gamma)
    out = np.full((n, ticks, len(API_LEVELS)), np.nan)
    rows = np.arange(n)
    hits, seen = np.zeros(len(API_LEVELS)), 0
    for t in range(max(first_tick, 1), last_tick):
        cols = np.full(n, t - 1)
        ok = np.isfinite(design.current(rows, cols))
        if not ok.any():
            continue
        r = rows[ok]
        q = model.quantiles(design, r, cols[ok])
        q = corrected(q, design.scale(r, cols[ok]), online.offsets([ids[i] for i in r]))
        out[r, t, :] = np.maximum(q[:, pick], 0.0) * alloc[r, None]
        real = use[r, t] / alloc[r]
        seen_now = np.isfinite(real)
        if seen_now.any():
            missed = real[seen_now, None] > q[seen_now]
            online.update([ids[i] for i in r[seen_now]], missed)
            hits += (~missed[:, pick]).sum(axis=0)
            seen += int(seen_now.sum())
    info = {
        "model": "models/usage UsageForecaster (lightgbm-quantile, conformal + online)",
        "fitted_on_hours": first_tick,
        "train_rows": model.n_train_rows_,
        "calibration": model.calibration_,
        "evaluated_coverage": {
            f"p{round(v * 100)}": round(float(hits[j] / max(seen, 1)), 4)
            for j, v in enumerate(API_LEVELS)
        },
    }
    return out, info
