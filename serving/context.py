"""What every route needs, built once per application: settings, configuration, the clock
and the served models. Routes get it with ``Depends(context)``."""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, Request

from predops.core.clock import Clock
from predops.models.failure.scorer import FailureScorer
from predops.pipelines.workspace.settings import Settings
from predops.serving.config import ServeConfig
from predops.serving.fleet import FleetCache, OnlineNodes
from predops.serving.models import ModelSlot
from predops.serving.sessions import SessionSigner


@dataclass
class ServeContext:
    settings: Settings
    config: ServeConfig
    clock: Clock
    failure: ModelSlot
    demand: ModelSlot
    online: OnlineNodes = field(init=False)
    fleet: FleetCache = field(default_factory=FleetCache)
    sessions: SessionSigner = field(init=False)
    """Signs dashboard sign-in cookies: with the configured ``session_key`` (shared by
    replicas), else a random key per process."""
    forecasts: dict[tuple[str, Any], Any] = field(default_factory=dict)
    """Demand forecasts per (model version, lake demand files' state); see routes.demand."""
    _scorers: weakref.WeakKeyDictionary[Any, FailureScorer] = field(
        default_factory=weakref.WeakKeyDictionary
    )
    _stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.online = OnlineNodes(self.settings.features_dir)
        key = self.config.session_key
        self.sessions = SessionSigner() if key is None else SessionSigner(key)

    def scorer(self, model: Any) -> FailureScorer:
        """The array-level scorer of a loaded failure model (built once per model)."""
        found = self._scorers.get(model)
        if found is None:
            found = self._scorers[model] = FailureScorer(model)
        return found

    def refresh_models(self) -> None:
        """Poll the registry once for both models (see :meth:`ModelSlot.refresh`), then
        warm the fleet risk cache so the first request after a change does not pay."""
        self.failure.refresh()
        self.demand.refresh()
        self.warm()

    def warm(self) -> None:
        """Score the fleet with the served failure model if the cache is cold (errors are
        left for requests to report)."""
        loaded = self.failure.current
        if loaded is None:
            return
        try:
            snap = self.online.snapshot(self.clock.now(), self.config.max_data_age)
            if snap.feature_set_hash == loaded.provenance.feature_set_hash:
                self.fleet.get(loaded.version, snap, self.scorer(loaded.model))
        except Exception:
            return

    def start_reloader(self) -> threading.Thread:
        """A daemon thread that polls the registry every ``config.reload_every_s``."""

        def loop() -> None:
            while not self._stop.wait(self.config.reload_every_s):
                self.refresh_models()

        t = threading.Thread(target=loop, name="predops-model-reloader", daemon=True)
        t.start()
        return t

    def stop_reloader(self) -> None:
        self._stop.set()


async def context(request: Request) -> ServeContext:
    """FastAPI dependency: the application's :class:`ServeContext`."""
    ctx: ServeContext = request.app.state.ctx
    return ctx


Ctx = Annotated[ServeContext, Depends(context)]
"""Route parameter type: ``def route(ctx: Ctx)`` gets the application's context."""
