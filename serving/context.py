"""What every route needs, built once per application: settings, configuration, the clock
and the served models. Routes get it with ``Depends(context)``."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Request

from core.clock import Clock
from pipelines.settings import Settings
from serving.config import ServeConfig
from serving.models import ModelSlot


@dataclass
class ServeContext:
    settings: Settings
    config: ServeConfig
    clock: Clock
    failure: ModelSlot
    demand: ModelSlot
    _stop: threading.Event = field(default_factory=threading.Event)

    def refresh_models(self) -> None:
        """Poll the registry once for both models (see :meth:`ModelSlot.refresh`)."""
        self.failure.refresh()
        self.demand.refresh()

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


def context(request: Request) -> ServeContext:
    """FastAPI dependency: the application's :class:`ServeContext`."""
    ctx: ServeContext = request.app.state.ctx
    return ctx


Ctx = Annotated[ServeContext, Depends(context)]
"""Route parameter type: ``def route(ctx: Ctx)`` gets the application's context."""
