"""The jobs on a Dask cluster: failure training, batch scoring, the demand backtest.

Every path here gives what the local path gives (tested on a 2-worker ``LocalCluster``
in ``tests/pipelines/jobs/test_distributed.py``); only where the work runs changes.

- :func:`train_failure`: each worker reads its partition of nodes from the offline node
  training frame (the feature store must be on storage the workers see), one task on a
  worker gathers those partitions from its peers and fits the same
  :class:`~predops.models.failure.model.FailureModel` the local job fits, on the same
  rows in the same order (so the model is identical, not merely close), and the
  backtest window is scored per partition on the workers. The client holds per-node
  row counts and the holdout's labels and probabilities, never the frame.
  ``lightgbm.dask`` is not used: it distributes the booster only, while the model's fit
  is more (time slices with a purge, negative down-sampling, early stopping on the
  validation slice, the linear blend, calibration, the anomaly scorer), and a
  data-parallel booster is not equal to the single-process one.
- A fleet whose training rows exceed ``max_rows`` (what the fitting worker can hold) is
  **sampled by node**, never truncated: :func:`sample_nodes` keeps the nodes of smallest
  stable hash whose rows together fit, every row of each, and the report says how many
  nodes and rows were kept of how many. Whole nodes keep each node's series intact for
  the time slices, the purge and the down-sampling, and a hash is blind to failures, so
  the failure rate (and the calibration) estimates the fleet's.
- :func:`predops.pipelines.jobs.partitioned.predict_risk`: the online frame scored in
  contiguous partitions of nodes on the workers; reasons go to the same riskiest rows as
  locally, so the risks are equal.
- :func:`rolling_origin_jobs`: the demand backtest as one task per cutoff (refit mode: every
  cutoff refits from scratch, so cutoffs are independent) or per end group (holdout
  mode: one fit then updates); the orchestration only, around
  :func:`predops.models.demand.backtest.rolling_origin`.

:func:`dask_client` connects to ``tcp://host:8786`` or starts a ``LocalCluster``.
"""

from __future__ import annotations

import hashlib
import operator
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from predops.features.frames import DEFAULT_HORIZONS
from predops.features.labels import label_name
from predops.models.demand import backtest
from predops.models.demand.backtest import BacktestResult, Forecaster
from predops.models.demand.config import ForecastConfig
from predops.models.failure.config import STRATEGY, node_model_defs
from predops.models.failure.model import FailureModel, observed
from predops.pipelines.jobs import failure as fj
from predops.pipelines.jobs.partitioned import blocks, partitions_of
from predops.pipelines.workspace.settings import Settings

ROW = "__row"
"""Row number in the offline frame: partitions are put back in the local row order."""
ORDER = ("ts", "node_id")
"""The order the local job sees rows in (``failure.OfflineNodeFrame.rows``)."""
CONNECT_TIMEOUT_S = 30
LOCAL_WORKERS = 2


# ---------------------------------------------------------------- cluster
@contextmanager
def dask_client(scheduler: str | None = None, *, workers: int = LOCAL_WORKERS) -> Iterator[Any]:
    """A ``distributed.Client`` of the cluster at ``scheduler`` (``tcp://host:8786``;
    connecting waits at most ``CONNECT_TIMEOUT_S``), or of a ``LocalCluster`` of
    ``workers`` single-threaded worker processes started here when none is given.
    Closed (and the local cluster stopped) on exit."""
    from distributed import Client, LocalCluster

    if scheduler:
        client: Any = Client(scheduler, timeout=f"{CONNECT_TIMEOUT_S}s")  # type: ignore[no-untyped-call]
        try:
            yield client
        finally:
            client.close()
        return
    if workers < 1:
        raise ValueError(f"a local Dask cluster needs at least 1 worker, got {workers}")
    with (
        LocalCluster(  # type: ignore[no-untyped-call]
            n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster) as local,  # type: ignore[no-untyped-call]
    ):
        yield local


# ---------------------------------------------------------------- sampling rule
SAMPLE_PERSON = b"predops-nodes"
"""Salt of the node hash (distinct from the classifier's group hash, so the sample is
not the classifier's validation or calibration cohort)."""


def node_rank(node_id: str) -> int:
    """A stable 64-bit hash of a node id (the same on every machine and run)."""
    digest = hashlib.blake2b(node_id.encode("utf-8"), digest_size=8, person=SAMPLE_PERSON)
    return int.from_bytes(digest.digest(), "big")


@dataclass(frozen=True, slots=True)
class NodeSample:
    """Which nodes' training rows are fitted (see :func:`sample_nodes`)."""

    nodes: tuple[str, ...]
    rows: int
    fleet_nodes: int
    fleet_rows: int
    max_rows: int | None

    @property
    def sampled(self) -> bool:
        return self.rows < self.fleet_rows

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": "whole nodes of smallest stable hash whose rows fit max_rows",
            "sampled": self.sampled,
            "max_rows": self.max_rows,
            "nodes": len(self.nodes),
            "fleet_nodes": self.fleet_nodes,
            "rows": self.rows,
            "fleet_rows": self.fleet_rows,
        }


def sample_nodes(rows_per_node: Mapping[str, int], max_rows: int | None) -> NodeSample:
    """Every node when all training rows fit in ``max_rows`` (None: no limit); otherwise
    the nodes in order of :func:`node_rank`, each with all its rows, up to the first
    one that would take the total past ``max_rows``. Raises when not even the first
    node fits."""
    total = sum(rows_per_node.values())
    if max_rows is not None and max_rows < 1:
        raise ValueError(f"max_rows must be at least 1, got {max_rows}")
    if max_rows is None or total <= max_rows:
        kept = sorted(rows_per_node)
        return NodeSample(tuple(kept), total, len(kept), total, max_rows)
    order = sorted(rows_per_node, key=lambda n: (node_rank(n), n))
    chosen: list[str] = []
    rows = 0
    for node in order:
        if rows + rows_per_node[node] > max_rows:
            break
        chosen.append(node)
        rows += rows_per_node[node]
    if not chosen:
        first = order[0]
        raise ValueError(
            f"max_rows {max_rows} is below the training rows of a single node "
            f"({rows_per_node[first]} of {first}); raise it"
        )
    return NodeSample(tuple(sorted(chosen)), rows, len(order), total, max_rows)


# ---------------------------------------------------------------- training
def offline_files(settings: Settings) -> list[str]:
    """The parquet file(s) of the latest offline node training frame (the one
    :func:`predops.pipelines.jobs.failure.training_frame` reads)."""
    from predops.pipelines.jobs.features import NODE_TRAINING

    base = settings.features_dir / "offline" / NODE_TRAINING
    dirs = sorted({p.parent for p in base.glob("as_of=*/*.parquet")})
    if not dirs:
        raise ValueError(
            "no offline node frame; run `predops features build` (the Dask training reads "
            "it in partitions of nodes, it does not build it)"
        )
    return [str(p) for p in sorted(Path(dirs[-1]).glob("*.parquet"))]


def _scan(files: Sequence[str]) -> pl.LazyFrame:
    return pl.scan_parquet(list(files), row_index_name=ROW)


def _strings(frame: pl.DataFrame) -> pl.DataFrame:
    """Categoricals as strings for the trip between processes (put back in :func:`_fit`)."""
    cats = [c for c, t in frame.schema.items() if t == pl.Categorical]
    return frame.with_columns(pl.col(c).cast(pl.String) for c in cats)


def _train_part(files: Sequence[str], ids: Sequence[str], until: datetime) -> pl.DataFrame:
    """One partition of nodes: its training rows (on a worker)."""
    lf = _scan(files).filter(pl.col("node_id").is_in(list(ids)) & (pl.col("ts") < until))
    return _strings(lf.collect())


def _fit(
    parts: Sequence[pl.DataFrame],
    categorical: Sequence[str],
    *,
    horizons: tuple[timedelta, ...],
    strategy: str,
    params: dict[str, Any] | None,
    feature_set_hash: str,
    label_cutoff: datetime,
    sample_rate: float,
) -> tuple[FailureModel, pl.DataFrame]:
    """The local job's fit on the gathered partitions in the frame's row order (on a
    worker); the model and its first five rows' features (the registry's example)."""
    frame = pl.concat(parts, how="vertical_relaxed").sort(ROW).drop(ROW)
    frame = frame.sort(*ORDER, maintain_order=True)
    frame = frame.with_columns(pl.col(c).cast(pl.Categorical) for c in categorical)
    model = fj.fit_model(
        frame,
        horizons=horizons,
        strategy=strategy,
        params=params,
        feature_set_hash=feature_set_hash,
        label_cutoff=label_cutoff,
        sample_rate=sample_rate,
    )
    return model, frame.select(model.base_features).head(5)


Scored = list[pl.DataFrame]


def _holdout_part(
    model: FailureModel,
    files: Sequence[str],
    ids: Sequence[str],
    start: datetime,
    last_ts: datetime,
) -> Scored:
    """Row numbers, labels and probabilities of one partition's observed backtest rows,
    per horizon (on a worker)."""
    lf = _scan(files).filter(pl.col("node_id").is_in(list(ids)) & (pl.col("ts") >= start))
    frame = lf.collect()
    rule = fj.reactive_rule()
    with_rule = set(rule.columns) <= set(frame.columns)  # as the local job's baseline
    out: Scored = []
    for i, h in enumerate(model.horizons):
        rows = observed(frame, h, label_cutoff=last_ts)
        y = rows[label_name(h)].to_numpy().astype(np.float64)
        p = model.predict_proba(rows)[:, i] if rows.height else np.zeros(0)
        keys = rows.select(ROW, *ORDER).with_columns(pl.col("node_id").cast(pl.String))
        part = keys.with_columns(y=pl.Series(y, dtype=pl.Float64), p=pl.Series(p))
        if with_rule:
            r = rule.score(rows) if rows.height else np.zeros(0)
            part = part.with_columns(r=pl.Series(r, dtype=pl.Float64))
        out.append(part)
    return out


def _metrics(horizons: Sequence[timedelta], parts: Sequence[Scored]) -> dict[str, float]:
    """:func:`predops.pipelines.jobs.failure.holdout_metrics` and ``baseline_metrics``
    from the partitions' scores, in the local job's row order."""
    out: dict[str, float] = {}
    for i, h in enumerate(horizons):
        rows = pl.concat([p[i] for p in parts]).sort(ROW).sort(*ORDER, maintain_order=True)
        y = rows["y"].to_numpy()
        if y.size == 0 or y.sum() == 0:
            continue
        out.update(fj.horizon_metrics(h, y, rows["p"].to_numpy()))
        if "r" in rows.columns:
            out.update(fj.rule_horizon_metrics(h, y, rows["r"].to_numpy()))
    return out


def train_failure(
    settings: Settings,
    client: Any,
    *,
    horizons: tuple[timedelta, ...] = DEFAULT_HORIZONS,
    strategy: str = STRATEGY,
    backtest_days: float = fj.BACKTEST_DAYS,
    params: dict[str, Any] | None = None,
    register: bool = True,
    max_rows: int | None = None,
    partitions: int | None = None,
) -> dict[str, Any]:
    """:func:`predops.pipelines.jobs.failure.train` on the cluster of ``client`` (see
    the module doc): same rows, same model, same backtest figures, same registry entry;
    plus ``engine``, ``workers`` and ``sample`` (:class:`NodeSample`) in the report."""
    t0 = time.perf_counter()
    files = offline_files(settings)
    feature_hash = fj.offline_feature_hash(settings)
    sample_rate = fj.offline_node_frame(settings).sample_rate
    scan = pl.scan_parquet(files)
    names = scan.collect_schema().names()
    missing = [d.name for d in node_model_defs() if d.name not in names]
    if missing:
        raise ValueError(
            f"the offline node frame lacks {len(missing)} feature(s) (e.g. {missing[:3]}); "
            "rebuild it with `predops features build`"
        )
    last = scan.select(pl.col("ts").max()).collect().item()
    if not isinstance(last, datetime):
        raise ValueError("the training frame is empty")
    start = fj.backtest_window(last, backtest_days)
    purge = max(horizons)
    counts = (
        scan.filter(pl.col("ts") < start - purge)
        .group_by(pl.col("node_id").cast(pl.String))
        .len()
        .collect()
    )
    if counts.height == 0:
        raise fj.no_training_rows(start, purge, backtest_days)
    sample = sample_nodes(dict(zip(counts["node_id"], counts["len"], strict=True)), max_rows)
    n = partitions_of(client, partitions)
    categorical = [c for c, t in scan.collect_schema().items() if t == pl.Categorical]
    parts = [
        client.submit(_train_part, files, ids, start - purge, pure=False)
        for ids in blocks(sample.nodes, n)
    ]
    fitted = client.submit(
        _fit,
        parts,
        categorical,
        horizons=horizons,
        strategy=strategy,
        params=params,
        feature_set_hash=feature_hash,
        label_cutoff=start,
        sample_rate=sample_rate,
        pure=False,
    )
    model_f = client.submit(operator.getitem, fitted, 0)
    example = client.submit(operator.getitem, fitted, 1).result()
    del parts  # the workers may drop the training partitions now
    fit_s = time.perf_counter() - t0
    held = scan.filter(pl.col("ts") >= start).select(pl.col("node_id").cast(pl.String).unique())
    every = sorted(held.collect()["node_id"].to_list())
    scored = client.gather(
        [
            client.submit(_holdout_part, model_f, files, ids, start, last, pure=False)
            for ids in blocks(every, n)
        ]
    )
    model: FailureModel = model_f.result()
    metrics = _metrics(model.horizons, scored)
    metrics["fit_seconds"] = fit_s
    out = fj.train_report(
        model, sample.rows, metrics, start=start, purge=purge, sample_rate=sample_rate
    )
    out["engine"] = "dask"
    out["workers"] = len(client.nthreads())
    out["sample"] = sample.to_dict()
    if register:
        out["version"] = fj.register_model(settings, model, metrics, start=start, example=example)
        out["alias"] = "challenger"
    out["seconds"] = round(time.perf_counter() - t0, 1)
    return out


# ---------------------------------------------------------------- demand backtest
@dataclass(frozen=True, slots=True)
class BacktestJob:
    """One backtest of :func:`predops.models.demand.backtest.rolling_origin`: its series,
    cutoffs and mode."""

    demand: pl.DataFrame
    cutoffs: tuple[datetime, ...]
    refit: bool


def _backtest_task(
    job: BacktestJob,
    models: Mapping[str, Callable[[], Forecaster]],
    config: ForecastConfig,
    calendar: pl.DataFrame | None,
) -> BacktestResult:
    return backtest.rolling_origin(
        job.demand,
        models,
        config=config,
        cutoffs=job.cutoffs,
        calendar=calendar,
        refit=job.refit,
    )


def rolling_origin_jobs(
    jobs: Sequence[BacktestJob],
    models: Mapping[str, Callable[[], Forecaster]],
    *,
    config: ForecastConfig,
    calendar: pl.DataFrame | None = None,
    client: Any = None,
) -> list[BacktestResult]:
    """Every job's :class:`BacktestResult`, as ``backtest.rolling_origin`` gives it: in
    this process without ``client``; else on its workers, one task per cutoff of a
    refitting job (each cutoff refits from scratch, so the cutoffs are independent) and
    one per job otherwise, the series scattered once per job. Per-cutoff results are put
    back together in cutoff order, so the rows equal the local ones."""
    if client is None:
        return [_backtest_task(j, models, config, calendar) for j in jobs]
    cal = client.scatter(calendar) if calendar is not None else None
    futures: list[list[Any]] = []
    for job in jobs:
        data = client.scatter(job.demand)
        cuts = [(c,) for c in sorted(job.cutoffs)] if job.refit else [job.cutoffs]
        futures.append(
            [
                client.submit(_task_of, data, c, job.refit, models, config, cal, pure=False)
                for c in cuts
            ]
        )
    results: list[BacktestResult] = []
    for fs in futures:
        parts: list[BacktestResult] = client.gather(fs)
        results.append(
            BacktestResult(
                rows=pl.concat([p.rows for p in parts], rechunk=True),
                cutoffs=tuple(c for p in parts for c in p.cutoffs),
                fit_seconds=_sum(p.fit_seconds for p in parts),
                predict_seconds=_sum(p.predict_seconds for p in parts),
            )
        )
    return results


def _task_of(
    demand: pl.DataFrame,
    cutoffs: tuple[datetime, ...],
    refit: bool,
    models: Mapping[str, Callable[[], Forecaster]],
    config: ForecastConfig,
    calendar: pl.DataFrame | None,
) -> BacktestResult:
    return _backtest_task(BacktestJob(demand, cutoffs, refit), models, config, calendar)


def _sum(parts: Iterator[dict[str, float]] | Any) -> dict[str, float]:
    out: dict[str, float] = {}
    for d in parts:
        for k, v in d.items():
            out[k] = out.get(k, 0.0) + v
    return out
