"""Champion models held by the server: loaded once, reloaded when predops moves the alias.

A :class:`ModelSlot` holds one registered model. Requests read ``slot.current`` once and use
that object to the end, so a reload (which builds the new model completely before swapping
one reference) never drops or mixes a request. When the registry is unreachable or the new
version fails to load, the slot keeps serving the last good model and records the error,
which ``/readyz`` reports.

The slot serves the version predops last promoted to the alias (its promotion record, see
:func:`predops.pipelines.workspace.registry.alias_state`), never one the alias was moved to
by hand; such a move is kept in ``slot.alias`` for ``/readyz``, ``/metrics`` and the
models page.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from predops.core.clock import Clock
from predops.core.contracts import Provenance
from predops.pipelines.workspace.errors import RegistryError
from predops.pipelines.workspace.promotion_records import AliasState
from predops.pipelines.workspace.registry import CHAMPION
from predops.pipelines.workspace.settings import Settings


@dataclass(frozen=True, slots=True)
class Loaded:
    """One loaded model version and what it is."""

    name: str
    version: str
    model: Any
    provenance: Provenance
    loaded_at: datetime
    provenance_dict: dict[str, Any] = field(init=False, repr=False, compare=False)
    """``provenance.to_dict()``, built once (every answer quotes it; read-only)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "provenance_dict", self.provenance.to_dict())


VersionOf = Callable[[], AliasState]
"""Where the alias points and which version predops promoted there (raises when the
registry cannot say)."""
LoadVersion = Callable[[str], tuple[Any, Provenance]]
"""Loads one version number: the model object and its provenance."""


class ModelSlot:
    """The served version of one registered model (see the module docstring)."""

    def __init__(self, name: str, version_of: VersionOf, load: LoadVersion, clock: Clock) -> None:
        self.name = name
        self._version_of = version_of
        self._load = load
        self._clock = clock
        self._current: Loaded | None = None
        self._lock = threading.Lock()  # one reload at a time; readers never take it
        self.last_check: datetime | None = None
        self.last_error: str | None = None
        self.reloads = 0
        self.alias: AliasState | None = None
        """The alias as last read (None until the registry answered once)."""

    @property
    def current(self) -> Loaded | None:
        return self._current

    def refresh(self) -> bool:
        """Check the alias; load and swap in a new version if predops promoted one. True
        when the served version changed. Errors are recorded, never raised: the last good
        model stays in place."""
        with self._lock:
            self.last_check = self._clock.now()
            try:
                self.alias = state = self._version_of()
                version = state.served_version
                if version is None:
                    raise RegistryError(state.problem or "no version was promoted by predops")
                if self._current is not None and self._current.version == version:
                    self.last_error = None
                    return False
                model, prov = self._load(version)
            except Exception as exc:  # the registry may fail in any way; keep serving
                self.last_error = f"{type(exc).__name__}: {exc}"
                return False
            self._current = Loaded(self.name, version, model, prov, self._clock.now())
            self.last_error = None
            self.reloads += 1
            return True

    def status(self) -> dict[str, Any]:
        cur = self._current
        return {
            "model": self.name,
            "loaded": cur is not None,
            "version": cur.version if cur else None,
            "loaded_at": cur.loaded_at.isoformat() if cur else None,
            "provenance": cur.provenance_dict if cur else None,
            "last_check": self.last_check.isoformat() if self.last_check else None,
            "last_error": self.last_error,
            "reloads": self.reloads,
            "alias": self.alias.to_dict() if self.alias else None,
        }

    def untrusted_alias(self) -> dict[str, Any] | None:
        """When the alias was moved outside predops: which model and alias, the version
        it points at, the one served and why (None when the alias is verified)."""
        state, cur = self.alias, self._current
        if state is None or state.problem is None:
            return None
        return {
            "model": self.name,
            "alias": state.alias,
            "alias_version": state.alias_version,
            "served_version": cur.version if cur else None,
            "problem": state.problem,
        }


def failure_slot(settings: Settings, clock: Clock) -> ModelSlot:
    """``predops.node_failure@champion`` as predops promoted it: a ``FailureModel``."""
    from predops.pipelines.jobs import failure as failure_jobs
    from predops.pipelines.workspace import registry

    return ModelSlot(
        failure_jobs.MODEL_NAME,
        lambda: registry.alias_state(failure_jobs.MODEL_NAME, CHAMPION, uri=settings.mlflow_uri),
        lambda version: failure_jobs.load_model(settings, version),
        clock,
    )


def demand_slot(settings: Settings, clock: Clock) -> ModelSlot:
    """The hourly demand model's champion (``predops.demand.hourly``, or the legacy
    single ``predops.demand`` when that is all the registry holds, see
    :func:`predops.pipelines.jobs.demand.resolve_name`), chosen when the server starts:
    the demand pages forecast hours ahead. The slot keeps the name ``demand`` (the key
    of ``/readyz`` and the ``model`` label of ``/metrics``); the provenance of what it
    loaded names the registered model. The model is the pyfunc model (its ``predict``
    takes ``{"demand": frame, "calendar": frame | None}``)."""
    from predops.pipelines.jobs import demand as demand_jobs
    from predops.pipelines.workspace import registry
    from predops.pipelines.workspace.errors import RegistryError

    try:
        name = demand_jobs.resolve_name(settings, "hourly")
    except RegistryError:  # no store yet: the slot says so when asked
        name = demand_jobs.model_name("hourly")

    def load(version: str) -> tuple[Any, Provenance]:
        model, _, prov = registry.load(name, version, uri=settings.mlflow_uri)
        return model, prov

    return ModelSlot(
        demand_jobs.MODEL_NAME,
        lambda: registry.alias_state(name, CHAMPION, uri=settings.mlflow_uri),
        load,
        clock,
    )
