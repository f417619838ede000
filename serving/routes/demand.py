"""``POST /v1/demand/forecast``: quantile forecasts from the served ``demand`` champion.

The forecasts of every lake series come from :func:`pipelines.demand_jobs.forecast` with
the server's loaded model; they are computed once per (model version, state of the
lake's demand files) and filtered per request by series, horizon and quantile. Horizons
are in steps of the model's interval (the shortest lead time it forecasts: one step in
every configuration).
"""

from __future__ import annotations

import threading
from datetime import datetime
from typing import Any

from fastapi import APIRouter

from pipelines import demand_jobs
from pipelines.lake import Lake
from serving.auth import Reader
from serving.context import Ctx, ServeContext
from serving.errors import ApiError
from serving.schemas import ERRORS, ForecastRequest, ForecastResponse

router = APIRouter(prefix="/v1/demand", tags=["demand"], responses=ERRORS)
_build = threading.Lock()


def _lake_state(ctx: ServeContext) -> tuple[tuple[str, int, int], ...]:
    files = Lake(ctx.settings.lake_dir).files("demand")
    return tuple((f.name, f.stat().st_mtime_ns, f.stat().st_size) for f in files)


def _all_forecasts(ctx: ServeContext) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    """(provenance, series id -> forecast rows with their horizon in steps), cached."""
    loaded = ctx.demand.current
    if loaded is None:
        raise ApiError(503, "no demand model is loaded yet (see /readyz)")
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
            raise ApiError(503, f"cannot forecast: {exc}") from None
        ahead = [
            datetime.fromisoformat(f["valid_at"]) - datetime.fromisoformat(f["issued_at"])
            for f in out["forecasts"]
        ]
        step = min(ahead, default=None)  # every configuration forecasts one step ahead
        series: dict[str, list[dict[str, Any]]] = {}
        for f, delta in zip(out["forecasts"], ahead, strict=True):
            f["horizon"] = round(delta / step) if step else 0
            series.setdefault(f["series_id"], []).append(f)
        found = (out["provenance"], series)
        ctx.forecasts.clear()  # one generation kept
        ctx.forecasts[key] = found
        return found


def _forecast(ctx: ServeContext, body: ForecastRequest) -> dict[str, Any]:
    if body.series_ids is not None and len(body.series_ids) > ctx.config.max_batch:
        raise ApiError(
            413,
            f"{len(body.series_ids)} series in one request; at most {ctx.config.max_batch}",
            "body.series_ids",
        )
    provenance, series = _all_forecasts(ctx)
    wanted = list(series) if body.series_ids is None else list(dict.fromkeys(body.series_ids))
    unknown = [s for s in wanted if s not in series]
    if unknown:
        raise ApiError(
            404,
            f"{len(unknown)} unknown series id(s): {', '.join(unknown[:20])}",
            "body.series_ids",
        )
    offered = sorted({f["horizon"] for rows in series.values() for f in rows})
    horizons = offered if body.horizons is None else sorted(set(body.horizons))
    for i, h in enumerate(body.horizons or []):
        if h not in offered:
            raise ApiError(
                422,
                f"horizon {h} is not forecast; the model forecasts {offered[0]}..{offered[-1]}",
                f"body.horizons.{i}",
            )
    keep = set(horizons)
    return {
        "model": provenance,
        "horizons": horizons,
        "series": [
            {
                "series_id": sid,
                "issued_at": series[sid][0]["issued_at"],
                "points": [
                    {
                        "horizon": f["horizon"],
                        "valid_at": f["valid_at"],
                        "quantiles": {q: f[q] for q in body.quantiles},
                        "method": f["method"],
                    }
                    for f in series[sid]
                    if f["horizon"] in keep
                ],
            }
            for sid in wanted
        ],
    }


@router.post("/forecast", response_model=ForecastResponse, summary="Demand forecasts")
def forecast(body: ForecastRequest, ctx: Ctx, _: Reader) -> dict[str, Any]:
    """p10 / p50 / p90 per series and horizon (steps of the model's interval) from the
    served demand model, for the series asked (default: every series in the lake)."""
    return _forecast(ctx, body)
