"""A demand series' backtest accuracy as the served version recorded it at training
time: that series' own figures (its units for mae and rmse) for the served model and
each baseline it was backtested beside, never figures pooled across series.

The figures are the training run's artifact ``backtest_per_series.json``
(:func:`predops.pipelines.jobs.demand.per_series_backtest`), read once per run and
kept for the few most recent runs.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from predops.pipelines.jobs.demand import PER_SERIES_ARTIFACT
from predops.pipelines.workspace import registry
from predops.pipelines.workspace.errors import RegistryError
from predops.serving.context import ServeContext

TAG = "predops.backtest_per_series"
KEEP_RUNS = 4
"""Runs whose per-series artifact is kept in memory (the served versions and a few
older ones)."""

BASELINE_NAMES = {
    "model": "served model",
    "lightgbm": "LightGBM alone",
    "ets": "ETS",
    "theta": "Theta",
    "naive": "naive (last value)",
    "persistence": "persistence (last value, band from h-step changes)",
}

_cache: OrderedDict[str, dict[str, Any]] = OrderedDict()
_lock = threading.Lock()


def label(model: str, freq_h: float = 1.0) -> str:
    """How a backtested model reads on the page (``seasonal_naive_24`` -> ``seasonal
    naive, 24 h season``)."""
    if model.startswith("seasonal_naive_"):
        steps = model.removeprefix("seasonal_naive_")
        if freq_h == 1.0:
            return f"seasonal naive ({steps} h season)"
        return f"seasonal naive ({steps}-step season)"
    return BASELINE_NAMES.get(model, model)


def _artifact(ctx: ServeContext, run_id: str) -> dict[str, Any]:
    with _lock:
        if run_id in _cache:
            _cache.move_to_end(run_id)
            return _cache[run_id]
    body = registry.run_json(run_id, PER_SERIES_ARTIFACT, uri=ctx.settings.mlflow_uri)
    if not isinstance(body, dict) or not isinstance(body.get("series"), dict):
        raise RegistryError(f"run {run_id}: {PER_SERIES_ARTIFACT} has no 'series' map")
    with _lock:
        _cache[run_id] = body
        while len(_cache) > KEEP_RUNS:
            _cache.popitem(last=False)
    return body


def series_backtest(
    ctx: ServeContext, models: list[dict[str, Any]], series_id: str
) -> dict[str, Any]:
    """The served demand version's backtest of ``series_id``: ``rows`` (served model
    first, then the baselines by mase, each with its figures), ``cutoffs``, ``version``;
    ``problem`` (and no rows) when it was not recorded."""
    loaded = ctx.demand.current
    if loaded is None:
        return {"rows": [], "problem": "no demand model is served"}
    version = next(
        (
            v
            for m in models
            if m["name"] == loaded.provenance.model_name
            for v in m["versions"]
            if v["version"] == loaded.version
        ),
        None,
    )
    if version is None:
        return {"rows": [], "problem": f"version {loaded.version} is not in the registry"}
    base = {"version": loaded.version, "rows": []}
    if TAG not in version["tags"] or not version.get("run_id"):
        return {
            **base,
            "problem": f"version {loaded.version} was registered without a per-series backtest "
            "(trained with 0 backtest cutoffs, or before predops recorded one); "
            "`predops train demand` records it",
        }
    try:
        body = _artifact(ctx, version["run_id"])
    except Exception as exc:  # the registry may fail in any way; the page says so
        return {**base, "problem": f"{type(exc).__name__}: {exc}"}
    figures = body["series"].get(series_id)
    if not figures:
        return {
            **base,
            "problem": f"the backtest of version {loaded.version} did not score {series_id!r} "
            "(too short a history at its cutoffs, or a series newer than the model)",
        }
    freq_h = 1.0 if body.get("config") == "hourly" else 168.0
    served = figures.get(body.get("served", "model"), {})
    rest = sorted(
        ((k, v) for k, v in figures.items() if k != body.get("served", "model")),
        key=lambda kv: kv[1].get("mase", float("inf")),
    )
    rows = [{"model": "model", "label": f"served model (v{loaded.version})", **served}]
    rows += [{"model": k, "label": label(k, freq_h), **v} for k, v in rest]
    return {
        **base,
        "rows": rows,
        "cutoffs": body.get("cutoffs", []),
        "horizons": body.get("horizons"),
        "problem": None,
    }
