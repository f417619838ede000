"""Node failure jobs: train + register, score from the champion, and the promotion backtest.
Over 500 lines: one job. Training, the promotion backtest and scoring share the offline
frame, the backtest window, the report and the registry entry (the Dask paths in
:mod:`predops.pipelines.jobs.distributed` reuse them), and splitting them would scatter one
contract over modules.

- :func:`train`: the node training frame from the feature store (``predops features
  build`` writes it from the lake; built here when missing), a :class:`FailureModel`
  fitted on everything before the backtest window, its figures on that window, then
  logged and registered as ``predops.node_failure`` through
  :mod:`predops.pipelines.workspace.registry`
  (the one module that talks to MLflow). New versions get the alias ``challenger``.
- :func:`backtest_for_registry`: what ``predops models promote node_failure`` judges
  challenger and champion by: PR-AUC of the 24 h horizon on the latest
  ``BACKTEST_DAYS`` of labelled rows. Training always leaves that window out, so a
  newer challenger has not seen it either.
- :func:`score`: the champion's :class:`FailureRisk` for every node in the online
  store as of a time; stale rows are listed, never scored as if fresh; a model whose
  feature-set hash differs from the store's is refused.
- :func:`current_risk`: the same scoring pass, one horizon, reasons for every node:
  what ``predops plan`` and the scheduler's score step hand the policy engine.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from functools import partial
from typing import Any

import numpy as np
import polars as pl

from predops.core.contracts import FailureRisk, Provenance
from predops.features.frames import DEFAULT_HORIZONS
from predops.features.labels import label_name
from predops.models.failure import metrics as M
from predops.models.failure.baselines import ReactiveRule, node_rule_columns
from predops.models.failure.config import (
    MODEL_PARAMS,
    PRIMARY_HORIZON,
    STRATEGY,
    node_model_defs,
)
from predops.models.failure.model import FailureModel, observed, train_failure_model
from predops.models.failure.scorer import pyfunc_predict
from predops.pipelines.workspace.errors import FeatureStoreError, RegistryError
from predops.pipelines.workspace.feature_store import STALE, FeatureStore
from predops.pipelines.workspace.registry import Backtest
from predops.pipelines.workspace.settings import Settings

log = logging.getLogger(__name__)

MODEL_NAME = "node_failure"
PIP_REQUIREMENTS = [
    "lightgbm>=4.3,<5",
    "scikit-learn>=1.5,<2",
    "polars>=1.20,<3",
    "pandas>=2.2,<4",
    "numpy>=1.26",
    "scipy>=1.11",
]
BACKTEST_DAYS = 7.0


# ---------------------------------------------------------------- data
def offline_feature_hash(settings: Settings) -> str:
    """The feature-set hash the latest offline node frame was built with (its spec's
    parameters, e.g. the sample interval, are part of the hash)."""
    import json

    from predops.pipelines.jobs.features import NODE_TRAINING

    metas = sorted((settings.features_dir / "offline" / NODE_TRAINING).glob("as_of=*/meta.json"))
    if not metas:
        raise ValueError("no offline node frame; run `predops features build`")
    return str(json.loads(metas[-1].read_text())["feature_set_hash"])


@dataclass(frozen=True, slots=True)
class OfflineNodeFrame:
    """The latest offline node training frame as a lazy scan, with the share of
    negatives it keeps (``sample_rate``; 1.0: every row, see
    :mod:`predops.features.sampling`)."""

    scan: pl.LazyFrame
    sample_rate: float
    last_ts: datetime

    def rows(self, keep: pl.Expr) -> pl.DataFrame:
        """The rows where ``keep`` holds, in (time, node) order: the order training
        sees them in does not depend on how the frame was written."""
        return self.scan.filter(keep).collect().sort("ts", "node_id", maintain_order=True)


def offline_node_frame(settings: Settings) -> OfflineNodeFrame:
    """The latest offline node training frame; built from the lake when there is none."""
    from predops.pipelines.jobs.features import NODE_TRAINING, build_features
    from predops.pipelines.workspace.lake import Lake

    store = FeatureStore(settings.features_dir)
    try:
        scan = store.scan_offline(NODE_TRAINING)
    except FeatureStoreError:
        lake = Lake(settings.lake_dir)
        cutoff = lake.scan("telemetry").select(pl.col("ts").max()).collect().item()
        if cutoff is None:
            raise ValueError(
                "no node training frame and no telemetry in the lake; run "
                "`predops simulate` (or ingest telemetry) and `predops features build`"
            ) from None
        log.info("no offline node frame: building one from the lake as of %s", cutoff)
        build_features(lake, store, as_of=cutoff)
        scan = store.scan_offline(NODE_TRAINING)
    names = set(scan.collect_schema().names())
    missing = [d.name for d in node_model_defs() if d.name not in names]
    if missing:
        raise ValueError(
            f"the offline node frame lacks {len(missing)} feature(s) (e.g. {missing[:3]}); "
            "rebuild it with `predops features build`"
        )
    sampling = store.offline_meta(NODE_TRAINING).get("negative_sampling") or {}
    last = scan.select(pl.col("ts").max()).collect().item()
    if not isinstance(last, datetime):
        raise ValueError("the training frame is empty")
    return OfflineNodeFrame(scan, float(sampling.get("rate", 1.0)), last)


def training_frame(settings: Settings) -> pl.DataFrame:
    """The latest offline node training frame, whole (small fleets; :func:`train` and the
    backtest read only the rows they need through :func:`offline_node_frame`)."""
    return offline_node_frame(settings).rows(pl.lit(True))


def backtest_window(frame: pl.DataFrame | datetime, days: float = BACKTEST_DAYS) -> datetime:
    """Start of the backtest window: ``days`` before the last row (of ``frame``, or the
    time of the last row) whose 24 h label window is fully observed."""
    last = frame if isinstance(frame, datetime) else _cutoff(frame)
    return last - PRIMARY_HORIZON - timedelta(days=days)


def _cutoff(frame: pl.DataFrame) -> datetime:
    t = frame["ts"].max()
    if not isinstance(t, datetime):
        raise ValueError("the training frame is empty")
    return t


def holdout_metrics(
    model: FailureModel, frame: pl.DataFrame, *, label_cutoff: datetime
) -> dict[str, float]:
    """PR-AUC, Brier and recall at 0.5 % false alarms per horizon on the observed rows
    of ``frame`` (a sampled frame keeps its backtest window whole: every row counts, see
    ``jobs.features.RECENT_KEPT``)."""
    out: dict[str, float] = {}
    for i, h in enumerate(model.horizons):
        rows = observed(frame, h, label_cutoff=label_cutoff)
        y = rows[label_name(h)].to_numpy().astype(np.float64)
        if y.size == 0 or y.sum() == 0:
            continue
        out.update(horizon_metrics(h, y, model.predict_proba(rows)[:, i]))
    return out


def baseline_metrics(
    model: FailureModel, frame: pl.DataFrame, *, label_cutoff: datetime
) -> dict[str, float]:
    """The reactive rule (:class:`ReactiveRule`, what platforms alert on today) on the
    rows :func:`holdout_metrics` scores: its PR-AUC and recall at 0.5 % false alarms per
    horizon, as ``baseline/reactive_rule/<metric>`` (:data:`BASELINE_PREFIX`); nothing
    when the frame lacks the rule's columns. A yes/no rule has no Brier score."""
    rule = reactive_rule()
    if not set(rule.columns) <= set(frame.columns):
        return {}
    out: dict[str, float] = {}
    for h in model.horizons:
        rows = observed(frame, h, label_cutoff=label_cutoff)
        y = rows[label_name(h)].to_numpy().astype(np.float64)
        if y.size == 0 or y.sum() == 0:
            continue
        out.update(rule_horizon_metrics(h, y, rule.score(rows)))
    return out


def reactive_rule() -> ReactiveRule:
    """The rule :func:`baseline_metrics` scores (over :func:`node_rule_columns`)."""
    return ReactiveRule(node_rule_columns())


def rule_horizon_metrics(h: timedelta, y: np.ndarray, score: np.ndarray) -> dict[str, float]:
    """The :func:`baseline_metrics` of one horizon from its labels and the rule's scores."""
    tag = f"{h.total_seconds() / 3600:g}h"
    return {
        f"{BASELINE_PREFIX}reactive_rule/pr_auc_{tag}": M.pr_auc(y, score),
        f"{BASELINE_PREFIX}reactive_rule/recall_at_fpr_0.005_{tag}": M.at_fpr(y, score, 0.005)[
            "recall"
        ],
    }


BASELINE_PREFIX = "baseline/"
"""Run metrics of a baseline scored beside the model: ``baseline/<name>/<metric>``."""


def horizon_metrics(h: timedelta, y: np.ndarray, p: np.ndarray) -> dict[str, float]:
    """The :func:`holdout_metrics` of one horizon from its labels and probabilities."""
    tag = f"{h.total_seconds() / 3600:g}h"
    return {
        f"pr_auc_{tag}": M.pr_auc(y, p),
        f"brier_{tag}": M.brier(y, p),
        f"recall_at_fpr_0.005_{tag}": M.at_fpr(y, p, 0.005)["recall"],
        f"positives_{tag}": float(y.sum()),
    }


# ---------------------------------------------------------------- train
def train(
    settings: Settings,
    *,
    horizons: tuple[timedelta, ...] = DEFAULT_HORIZONS,
    strategy: str = STRATEGY,
    backtest_days: float = BACKTEST_DAYS,
    params: dict[str, Any] | None = None,
    register: bool = True,
) -> dict[str, Any]:
    """Fit on the offline frame before the backtest window, report the window, register."""
    t0 = time.perf_counter()
    offline = offline_node_frame(settings)
    feature_hash = offline_feature_hash(settings)
    start = backtest_window(offline.last_ts, backtest_days)
    purge = max(horizons)
    train_rows = offline.rows(pl.col("ts") < start - purge)
    if train_rows.height == 0:
        raise no_training_rows(start, purge, backtest_days)
    model = fit_model(
        train_rows,
        horizons=horizons,
        strategy=strategy,
        params=params,
        feature_set_hash=feature_hash,
        label_cutoff=start,
        sample_rate=offline.sample_rate,
    )
    fit_s = time.perf_counter() - t0
    example = train_rows.select(model.base_features).head(5)
    n_train = train_rows.height
    del train_rows
    held = offline.rows(pl.col("ts") >= start)
    metrics = holdout_metrics(model, held, label_cutoff=offline.last_ts)
    metrics.update(baseline_metrics(model, held, label_cutoff=offline.last_ts))
    del held
    metrics["fit_seconds"] = fit_s
    out = train_report(
        model, n_train, metrics, start=start, purge=purge, sample_rate=offline.sample_rate
    )
    if register:
        out["version"] = register_model(settings, model, metrics, start=start, example=example)
        out["alias"] = "challenger"
    out["seconds"] = round(time.perf_counter() - t0, 1)
    return out


def fit_model(
    rows: pl.DataFrame,
    *,
    horizons: tuple[timedelta, ...],
    strategy: str,
    params: dict[str, Any] | None,
    feature_set_hash: str,
    label_cutoff: datetime,
    sample_rate: float,
) -> FailureModel:
    """The production fit on training rows (``params`` over ``MODEL_PARAMS``; the
    offline frame's negative ``sample_rate``): what the local job and the Dask job (on a
    worker) both run."""
    return train_failure_model(
        rows,
        feature_defs=node_model_defs(),
        horizons=horizons,
        feature_set_hash=feature_set_hash,
        strategy=strategy,
        params={**MODEL_PARAMS, **(params or {})},
        label_cutoff=label_cutoff,
        sample_rate=sample_rate,
    )


def no_training_rows(start: datetime, purge: timedelta, backtest_days: float) -> ValueError:
    return ValueError(
        f"no training rows before {start - purge} (backtest window {backtest_days} d "
        f"+ {purge} purge); build features over a longer period"
    )


def train_report(
    model: FailureModel,
    rows: int,
    metrics: dict[str, float],
    *,
    start: datetime,
    purge: timedelta,
    sample_rate: float,
) -> dict[str, Any]:
    """What ``predops train failure`` reports before registering."""
    return {
        "model": f"predops.{MODEL_NAME}",
        "feature_set_hash": model.feature_set_hash,
        "training_rows": rows,
        "negative_sample_rate": sample_rate,
        "training_until": (start - purge).isoformat(),
        "backtest_from": start.isoformat(),
        "metrics": metrics,
        "params": model.params(),
    }


def register_model(
    settings: Settings,
    model: FailureModel,
    metrics: dict[str, float],
    *,
    start: datetime,
    example: pl.DataFrame,
) -> str:
    """Log and register a trained model as ``predops.node_failure`` (alias
    ``challenger``); ``start`` is its backtest window's start, ``example`` a few of its
    training rows' features. Every trainer (local or Dask) registers through here, so
    serving sees one artefact."""
    from predops.pipelines.workspace import registry

    return registry.log_and_register(
        MODEL_NAME,
        model,
        predict=pyfunc_predict,
        params=model.params(),
        metrics=metrics,
        feature_set_hash=model.feature_set_hash,
        data_cutoff=start,
        pip_requirements=PIP_REQUIREMENTS,
        # The signature names the features the model reads (other columns are ignored).
        input_example=example.to_pandas(),
        extra_tags={
            "predops.backtest_from": start.isoformat(),
            "predops.horizons_h": ",".join(f"{h.total_seconds() / 3600:g}" for h in model.horizons),
            "predops.strategy": model.strategy,
        },
        uri=settings.mlflow_uri,
    )


# ---------------------------------------------------------------- load
def _parse_uri(model_uri: str) -> tuple[str, str]:
    """``models:/predops.node_failure/3`` or ``models:/predops.node_failure@champion``."""
    body = model_uri.removeprefix("models:/")
    if "@" in body:
        name, alias = body.split("@", 1)
        return name, alias
    name, _, version = body.rpartition("/")
    if not name or not version:
        raise RegistryError(f"cannot read a model name and version from {model_uri!r}")
    return name, version


def load_model(
    settings: Settings, alias_or_version: str = "champion"
) -> tuple[FailureModel, Provenance]:
    """The registered :class:`FailureModel` behind an alias or version, with provenance."""
    from predops.pipelines.workspace import registry

    model, _version, prov = registry.load_python_model(
        MODEL_NAME, alias_or_version, uri=settings.mlflow_uri
    )
    if not isinstance(model, FailureModel):
        raise RegistryError(
            f"predops.{MODEL_NAME} version {prov.model_version} holds a "
            f"{type(model).__name__}, not a FailureModel"
        )
    return model, prov


_KEPT: dict[tuple[str, str, str, str], FailureModel] = {}
"""The last version the scheduled pipeline's scoring loaded in this process (one)."""
_KEPT_LOCK = threading.Lock()


def _version_model(settings: Settings, prov: Provenance) -> FailureModel:
    """The model of the registry version ``prov`` names, kept in this process (a
    version's artifact never changes; the key holds its run id): the scheduled pipeline
    scores with the same version at every new bucket end, and loading it from the
    registry cost about 0.1 s each time."""
    key = (settings.mlflow_uri, prov.model_name, prov.model_version, prov.run_id or "")
    with _KEPT_LOCK:
        fm = _KEPT.get(key) if prov.run_id else None
    if fm is None:
        fm, _ = load_model(settings, prov.model_version)
        if prov.run_id:
            with _KEPT_LOCK:
                _KEPT.clear()
                _KEPT[key] = fm
    return fm


# ---------------------------------------------------------------- backtest
def backtest_score(model_uri: str, *, settings: Settings, days: float = BACKTEST_DAYS) -> float:
    """PR-AUC (24 h) of the model at ``model_uri`` on the latest backtest window, through
    the pyfunc interface (probabilities out)."""
    from predops.pipelines.workspace import registry

    name, version = _parse_uri(model_uri)
    pyfunc_model, _, _ = registry.load(name, version, uri=settings.mlflow_uri)
    offline = offline_node_frame(settings)
    rows = observed(
        offline.rows(pl.col("ts") >= backtest_window(offline.last_ts, days)),
        PRIMARY_HORIZON,
        label_cutoff=offline.last_ts,
    )
    lbl = label_name(PRIMARY_HORIZON)
    pred = pyfunc_model.predict(rows.to_pandas())
    col = f"p_{lbl}"
    if col not in pred.columns:
        raise RegistryError(f"{model_uri} predicts {list(pred.columns)}, not {col}")
    return M.pr_auc(rows[lbl].to_numpy(), pred[col].to_numpy())


def backtest_for_registry(settings: Settings) -> Backtest:
    """The promotion backtest: higher PR-AUC (24 h) on the same latest window wins."""
    return Backtest(
        score=partial(backtest_score, settings=settings, days=BACKTEST_DAYS),
        metric="pr_auc_24h_last_7d",
        higher_is_better=True,
    )


# ---------------------------------------------------------------- score
SCORE_MAX_AGE = timedelta(minutes=30)
"""Online features whose last sample is older than this at scoring time are stale."""
LAST_SAMPLE = "last_sample_ts"


class NoOnlineFeatures(FeatureStoreError, ValueError):
    """The online store cannot feed the champion: no node frame, or one built with a
    different feature set. A :class:`FeatureStoreError` (callers that plan without
    risk catch the store's error type) and a ValueError (one clear CLI message)."""


@dataclass(frozen=True, slots=True)
class OnlineScores:
    """One scoring pass over the online store (see :func:`score_online`)."""

    risks: list[FailureRisk]
    model_provenance: Provenance
    online_as_of: datetime
    nodes: int
    scored: int
    stale: list[str]
    after_as_of: list[str]
    """Nodes whose latest online row is newer than the scoring time: scoring them would
    read the future, so they are listed, never scored."""
    horizons: tuple[timedelta, ...]
    seconds: dict[str, float]
    reused: bool = False
    """The previous pass's risks were re-stamped (``score_online(reuse=True)``)."""


def score_online(
    settings: Settings,
    *,
    as_of: datetime,
    max_age: timedelta = SCORE_MAX_AGE,
    reasons_for: int | None = None,
    horizons: Sequence[timedelta] | None = None,
    model: tuple[FailureModel, Provenance] | None = None,
    client: Any = None,
    reuse: bool = False,
) -> OnlineScores:
    """Score the online store's fresh nodes at ``as_of`` with the champion (or ``model``).

    Fresh means last sample within ``max_age`` before ``as_of`` and not after it. Every
    risk is stamped ``as_of`` and carries the model's name, version and feature-set hash
    with ``data_cutoff`` = the oldest last sample among the scored nodes: the data the
    risk relies on, which is what the policy's stale-data guard judges (the model's own
    training cutoff stays on its registry version). ``reasons_for``: reasons for that
    many riskiest nodes per horizon (None: every node). ``client`` (a
    ``distributed.Client``) scores partitions of the nodes on its workers, with the
    same risks (:func:`predops.pipelines.jobs.partitioned.predict_risk`). ``reuse``
    (the scheduled pipeline; reasons for every node only): the previous pass's risks are
    re-stamped instead of scored again when the online rows and the served version are
    the same (:mod:`predops.pipelines.jobs.risk_cache`), with the same answers; new rows
    are scored by that version, loaded once per process (:func:`_version_model`)."""
    from predops.pipelines.jobs import risk_cache
    from predops.pipelines.workspace import registry

    t0 = time.perf_counter()
    reuse = reuse and model is None and client is None and reasons_for is None and bool(horizons)
    fm: FailureModel | None
    if reuse:
        fm, prov = None, registry.served_provenance(MODEL_NAME, uri=settings.mlflow_uri)
    else:
        fm, prov = model or load_model(settings)
    t_load = time.perf_counter() - t0
    store = FeatureStore(settings.features_dir)
    try:
        online = store.read_online("node", now=as_of, max_age=max_age, ts_col=LAST_SAMPLE)
    except FeatureStoreError as exc:
        raise NoOnlineFeatures(str(exc)) from None
    if online.feature_set_hash != prov.feature_set_hash:
        raise NoOnlineFeatures(
            f"online features have hash {online.feature_set_hash}, the champion was "
            f"trained on {prov.feature_set_hash}: rebuild features or retrain"
        )
    frame = online.frame
    after = pl.col(LAST_SAMPLE) > pl.lit(as_of, dtype=frame.schema[LAST_SAMPLE])
    stale = frame.filter(pl.col(STALE))
    future = frame.filter(~pl.col(STALE) & after)
    fresh = frame.filter(~pl.col(STALE) & ~after)
    t1 = time.perf_counter()
    risks: list[FailureRisk] = []
    reused = False
    if fresh.height:
        oldest = fresh[LAST_SAMPLE].min()
        assert isinstance(oldest, datetime)
        used = replace(prov, data_cutoff=oldest)
        kw: dict[str, Any] = {
            "as_of": as_of,
            "horizons": horizons,
            "provenance": used,
            "reasons_for": reasons_for,
        }
        cache = store.root / "online" / risk_cache.FILE
        key = None
        if reuse:
            key = risk_cache.cache_key(prov, online.rows_id, horizons or ())
            ids = fresh["node_id"].to_list()
            hit = risk_cache.lookup(cache, key, ids, as_of=as_of, provenance=used) if key else None
            reused = hit is not None
            risks = hit or []
        if not reused:
            if fm is None:  # the version the registry named above, whatever moved since
                t_load0 = time.perf_counter()
                fm = _version_model(settings, prov)
                t_load += time.perf_counter() - t_load0
            if client is None:
                risks = fm.predict_risk(fresh, **kw)
            else:
                from predops.pipelines.jobs.partitioned import predict_risk

                risks = predict_risk(client, fm, fresh, **kw)
            if reuse:
                risk_cache.save(cache, key, risks)
    return OnlineScores(
        risks=risks,
        model_provenance=prov,
        online_as_of=online.as_of,
        nodes=frame.height,
        scored=fresh.height,
        stale=sorted(stale["node_id"].to_list()),
        after_as_of=sorted(future["node_id"].to_list()),
        horizons=tuple(horizons) if horizons else tuple(fm.horizons if fm else ()),
        seconds={"load": round(t_load, 3), "score": round(time.perf_counter() - t1, 3)},
        reused=reused,
    )


def score(
    settings: Settings,
    *,
    as_of: datetime,
    max_age: timedelta = SCORE_MAX_AGE,
    reasons_for: int | None = None,
    model: tuple[FailureModel, Provenance] | None = None,
    client: Any = None,
) -> dict[str, Any]:
    """Risk of every fresh node in the online store at ``as_of`` from the champion, every
    horizon, as the JSON report of ``predops score failure`` (``client``: on Dask)."""
    s = score_online(
        settings,
        as_of=as_of,
        max_age=max_age,
        reasons_for=reasons_for,
        model=model,
        client=client,
    )
    return {
        "as_of": as_of.isoformat(),
        "model": s.model_provenance.to_dict(),
        "online_as_of": s.online_as_of.isoformat(),
        "nodes": s.nodes,
        "scored": s.scored,
        "stale": s.stale,
        "after_as_of": s.after_as_of,
        "horizons_h": [h.total_seconds() / 3600 for h in s.horizons],
        "risks": [r.to_dict() for r in s.risks],
        "seconds": s.seconds,
    }


def current_risk(settings: Settings, *, now: datetime) -> list[FailureRisk]:
    """What ``predops plan`` and the scheduler's score step act on: one
    :class:`FailureRisk` per fresh node at ``now`` from the champion, with reasons for
    every node (:func:`current_scores`' risks)."""
    return current_scores(settings, now=now).risks


def current_scores(
    settings: Settings,
    *,
    now: datetime,
    horizon: timedelta = PRIMARY_HORIZON,
    max_age: timedelta = SCORE_MAX_AGE,
    reuse: bool = False,
) -> OnlineScores:
    """The scoring pass behind :func:`current_risk` (with whether it re-used and how
    long it took).

    One horizon, because the policy keeps one risk per node (the latest, and the highest
    p_fail among equal times): handed every horizon it would always price the longest
    one. The 24 h horizon is the one the champion is backtested and promoted on. Every
    node gets reasons because the policy may act on any of them (a drain, or an uncordon
    of a cordoned node that now looks healthy) and puts them in the action's evidence.
    Stale nodes and nodes with rows after ``now`` get no risk, which the policy reports
    as a ``stale_data`` skip. Raises
    :class:`predops.pipelines.workspace.registry.RegistryError` without a
    champion and :class:`NoOnlineFeatures` when the online store cannot feed it.
    ``reuse``: see :func:`score_online` (the incremental pipeline)."""
    return score_online(
        settings, as_of=now, max_age=max_age, reasons_for=None, horizons=[horizon], reuse=reuse
    )
