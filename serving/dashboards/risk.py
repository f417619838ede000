"""Fleet risk as the dashboards show it: the served failure champion's scores of the
online store's fresh nodes at one horizon, with reasons for the riskiest ones.

The scores are the server's shared fleet cache (:mod:`serving.fleet`: one scoring pass
per model version and online snapshot, the same numbers ``/v1/failure/risk`` serves);
stale nodes are listed and never scored, and a feature-set mismatch is refused, as in
``predops score failure``. A page never loads a model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import numpy as np

from predops.core.contracts import FailureRisk, Reason
from predops.models.failure.config import PRIMARY_HORIZON
from predops.pipelines.workspace.errors import FeatureStoreError
from predops.serving.context import ServeContext
from predops.serving.fleet import FRESH

REASONS_FOR = 25
"""Nodes (riskiest first) that get reasons: a TreeSHAP pass each, so not the whole fleet."""
SHOWN = 3
"""Reasons a listed node gets (the scorer's default, cached per scoring pass)."""
MAX_EXPLAINED = 200
"""Most nodes one :meth:`FleetRisk.explain` call explains (a page lists fewer)."""
ALL_REASONS = 10_000
"""``top`` that asks :meth:`FleetRisk.explain` for every contribution above noise."""

Explainer = Callable[[Sequence[str], int], dict[str, tuple[Reason, ...]]]
"""Reasons of node ids (those scored in the same pass), ``top`` of them per node."""


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
    explainer: Explainer | None = field(default=None, compare=False, repr=False)
    """The scoring pass's reasons of any node it scored (beyond the riskiest
    :data:`REASONS_FOR`, or more than :data:`SHOWN` each)."""

    def by_node(self) -> dict[str, FailureRisk]:
        return {r.node_id: r for r in self.risks}

    def explain(self, node_ids: Sequence[str], top: int = SHOWN) -> dict[str, tuple[Reason, ...]]:
        """The ``top`` largest reasons (by absolute contribution, as the model ranks
        them) of each of ``node_ids`` that this pass scored; at most
        :data:`MAX_EXPLAINED` nodes a call."""
        if len(node_ids) > MAX_EXPLAINED:
            raise ValueError(f"{len(node_ids)} nodes to explain; at most {MAX_EXPLAINED}")
        scored = self.by_node()
        ids = [n for n in dict.fromkeys(node_ids) if n in scored]
        if not ids or self.explainer is None:
            return {}
        return self.explainer(ids, top)


def fleet_risk(ctx: ServeContext, *, horizon: timedelta = PRIMARY_HORIZON) -> FleetRisk:
    """The current risk of every fresh node at ``horizon`` (the model's first horizon if
    it has no such one), from the server's shared fleet cache (:mod:`serving.fleet`, the
    same scores ``/v1/failure/risk`` serves), with reasons for the riskiest
    :data:`REASONS_FOR`."""
    now = ctx.clock.now()
    loaded = ctx.failure.current
    if loaded is None:
        why = ctx.failure.last_error or "not loaded yet"
        return FleetRisk(now, horizon, problem=f"no failure model is served: {why}")
    label = f"{loaded.name} v{loaded.version}"
    prov = loaded.provenance
    try:
        snap = ctx.online.snapshot(now, ctx.config.max_data_age)
    except FeatureStoreError as exc:
        return FleetRisk(now, horizon, model=label, problem=str(exc))
    if snap.feature_set_hash != prov.feature_set_hash:
        return FleetRisk(
            now,
            horizon,
            model=label,
            online_as_of=snap.as_of,
            problem=f"online features have hash {snap.feature_set_hash}, the champion was "
            f"trained on {prov.feature_set_hash}: rebuild features or retrain",
        )
    scorer = ctx.scorer(loaded.model)
    fleet = ctx.fleet.get(loaded.version, snap, scorer)
    try:
        h = scorer.horizon_index(horizon.total_seconds() / 3600)
    except ValueError:
        h = 0
    horizon = scorer.horizons[h]
    every = np.arange(len(snap.node_ids), dtype=np.int64)
    status = snap.status(every, now, ctx.config.max_data_age)
    fresh = every[status == FRESH]
    p = fleet.p_fail[fresh, h]
    order = fresh[np.lexsort((np.array([snap.node_ids[i] for i in fresh]), -p))]
    top = [int(i) for i in order[:REASONS_FOR]]
    reasons_of = dict(zip(top, fleet.reasons(top, h), strict=True))
    risks = tuple(
        FailureRisk(
            snap.node_ids[i],
            now,
            horizon,
            float(fleet.p_fail[i, h]),
            reasons_of.get(int(i), ()),
            prov,
        )
        for i in order
    )
    problem = None
    if not risks:
        known = snap.last_sample_s[~np.isnan(snap.last_sample_s)]
        seen = (
            f"{datetime.fromtimestamp(float(known.max()), UTC):%Y-%m-%d %H:%M}"
            if known.size
            else "none"
        )
        problem = (
            f"no node has features fresher than {ctx.config.max_data_age} at "
            f"{now.isoformat()} (newest sample {seen}); run the features job"
        )
    stale = tuple(sorted(snap.node_ids[i] for i in every[status != FRESH]))

    def explainer(ids: Sequence[str], top: int) -> dict[str, tuple[Reason, ...]]:
        rows = [snap.index[n] for n in ids]
        if top == SHOWN:  # the pass's cached reasons (the API's ``explain`` too)
            found = fleet.reasons(rows, h)
        else:
            found = scorer.reasons(fleet.design.take(np.asarray(rows, np.int64)), h, top=top)
        return dict(zip(ids, found, strict=True))

    return FleetRisk(now, horizon, risks, stale, label, snap.as_of, problem, explainer)
