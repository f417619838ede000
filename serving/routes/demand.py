"""``POST /v1/demand/forecast``: quantile forecasts from the served ``demand`` champion.

Every lake series' forecast comes from the server's cache (:mod:`serving.forecasts`) and
is filtered per request by series, horizon and quantile. Horizons are in steps of the
model's interval.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from predops.serving.auth import Reader
from predops.serving.context import Ctx, ServeContext
from predops.serving.errors import ApiError
from predops.serving.forecasts import ForecastUnavailable, all_forecasts
from predops.serving.schemas import ERRORS, ForecastRequest, ForecastResponse

router = APIRouter(prefix="/v1/demand", tags=["demand"], responses=ERRORS)


def _forecast(ctx: ServeContext, body: ForecastRequest) -> dict[str, Any]:
    if body.series_ids is not None and len(body.series_ids) > ctx.config.max_batch:
        raise ApiError(
            413,
            f"{len(body.series_ids)} series in one request; at most {ctx.config.max_batch}",
            "body.series_ids",
        )
    try:
        provenance, series, selection = all_forecasts(ctx)
    except ForecastUnavailable as exc:
        raise ApiError(503, str(exc)) from None
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
    chosen = (selection or {}).get("series", {})
    return {
        "model": provenance,
        "selection": None
        if selection is None
        else {k: v for k, v in selection.items() if k != "series"},
        "horizons": horizons,
        "series": [
            {
                "series_id": sid,
                "issued_at": series[sid][0]["issued_at"],
                "weights": chosen[sid]["weights"] if sid in chosen else None,
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
