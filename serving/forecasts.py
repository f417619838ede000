"""Demand forecasts of every lake series from the served ``demand`` champion, cached.

Computed with :func:`predops.pipelines.jobs.demand.forecast` and the model object the server
holds, once per (model version, state of the lake's demand files); both
``POST /v1/demand/forecast`` and the demand dashboards read this one cache. Each row gets
its ``horizon`` in steps of the model's interval (the shortest lead time it forecasts:
one step in every configuration).
"""

from __future__ import annotations

import threading
from datetime import datetime
from typing import Any

from predops.pipelines.jobs import demand as demand_jobs
from predops.pipelines.workspace.lake import Lake
from predops.serving.context import ServeContext

_build = threading.Lock()

Forecasts = tuple[dict[str, Any], dict[str, list[dict[str, Any]]], dict[str, Any] | None]
"""(provenance, series id -> forecast rows: series_id, issued_at, valid_at, p10, p50, p90,
method, horizon; the selection: how a combination made them, None for a single model,
see :func:`predops.pipelines.jobs.demand.served_selection`)."""


class ForecastUnavailable(RuntimeError):
    """No forecast can be served now; the message says why."""


def _lake_state(ctx: ServeContext) -> tuple[tuple[str, int, int], ...]:
    files = Lake(ctx.settings.lake_dir).files("demand")
    return tuple((f.name, f.stat().st_mtime_ns, f.stat().st_size) for f in files)


def all_forecasts(ctx: ServeContext) -> Forecasts:
    """Every series' forecast from the served model (see the module docstring). Raises
    :class:`ForecastUnavailable` without a model or without demand in the lake."""
    loaded = ctx.demand.current
    if loaded is None:
        why = ctx.demand.last_error or "not loaded yet"
        raise ForecastUnavailable(f"no demand model is loaded ({why}; see /readyz)")
    key = (loaded.version, _lake_state(ctx))
    found = ctx.forecasts.get(key)
    if found is not None:
        return found  # type: ignore[no-any-return]
    with _build:
        found = ctx.forecasts.get(key)
        if found is not None:
            return found  # type: ignore[no-any-return]
        try:
            out = demand_jobs.forecast(
                ctx.settings, loaded=(loaded.model, loaded.version, loaded.provenance)
            )
        except ValueError as exc:  # no demand in the lake
            raise ForecastUnavailable(f"cannot forecast: {exc}") from None
        except Exception as exc:  # e.g. a model trained on other features than the lake's
            raise ForecastUnavailable(
                f"the served demand model v{loaded.version} cannot forecast the lake's "
                f"demand ({type(exc).__name__}: {exc}); retrain it"
            ) from None
        ahead = [
            datetime.fromisoformat(f["valid_at"]) - datetime.fromisoformat(f["issued_at"])
            for f in out["forecasts"]
        ]
        step = min(ahead, default=None)  # every configuration forecasts one step ahead
        series: dict[str, list[dict[str, Any]]] = {}
        for f, delta in zip(out["forecasts"], ahead, strict=True):
            f["horizon"] = round(delta / step) if step else 0
            series.setdefault(f["series_id"], []).append(f)
        found = (out["provenance"], series, out.get("selection"))
        ctx.forecasts.clear()  # one generation kept
        ctx.forecasts[key] = found
        return found
