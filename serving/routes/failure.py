"""``/v1/failure/*``: node failure risk from the served ``node_failure`` champion.

- ``POST /v1/failure/score``: nodes by id (features from the online store) and / or by
  feature vector; P(failure) per horizon, reasons for the riskiest, provenance. Unknown
  node ids are a 404 naming them; stale nodes are answered with ``status: stale`` and no
  risk (the server never scores old data as if it were current).
- ``GET /v1/failure/risk``: the fleet's fresh nodes riskiest first, filtered by pool /
  rack, paged with limit / offset (scored once per model version and online snapshot).
- ``GET /v1/failure/features``: what a feature vector must hold.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Annotated, Any

import numpy as np
from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from predops.core.contracts import Reason
from predops.models.failure.scorer import FailureScorer, FeatureVectorError
from predops.pipelines.workspace.errors import FeatureStoreError
from predops.serving.auth import Reader
from predops.serving.context import Ctx, ServeContext
from predops.serving.errors import ApiError
from predops.serving.fleet import FRESH, FleetRisk, OnlineSnapshot
from predops.serving.models import Loaded
from predops.serving.schemas import (
    ERRORS,
    FeatureList,
    FleetRiskPage,
    ScoreRequest,
    ScoreResponse,
)

router = APIRouter(prefix="/v1/failure", tags=["failure"], responses=ERRORS)

INLINE_WORK = 64
"""Requests scoring at most this many nodes (and explaining none) run on the event loop;
larger ones go to the thread pool so they never stall other requests."""
UNKNOWN_SHOWN = 20


def _served(ctx: ServeContext) -> tuple[Loaded, FailureScorer]:
    loaded = ctx.failure.current
    if loaded is None:
        raise ApiError(503, "no failure model is loaded yet (see /readyz)")
    return loaded, ctx.scorer(loaded.model)


def _fleet(ctx: ServeContext, loaded: Loaded, scorer: FailureScorer) -> FleetRisk:
    try:
        snap = ctx.online.snapshot(ctx.clock.now(), ctx.config.max_data_age)
    except FeatureStoreError as exc:
        raise ApiError(503, f"online features unavailable: {exc}") from None
    if snap.feature_set_hash != loaded.provenance.feature_set_hash:
        raise ApiError(
            503,
            f"online features have feature set {snap.feature_set_hash}, the served model "
            f"{loaded.version} was trained on {loaded.provenance.feature_set_hash}",
        )
    return ctx.fleet.get(loaded.version, snap, scorer)


def _horizons(scorer: FailureScorer, hours: list[float] | None, field: str) -> list[int]:
    if hours is None:
        return list(range(len(scorer.horizons)))
    if not hours:
        raise ApiError(422, "give at least one horizon (or leave it out for all)", field)
    out = []
    for i, h in enumerate(hours):
        try:
            out.append(scorer.horizon_index(h))
        except ValueError as exc:
            raise ApiError(422, str(exc), f"{field}.{i}") from None
    return list(dict.fromkeys(out))


def _reasons(found: tuple[Reason, ...]) -> list[dict[str, Any]]:
    return [{"feature": r.feature, "contribution": r.contribution, "text": r.text} for r in found]


def _iso(t: datetime | None) -> str | None:
    return None if t is None else t.isoformat()


def _rows_of(snap: OnlineSnapshot, ids: Sequence[str]) -> np.ndarray:
    unknown = [n for n in dict.fromkeys(ids) if n not in snap.index]
    if unknown:
        shown = ", ".join(unknown[:UNKNOWN_SHOWN])
        more = f" and {len(unknown) - UNKNOWN_SHOWN} more" if len(unknown) > UNKNOWN_SHOWN else ""
        raise ApiError(404, f"{len(unknown)} unknown node id(s): {shown}{more}", "body.node_ids")
    return np.fromiter((snap.index[n] for n in ids), dtype=np.int64, count=len(ids))


def _score(ctx: ServeContext, body: ScoreRequest) -> dict[str, Any]:
    loaded, scorer = _served(ctx)
    count = len(body.node_ids) + len(body.nodes)
    if count == 0:
        raise ApiError(422, "give node_ids, nodes (feature vectors) or both", "body.node_ids")
    if count > ctx.config.max_batch:
        raise ApiError(
            413, f"{count} nodes in one request; at most {ctx.config.max_batch}", "body.node_ids"
        )
    which = _horizons(scorer, body.horizons_hours, "body.horizons_hours")
    now = ctx.clock.now()
    results: list[dict[str, Any]] = []
    # (p per chosen horizon, where its reasons come from) of every scored node
    scored: list[tuple[int, np.ndarray]] = []
    online_as_of: datetime | None = None
    fleet: FleetRisk | None = None
    rows = np.zeros(0, dtype=np.int64)
    if body.node_ids:
        fleet = _fleet(ctx, loaded, scorer)
        snap = fleet.snapshot
        online_as_of = snap.as_of
        rows = _rows_of(snap, body.node_ids)
        status = snap.status(rows, now, ctx.config.max_data_age)
        p = fleet.p_fail[rows][:, which]
        for k, (node_id, row) in enumerate(zip(body.node_ids, rows, strict=True)):
            results.append(
                {
                    "node_id": node_id,
                    "source": "online",
                    "status": status[k],
                    "last_sample_at": _iso(snap.last_sample_at(int(row))),
                    "risks": [],
                }
            )
            if status[k] == FRESH:
                scored.append((k, p[k]))
    design = None
    if body.nodes:
        try:
            design = scorer.design_vectors([n.features for n in body.nodes])
        except FeatureVectorError as exc:
            raise ApiError(
                422, exc.message, f"body.nodes.{exc.row}.features.{exc.feature}"
            ) from None
        pv = scorer.proba(design, which)
        base = len(results)
        for k, vector in enumerate(body.nodes):
            results.append(
                {"node_id": vector.node_id, "source": "body", "status": FRESH, "risks": []}
            )
            scored.append((base + k, pv[k]))
    online_count = len(body.node_ids)
    for j, h in enumerate(which):
        hours = scorer.horizons[h].total_seconds() / 3600
        top = sorted(scored, key=lambda s: -s[1][j])[: body.explain]
        explained: dict[int, tuple[Reason, ...]] = {}
        from_online = [k for k, _ in top if k < online_count]
        from_body = [k - online_count for k, _ in top if k >= online_count]
        if fleet is not None and from_online:
            found = fleet.reasons([int(rows[k]) for k in from_online], h)
            explained.update(zip(from_online, found, strict=True))
        if design is not None and from_body:
            sub = design.take(np.asarray(from_body, dtype=np.int64))
            found = scorer.reasons(sub, h)
            explained.update(zip((k + online_count for k in from_body), found, strict=True))
        for k, pk in scored:
            results[k]["risks"].append(
                {
                    "horizon_hours": hours,
                    "p_fail": float(pk[j]),
                    "reasons": _reasons(explained.get(k, ())),
                }
            )
    return {
        "as_of": now.isoformat(),
        "model": loaded.provenance_dict,
        "online_as_of": _iso(online_as_of),
        "results": results,
    }


@router.post("/score", response_model=ScoreResponse, summary="Score nodes")
async def score(body: ScoreRequest, ctx: Ctx, _: Reader) -> JSONResponse:
    """Calibrated P(failure within each horizon) per node, with the top reasons of the
    ``explain`` riskiest nodes per horizon and the served model's provenance."""
    # The body is built to ScoreResponse's shape and serialised directly: validating
    # 10,000 nodes x 3 horizons against the model again would cost more than scoring
    # them (tests check the shape with ScoreResponse.model_validate).
    count = len(body.node_ids) + len(body.nodes)
    if count <= INLINE_WORK and body.explain == 0:
        return JSONResponse(_score(ctx, body))
    return JSONResponse(await run_in_threadpool(_score, ctx, body))


def _risk_page(
    ctx: ServeContext,
    pool: str | None,
    rack: str | None,
    horizon_hours: float | None,
    limit: int,
    offset: int,
    reasons: bool,
) -> dict[str, Any]:
    loaded, scorer = _served(ctx)
    fleet = _fleet(ctx, loaded, scorer)
    snap = fleet.snapshot
    if horizon_hours is None:
        h = scorer.horizon_index(24.0) if 24.0 in _hours(scorer) else 0
    else:
        try:
            h = scorer.horizon_index(horizon_hours)
        except ValueError as exc:
            raise ApiError(422, str(exc), "query.horizon_hours") from None
    now = ctx.clock.now()
    every = np.arange(len(snap.node_ids), dtype=np.int64)
    status = snap.status(every, now, ctx.config.max_data_age)
    match = np.ones(every.size, dtype=bool)
    if pool is not None:
        match &= np.array([p == pool for p in snap.pools], dtype=bool)
    if rack is not None:
        match &= np.array([r == rack for r in snap.racks], dtype=bool)
    fresh = every[match & (status == FRESH)]
    p = fleet.p_fail[fresh, h]
    order = fresh[np.lexsort((np.array([snap.node_ids[i] for i in fresh]), -p))]
    page = [int(i) for i in order[offset : offset + limit]]
    why = fleet.reasons(page, h) if reasons else [()] * len(page)
    end = offset + len(page)
    return {
        "as_of": now,
        "horizon_hours": scorer.horizons[h].total_seconds() / 3600,
        "model": loaded.provenance_dict,
        "online_as_of": snap.as_of,
        "total": int(order.size),
        "stale": int(match.sum() - order.size),
        "offset": offset,
        "limit": limit,
        "next_offset": end if end < order.size else None,
        "items": [
            {
                "node_id": snap.node_ids[i],
                "pool": snap.pools[i],
                "rack": snap.racks[i],
                "p_fail": float(fleet.p_fail[i, h]),
                "last_sample_at": snap.last_sample_at(i),
                "reasons": _reasons(w),
            }
            for i, w in zip(page, why, strict=True)
        ],
    }


def _hours(scorer: FailureScorer) -> list[float]:
    return [h.total_seconds() / 3600 for h in scorer.horizons]


@router.get("/risk", response_model=FleetRiskPage, summary="Fleet risk, riskiest first")
def fleet_risk(
    ctx: Ctx,
    _: Reader,
    pool: Annotated[str | None, Query(max_length=128, description="only this pool")] = None,
    rack: Annotated[str | None, Query(max_length=128, description="only this rack")] = None,
    horizon_hours: Annotated[
        float | None, Query(gt=0, le=10_000, description="default: 24 h if the model has it")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
    reasons: Annotated[bool, Query(description="top reasons of each listed node")] = True,
) -> dict[str, Any]:
    """Every fresh node of the online store scored by the served model (cached per model
    version and online snapshot), filtered, sorted by p_fail (ties by node id), paged."""
    return _risk_page(ctx, pool, rack, horizon_hours, limit, offset, reasons)


@router.get("/features", response_model=FeatureList, summary="Features a vector must hold")
def features(ctx: Ctx, _: Reader) -> dict[str, Any]:
    """The served model's features: numbers (float32 range) and categorical levels."""
    loaded, scorer = _served(ctx)
    return {
        "model_version": loaded.version,
        "numeric": [f for f in scorer.features if f not in scorer.categorical],
        "categorical": {
            f: scorer.levels.get(f, []) for f in scorer.features if f in scorer.categorical
        },
    }
