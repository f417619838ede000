"""The per-node and per-series families of the server's ``/metrics``, rendered once per input.

- ``predops_node_failure_probability{node,pool,rack,horizon}``: P(failure within the
  horizon) of every fresh node of the online store, from the served failure model — the
  same :class:`~predops.serving.fleet.FleetRisk` that ``/v1/failure/risk`` pages (scored
  once per model version and online snapshot). Stale nodes have no series, as they have
  no risk in the API. ``horizon`` is the model's, e.g. ``24h``.
- ``predops_node_running_pods{node}``: pods running on each of those nodes at the online
  store's ``as_of``, as the lake knows them (the pods the planner places and a drain
  would displace); 0 is an idle node.
- ``predops_demand_forecast{series,quantile,horizon}``: the served demand forecasts
  (the cache ``/v1/demand/forecast`` reads) at :data:`FORECAST_STEPS` steps of the
  model's interval ahead (hourly: ``1h``, ``6h``, ``24h``), quantile ``0.1`` / ``0.5`` /
  ``0.9``. Typed ``summary``: the quantiles of the forecast distribution, without the
  ``_sum`` / ``_count`` of observed values (OpenMetrics makes both optional), so the
  ``quantile`` label keeps the meaning Prometheus gives it (``promtool check metrics``
  refuses it on a gauge).
- ``predops_demand_observed{series}`` / ``predops_demand_capacity{series}``: each lake
  series' latest value and capacity (same units as its forecast).

The text of each block is cached and re-rendered only when its inputs change: the node
block per (model version, online snapshot, set of fresh nodes, the lake's pods files),
the demand block per (forecast generation, the lake's demand files). A scrape in between
copies bytes. A block that cannot be built (no model, no online store) is left out and
the rest of ``/metrics`` still answers.

Cardinality: one series per fresh node and horizon, one per node for running pods, nine
per demand series. At 10,000 nodes and 3 horizons that is 40,000 node series, about
4.1 MB of text (0.1 MB gzip), rendered in about 0.3 s (``benchmarks/bench_metrics.py``
measures it).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import polars as pl

from predops.features.definitions import window_label
from predops.pipelines.workspace.errors import FeatureStoreError
from predops.pipelines.workspace.lake import Lake
from predops.pipelines.workspace.pod_snapshot import running_pods
from predops.serving.context import ServeContext
from predops.serving.fleet import FRESH, FleetRisk
from predops.serving.forecasts import ForecastUnavailable, all_forecasts

log = logging.getLogger(__name__)

RISK = "predops_node_failure_probability"
PODS = "predops_node_running_pods"
FORECAST = "predops_demand_forecast"
OBSERVED = "predops_demand_observed"
CAPACITY = "predops_demand_capacity"
FORECAST_STEPS = (1, 6, 24)
"""Steps ahead exposed per series: the next interval (pool sizing's scale-up lead), six
and 24 (hourly: a day ahead, tidal lending's horizon); the API serves every step."""
QUANTILES = (("0.1", "p10"), ("0.5", "p50"), ("0.9", "p90"))


def escape(value: str) -> str:
    """A label value in the text format: backslash, double quote and newline escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def number(value: float) -> str:
    """A sample value: 6 significant digits (a probability to 1e-6 is plenty)."""
    if value != value:
        return "NaN"
    return f"{value:.6g}"


def family(name: str, kind: str, help_text: str, lines: Iterable[str]) -> str:
    """One metric family: HELP, TYPE and its sample lines (``name{labels} value``)."""
    body = "\n".join(lines)
    return f"# HELP {name} {help_text}\n# TYPE {name} {kind}\n" + (body + "\n" if body else "")


def node_labels(node_ids: Sequence[str], pools: Sequence[Any], racks: Sequence[Any]) -> list[str]:
    """``node="..",pool="..",rack=".."`` per node (an unknown pool or rack is empty)."""
    return [
        f'node="{escape(n)}",pool="{escape(p or "")}",rack="{escape(r or "")}"'
        for n, p, r in zip(node_ids, pools, racks, strict=True)
    ]


def risk_lines(
    labels: Sequence[str], rows: np.ndarray, p_fail: np.ndarray, horizons: Sequence[str]
) -> list[str]:
    """``RISK{labels,horizon} p`` for each row index and horizon column of ``p_fail``."""
    out: list[str] = []
    for j, h in enumerate(horizons):
        tail = f',horizon="{escape(h)}"}} '
        col = p_fail[:, j]
        out.extend(f"{RISK}{{{labels[i]}{tail}{number(float(col[i]))}" for i in rows)
    return out


def node_block(
    labels: Sequence[str],
    node_ids: Sequence[str],
    rows: np.ndarray,
    p_fail: np.ndarray,
    horizons: Sequence[str],
    pods: Mapping[str, int],
) -> str:
    """The risk and running-pods families of the nodes at ``rows``."""
    risk = family(
        RISK,
        "gauge",
        "Calibrated P(failure within horizon) of each fresh node, served model",
        risk_lines(labels, rows, p_fail, horizons),
    )
    running = family(
        PODS,
        "gauge",
        "Pods running on each fresh node at the online features' as_of (lake)",
        (f'{PODS}{{node="{escape(node_ids[i])}"}} {pods.get(node_ids[i], 0)}' for i in rows),
    )
    return risk + running


def horizon_label(ahead: timedelta) -> str:
    """A lead time as a label: ``1h``, ``24h``, ``7d``."""
    return window_label(ahead)


def pods_per_node(lake: Lake, at: datetime) -> dict[str, int]:
    """Pods running on each node at ``at`` (nodes without any are absent)."""
    pods = running_pods(lake, at)
    if pods.height == 0:
        return {}
    counts = pods.group_by("node_id").len()
    return dict(zip(counts["node_id"].to_list(), counts["len"].to_list(), strict=True))


def latest_demand(lake: Lake) -> pl.DataFrame:
    """series_id, value, capacity of each lake demand series' latest row."""
    if not lake.files("demand"):
        return pl.DataFrame(schema={"series_id": pl.String, "value": float, "capacity": float})
    return (
        lake.scan("demand")
        .group_by("series_id")
        .agg(
            pl.col("value").sort_by("ts").last(),
            pl.col("capacity").sort_by("ts").last(),
        )
        .sort("series_id")
        .collect()
    )


class FleetFamilies:
    """The cached text blocks of the module's families (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._node_key: tuple[Any, ...] | None = None
        self._node_text = ""
        self._labels_of: Any = None
        self._labels: list[str] = []
        self._pods_key: tuple[Any, ...] | None = None
        self._pods: dict[str, int] = {}
        self._demand_src: Any = False  # never what all_forecasts returns
        self._demand_state: tuple[Any, ...] | None = None
        self._demand_text = ""
        self.renders = 0
        """Blocks rendered since start (a test checks scrapes reuse them)."""

    def render(self, ctx: ServeContext) -> bytes:
        """The node and demand blocks for ``ctx`` now (cached; see the module doc)."""
        with self._lock:
            return (self._node_block(ctx) + self._demand_block(ctx)).encode()

    # ------------------------------------------------------------ nodes
    def _fleet(self, ctx: ServeContext) -> FleetRisk | None:
        loaded = ctx.failure.current
        if loaded is None:
            return None
        try:
            snap = ctx.online.snapshot(ctx.clock.now(), ctx.config.max_data_age)
        except FeatureStoreError:
            return None
        if snap.feature_set_hash != loaded.provenance.feature_set_hash:
            return None
        return ctx.fleet.get(loaded.version, snap, ctx.scorer(loaded.model))

    def _node_block(self, ctx: ServeContext) -> str:
        try:
            fleet = self._fleet(ctx)
            if fleet is None:
                return ""
            snap = fleet.snapshot
            every = np.arange(len(snap.node_ids), dtype=np.int64)
            fresh = snap.status(every, ctx.clock.now(), ctx.config.max_data_age) == FRESH
            lake = Lake(ctx.settings.lake_dir)
            pods_key = (snap.version, snap.as_of, _files_state(lake, "pods"))
            key = (fleet.model_version, snap.version, fresh.tobytes(), pods_key)
            if key == self._node_key:
                return self._node_text
            if pods_key != self._pods_key:
                self._pods, self._pods_key = pods_per_node(lake, snap.as_of), pods_key
            if self._labels_of is not snap:
                self._labels_of = snap
                self._labels = node_labels(snap.node_ids, snap.pools, snap.racks)
            hours = [horizon_label(h) for h in fleet.scorer.horizons]
            text = node_block(
                self._labels, snap.node_ids, every[fresh], fleet.p_fail, hours, self._pods
            )
        except Exception:  # a family that cannot be built must not take /metrics down
            log.exception("node metrics could not be rendered")
            return ""
        self._node_key, self._node_text = key, text
        self.renders += 1
        return text

    # ------------------------------------------------------------ demand
    def _demand_block(self, ctx: ServeContext) -> str:
        try:
            lake = Lake(ctx.settings.lake_dir)
            state = _files_state(lake, "demand")
            try:
                forecasts: Any = all_forecasts(ctx)
            except ForecastUnavailable:
                forecasts = None
            # The server's forecast cache hands out one object per generation.
            if forecasts is self._demand_src and state == self._demand_state:
                return self._demand_text
            text = self._forecast_family(forecasts) + self._latest_families(lake)
        except Exception:
            log.exception("demand metrics could not be rendered")
            return ""
        self._demand_src, self._demand_state, self._demand_text = forecasts, state, text
        self.renders += 1
        return text

    @staticmethod
    def _forecast_family(forecasts: Any) -> str:
        if forecasts is None:
            return ""
        lines = []
        for series_id, rows in sorted(forecasts[1].items()):
            sid = escape(series_id)
            for r in rows:
                if r["horizon"] not in FORECAST_STEPS:
                    continue
                ahead = datetime.fromisoformat(r["valid_at"]) - datetime.fromisoformat(
                    r["issued_at"]
                )
                h = escape(horizon_label(ahead))
                for q, col in QUANTILES:
                    lines.append(
                        f'{FORECAST}{{series="{sid}",quantile="{q}",horizon="{h}"}} '
                        f"{number(float(r[col]))}"
                    )
        return family(FORECAST, "summary", "Served demand forecast quantiles per series", lines)

    @staticmethod
    def _latest_families(lake: Lake) -> str:
        latest = latest_demand(lake)
        out = []
        for name, col, text in (
            (OBSERVED, "value", "Latest observed demand of each lake series"),
            (CAPACITY, "capacity", "Latest capacity of each lake series (same units)"),
        ):
            lines = (
                f'{name}{{series="{escape(s)}"}} {number(float(v))}'
                for s, v in zip(latest["series_id"], latest[col], strict=True)
                if v is not None
            )
            out.append(family(name, "gauge", text, lines))
        return "".join(out)


def _files_state(lake: Lake, table: str) -> tuple[tuple[str, int, int], ...]:
    files = lake.files(table)
    return tuple((str(f), f.stat().st_mtime_ns, f.stat().st_size) for f in files)
