"""Configuration: one TOML file + PREDOPS_SECTION__KEY overrides, errors name the key."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from predops.pipelines.scheduler.config import demand_configs, load_config
from predops.pipelines.workspace.config import ConfigError


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "predops.toml"
    p.write_text(text)
    return p


def test_full_file_is_typed(tmp_path: Path) -> None:
    cfg = load_config(
        write(
            tmp_path,
            """
[scheduler]
misfire_grace_time = "90s"
max_workers = 2
[jobs.pipeline]
cron = "*/5 * * * *"
[jobs.retrain]
cron = "0 3 * * 0"
enabled = false
[ingest]
source = "prometheus"
path = "http://prometheus:9090"
lookback = "30m"
step = "1m"
options = { job = "node" }
[features]
engine = "dask"
dask_scheduler = "tcp://dask:8786"
training_window = "7d"
incremental = false
[retrain]
demand_config = "weekly"
backtest_cutoffs = 0
""",
        ),
        {},
    )
    assert cfg.misfire_grace_time == timedelta(seconds=90)
    assert cfg.max_workers == 2
    assert cfg.jobs["pipeline"].cron == "*/5 * * * *"
    assert cfg.jobs["retrain"].enabled is False
    assert cfg.ingest is not None and cfg.ingest.lookback == timedelta(minutes=30)
    assert cfg.ingest.options == {"job": "node"}
    assert cfg.features.engine == "dask" and cfg.features.training_window == timedelta(days=7)
    assert cfg.features.incremental is False and load_config(None, {}).features.incremental
    assert cfg.retrain.demand_config == "weekly" and cfg.retrain.backtest_cutoffs == 0
    assert demand_configs(cfg.retrain) == ("weekly",)


def test_no_file_means_defaults() -> None:
    cfg = load_config(None, {})
    assert set(cfg.jobs) == {"pipeline", "retrain", "lake_maintenance"}
    assert cfg.ingest is None
    assert cfg.origin == "configuration"
    # Both demand models by default: hourly (pool sizing) and weekly (procurement).
    assert demand_configs(cfg.retrain) == ("hourly", "weekly")


def test_environment_overrides_are_typed_and_reported(tmp_path: Path) -> None:
    env = {
        "PREDOPS_JOBS__PIPELINE__CRON": "0 * * * *",
        "PREDOPS_SCHEDULER__MAX_WORKERS": "3",
        "PREDOPS_JOBS__RETRAIN__ENABLED": "false",
        "PREDOPS_WORKSPACE": "/ignored/not/a/config/key",
        "PREDOPS_SERVER__PROTECT_READS": "true",  # the server's, in a shared environment
    }
    cfg = load_config(write(tmp_path, '[jobs.pipeline]\ncron = "*/5 * * * *"\n'), env)
    assert cfg.jobs["pipeline"].cron == "0 * * * *"
    assert cfg.max_workers == 3
    assert cfg.jobs["retrain"].enabled is False
    assert "PREDOPS_JOBS__PIPELINE__CRON" in cfg.origin


@pytest.mark.parametrize(
    ("text", "env", "names"),
    [
        ("[scheduler]\nmisfire_grace = '1m'\n", {}, ["[scheduler]", "misfire_grace", "unknown"]),
        ("[schedular]\n", {}, ["[schedular]", "unknown section"]),
        ("[jobs.nightly]\ncron = '0 0 * * *'\n", {}, ["[jobs.nightly]", "unknown job"]),
        ("[jobs.pipeline]\ncron = '*/5 * *'\n", {}, ["[jobs.pipeline]", "cron", "3 fields"]),
        ("[jobs.pipeline]\ncron = '99 * * * *'\n", {}, ["[jobs.pipeline]", "cron"]),
        ("[scheduler]\nmisfire_grace_time = 'soon'\n", {}, ["misfire_grace_time", "soon"]),
        ("[scheduler]\nmisfire_grace_time = 60\n", {}, ["misfire_grace_time", "duration"]),
        ("[scheduler]\ntimezone = 'Mars/Olympus'\n", {}, ["timezone", "Mars/Olympus"]),
        ("[scheduler]\nmax_workers = 0\n", {}, ["max_workers", ">= 1"]),
        ("[ingest]\nsource = 'files'\n", {}, ["[ingest]", "path", "required"]),
        ("[ingest]\nsource = 'ftp'\npath = 'x'\n", {}, ["[ingest]", "source", "'ftp'"]),
        ("[features]\nengine = 'dask'\n", {}, ["[features]", "dask_scheduler", "required"]),
        ("[features]\nengine = 'spark'\n", {}, ["[features]", "engine", "spark"]),
        ("[features]\nincremental = 'yes'\n", {}, ["[features]", "incremental"]),
        ("[retrain]\nbacktest_cutoffs = 'x'\n", {}, ["[retrain]", "backtest_cutoffs"]),
        ("[jobs.pipeline\n", {}, ["not valid TOML"]),
        ("", {"PREDOPS_JOBS__PIPELINE__CORN": "x"}, ["[jobs.pipeline]", "corn", "unknown"]),
        ("", {"PREDOPS_SCHEDULER__MAX_WORKERS": "many"}, ["max_workers", "'many'"]),
    ],
)
def test_errors_name_the_file_and_key(
    tmp_path: Path, text: str, env: dict[str, str], names: list[str]
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_config(path, env)
    msg = str(err.value)
    assert str(path) in msg or "environment" in msg
    for name in names:
        assert name in msg, msg


def test_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such configuration file"):
        load_config(tmp_path / "absent.toml", {})


def test_several_ingest_sources_in_order_with_distinct_names(tmp_path: Path) -> None:
    two = """
[[ingest]]
source = "kubernetes"
path = "in-cluster"
[[ingest]]
source = "prometheus"
path = "http://prometheus:9090"
lookback = "30m"
"""
    path = tmp_path / "two.toml"
    path.write_text(two)
    cfg = load_config(path, {})
    assert [i.source for i in cfg.ingests] == ["kubernetes", "prometheus"]
    assert cfg.ingest is cfg.ingests[0]
    path.write_text(two.replace('"prometheus"\npath', '"kubernetes"\npath'))
    with pytest.raises(ConfigError, match="distinct source_name"):
        load_config(path, {})
    path.write_text(two.replace('path = "in-cluster"\n', ""))
    with pytest.raises(ConfigError, match=r"ingest\[0\]"):
        load_config(path, {})
