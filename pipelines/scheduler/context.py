"""What a scheduled job run needs, built once by the composition root.

Its own module so that the runner (which runs steps) and the steps (which read the
context) both import it, never each other.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from predops.core.clock import Clock
from predops.pipelines.scheduler.config import ScheduleConfig
from predops.pipelines.workspace.runs import RunStore
from predops.pipelines.workspace.settings import Settings

if TYPE_CHECKING:
    from predops.pipelines.scheduler.metrics import SchedulerMetrics


@dataclass(frozen=True, slots=True)
class JobContext:
    """What a job run needs; built once by the composition root.

    ``pause_after`` maps a step name to seconds to wait after it (a test hook, set only
    by ``predops schedule`` from its environment, to kill a run in the middle).
    ``metrics``, when set, counts every run (``predops schedule start --metrics-port``).
    ``carried``: what earlier steps of this run handed on to later ones (the pipeline's
    ``score`` and ``forecast`` answers, so ``plan`` does not compute them again); the
    runner gives each run its own (empty) mapping.
    """

    settings: Settings
    config: ScheduleConfig
    runs: RunStore
    clock: Clock
    pause_after: Mapping[str, float] = field(default_factory=dict)
    sleep: Callable[[float], None] = time.sleep
    metrics: SchedulerMetrics | None = None
    carried: dict[str, Any] = field(default_factory=dict)
