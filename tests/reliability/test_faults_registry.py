"""Injected faults in the MLflow store: locked by another process, unreachable, failing
half-way through a registration. ``predops train`` and ``predops models`` fail cleanly —
one message naming the store (password redacted), no traceback, nothing half-registered —
and work again once the store is back. (Serving keeping its last good model is tested
with the server.)"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from predops.pipelines.cli.main import main
from predops.pipelines.workspace import registry

REPO = Path(__file__).resolve().parents[2]


def invoke(ws: Path, *args: str) -> Result:
    return CliRunner().invoke(main, ["--workspace", str(ws), *args, "--json"])


def ok(ws: Path, *args: str) -> dict[str, Any]:
    res = invoke(ws, *args)
    assert res.exit_code == 0, res.output
    out: dict[str, Any] = json.loads(res.stdout)
    return out


def clean_failure(res: Result) -> str:
    """The one error message of a failed command (and proof that nothing else came out)."""
    assert res.exit_code == 1, res.output
    assert "Traceback" not in res.output
    assert not isinstance(res.exception, AssertionError)
    body = json.loads(res.stdout.splitlines()[0])
    assert body["type"] == "RegistryUnavailable"
    msg: str = body["error"]
    assert f"Error: {msg}" in res.output
    return msg


@pytest.fixture(scope="module")
def store_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An MLflow SQLite store with its tables (MLflow's migrations take ~15 s: once)."""
    db = tmp_path_factory.mktemp("mlflow") / "mlflow.db"
    registry.list_models(uri=f"sqlite:///{db}")
    return db


@pytest.fixture(scope="module")
def lake_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ws = tmp_path_factory.mktemp("ws")
    ok(ws, "simulate", "--nodes", "20", "--days", "4", "--interval", "1h")
    return ws


@pytest.fixture
def workspace(
    tmp_path: Path, store_template: Path, lake_template: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setattr(registry, "STORE_WAIT_S", 0.3)
    ws = tmp_path / "ws"
    shutil.copytree(lake_template, ws)
    shutil.copy(store_template, ws / "mlflow.db")
    return ws


def uri_of(ws: Path) -> str:
    return f"sqlite:///{ws / 'mlflow.db'}"


@pytest.fixture
def locked(workspace: Path) -> Iterator[sqlite3.Connection]:
    """Another connection holding an exclusive lock on the workspace's store."""
    con = sqlite3.connect(workspace / "mlflow.db", isolation_level=None)
    con.execute("BEGIN EXCLUSIVE")
    try:
        yield con
    finally:
        con.close()


def test_locked_store_fails_train_and_promote_cleanly_then_recovers(
    workspace: Path, locked: sqlite3.Connection
) -> None:
    store = uri_of(workspace)
    for args in (("train", "demand", "--backtest-cutoffs", "0"), ("models", "promote", "demand")):
        msg = clean_failure(invoke(workspace, *args))
        assert msg.startswith(f"MLflow store {store} is unavailable")
        assert "locked by another process" in msg
    locked.rollback()  # the other process lets go
    assert registry.list_models(uri=store) == []  # nothing was registered, even in part
    first = ok(workspace, "train", "demand", "--backtest-cutoffs", "0")
    assert first["version"] == "1"
    (model,) = registry.list_models(uri=store)
    assert [v["version"] for v in model["versions"]] == ["1"]


def test_locked_store_in_a_subprocess_prints_no_traceback(workspace: Path) -> None:
    """The real command line, and the lock held by another process."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sqlite3, sys; c = sqlite3.connect(sys.argv[1], isolation_level=None); "
            "c.execute('BEGIN EXCLUSIVE'); print('locked', flush=True); sys.stdin.read()",
            str(workspace / "mlflow.db"),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        env = dict(os.environ)
        env.pop("MLFLOW_TRACKING_URI", None)
        command = ["-m", "predops", "--workspace", str(workspace), "models", "list"]
        proc = subprocess.run(
            [sys.executable, *command],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=REPO,
            env=env,
        )
    finally:
        holder.communicate("")
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr + proc.stdout
    assert proc.stderr.strip() == (
        f"Error: MLflow store {uri_of(workspace)} is unavailable: the database is locked by "
        "another process or connection (waited 5 s); try again when it lets go"
    )


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unreachable_store_fails_fast_and_never_shows_the_password(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = closed_port()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://bob:hunter2@127.0.0.1:{port}")
    for args in (
        ("train", "demand", "--backtest-cutoffs", "0"),
        ("train", "failure"),
        ("models", "list"),
        ("models", "rollback", "demand"),
    ):
        res = invoke(workspace, *args)
        msg = clean_failure(res)
        assert msg.startswith(f"MLflow store http://***@127.0.0.1:{port} is unavailable")
        assert "cannot connect (ConnectionRefusedError" in msg
        assert "hunter2" not in res.output


class AliasesFail:
    """An MLflow client whose alias writes fail as a locked SQLite store fails them."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def set_registered_model_alias(self, *args: Any) -> None:
        raise sqlite3.OperationalError("database is locked")


def test_store_failing_half_way_through_registration_leaves_no_version(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store fails after MLflow created the version, before its aliases."""
    real = registry._mlflow

    @contextmanager
    def failing(uri: str | None) -> Iterator[Any]:
        with real(uri) as client:
            yield AliasesFail(client)

    store = uri_of(workspace)
    monkeypatch.setattr(registry, "_mlflow", failing)
    msg = clean_failure(invoke(workspace, "train", "demand", "--backtest-cutoffs", "0"))
    assert msg.startswith(f"MLflow store {store} failed: the database is locked")
    assert "predops.demand.hourly version 1 was registered half-way and deleted again" in msg
    monkeypatch.undo()
    assert registry.list_models(uri=store) == []  # (recovery: the locked-store test)
