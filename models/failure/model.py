"""``FailureModel``: what gets trained, registered and served for node failure risk.

It bundles the feature definitions it reads, the label-free anomaly scorer whose
scores it adds as features, one calibrated :class:`NodeFailureClassifier` per horizon
(or one for all horizons, with the horizon as a feature), and the wording of reasons.

- ``predict_proba(frame)`` -> (rows x horizons) calibrated probabilities;
- ``predict_risk(frame)`` -> one :class:`core.contracts.FailureRisk` per row and horizon,
  with the top signed contributions as :class:`Reason`;
- calling the model on a pandas frame (MLflow's pyfunc protocol) returns a frame of
  probabilities ``p_fails_within_<h>`` (e.g. ``p_fails_within_24h``), never class labels.

Horizon strategies (``strategy``): ``per_horizon`` fits one classifier per horizon on
that horizon's labels; ``stacked`` stacks the rows once per horizon with a
``horizon_h`` feature constrained to be monotone increasing, so p(6 h) <= p(24 h) <=
p(72 h) holds by construction (the policy engine prices these against each other).
Measured by ``predops eval failure --source synthetic --compare-strategies`` (2,000
nodes x 60 days, trained on days 0-35, tested on days 38-57): PR-AUC 6 h / 24 h / 72 h was
0.140 / 0.167 / 0.169 stacked vs 0.139 / 0.165 / 0.156 per horizon, and per-horizon
probabilities were out of order on 0.4 % of rows. Production trains ``stacked``
(``predops.models.failure.config.STRATEGY``); the monotonicity alone decided it, the figures
(on the evaluation's own test period) only agree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import pandas as pd
import polars as pl

from predops.core.contracts import FailureRisk, Provenance, Reason
from predops.features.definitions import FeatureDef
from predops.features.labels import label_name
from predops.features.sampling import horizon_rows
from predops.models.anomaly.node import MAX_COLUMN, NodeAnomalyScorer, score_name
from predops.models.failure.classifier import NodeFailureClassifier
from predops.models.failure.reasons import top_reasons_rows

STRATEGIES = ("per_horizon", "stacked")
HORIZON_FEATURE = "horizon_h"
STACKED_KEY = "stacked"


def anomaly_defs(scorer: NodeAnomalyScorer) -> list[FeatureDef]:
    """Feature definitions of the anomaly scores (for names and reason wording)."""
    defs = []
    for m in scorer.metrics:
        what = (
            f"new {m} errors in 24h vs the node's own rate"
            if scorer.is_counter(m)
            else f"{m} vs its own 24h history and rack peers"
        )
        defs.append(FeatureDef(score_name(m), (m,), "surprise", None, "float32", doc=what))
    defs.append(
        FeatureDef(MAX_COLUMN, ("anomaly",), "surprise", None, "float32", doc="most unusual metric")
    )
    return defs


@dataclass(eq=False)  # identity hash: MLflow caches per model object
class FailureModel:
    """A trained failure model (see module doc). Build it with :func:`train_failure_model`."""

    feature_defs: tuple[FeatureDef, ...]
    horizons: tuple[timedelta, ...]
    strategy: str
    classifiers: dict[str, NodeFailureClassifier]
    feature_set_hash: str
    anomaly: NodeAnomalyScorer | None = None
    entity: str = "node_id"
    time_column: str = "ts"
    extra_defs: tuple[FeatureDef, ...] = field(default=())

    @property
    def base_features(self) -> list[str]:
        return [d.name for d in self.feature_defs]

    @property
    def all_defs(self) -> list[FeatureDef]:
        return [*self.feature_defs, *self.extra_defs]

    @property
    def labels(self) -> list[str]:
        return [label_name(h) for h in self.horizons]

    # ------------------------------------------------------------------ design
    def design(self, frame: pl.DataFrame) -> pd.DataFrame:
        """The feature matrix the classifiers read (anomaly scores added)."""
        missing = [c for c in self.base_features if c not in frame.columns]
        if missing:
            raise ValueError(
                f"feature frame lacks {len(missing)} model feature(s), e.g. {missing[:5]}; "
                "was it built with the same feature set?"
            )
        cats = {d.name for d in self.feature_defs if d.dtype == "category"}
        cols = [
            pl.col(c).cast(pl.String).cast(pl.Categorical) if c in cats else pl.col(c)
            for c in self.base_features
        ]
        base = frame.select(cols)
        if self.anomaly is not None:
            base = pl.concat([base, self.anomaly.transform(frame)], how="horizontal")
        return base.to_pandas()

    def _with_horizon(self, X: pd.DataFrame, h: timedelta) -> pd.DataFrame:
        out = X.copy(deep=False)
        out[HORIZON_FEATURE] = np.float32(h.total_seconds() / 3600)
        return out

    def _per_horizon(self, X: pd.DataFrame) -> list[tuple[NodeFailureClassifier, pd.DataFrame]]:
        if self.strategy == STACKED_KEY:
            clf = self.classifiers[STACKED_KEY]
            return [(clf, self._with_horizon(X, h)) for h in self.horizons]
        return [(self.classifiers[lbl], X) for lbl in self.labels]

    # ------------------------------------------------------------------ predict
    def predict_proba(self, frame: pl.DataFrame) -> np.ndarray:
        """Calibrated P(failure within each horizon), shape (rows, len(horizons))."""
        X = self.design(frame)
        if X.shape[0] == 0:
            return np.zeros((0, len(self.horizons)))
        return np.column_stack([clf.predict_proba(Xh)[:, 1] for clf, Xh in self._per_horizon(X)])

    def __call__(self, model_input: pd.DataFrame) -> pd.DataFrame:
        """MLflow pyfunc entry point: feature rows in, ``p_fails_within_<h>`` columns out."""
        if isinstance(model_input, pl.DataFrame):
            frame = model_input
        else:
            # Only the columns the model reads (skips time zones and labels on the way).
            cols = [c for c in model_input.columns if c in set(self.base_features)]
            frame = pl.from_pandas(model_input[cols])
        p = self.predict_proba(frame)
        return pd.DataFrame({f"p_{lbl}": p[:, i] for i, lbl in enumerate(self.labels)})

    def predict_risk(
        self,
        frame: pl.DataFrame,
        *,
        as_of: datetime | None = None,
        horizons: Sequence[timedelta] | None = None,
        provenance: Provenance | None = None,
        top: int = 3,
        reasons_for: int | None = None,
    ) -> list[FailureRisk]:
        """One :class:`FailureRisk` per row and horizon.

        ``as_of`` stamps every risk (default: each row's ``time_column``);
        ``reasons_for`` limits reasons to that many riskiest rows per horizon (reasons
        cost a TreeSHAP pass; None: every row).
        """
        wanted = list(horizons) if horizons is not None else list(self.horizons)
        unknown = [h for h in wanted if h not in self.horizons]
        if unknown:
            raise ValueError(f"model has no horizon(s) {unknown}; it has {list(self.horizons)}")
        X = self.design(frame)
        ids = frame[self.entity].to_list()
        stamps = [as_of] * frame.height if as_of is not None else frame[self.time_column].to_list()
        names = list(X.columns)
        defs = {d.name: d for d in self.all_defs}
        used_defs = [defs[n] for n in names]
        out: list[FailureRisk] = []
        for h, (clf, Xh) in zip(self.horizons, self._per_horizon(X), strict=True):
            if h not in wanted:
                continue
            p = np.clip(clf.predict_proba(Xh)[:, 1], 0.0, 1.0)
            rows = np.arange(frame.height)
            if reasons_for is not None:
                rows = np.argsort(-p, kind="stable")[:reasons_for]
            reasons: dict[int, tuple[Reason, ...]] = {}
            if rows.size:
                # TreeSHAP and the row values only for the rows that get reasons.
                contrib = clf.contributions(Xh.iloc[rows])[:, : len(names)]  # no horizon/bias
                values = X.iloc[rows].to_numpy(dtype=object)
                worded = top_reasons_rows(contrib, values, used_defs, top=top)
                reasons = {int(i): r for i, r in zip(rows, worded, strict=True)}
            out.extend(
                FailureRisk(
                    node_id=str(ids[i]),
                    as_of=stamps[i],
                    horizon=h,
                    p_fail=float(p[i]),
                    reasons=reasons.get(i, ()),
                    provenance=provenance,
                )
                for i in range(frame.height)
            )
        return out

    def params(self) -> dict[str, Any]:
        """What training chose, for the tracking store."""
        clf = next(iter(self.classifiers.values()))
        return {
            "strategy": self.strategy,
            "horizons_h": [h.total_seconds() / 3600 for h in self.horizons],
            "features": len(self.base_features),
            "anomaly_features": self.anomaly is not None,
            **{f"clf.{k}": v for k, v in clf.get_params().items() if k != "random_state"},
            "best_iterations": {k: c.best_iteration_ for k, c in self.classifiers.items()},
        }


def observed(
    frame: pl.DataFrame,
    horizon: timedelta,
    *,
    label_cutoff: datetime | None = None,
    time_column: str = "ts",
) -> pl.DataFrame:
    """Rows whose whole label window ``(t, t + horizon]`` lies before the label cutoff
    (default: the frame's last row) and whose node may be scored (``usable``).

    A row whose window runs past the cutoff is labelled only when a failure was already
    seen in it: keeping those would keep the positives and drop the negatives.
    """
    if frame.height == 0:
        return frame
    cutoff = label_cutoff if label_cutoff is not None else frame[time_column].max()
    out = frame.filter(
        pl.col(label_name(horizon)).is_not_null() & (pl.col(time_column) + horizon <= cutoff)
    )
    if "usable" in out.columns:
        out = out.filter(pl.col("usable"))
    return out


def train_failure_model(
    frame: pl.DataFrame,
    *,
    feature_defs: Sequence[FeatureDef],
    horizons: Sequence[timedelta],
    feature_set_hash: str,
    strategy: str = "per_horizon",
    anomaly: bool = True,
    params: Mapping[str, Any] | None = None,
    entity: str = "node_id",
    time_column: str = "ts",
    label_cutoff: datetime | None = None,
    sample_rate: float = 1.0,
) -> FailureModel:
    """Fit a :class:`FailureModel` on a labelled frame; per horizon only
    :func:`observed` rows are used. ``params`` go to every classifier; the purge gap is
    set to each horizon (the largest one when stacked).

    ``sample_rate`` < 1: ``frame`` was sampled by :mod:`predops.features.sampling` at that
    rate; per horizon only its positives and the negatives the rule drew for every horizon
    (``sample_u < rate``) are used, and the classifiers are told that their input holds
    that share of the negatives (``prior_negative_rate``)."""
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
    hs = tuple(sorted(horizons))
    if not hs:
        raise ValueError("at least one horizon is needed")
    scorer = NodeAnomalyScorer().fit(frame) if anomaly else None
    model = FailureModel(
        feature_defs=tuple(feature_defs),
        horizons=hs,
        strategy=strategy,
        classifiers={},
        feature_set_hash=feature_set_hash,
        anomaly=scorer,
        entity=entity,
        time_column=time_column,
        extra_defs=tuple(anomaly_defs(scorer)) if scorer is not None else (),
    )
    base = dict(params or {})
    if sample_rate < 1.0:
        base["prior_negative_rate"] = sample_rate

    def rows_for(h: timedelta) -> pl.DataFrame:
        rows = observed(frame, h, label_cutoff=label_cutoff, time_column=time_column)
        return horizon_rows(rows, label_name(h), sample_rate)

    if strategy == "per_horizon":
        for h in hs:
            lbl = label_name(h)
            rows = rows_for(h)
            clf = NodeFailureClassifier(**{**base, "purge": h.total_seconds()})
            clf.fit(
                model.design(rows),
                rows[lbl].to_numpy(),
                time=rows[time_column].to_numpy(),
                groups=rows[entity].to_numpy(),
            )
            model.classifiers[lbl] = clf
        return model
    parts, ys, ts, ids = [], [], [], []
    for h in hs:
        lbl = label_name(h)
        rows = rows_for(h)
        parts.append(model._with_horizon(model.design(rows), h))
        ys.append(rows[lbl].to_numpy())
        ts.append(rows[time_column].to_numpy())
        ids.append(rows[entity].to_numpy())
    clf = NodeFailureClassifier(
        **{
            **base,
            "purge": max(hs).total_seconds(),
            "monotone_constraints": {HORIZON_FEATURE: 1},
        }
    )
    stacked = pd.concat(parts, ignore_index=True)
    parts.clear()  # one copy of the stacked rows, not two, while fitting
    clf.fit(
        stacked,
        np.concatenate(ys),
        time=np.concatenate(ts),
        groups=np.concatenate(ids),
    )
    model.classifiers[STACKED_KEY] = clf
    return model
