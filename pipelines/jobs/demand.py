"""Demand forecasting jobs: evaluate on a trace, train + register, forecast from the
champion, and the backtest the registry promotes by.
Over 500 lines: the demand use cases (load and validate a source, evaluate, train and
register, forecast, the registry's backtest) share the source loading, the model
factories and the frame conversions; each is short.

- :func:`load_source` reads any file in the format of ``../shared/data`` through the
  ingest adapters (validated against the ``demand`` contract, bad rows counted, no
  lake needed), or simulates the synthetic fleet; ``openb`` pod lists become GPU
  demand (created and not yet deleted pods, by GPU model set).
- :func:`evaluate` runs the rolling-origin backtest of the model and every baseline
  and reports the metrics per horizon bucket, plus the issue's targets.
- :func:`train` fits on the lake's ``demand`` table and logs + registers the model
  under its horizon's name (``predops.demand.hourly``: pool sizing, 1-48 h;
  ``predops.demand.weekly``: procurement, 4-26 weeks); :func:`issue_forecasts` loads
  that horizon's champion and issues :class:`core.contracts.Forecast` objects with its
  provenance (:func:`forecast`: the same as a report). A registry holding only the
  single ``predops.demand`` of earlier releases keeps working: that model answers for
  the horizon its configuration is (:func:`resolve_name`).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import polars as pl
from sklearn.base import clone

from predops.core.clock import Clock
from predops.core.contracts import Forecast, Provenance
from predops.core.schemas import CALENDAR, DEMAND, PODS
from predops.core.validation import validate
from predops.features.demand import SERIES, demand_from_pods
from predops.models.demand.backtest import (
    BacktestResult,
    Forecaster,
    cutoffs_before_end,
    rolling_origin,
)
from predops.models.demand.baselines import (
    ETSForecaster,
    SeasonalNaiveForecaster,
    ThetaForecaster,
)
from predops.models.demand.config import ForecastConfig
from predops.models.demand.forecaster import DemandForecaster
from predops.models.demand.metrics import as_nested, score
from predops.models.demand.selection import SelectedForecaster
from predops.pipelines.jobs.distributed import BacktestJob, rolling_origin_jobs
from predops.pipelines.workspace.registry import Backtest
from predops.pipelines.workspace.settings import Settings

log = logging.getLogger(__name__)

SOURCES = ("synthetic", "helios", "philly", "datacenter", "azure-vm", "openb")
MODEL_NAME = "demand"
"""The single demand model of earlier releases (one configuration, hourly or weekly)."""
HORIZONS = ("hourly", "weekly")
"""The demand models registered side by side, by configuration name."""


def model_name(config_name: str) -> str:
    """``"hourly"`` -> ``"demand.hourly"``: the registered name of that horizon's model."""
    if config_name not in HORIZONS:
        raise ValueError(f"unknown demand horizon {config_name!r}; known: {list(HORIZONS)}")
    return f"{MODEL_NAME}.{config_name}"


def resolve_name(settings: Settings, config_name: str) -> str:
    """The registered model that answers for horizon ``config_name``: its own
    (``demand.<config>``) when registered, else the legacy single ``demand`` model when
    that one was trained with this configuration (its ``predops.config`` tag; a legacy
    model without the tag counts as hourly), else its own name (whose load then says it
    is missing)."""
    from predops.pipelines.workspace import registry

    own = model_name(config_name)
    by_name = {m["name"]: m for m in registry.list_models(uri=settings.mlflow_uri)}
    if registry.registered_name(own) in by_name:
        return own
    legacy = by_name.get(registry.registered_name(MODEL_NAME))
    if legacy is not None:
        configs = {v["tags"].get("predops.config", "hourly") for v in legacy["versions"]}
        if config_name in configs:
            return MODEL_NAME
    return own


PIP_REQUIREMENTS = [
    "lightgbm>=4.3,<5",
    "polars>=1.20,<3",
    "numpy>=1.26",
    "pandas>=2.2,<4",
    "scikit-learn>=1.5,<2",
    "statsmodels>=0.14,<1",
]
TARGET_MASE_GAIN = 0.10
TARGET_COVERAGE = (0.75, 0.85)
TARGET_UNDER = 0.12
REGISTRY_BACKTEST_CUTOFFS = 3
"""Rolling origins of the promotion backtest (each refits both candidates)."""


@dataclass(frozen=True, slots=True)
class SourceData:
    """Demand rows (contract columns) and known events, with what was dropped."""

    demand: pl.DataFrame
    calendar: pl.DataFrame | None
    quarantined: int = 0
    notes: list[str] = field(default_factory=list)


def _validated(
    frame: pl.DataFrame, schema: Any, first_row: int, now: datetime, bad: list[str]
) -> tuple[pl.DataFrame, int]:
    """Good rows; each quarantined row's row, field and reason goes to ``bad``."""
    res = validate(frame, schema, now=now, first_row=first_row)
    for r in res.quarantined.head(3).iter_rows(named=True):
        bad.append(f"{schema.name} row {r['row']} field {r['field']}: {r['reason']}")
    return res.good, res.quarantined.height


def coarsest_datacenter_series(demand: pl.DataFrame) -> pl.DataFrame:
    """DataCenter-Traces publish each metric at several bucket widths (10 s, 30 s, 300 s)
    that agree once resampled; keep the coarsest per trace and metric so no cluster
    counts twice in the metrics."""
    parts = pl.col(SERIES).str.split("/")
    keyed = demand.with_columns(
        parts.list.get(1).alias("__trace"),
        parts.list.get(3).alias("__metric"),
        parts.list.get(2).str.strip_suffix("s").cast(pl.Int64, strict=False).alias("__width"),
    )
    widest = keyed.group_by("__trace", "__metric").agg(pl.col("__width").max())
    return keyed.join(widest, on=["__trace", "__metric", "__width"]).drop(
        "__trace", "__metric", "__width"
    )


def load_source(
    source: str,
    path: str | None,
    *,
    clock: Clock,
    synthetic: dict[str, Any] | None = None,
) -> SourceData:
    """Demand (and calendar) from ``source``: see the module docstring."""
    if source not in SOURCES:
        raise ValueError(f"unknown source {source!r}; known: {', '.join(SOURCES)}")
    if source == "synthetic":
        from predops.pipelines.synthetic.run import SimConfig, simulate_frames

        opts: dict[str, Any] = {
            "nodes": 120,
            "days": 35.0,
            "interval": timedelta(hours=1),
            "seed": 7,
            "start": datetime(2026, 1, 5, tzinfo=UTC),
        }
        opts.update(synthetic or {})
        frames = simulate_frames(SimConfig(**opts))
        return SourceData(frames["demand"], frames["calendar"], notes=["synthetic fleet"])
    if not path:
        raise ValueError(f"--path is required for source {source!r}")
    if not Path(path).exists():
        raise FileNotFoundError(f"{path}: no such file or folder")
    from predops.pipelines.ingest.registry import IngestOptions, adapter

    now = clock.now()
    demand: list[pl.DataFrame] = []
    pods: list[pl.DataFrame] = []
    bad = 0
    examples: list[str] = []
    for batch in adapter(source).read(path, IngestOptions(clock=clock)):
        if batch.table == "demand":
            good, n = _validated(batch.frame, DEMAND, batch.first_row, now, examples)
            demand.append(good)
            bad += n
        elif batch.table == "pods":
            good, n = _validated(batch.frame, PODS, batch.first_row, now, examples)
            pods.append(good)
            bad += n
    notes: list[str] = []
    if bad:
        log.warning("%s: %d row(s) quarantined, e.g. %s", path, bad, examples[0])
        notes.append(f"{bad} row(s) quarantined, e.g. {examples[0]}")
    if source == "openb":
        if not pods:
            raise ValueError(f"{path}: no openb pod list (openb_pod_list_*.csv) found")
        all_pods = pl.concat(pods)
        workloads = all_pods["pod_id"].str.split("/").list.first()
        for wl in sorted(workloads.unique().to_list()):
            sel = all_pods.filter(workloads == wl)
            demand.append(demand_from_pods(sel, timedelta(hours=1), prefix=f"openb/{wl}"))
        notes.append("openb: GPUs of created, not yet deleted pods (running + pending), hourly")
    if not demand:
        raise ValueError(f"{path}: no demand rows read by the {source} adapter")
    frame = pl.concat([d.select(DEMAND.names) for d in demand], how="vertical_relaxed").unique(
        [SERIES, "ts"], keep="first", maintain_order=True
    )
    if source == "datacenter":
        frame = coarsest_datacenter_series(frame)
        notes.append("datacenter: one bucket width per trace and metric (the coarsest)")
    if frame.height == 0:
        raise ValueError(f"{path}: every demand row was quarantined ({bad})")
    return SourceData(frame, None, quarantined=bad, notes=notes)


def with_horizon(config: ForecastConfig, max_horizon: int | None) -> ForecastConfig:
    """``config`` forecasting horizons 1..max_horizon (buckets cut to fit)."""
    if max_horizon is None or max_horizon == config.max_horizon:
        return config
    if max_horizon < 1:
        raise ValueError("max horizon must be >= 1")
    buckets = tuple((a, min(b, max_horizon)) for a, b in config.buckets if a <= max_horizon)
    return dataclasses.replace(config, horizons=tuple(range(1, max_horizon + 1)), buckets=buckets)


DEFAULT_EVAL_MODELS = ("selected", "seasonal_naive_168", "naive", "seasonal_naive_52")
"""What ``predops eval demand`` runs unless ``--models`` says otherwise: the served
combination (which also reports its components: lightgbm, ets, theta, persistence and
the shortest seasonal naive, each fit once) and the other seasonal naives. The
quantile-objective LightGBM (``lightgbm_quantile``) is a diagnostic now, run on request."""


def model_factories(
    config: ForecastConfig, names: tuple[str, ...] | None = None, *, seed: int = 0
) -> dict[str, Callable[[], Forecaster]]:
    """The served combination, the model (conformal and quantile intervals) and the
    baselines, by name (``names`` None: every one)."""
    out: dict[str, Callable[[], Forecaster]] = {
        "selected": lambda: SelectedForecaster(config, random_state=seed),
        "lightgbm": lambda: DemandForecaster(config, interval="conformal", random_state=seed),
        "lightgbm_quantile": lambda: DemandForecaster(
            config, interval="quantile", random_state=seed
        ),
    }
    seasons = (1, *config.seasons) if config.name == "weekly" else config.seasons
    for m in seasons:
        out["naive" if m == 1 else f"seasonal_naive_{m}"] = partial(
            SeasonalNaiveForecaster, config, season=m
        )
    out["ets"] = lambda: ETSForecaster(config)
    out["theta"] = lambda: ThetaForecaster(config)
    if names:
        unknown = sorted(set(names) - set(out))
        if unknown:
            raise ValueError(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(out)}")
        out = {k: v for k, v in out.items() if k in names}
    return out


def targets_check(metrics: dict[str, dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """The issue's bar on bucket ``all``: MASE >= 10 % below the best of seasonal naive
    and ETS, coverage within 75-85 %, under-provisioning at most 12 % (model = the
    served combination ``selected`` when run, else ``lightgbm``)."""
    served = "selected" if "selected" in metrics else "lightgbm"
    model = metrics.get(served, {}).get("all")
    base = {
        k: v["all"]["mase"]
        for k, v in metrics.items()
        if (k.startswith("seasonal_naive") or k == "ets") and v.get("all", {}).get("mase")
    }
    if model is None or not base:
        return {"evaluated": False}
    best_name = min(base, key=lambda k: base[k])
    gain = 1 - model["mase"] / base[best_name]
    cov, under = model["coverage"], model["under_provisioning"]
    checks = {
        "mase_gain_vs_best_baseline": gain >= TARGET_MASE_GAIN,
        "coverage_75_85": TARGET_COVERAGE[0] <= cov <= TARGET_COVERAGE[1],
        "under_provisioning_le_12pct": under <= TARGET_UNDER,
    }
    return {
        "evaluated": True,
        "model": served,
        "best_baseline": best_name,
        "best_baseline_mase": base[best_name],
        "model_mase": model["mase"],
        "mase_gain": gain,
        "coverage": cov,
        "under_provisioning": under,
        "checks": checks,
        "met": all(checks.values()),
    }


def evaluate(
    data: SourceData,
    *,
    config: ForecastConfig,
    cutoffs: int = 5,
    every: timedelta | None = None,
    holdout: timedelta | None = None,
    models: tuple[str, ...] | None = None,
    seed: int = 0,
    drop_last: timedelta | None = None,
    client: Any = None,
) -> dict[str, Any]:
    """Backtest report (see :func:`rolling_origin`); ``client`` (a ``distributed.Client``)
    runs the backtests on its workers with the same result
    (:func:`predops.pipelines.jobs.distributed.rolling_origin_jobs`).

    ``drop_last`` cuts that much off the end of every end group first: a validation
    run, as if the data had ended earlier, to choose settings on cutoffs that are not
    the scored ones.

    Rolling mode: ``cutoffs`` origins ``every`` apart (default the config's
    ``backtest_every``: a day hourly, four weeks weekly), each refitting every model.
    Holdout mode (``holdout`` given): every model is fit once on the data before the
    last ``holdout`` of the series and then forecasts from origins ``every`` apart
    (default one step) across it, never refit.
    """
    demand = data.demand
    if models is None:
        known = model_factories(config, seed=seed)
        models = tuple(m for m in DEFAULT_EVAL_MODELS if m in known)
    factories = model_factories(config, models, seed=seed)
    jobs: list[BacktestJob] = []
    for group in end_groups(demand, config):
        if drop_last is not None:
            group = group.filter(pl.col("ts") <= pl.col("ts").max() - drop_last)
        if holdout is not None:
            end = group["ts"].max()
            assert isinstance(end, datetime)
            first = _floor(end - holdout, config.freq)
            step = every or config.freq
            n = int((end - first) / step)
            cuts = tuple(first + step * i for i in range(n))
            refit = False
        else:
            cuts = cutoffs_before_end(group, config, n=cutoffs, every=every)
            refit = True
        jobs.append(BacktestJob(group, cuts, refit))
    results = rolling_origin_jobs(
        jobs, factories, config=config, calendar=data.calendar, client=client
    )
    result = BacktestResult(
        rows=pl.concat([r.rows for r in results]),
        cutoffs=tuple(c for r in results for c in r.cutoffs),
        fit_seconds={k: sum(r.fit_seconds.get(k, 0.0) for r in results) for k in factories},
        predict_seconds={k: sum(r.predict_seconds.get(k, 0.0) for r in results) for k in factories},
    )
    table = score(result.rows, config)
    metrics = as_nested(table)
    return {
        "config": config.name,
        "horizons": [min(config.horizons), max(config.horizons)],
        "freq_s": config.freq.total_seconds(),
        "series": demand[SERIES].n_unique(),
        "rows": demand.height,
        "quarantined": data.quarantined,
        "notes": data.notes,
        "mode": "holdout" if holdout is not None else "rolling",
        "cutoffs": [c.isoformat() for c in (result.cutoffs[:1] + result.cutoffs[-1:])]
        if holdout is not None
        else [c.isoformat() for c in result.cutoffs],
        "n_cutoffs": len(result.cutoffs),
        "groups": len(results),
        "metrics": metrics,
        "targets": targets_check(metrics),
        "methods": _methods(result),
        "selection": _selection_summary(results),
        "fit_seconds": {k: round(v, 2) for k, v in result.fit_seconds.items()},
        "predict_seconds": {k: round(v, 2) for k, v in result.predict_seconds.items()},
    }


def end_groups(demand: pl.DataFrame, config: ForecastConfig) -> list[pl.DataFrame]:
    """Series split by where they end: traces on different calendars (DataCenter-Traces'
    alibaba2018, azure_v2 and google2019 sit at unrelated epochs) get their own cutoffs,
    so each is scored on its own last days, and no model trains across calendars.
    Series ending within one max horizon of each other share a group."""
    ends = demand.group_by(SERIES).agg(pl.col("ts").max().alias("__end")).sort("__end")
    gap = config.max_horizon * config.freq
    labels: dict[str, int] = {}
    group, last = 0, None
    for sid, end in ends.iter_rows():
        if last is not None and end - last > gap:
            group += 1
        labels[sid] = group
        last = end
    tagged = demand.with_columns(
        pl.col(SERIES).replace_strict(labels, return_dtype=pl.Int32).alias("__group")
    )
    return [g.drop("__group") for _, g in sorted(tagged.group_by("__group"), key=lambda kv: kv[0])]


def _selection_summary(results: list[BacktestResult]) -> dict[str, Any]:
    """What the served combination was made of, per end group and refit: its windows
    (all before the cutoff) and each candidate's mean weight over series, per bucket."""
    out: list[dict[str, Any]] = []
    for r in results:
        for sel in r.selections.get("selected", []):
            weights = sel["weights_now"]
            mean: dict[str, dict[str, float]] = {}
            for per_bucket in weights.values():
                for bucket, w in per_bucket.items():
                    acc = mean.setdefault(bucket, {})
                    for cand, x in w.items():
                        acc[cand] = acc.get(cand, 0.0) + x / len(weights)
            out.append(
                {
                    "data_cutoff": sel["data_cutoff"],
                    "lightgbm_rounds": sel.get("lightgbm_rounds"),
                    "lightgbm_anchor": sel.get("lightgbm_anchor"),
                    "window_origins": sel["window_origins"],
                    "series": len(weights),
                    "mean_weight": {
                        b: {c: round(x, 3) for c, x in w.items()} for b, w in mean.items()
                    },
                }
            )
    return {"weighting": "per series and bucket", "refits": out} if out else {}


def _methods(result: BacktestResult) -> dict[str, dict[str, int]]:
    """How many forecast rows each model answered with which method."""
    out: dict[str, dict[str, int]] = {}
    counts = result.rows.group_by("model", "method").len()
    for row in counts.iter_rows(named=True):
        out.setdefault(row["model"], {})[row["method"]] = int(row["len"])
    return out


def _floor(t: datetime, step: timedelta) -> datetime:
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    return epoch + ((t - epoch) // step) * step


def lake_demand(settings: Settings, *, source: str | None = None) -> SourceData:
    """The lake's ``demand`` table (one source, or all, a key kept once) and calendar."""
    from predops.pipelines.workspace.lake import Lake

    lake = Lake(settings.lake_dir)
    demand = (
        lake.scan("demand", source)
        .select(DEMAND.names)
        .unique([SERIES, "ts"], keep="first")
        .sort(SERIES, "ts")
        .collect()
    )
    if demand.height == 0:
        where = f"source {source!r}" if source else "any source"
        raise ValueError(
            f"the lake at {lake.root} has no demand rows from {where}; "
            "run `predops simulate` or `predops ingest helios PATH` first"
        )
    calendar = lake.scan("calendar").select(CALENDAR.names).collect()
    return SourceData(demand, calendar if calendar.height else None)


def predict_forecasts(forecaster: DemandForecaster, model_input: Any) -> Any:
    """The registered demand model's prediction (its pyfunc face, see
    :func:`predops.pipelines.workspace.registry.log_and_register`).

    Input: a DataFrame of ``demand`` rows (series_id, ts, value, ...), or a dict
    ``{"demand": DataFrame, "calendar": DataFrame}``; only the last
    ``forecaster.lookback`` buckets of each series matter. Output: a pandas frame, one
    row per series and horizon with issued_at, valid_at, horizon, p10, p50, p90 and the
    method.
    """
    calendar = None
    if isinstance(model_input, dict):
        demand = _polars(model_input["demand"])
        if model_input.get("calendar") is not None:
            calendar = _polars(model_input["calendar"])
    else:
        demand = _polars(model_input)
    return forecaster.predict(demand, calendar=calendar).to_pandas()


def _polars(frame: Any) -> pl.DataFrame:
    out = frame if isinstance(frame, pl.DataFrame) else pl.from_pandas(frame)
    if "ts" in out.columns:
        out = out.with_columns(pl.col("ts").cast(pl.Datetime("us", "UTC")))
    return out


def _backtest_metrics(
    data: SourceData, factory: Callable[[], Forecaster], config: ForecastConfig, cutoffs: int
) -> dict[str, float]:
    pooled, _ = _backtest(data, factory, config, cutoffs, baselines=False)
    return pooled


PER_SERIES_ARTIFACT = "backtest_per_series.json"
"""The training run's artifact with each series' backtest figures, the served model's
and its baselines' (:func:`per_series_backtest`); the version tag
``predops.backtest_per_series`` names it."""
PER_SERIES_METRICS = ("mae", "rmse", "mase", "wql", "coverage", "under_provisioning", "rows")


def _backtest(
    data: SourceData,
    factory: Callable[[], Forecaster],
    config: ForecastConfig,
    cutoffs: int,
    *,
    baselines: bool,
) -> tuple[dict[str, float], dict[str, Any]]:
    """The model's pooled backtest figures over every horizon, and (``baselines``) the
    per-series ones of the model and of the seasonal naives beside it."""
    cuts = cutoffs_before_end(data.demand, config, n=cutoffs)
    models: dict[str, Callable[[], Forecaster]] = {"model": factory}
    if baselines:
        models.update(
            {
                f"seasonal_naive_{m}": partial(SeasonalNaiveForecaster, config, season=m)
                for m in config.seasons
            }
        )
    result = rolling_origin(
        data.demand, models, config=config, cutoffs=cuts, calendar=data.calendar
    )
    table = as_nested(score(result.rows.filter(pl.col("model") == "model"), config))
    pooled = {k: float(v) for k, v in table["model"]["all"].items() if v is not None}
    if not baselines:
        return pooled, {}
    for name, buckets in as_nested(score(result.rows, config)).items():
        if name == "model":
            continue
        for k in SCALE_FREE:  # pooling mae / rmse would mix the series' units
            if (v := buckets["all"].get(k)) is not None:
                pooled[f"{BASELINE_PREFIX}{name}/{k}"] = float(v)
    return pooled, per_series_backtest(result.rows, config, cuts)


SCALE_FREE = ("mase", "wql", "coverage", "under_provisioning")
"""Backtest figures that may be pooled across series of different units."""
BASELINE_PREFIX = "baseline/"
"""A baseline's pooled figure in the run's metrics: ``baseline/<name>/<metric>``, logged
as ``backtest_baseline/<name>/<metric>`` beside the model's ``backtest_<metric>``."""


def per_series_backtest(
    rows: pl.DataFrame, config: ForecastConfig, cutoffs: tuple[datetime, ...]
) -> dict[str, Any]:
    """Each series' backtest figures over every horizon, per model (``model`` is the
    one registered; the rest are its baselines: the seasonal naives, and the
    components a combination reports, e.g. ets and theta), in the series' own units
    for mae and rmse. Scored per series, never pooled across series of different
    units."""
    table = score(rows, config, by=("series_id", "model")).filter(pl.col("bucket") == "all")
    series: dict[str, dict[str, dict[str, float]]] = {}
    for r in table.iter_rows(named=True):
        series.setdefault(str(r["series_id"]), {})[str(r["model"])] = {
            k: float(r[k]) for k in PER_SERIES_METRICS if r[k] is not None and r[k] == r[k]
        }
    return {
        "config": config.name,
        "cutoffs": [c.isoformat() for c in cutoffs],
        "horizons": [min(config.horizons), max(config.horizons)],
        "served": "model",
        "series": series,
    }


def train(
    settings: Settings,
    *,
    config: ForecastConfig,
    source: str | None = None,
    backtest_cutoffs: int = 3,
    seed: int = 0,
    method: str = "auto",
) -> dict[str, Any]:
    """Fit on the lake's demand, backtest the same configuration (``backtest_cutoffs``
    rolling origins, 0 to skip), log the run and register a new version of
    ``predops.demand.<config>`` (alias ``challenger``; ``champion`` too if it is the
    first).

    ``method`` (:data:`TRAIN_METHODS`): ``selected`` registers the combination of the
    LightGBM and the classical methods weighted per series and horizon bucket on the
    windows before the cutoff (:class:`SelectedForecaster`, what ``predops eval demand``
    measures as served); ``lightgbm`` the LightGBM alone; ``auto`` (default) the
    combination when the history holds its windows (:func:`selection_room`), else the
    LightGBM (which has its own short-history fallback). The tag ``predops.method``
    says which, and why."""
    from predops.pipelines.workspace import registry

    if method not in TRAIN_METHODS:
        raise ValueError(f"method must be one of {', '.join(TRAIN_METHODS)}, got {method!r}")
    data = lake_demand(settings, source=source)
    room = selection_room(data.demand, config)
    chosen = ("selected" if room == "run" else "lightgbm") if method == "auto" else method
    why = "asked" if method != "auto" else ("windows fit" if room == "run" else room)
    t0 = time.perf_counter()
    est: Any
    if chosen == "selected":
        est = SelectedForecaster(config, random_state=seed).fit(data.demand, calendar=data.calendar)
        base: DemandForecaster = est.models_["lightgbm"]
    else:
        est = base = DemandForecaster(config, random_state=seed).fit(
            data.demand, calendar=data.calendar
        )
    fit_s = time.perf_counter() - t0
    metrics: dict[str, float] = {"fit_seconds": fit_s, "train_rows": float(base.n_train_rows_)}
    backtest = backtest_room(data.demand, config, backtest_cutoffs)
    per_series: dict[str, Any] = {}
    if backtest_cutoffs and backtest == "run":
        bt, per_series = _backtest(
            data, lambda: clone(est), config, backtest_cutoffs, baselines=True
        )
        metrics.update({f"backtest_{k}": v for k, v in bt.items()})
    params = {k: v for k, v in est.get_params().items() if k != "config"}
    params["config"] = config.name
    params["horizons"] = f"{min(config.horizons)}-{max(config.horizons)}"
    name = model_name(config.name)
    version = registry.log_and_register(
        name,
        est,
        predict=predict_forecasts,
        params=params,
        metrics=metrics,
        feature_set_hash=config.hash,
        data_cutoff=est.data_cutoff_,
        pip_requirements=PIP_REQUIREMENTS,
        # One series' history as the fit kept it: enough rows for predict to answer.
        input_example=base.tail_.filter(pl.col(SERIES) == base.tail_[SERIES][0]).to_pandas(),
        extra_tags={
            "predops.config": config.name,
            "predops.method": f"{chosen} ({why})",
            "predops.interval": base.interval,
            "predops.calibration": base.calibration_,
            "predops.series": str(base.n_series_),
            "predops.lake_source": source or "all",
            "predops.backtest": backtest,
            **({"predops.backtest_per_series": PER_SERIES_ARTIFACT} if per_series else {}),
        },
        json_artifacts={PER_SERIES_ARTIFACT: per_series} if per_series else None,
        uri=settings.mlflow_uri,
    )
    return {
        "model": registry.registered_name(name),
        "version": version,
        "config": config.name,
        "method": chosen,
        "method_why": why,
        "data_cutoff": est.data_cutoff_.isoformat(),
        "series": base.n_series_,
        "rows": data.demand.height,
        "metrics": metrics,
        "backtest": backtest,
    }


TRAIN_METHODS = ("auto", "selected", "lightgbm")


def selection_room(demand: pl.DataFrame, config: ForecastConfig) -> str:
    """``"run"`` when ``demand`` holds the combination's validation windows (as many
    as :class:`SelectedForecaster` places by default, each with ``min_history`` buckets
    before it and the full horizon after it); else why not."""
    windows = int(SelectedForecaster().windows)
    room = backtest_room(demand, config, windows)
    return room if room == "run" else room.replace("origins need", "selection windows need")


def backtest_room(demand: pl.DataFrame, config: ForecastConfig, cutoffs: int) -> str:
    """``"run"`` when ``demand`` spans ``cutoffs`` rolling origins, each with
    ``min_history`` buckets before it and the full horizon after it; else why not (the
    weekly model on a few weeks of history: it is registered, forecasts by its short
    series fallback, and says so, but has nothing to be backtested on)."""
    if not cutoffs:
        return "skipped: 0 cutoffs asked"
    first, last = demand["ts"].min(), demand["ts"].max()
    if not isinstance(first, datetime) or not isinstance(last, datetime):
        return "skipped: no demand rows"
    have = int((last - first) / config.freq) + 1
    need = config.min_history + config.max_horizon + (cutoffs - 1) * config.backtest_every
    if have < need:
        return (
            f"skipped: {have} {config.name} buckets of history, {cutoffs} origins need "
            f"{need} ({config.min_history} to fit, {config.max_horizon} to score)"
        )
    return "run"


@dataclass(frozen=True, slots=True)
class DemandForecasts:
    """One demand model version's forecasts of the lake's series, with its provenance."""

    version: str
    provenance: Provenance
    forecasts: tuple[Forecast, ...]
    reused: bool = False
    """The previous pass's forecasts (``issue_forecasts(reuse=True)``)."""
    selection: dict[str, Any] | None = None
    """How a combination made these forecasts (:func:`served_selection`); None for a
    single model, or when the forecasts were reused without loading the model."""

    def to_dict(self) -> dict[str, Any]:
        """The report ``predops forecast demand`` prints and the server serves."""
        out = {
            "model": self.provenance.model_name,
            "version": self.version,
            "provenance": self.provenance.to_dict(),
            "series": len({f.series_id for f in self.forecasts}),
            "forecasts": [f.to_dict() for f in self.forecasts],
        }
        if self.selection is not None:
            out["selection"] = self.selection
        return out


def served_selection(forecaster: Any) -> dict[str, Any] | None:
    """What a served combination is made of, after its latest ``predict``: the
    candidates, the weighting, the validation windows (all at or before the data
    cutoff) and, per series, each horizon bucket's candidate weights now and at fit
    (:meth:`SelectedForecaster.selection`, regrouped by series). None for a model that
    is not a combination (the LightGBM alone)."""
    if not isinstance(forecaster, SelectedForecaster):
        return None
    sel = forecaster.selection()
    at_fit, now = sel.pop("weights_at_fit"), sel.pop("weights_now")
    sel["series"] = {
        sid: {"weights": now.get(sid, {}), "weights_at_fit": at_fit.get(sid, {})}
        for sid in sorted(set(at_fit) | set(now))
    }
    return sel


def issue_forecasts(
    settings: Settings,
    *,
    alias: str = "champion",
    source: str | None = None,
    loaded: tuple[Any, str, Provenance] | None = None,
    horizon: str = "hourly",
    reuse: bool = False,
) -> DemandForecasts:
    """Forecasts of every lake series from the ``alias`` version of the ``horizon``
    model (:func:`resolve_name`), with its provenance.
    ``loaded``: an already loaded ``(pyfunc model, version, provenance)`` to use instead
    (the server's champion). The forecaster inside the registered model is called on
    the lake's polars frames directly (its pyfunc face, :func:`predict_forecasts`, is
    the same call behind a pandas round trip). ``reuse`` (the scheduled pipeline): the
    previous pass's forecasts when the served version and its inputs did not change
    (:mod:`predops.pipelines.jobs.forecast_cache`), with the same answers, without
    loading the model."""
    from predops.pipelines.jobs import forecast_cache
    from predops.pipelines.workspace import registry

    # The model first: a workspace without one gets the registry's error (the pipeline's
    # forecast step skips on it), whether or not its lake holds demand rows yet.
    reuse = reuse and loaded is None
    name = resolve_name(settings, horizon) if loaded is None else ""  # served: no registry read
    if reuse:
        served = registry.served_provenance(name, alias, uri=settings.mlflow_uri)
    elif loaded is None:
        loaded = registry.load(name, alias, uri=settings.mlflow_uri)
    data = lake_demand(settings, source=source)
    cache = forecast_cache.path_for(settings.features_dir, horizon)
    if reuse:
        hit = forecast_cache.lookup(cache, served, data.demand, data.calendar)
        if hit is not None:
            out = forecasts_from_frame(hit, served)
            return DemandForecasts(served.model_version, served, tuple(out), reused=True)
        # the version the registry named above, whatever moved since
        loaded = registry.load(name, served.model_version, uri=settings.mlflow_uri)
    assert loaded is not None
    model, version, prov = loaded
    forecaster: DemandForecaster = registry.python_object(model)
    # Only the last lookback buckets matter (plus one bucket of slack for alignment).
    window = forecast_cache.Window(forecaster.config_.spec, forecaster.lookback)
    recent = window.inputs(data.demand)
    frame = forecaster.predict(recent, calendar=data.calendar)
    if reuse:
        grid = window.grid_digest(recent)
        forecast_cache.save(cache, prov, window, grid, data.calendar, frame)
    return DemandForecasts(
        version,
        prov,
        tuple(forecasts_from_frame(frame, prov)),
        selection=served_selection(forecaster),
    )


def forecast(
    settings: Settings,
    *,
    alias: str = "champion",
    source: str | None = None,
    loaded: tuple[Any, str, Provenance] | None = None,
    horizon: str = "hourly",
) -> dict[str, Any]:
    """:func:`issue_forecasts` as the report :meth:`DemandForecasts.to_dict` gives."""
    out = issue_forecasts(settings, alias=alias, source=source, loaded=loaded, horizon=horizon)
    return out.to_dict()


def forecasts_from_frame(frame: pl.DataFrame, provenance: Provenance | None) -> list[Forecast]:
    """Forecast rows (see :meth:`DemandForecaster.predict`) as contract objects."""
    utc = pl.Datetime("us", "UTC")
    frame = frame.with_columns(pl.col("issued_at").cast(utc), pl.col("valid_at").cast(utc))
    return [
        Forecast(
            series_id=r["series_id"],
            issued_at=r["issued_at"],
            valid_at=r["valid_at"],
            p10=float(r["p10"]),
            p50=float(r["p50"]),
            p90=float(r["p90"]),
            method=r["method"],
            provenance=provenance,
        )
        for r in frame.iter_rows(named=True)
    ]


def backtest_for_registry(settings: Settings) -> Backtest:
    """The promotion backtest of a demand model (either horizon, or the legacy single
    ``predops.demand``): each candidate's configuration is
    refit at the last :data:`REGISTRY_BACKTEST_CUTOFFS` rolling origins of the lake's
    demand (as production would), and scored by the weighted quantile loss over every
    horizon (lower is better). Refitting — rather than scoring the stored fits — keeps a
    newer training cutoff from being judged on data it was trained on."""
    from predops.pipelines.workspace.registry import Backtest, load_uri, python_object

    data = lake_demand(settings)

    def score_uri(model_uri: str) -> float:
        model = load_uri(model_uri, uri=settings.mlflow_uri)
        fitted: DemandForecaster = python_object(model)
        metrics = _backtest_metrics(
            data, lambda: clone(fitted), fitted.config_, REGISTRY_BACKTEST_CUTOFFS
        )
        return metrics["wql"]

    return Backtest(score=score_uri, metric="wql")


__all__ = [
    "HORIZONS",
    "SOURCES",
    "DemandForecasts",
    "SourceData",
    "backtest_for_registry",
    "evaluate",
    "forecast",
    "issue_forecasts",
    "load_source",
    "model_factories",
    "model_name",
    "resolve_name",
    "served_selection",
    "train",
]
