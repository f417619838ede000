"""Prometheus metrics of one application (its own registry, never the global one).

- ``predops_http_requests_total{method,route,status}`` and
  ``predops_http_request_duration_seconds{method,route}``: per route template (unmatched
  paths are counted as ``route="unmatched"``, so a scanner cannot blow up the label set);
- ``predops_model_info{model,version}`` = 1 for each served model version;
  ``predops_model_loaded{model}`` (0 until a version is loaded) and
  ``predops_model_data_cutoff_timestamp_seconds{model}`` (the served version's data
  cutoff, Unix seconds);
- ``predops_model_reloads_total{model}``: a counter of versions loaded since start, and
  ``predops_model_registry_error{model}`` (1 while the last registry check failed);
- ``predops_registry_alias_unverified{model,alias}``: 1 while the alias points somewhere
  predops did not promote (the last promoted version keeps serving), else 0;
- ``predops_online_features_age_seconds``: the server's clock minus the online store's
  ``as_of``;
- ``predops_plan_actions{kind}`` / ``predops_plan_skips{reason}`` of the latest plan
  (every kind and skip reason, 0 when the plan has none, so alerts find the series;
  none without a plan);
- per node and per demand series: see :mod:`predops.serving.fleet_metrics`.

Request metrics are observed by a pure ASGI middleware; the rest is read at scrape time.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter as Tally
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from predops.core.actions import (
    Buy,
    Cordon,
    Drain,
    LendNodes,
    ResizePool,
    ReturnNodes,
    SetReclaimable,
    SkipReason,
    Uncordon,
)
from predops.serving.errors import ASGIApp, Message, Receive, Scope, Send
from predops.serving.fleet_metrics import FleetFamilies

ACTION_KINDS = tuple(
    a.kind
    for a in (Cordon, Drain, Uncordon, ResizePool, LendNodes, ReturnNodes, SetReclaimable, Buy)
)
BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class ServerMetrics:
    """The application's registry and instruments."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "predops_http_requests",
            "HTTP requests answered",
            ["method", "route", "status"],
            registry=r,
        )
        self.latency = Histogram(
            "predops_http_request_duration_seconds",
            "Time to answer, seconds",
            ["method", "route"],
            buckets=BUCKETS,
            registry=r,
        )
        self.model = Gauge(
            "predops_model_info", "Served model versions (1 each)", ["model", "version"], registry=r
        )
        self.loaded = Gauge(
            "predops_model_loaded", "1 once a version of the model is served", ["model"], registry=r
        )
        self.cutoff = Gauge(
            "predops_model_data_cutoff_timestamp_seconds",
            "Data cutoff of the served model version, Unix seconds",
            ["model"],
            registry=r,
        )
        self.reloads = Counter(
            "predops_model_reloads", "Model versions loaded since start", ["model"], registry=r
        )
        self._reloads_seen: dict[str, int] = {}
        self.registry_error = Gauge(
            "predops_model_registry_error",
            "1 while the last registry check failed",
            ["model"],
            registry=r,
        )
        self.alias_unverified = Gauge(
            "predops_registry_alias_unverified",
            "1 while the registry alias points at a version predops did not promote to it",
            ["model", "alias"],
            registry=r,
        )
        self.data_age = Gauge(
            "predops_online_features_age_seconds",
            "Age of the online node features, seconds",
            registry=r,
        )
        self.plan_actions = Gauge(
            "predops_plan_actions", "Actions of the latest plan", ["kind"], registry=r
        )
        self.plan_skips = Gauge(
            "predops_plan_skips", "Skips of the latest plan", ["reason"], registry=r
        )
        self._plan_read: tuple[str, int] | None = None
        self.fleet = FleetFamilies()
        self._scrape = threading.Lock()

    def exposition(self, ctx: Any) -> bytes:
        """Refresh the scrape-time gauges from ``ctx`` and render the text format."""
        with self._scrape:  # one scrape at a time: the reload counter advances once
            return self._exposition(ctx)

    def _exposition(self, ctx: Any) -> bytes:
        self.model.clear()
        for slot in (ctx.failure, ctx.demand):
            cur = slot.current
            if cur is not None:
                self.model.labels(slot.name, cur.version).set(1)
                self.cutoff.labels(slot.name).set(cur.provenance.data_cutoff.timestamp())
            self.loaded.labels(slot.name).set(0 if cur is None else 1)
            seen = self._reloads_seen.get(slot.name, 0)
            self.reloads.labels(slot.name).inc(max(0, slot.reloads - seen))
            self._reloads_seen[slot.name] = max(seen, slot.reloads)
            self.registry_error.labels(slot.name).set(1 if slot.last_error else 0)
            if slot.alias is not None:
                bad = slot.untrusted_alias() is not None
                self.alias_unverified.labels(slot.name, slot.alias.alias).set(1 if bad else 0)
        try:
            snap = ctx.online.snapshot(ctx.clock.now(), ctx.config.max_data_age)
            self.data_age.set((ctx.clock.now() - snap.as_of).total_seconds())
        except Exception:
            self.data_age.set(float("nan"))
        self._plan(ctx)
        return generate_latest(self.registry) + self.fleet.render(ctx)

    def _plan(self, ctx: Any) -> None:
        """The latest plan's counts (its file is parsed once per plan id and mtime)."""
        from predops.serving.routes.plans import latest_plan_id

        plan_id = latest_plan_id(ctx)
        read: tuple[str, int] | None = None
        raw: dict[str, Any] = {}
        if plan_id is not None:
            path = ctx.settings.plans_dir / f"{plan_id}.json"
            try:
                read = (plan_id, path.stat().st_mtime_ns)
                if read == self._plan_read:
                    return
                raw = json.loads(path.read_text())
            except (OSError, ValueError):
                read = None
        self._plan_read = read
        self.plan_actions.clear()
        self.plan_skips.clear()
        if read is None:
            return
        actions = Tally(a.get("kind", "?") for a in raw.get("actions", []))
        for kind in (*ACTION_KINDS, *actions):
            self.plan_actions.labels(kind).set(actions.get(kind, 0))
        skips = Tally(s.get("reason", "?") for s in raw.get("skips", []))
        for reason in (*(r.value for r in SkipReason), *skips):
            self.plan_skips.labels(reason).set(skips.get(reason, 0))


class RequestMetrics:
    """ASGI middleware: count and time every HTTP request by route template."""

    def __init__(self, app: ASGIApp, metrics: ServerMetrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def tracked(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            method = str(scope.get("method", "?"))
            self.metrics.requests.labels(method, template, str(status)).inc()
            self.metrics.latency.labels(method, template).observe(time.perf_counter() - start)
