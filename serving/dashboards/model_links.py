"""The models page's links and baselines: each registered version's MLflow run (a link
into the tracking UI when ``mlflow_ui_url`` is configured, else its run id and artifact
URI as text), and each logged metric beside the baselines its training run scored on
the same rows (run metrics named ``[prefix]baseline/<name>/<metric>``: the failure
model's reactive rule, the demand model's seasonal naives, ETS and Theta).
"""

from __future__ import annotations

import re
import threading
from typing import Any

from predops.pipelines.workspace import registry
from predops.serving.context import ServeContext

BASELINE = re.compile(r"^(?P<prefix>.*?)baseline/(?P<name>[^/]+)/(?P<metric>.+)$")
LABELS = {
    "reactive_rule": "reactive rule",
    "ets": "ETS",
    "theta": "Theta",
    "lightgbm": "LightGBM alone",
    "naive": "naive",
    "persistence": "persistence (last value)",
}
KEEP = 256
"""Runs whose link details are kept in memory."""

_cache: dict[str, dict[str, str]] = {}
_lock = threading.Lock()


def baseline_label(name: str) -> str:
    if name.startswith("seasonal_naive_"):
        return f"seasonal naive {name.removeprefix('seasonal_naive_')}"
    return LABELS.get(name, name.replace("_", " "))


def split_baselines(models: list[dict[str, Any]]) -> None:
    """Move every version's baseline metrics out of ``metrics`` into ``baselines``:
    ``{metric: [(baseline label, value), ...]}`` keyed by the model's own metric name."""
    for m in models:
        for v in m["versions"]:
            own: dict[str, float] = {}
            beside: dict[str, list[tuple[str, float]]] = {}
            for k, x in v.get("metrics", {}).items():
                hit = BASELINE.match(k)
                if hit is None:
                    own[k] = x
                else:
                    metric = hit["prefix"] + hit["metric"]
                    beside.setdefault(metric, []).append((baseline_label(hit["name"]), x))
            v["metrics"] = own
            v["baselines"] = {k: sorted(b) for k, b in beside.items()}


def links(ctx: ServeContext, models: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    """By run id: ``run_id``, ``artifact_uri`` and ``url`` (the tracking UI's run page,
    only when configured). Also splits the baselines out of the versions' metrics
    (:func:`split_baselines`)."""
    split_baselines(models)
    runs = [v["run_id"] for m in models for v in m["versions"] if v.get("run_id")]
    with _lock:
        missing = [r for r in runs if r not in _cache]
    if missing:
        try:
            found = registry.run_links(missing, uri=ctx.settings.mlflow_uri)
        except Exception:  # the registry may fail in any way; the page says so elsewhere
            found = {}
        with _lock:
            if len(_cache) + len(found) > KEEP:
                _cache.clear()
            _cache.update(found)
    ui = ctx.config.mlflow_ui_url
    out: dict[str, dict[str, str]] = {}
    with _lock:
        for run_id in runs:
            info = _cache.get(run_id)
            if info is None:
                continue
            row = {"run_id": run_id, "artifact_uri": info["artifact_uri"]}
            if ui:
                row["url"] = f"{ui.rstrip('/')}/#/experiments/{info['experiment_id']}/runs/{run_id}"
            out[run_id] = row
    return out
