"""Fleet risk as the dashboards show it: the served failure champion scoring the online
store's fresh nodes at one horizon, with reasons for the riskiest ones.

This is the same computation as ``predops score failure`` (online features, stale rows
listed and never scored, a feature-set mismatch refused), done with the model object the
server already holds (``ctx.failure.current``) so a page never loads a model. Results are
cached per (model version, online frame file, minute): a page refresh within the same
minute reuses them.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from core.contracts import FailureRisk
from pipelines.failure_jobs import PRIMARY_HORIZON
from pipelines.feature_jobs import NODE_ONLINE
from pipelines.feature_store import STALE, FeatureStore, FeatureStoreError
from serving.context import ServeContext

LAST_SAMPLE = "last_sample_ts"
REASONS_FOR = 25
"""Nodes (riskiest first) that get reasons: a TreeSHAP pass each, so not the whole fleet."""


@dataclass(frozen=True, slots=True)
class FleetRisk:
    """One scoring pass, or why there is none (``problem`` set, ``risks`` empty)."""

    as_of: datetime
    horizon: timedelta
    risks: tuple[FailureRisk, ...] = ()
    stale: tuple[str, ...] = ()
    model: str | None = None
    """``name v<version>`` of the model that scored."""
    online_as_of: datetime | None = None
    problem: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def by_node(self) -> dict[str, FailureRisk]:
        return {r.node_id: r for r in self.risks}


_cache: dict[tuple[Any, ...], FleetRisk] = {}
_lock = threading.Lock()


def fleet_risk(ctx: ServeContext, *, horizon: timedelta = PRIMARY_HORIZON) -> FleetRisk:
    """The current risk of every fresh node (see the module docstring)."""
    now = ctx.clock.now()
    loaded = ctx.failure.current
    if loaded is None:
        why = ctx.failure.last_error or "not loaded yet"
        return FleetRisk(now, horizon, problem=f"no failure model is served: {why}")
    online = Path(ctx.settings.features_dir) / "online" / f"{NODE_ONLINE}.arrow"
    stamp = online.stat().st_mtime_ns if online.exists() else None
    key = (loaded.version, stamp, now.replace(second=0, microsecond=0), horizon)
    with _lock:
        hit = _cache.get(key)
        if hit is not None:
            return hit
        out = _score(
            ctx, loaded.model, loaded.provenance, f"{loaded.name} v{loaded.version}", now, horizon
        )
        _cache.clear()
        _cache[key] = out
        return out


def _score(
    ctx: ServeContext, model: Any, prov: Any, label: str, now: datetime, horizon: timedelta
) -> FleetRisk:
    store = FeatureStore(ctx.settings.features_dir)
    try:
        online = store.read_online(
            NODE_ONLINE, now=now, max_age=ctx.config.max_data_age, ts_col=LAST_SAMPLE
        )
    except FeatureStoreError as exc:
        return FleetRisk(now, horizon, model=label, problem=str(exc))
    if online.feature_set_hash != prov.feature_set_hash:
        return FleetRisk(
            now,
            horizon,
            model=label,
            online_as_of=online.as_of,
            problem=f"online features have hash {online.feature_set_hash}, the champion was "
            f"trained on {prov.feature_set_hash}: rebuild features or retrain",
        )
    frame = online.frame
    after = pl.col(LAST_SAMPLE) > pl.lit(now, dtype=frame.schema[LAST_SAMPLE])
    stale = frame.filter(pl.col(STALE) | after)
    fresh = frame.filter(~pl.col(STALE) & ~after)
    if horizon not in model.horizons:
        horizon = model.horizons[0]
    risks: list[FailureRisk] = []
    if fresh.height:
        risks = model.predict_risk(
            fresh, as_of=now, horizons=[horizon], provenance=prov, reasons_for=REASONS_FOR
        )
    problem = None
    if not risks:
        newest = frame[LAST_SAMPLE].max()
        problem = (
            f"no node has features fresher than {ctx.config.max_data_age} at "
            f"{now.isoformat()} (newest sample {newest!s:.19}); run the features job"
        )
    return FleetRisk(
        now,
        horizon,
        tuple(sorted(risks, key=lambda r: -r.p_fail)),
        tuple(sorted(stale["node_id"].to_list())),
        label,
        online.as_of,
        problem,
    )
