"""The scheduler's configuration: one TOML file plus ``PREDOPS_*`` environment overrides.

Read once at start (``predops schedule start --config predops.toml``) and validated into
a typed, frozen :class:`ScheduleConfig`; every error names the key
(``predops.toml: [jobs.pipeline] cron: ...``). Unknown sections and keys are errors, so a
typo never silently falls back to a default.

The same file may feed the server and the CLI: ``[policy]`` (budgets and policy knobs,
:mod:`predops.pipelines.workspace.policy_config`) is read here too, for the ``plan``
step; the server's ``[server]`` / ``[[tokens]]`` are left to the server, which validates
them when it starts. A section no reader knows is still an error here.

Environment overrides use double underscores between levels, e.g.
``PREDOPS_JOBS__PIPELINE__CRON="*/5 * * * *"`` or ``PREDOPS_INGEST__PATH=/data/drop``.
Variables without ``__`` (``PREDOPS_WORKSPACE``, ``PREDOPS_OPERATOR``, ...) and the
server's own ``PREDOPS_SERVER__*`` (one environment may feed both processes) are other
settings and are ignored here. Override values are text, typed by the same validation
as the file's.

Example::

    [scheduler]
    timezone = "UTC"
    misfire_grace_time = "10m"   # a run may start this late, else it is skipped

    [jobs.pipeline]              # ingest -> features -> score -> forecast -> plan
    cron = "*/15 * * * *"

    [jobs.retrain]               # offline features -> train + promote both models
    cron = "30 2 * * *"

    [[ingest]]                   # optional: what the pipeline re-reads each run, in order
    source = "kubernetes"        # the inventory as the autoscaler changes it, pods, PDBs
    path = "in-cluster"

    [[ingest]]                   # ([ingest] for a single source works too)
    source = "prometheus"
    path = "http://prometheus:9090"
    lookback = "30m"
    step = "1m"
    # the adapter's -o KEY=VALUE pairs; a run gives up on a slow Prometheus after
    # ingest_deadline (default 15m), before the next fire
    options = { ingest_deadline = "10m", request_deadline = "1m" }

    [jobs.lake_maintenance]      # retention, then compaction of settled day partitions
    cron = "40 * * * *"

    [lake]                       # optional: compaction knobs (these are the defaults)
    compact_min_files = 8        # compact a day partition with this many small files
    target_file_mb = 256         # smaller files are small; rewritten files close at it
    settle = "1h"                # a day is compacted once it ended this long ago
    keep_removed = "15m"         # replaced files stay on disk this long for readers

    [lake.retention]             # optional: drop day partitions older than this
    telemetry = "90d"            # tables not listed are kept whole

    [[policy.budgets]]           # optional: the plan step's budgets and policy knobs
    scope = "rack"
    max_nodes = 1
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from predops.pipelines.workspace.config import (
    ConfigError,
    ConfigTable,
    check_sections,
    merge_env,
    read_toml,
)
from predops.pipelines.workspace.lake_maintenance import LakeSettings, parse_lake_settings
from predops.pipelines.workspace.policy_config import PolicySettings, parse_policy

SERVER_ENV_PREFIX = "PREDOPS_SERVER__"
"""The server's overrides (``serving.config``): not the scheduler's to read."""
JOB_NAMES = ("pipeline", "retrain", "lake_maintenance")
"""The scheduled jobs: the frequent chain, the slower retrain + promote, and the lake's
retention + compaction (``[lake]``)."""
DEFAULT_CRON = {
    "pipeline": "*/15 * * * *",
    "retrain": "30 2 * * *",
    "lake_maintenance": "40 * * * *",
}
ENGINES = ("local", "dask")
DEMAND_CONFIGS = ("both", "hourly", "weekly")


@dataclass(frozen=True, slots=True)
class JobConfig:
    """One scheduled job: a cron expression (5 fields, or 6 with leading seconds)."""

    name: str
    cron: str
    enabled: bool = True


@dataclass(frozen=True, slots=True)
class IngestConfig:
    """What the pipeline re-reads each run through an ingest adapter.

    ``lookback`` (range adapters such as Prometheus) makes the window ``now - lookback``
    .. ``now``; ``step`` is the range step. ``options`` are the adapter's KEY=VALUE pairs.
    """

    source: str
    path: str
    table: str | None = None
    source_name: str | None = None
    lookback: timedelta | None = None
    step: timedelta | None = None
    options: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class FeaturesConfig:
    """How features are built: engine, Dask scheduler, training window and cadence, and
    whether the pipeline job runs incrementally (``incremental``, default true: online
    node rows recomputed only when their inputs changed, scores and forecasts computed
    once per run; false recomputes everything each run, the same results)."""

    engine: str = "local"
    dask_scheduler: str | None = None
    training_window: timedelta = timedelta(days=14)
    every: timedelta = timedelta(hours=1)
    incremental: bool = True


LABEL_MODES = ("auto", "labeller", "off")


@dataclass(frozen=True, slots=True)
class RetrainConfig:
    """Which demand configurations to train, and the backtest that goes with them."""

    demand_config: str = "both"
    """``both``: the hourly model (pool sizing) and the weekly one (procurement), each
    registered under its own name; ``hourly`` / ``weekly``: only that one."""
    backtest_cutoffs: int = 3
    seed: int = 0
    labels: str = "auto"
    """``auto``: label the lake's raw signals unless it holds the simulator's own failure
    events; ``labeller``: always; ``off``: never (tickets and other failure events only)."""
    usage: bool = True
    """Train and promote the per-node usage model (``predops.usage``) too."""
    usage_window: timedelta = timedelta(hours=2)
    """The usage model's forecast window (longer than ``[policy.reclaim] hold``)."""
    usage_estimators: int = 200
    """Trees per quantile level of the usage model (the demo trains with fewer)."""


@dataclass(frozen=True, slots=True)
class ScheduleConfig:
    """Everything ``predops schedule`` needs, validated."""

    jobs: Mapping[str, JobConfig]
    timezone: str = "UTC"
    misfire_grace_time: timedelta = timedelta(minutes=10)
    max_workers: int = 1
    ingests: tuple[IngestConfig, ...] = ()
    """What the pipeline re-reads each run, in order (``[ingest]`` or ``[[ingest]]``)."""
    features: FeaturesConfig = FeaturesConfig()
    retrain: RetrainConfig = RetrainConfig()
    policy: PolicySettings = field(default_factory=PolicySettings)
    """The ``plan`` step's budgets and policy knobs (``[policy]``)."""
    lake: LakeSettings = field(default_factory=LakeSettings)
    """The ``lake_maintenance`` job's compaction knobs and retention (``[lake]``)."""
    origin: str = "defaults"

    @property
    def ingest(self) -> IngestConfig | None:
        """The first ingest source (None when there is none)."""
        return self.ingests[0] if self.ingests else None

    """Where it came from (the file, plus which environment keys), for reports."""


# ---------------------------------------------------------------- reading
def load_config(path: Path | None, env: Mapping[str, str]) -> ScheduleConfig:
    """Read ``path`` (or only defaults when None), apply ``env`` overrides, validate."""
    where, raw = read_toml(path)
    ours = {k: v for k, v in env.items() if not k.startswith(SERVER_ENV_PREFIX)}
    applied = merge_env(raw, ours, where)
    cfg = parse_config(raw, where, env_keys=applied)
    origin = where + (f" + environment ({', '.join(applied)})" if applied else "")
    return replace(cfg, origin=origin)


# ---------------------------------------------------------------- validation
def check_cron(expr: str, timezone: str) -> Any:
    """The APScheduler trigger for ``expr``: 5 crontab fields, or 6 with seconds first."""
    from apscheduler.triggers.cron import CronTrigger

    fields = expr.split()
    if len(fields) == 5:
        return CronTrigger.from_crontab(expr, timezone=timezone)
    if len(fields) == 6:
        second, minute, hour, day, month, dow = fields
        return CronTrigger(
            second=second,
            minute=minute,
            hour=hour,
            day=day,
            month=month,
            day_of_week=dow,
            timezone=timezone,
        )
    raise ValueError(f"{expr!r} has {len(fields)} fields; expected 5 (or 6 with seconds first)")


def _ingest_table(t: ConfigTable) -> IngestConfig:
    from predops.pipelines.ingest.registry import ADAPTERS

    source = t.required_text("source")
    if source not in ADAPTERS:
        raise t.fail("source", f"{source!r} is not an adapter ({', '.join(sorted(ADAPTERS))})")
    opts = t.get("options") or {}
    if not isinstance(opts, dict) or not all(isinstance(v, str) for v in opts.values()):
        raise t.fail("options", "must be a table of string values")
    out = IngestConfig(
        source=source,
        path=t.required_text("path"),
        table=t.text("table"),
        source_name=t.text("source_name"),
        lookback=t.duration("lookback", None),
        step=t.duration("step", None),
        options=dict(opts),
    )
    t.done()
    return out


def parse_config(
    raw: Mapping[str, Any], where: str, *, env_keys: Sequence[str] = ()
) -> ScheduleConfig:
    """Validate a parsed TOML document (see the module docstring for its shape);
    ``env_keys`` are the environment overrides already merged into it (for the policy's
    origin)."""
    check_sections(raw, where)
    sched = ConfigTable(raw.get("scheduler", {}), where, "scheduler")
    timezone = sched.text("timezone", "UTC")
    assert timezone is not None
    try:
        import zoneinfo

        zoneinfo.ZoneInfo(timezone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise sched.fail("timezone", f"{timezone!r} is not a known time zone") from None
    grace = sched.duration("misfire_grace_time", timedelta(minutes=10))
    assert grace is not None
    workers = sched.integer("max_workers", 1, 1)
    sched.done()

    jobs_raw = raw.get("jobs", {})
    if not isinstance(jobs_raw, dict):
        raise ConfigError(f"{where}: [jobs] must be a table of [jobs.<name>] tables")
    extra = sorted(set(jobs_raw) - set(JOB_NAMES))
    if extra:
        raise ConfigError(f"{where}: unknown job [jobs.{extra[0]}] (known: {', '.join(JOB_NAMES)})")
    jobs = {}
    for name in JOB_NAMES:
        t = ConfigTable(jobs_raw.get(name, {}), where, f"jobs.{name}")
        cron = t.text("cron", DEFAULT_CRON[name])
        assert cron is not None
        try:
            check_cron(cron, timezone)
        except ValueError as exc:
            raise t.fail("cron", str(exc)) from None
        jobs[name] = JobConfig(name=name, cron=cron, enabled=t.boolean("enabled", True))
        t.done()

    raw_ingest = raw.get("ingest")
    if raw_ingest is None:
        tables: list[tuple[Any, str]] = []
    elif isinstance(raw_ingest, list):  # [[ingest]]: several sources, read in order
        tables = [(item, f"ingest[{i}]") for i, item in enumerate(raw_ingest)]
    else:
        tables = [(raw_ingest, "ingest")]
    ingests = tuple(_ingest_table(ConfigTable(item, where, name)) for item, name in tables)
    names = [i.source_name or i.source for i in ingests]
    if len(set(names)) < len(names):
        raise ConfigError(
            f"{where}: [[ingest]]: two sources write under the same lake source name; "
            "give each a distinct source_name"
        )

    t = ConfigTable(raw.get("features", {}), where, "features")
    engine = t.choice("engine", "local", ENGINES)
    dask = t.text("dask_scheduler")
    if engine == "dask" and dask is None:
        raise t.fail("dask_scheduler", "is required with engine = 'dask' (tcp://host:8786)")
    window = t.duration("training_window", timedelta(days=14))
    every = t.duration("every", timedelta(hours=1))
    assert window is not None and every is not None
    incremental = t.boolean("incremental", True)
    features = FeaturesConfig(engine, dask, window, every, incremental)
    t.done()

    t = ConfigTable(raw.get("retrain", {}), where, "retrain")
    retrain = RetrainConfig(
        demand_config=t.choice("demand_config", "both", DEMAND_CONFIGS),
        backtest_cutoffs=t.integer("backtest_cutoffs", 3, 0),
        seed=t.integer("seed", 0, 0),
        labels=t.choice("labels", "auto", LABEL_MODES),
        usage=t.boolean("usage", True),
        usage_window=_usage_window(t),
        usage_estimators=t.integer("usage_estimators", 200, 1),
    )
    t.done()
    return ScheduleConfig(
        policy=parse_policy(raw, where, env_keys=env_keys),
        lake=parse_lake_settings(raw, where),
        jobs=jobs,
        timezone=timezone,
        misfire_grace_time=grace,
        max_workers=workers,
        ingests=ingests,
        features=features,
        retrain=retrain,
    )


def _usage_window(t: ConfigTable) -> timedelta:
    w = t.duration("usage_window", timedelta(hours=2))
    assert w is not None
    if not timedelta(0) < w <= timedelta(days=1):
        raise t.fail("usage_window", f"must be in (0, 1d], got {w}")
    return w


def demand_configs(retrain: RetrainConfig) -> tuple[str, ...]:
    """The demand configurations ``retrain`` trains, in order (hourly first)."""
    if retrain.demand_config == "both":
        return ("hourly", "weekly")
    return (retrain.demand_config,)
