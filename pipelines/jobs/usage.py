"""The per-node usage model's jobs: train + register ``predops.usage``, its promotion
backtest, and the usage forecasts and measurements a plan's reclaim decision takes.

- :func:`train`: the lake's node telemetry over ``training_window`` (CPU as cores,
  ``cpu_util_pct`` x the inventory's cores; memory as ``mem_used_bytes``,
  :func:`predops.models.usage.grid.telemetry_history`) fits one
  :class:`~predops.models.usage.forecaster.UsageForecaster` per resource (memory only
  when the telemetry has it), wrapped as a :class:`NodeUsageModel`, and registers it as
  ``predops.usage`` (alias ``challenger``; ``champion`` when it is the first) with the
  holdout figures of the same settings refitted before the last ``holdout``.
- :func:`backtest_for_registry`: what ``predops models promote usage`` judges
  challenger and champion by: each one's settings refitted on the lake's telemetry up to
  the last :data:`HOLDOUT` and scored there by the CPU peak quantiles' mean pinball loss
  (share of allocatable; lower is better). Refitting keeps a newer training cutoff from
  being judged on data it was trained on.
- :func:`usage_inputs`: the champion's p50 / p95 / p99 per node over its window after
  the latest sample at or before ``now``, and that sample as the usage measured now —
  the :class:`~predops.policy.engine.Reclaiming` the plan hands
  :class:`~predops.policy.reclaim.ReclaimPolicy`.

Memory: the lake is only ever scanned (a Parquet scan filtered by time); the
forecaster reads ``chunk_series`` nodes at a time (its module docstring), so neither
training nor serving holds a fleet's history whole. The online interval correction is
not carried between plans: each plan serves the registered fit as trained.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

import polars as pl

from predops.core.contracts import UsageForecast
from predops.models.usage.forecaster import LOOKBACK, UsageForecaster, to_forecasts
from predops.models.usage.grid import SERIES, telemetry_history
from predops.pipelines.workspace.errors import RegistryError
from predops.pipelines.workspace.lake import Lake
from predops.pipelines.workspace.registry import Backtest
from predops.pipelines.workspace.settings import Settings
from predops.policy.engine import Reclaiming
from predops.policy.reclaim import NodeUsage

MODEL_NAME = "usage"
PIP_REQUIREMENTS = ["lightgbm>=4.3,<5", "polars>=1.20,<3", "numpy>=1.26", "pandas>=2.2,<4"]
WINDOW = timedelta(hours=2)
"""Default forecast window: longer than ``[policy.reclaim] hold`` (1 h), so a forecast
issued at the latest sample still covers the round until the next plan."""
TRAINING_WINDOW = timedelta(days=14)
HOLDOUT = timedelta(days=1)
PARAMS = tuple(p for p in inspect.signature(UsageForecaster.__init__).parameters if p != "self")


@dataclass
class NodeUsageModel:
    """The registered object: the CPU forecaster (cores) and, when the telemetry had
    memory, the memory one (bytes), fitted on the same nodes and window."""

    cpu: UsageForecaster
    memory: UsageForecaster | None

    @property
    def window(self) -> timedelta:
        return self.cpu.window


def predict_usage(model: NodeUsageModel, model_input: Any) -> Any:
    """The registered usage model's pyfunc face: a CPU usage history (series_id, ts,
    usage in cores, allocatable) in, the CPU predict frame (p50 ... p99 per node) out."""
    frame = model_input if isinstance(model_input, pl.DataFrame) else pl.from_pandas(model_input)
    frame = frame.with_columns(pl.col("ts").cast(pl.Datetime("us", "UTC")))
    return model.cpu.predict(frame).to_pandas()


def usage_history(
    lake: Lake, resource: str, *, start: datetime | None = None, end: datetime | None = None
) -> pl.LazyFrame:
    """The lake's node usage of ``resource`` (``cpu`` or ``memory``) as a lazy scan, rows
    with a sample only."""
    tel = lake.scan("telemetry", start=start, end=end)
    hist = telemetry_history(tel, lake.scan("inventory"), resource)
    return hist.filter(pl.col("usage").is_not_null() & pl.col("usage").is_not_nan())


def _has_rows(lf: pl.LazyFrame) -> bool:
    return bool(lf.select(pl.len()).collect(engine="streaming").item() > 0)


def _settings_of(model: UsageForecaster) -> dict[str, Any]:
    return {p: getattr(model, p) for p in PARAMS}


def _hash(settings: Mapping[str, Any]) -> str:
    body = json.dumps({k: str(v) for k, v in sorted(settings.items())}, sort_keys=True)
    return hashlib.sha256(body.encode()).hexdigest()[:16]


def _span(lake: Lake) -> datetime:
    end = lake.latest_time("telemetry")
    if end is None:
        raise ValueError("the lake has no telemetry to train the usage model on")
    return end


def holdout(
    settings: Mapping[str, Any], history: pl.LazyFrame, end: datetime, span: timedelta = HOLDOUT
) -> dict[str, Any]:
    """Settings ``settings`` refitted on ``history`` up to ``end - span`` and scored on
    the last ``span`` (origins one window apart)."""
    cut = end - span
    model = UsageForecaster(**settings).fit(history.filter(pl.col("ts") <= cut))
    return model.holdout_scores(history, cut, model.window)


def train(
    settings: Settings,
    *,
    window: timedelta = WINDOW,
    training_window: timedelta = TRAINING_WINDOW,
    backtest: bool = True,
    seed: int = 0,
    n_jobs: int | None = None,
    params: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Fit and register ``predops.usage`` (module docstring); ``params``: further
    :class:`UsageForecaster` settings (``n_estimators``, ``max_train_rows``, ...)."""
    from predops.pipelines.workspace import registry

    lake = Lake(settings.lake_dir)
    end = _span(lake)
    start = end - training_window
    knobs = {"window": window, "random_state": seed, "n_jobs": n_jobs, **dict(params or {})}
    t0, c0 = time.perf_counter(), time.process_time()
    cpu_hist = usage_history(lake, "cpu", start=start, end=end)
    if not _has_rows(cpu_hist):
        raise ValueError(f"the lake has no CPU telemetry with inventory from {start.isoformat()}")
    cpu = UsageForecaster(**knobs).fit(cpu_hist)
    mem_hist = usage_history(lake, "memory", start=start, end=end)
    memory = UsageForecaster(**knobs).fit(mem_hist) if _has_rows(mem_hist) else None
    metrics: dict[str, float] = {
        "fit_seconds": time.perf_counter() - t0,
        "fit_cpu_seconds": time.process_time() - c0,
        "train_rows": float(cpu.n_train_rows_),
        "nodes": float(cpu.n_series_),
    }
    scores: dict[str, Any] | str = "skipped"
    if backtest:
        try:
            scores = holdout(_settings_of(cpu), cpu_hist, end)
        except ValueError as exc:  # too little history before the holdout day
            scores = f"skipped: {exc}"
        else:
            metrics["backtest_pinball"] = scores["loss"]
            metrics.update({f"backtest_coverage_{k}": v for k, v in scores["coverage"].items()})
    example = (
        cpu_hist.filter(pl.col("ts") > end - timedelta(hours=6))
        .head(200)
        .collect()
        .filter(pl.col(SERIES) == pl.col(SERIES).first())
    )
    chosen = _settings_of(cpu)
    version = registry.log_and_register(
        MODEL_NAME,
        NodeUsageModel(cpu, memory),
        predict=predict_usage,
        params={k: v for k, v in chosen.items() if k != "levels"},
        metrics=metrics,
        feature_set_hash=_hash(chosen),
        data_cutoff=cpu.data_cutoff_,
        pip_requirements=PIP_REQUIREMENTS,
        input_example=example.to_pandas(),
        extra_tags={
            "predops.window": str(window),
            "predops.resources": "cpu,memory" if memory is not None else "cpu",
            "predops.calibration": cpu.calibration_,
            "predops.training_window": str(training_window),
        },
        uri=settings.mlflow_uri,
    )
    return {
        "model": registry.registered_name(MODEL_NAME),
        "version": version,
        "data_cutoff": cpu.data_cutoff_.isoformat(),
        "window_hours": window.total_seconds() / 3600,
        "nodes": cpu.n_series_,
        "resources": ["cpu", "memory"] if memory is not None else ["cpu"],
        "metrics": metrics,
        "backtest": scores,
    }


def backtest_for_registry(settings: Settings) -> Backtest:
    """The promotion backtest of ``predops.usage`` (module docstring)."""
    from predops.pipelines.workspace.registry import load_uri, python_object

    lake = Lake(settings.lake_dir)
    try:
        end = _span(lake)
    except ValueError as exc:
        raise RegistryError(f"usage backtest: {exc}") from None
    history = usage_history(lake, "cpu", start=end - TRAINING_WINDOW - HOLDOUT, end=end)

    def score_uri(model_uri: str) -> float:
        fitted: NodeUsageModel = python_object(load_uri(model_uri, uri=settings.mlflow_uri))
        try:
            return float(holdout(_settings_of(fitted.cpu), history, end)["loss"])
        except ValueError as exc:
            raise RegistryError(f"usage backtest of {model_uri}: {exc}") from None

    return Backtest(score=score_uri, metric="pinball")


def _measured(frame: pl.DataFrame) -> dict[str, tuple[datetime, float]]:
    return {r[SERIES]: (r["issued_at"], float(r["usage_now"])) for r in frame.iter_rows(named=True)}


def usage_inputs(
    settings: Settings,
    now: datetime,
    published: Mapping[str, tuple[int, int | None]],
) -> tuple[Reclaiming | None, dict[str, Any]]:
    """The champion's forecasts of every node with telemetry in the last
    :data:`~predops.models.usage.forecaster.LOOKBACK` before ``now`` and the usage
    measured at each one's latest sample, or None and why (no registry, no champion)."""
    from predops.pipelines.workspace import registry

    uri = settings.mlflow_uri
    if uri.startswith("sqlite:///") and not settings.workspace.joinpath("mlflow.db").exists():
        return None, {"status": "missing", "note": "no model registry in the workspace yet"}
    try:
        model, version, prov = registry.load_python_model(MODEL_NAME, uri=uri)
    except RegistryError as exc:
        return None, {"status": "missing", "note": f"no champion usage model: {exc}"}
    lake = Lake(settings.lake_dir)
    since = now - LOOKBACK - model.window
    cpu_hist = usage_history(lake, "cpu", start=since, end=now)
    if not _has_rows(cpu_hist):
        return None, {"status": "missing", "note": f"no CPU telemetry after {since.isoformat()}"}
    cpu = model.cpu.predict(cpu_hist, as_of=now)
    mem = None
    if model.memory is not None:
        mem_hist = usage_history(lake, "memory", start=since, end=now)
        mem = model.memory.predict(mem_hist, as_of=now) if _has_rows(mem_hist) else None
    forecasts: list[UsageForecast] = [
        replace(f, provenance=prov) for f in to_forecasts(cpu, model.window, mem)
    ]
    mem_now = _measured(mem) if mem is not None else {}
    measured = {
        node: NodeUsage(node, at, used, mem_now[node][1] if node in mem_now else None)
        for node, (at, used) in _measured(cpu).items()
    }
    note = {
        "status": "ok",
        "model": prov.model_name,
        "version": version,
        "nodes": len(forecasts),
        "window_hours": model.window.total_seconds() / 3600,
        "resources": ["cpu", "memory"] if mem is not None else ["cpu"],
        "newest_sample": max(f.as_of for f in forecasts).isoformat(),
        "published_known": len(published),
    }
    return Reclaiming(forecasts, measured, dict(published)), note


__all__ = [
    "MODEL_NAME",
    "NodeUsageModel",
    "backtest_for_registry",
    "train",
    "usage_history",
    "usage_inputs",
]
