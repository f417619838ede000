"""A throwaway PostgreSQL cluster and an MLflow tracking server on it, for the registry's
integration test: both on 127.0.0.1, on free ports, in a temp dir, each stopped by its
own process id (group) and every wait bounded.

PostgreSQL refuses to run as root. When the tests run as root (CI does), ``initdb`` and
``postgres`` run as the ``postgres`` system user that Debian's package creates (``nobody``
if there is none), through ``subprocess``' own ``user=`` / ``group=`` switch (no
``su``/``runuser``, so no PAM or login shell is involved); the cluster's folder is made
under the system temp dir, which that user can reach, and handed to it.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import requests

READY_S = 30.0
"""How long PostgreSQL may take to accept connections (s)."""
MLFLOW_READY_S = 90.0
"""How long the MLflow server may take to answer /health (s); its first start creates
the tables (about 10 s here) and importing MLflow's server costs about 10 s more."""
STOP_S = 20.0


def postgres_bindir() -> Path | None:
    """The folder with ``initdb`` and ``postgres``: Debian's newest
    ``/usr/lib/postgresql/<major>/bin``, else wherever ``initdb`` is on PATH."""
    found = sorted(
        (Path(p).parent for p in glob.glob("/usr/lib/postgresql/*/bin/initdb")),
        key=lambda d: int(d.parent.name) if d.parent.name.isdigit() else 0,
    )
    if found:
        return found[-1]
    on_path = shutil.which("initdb")
    return Path(on_path).parent if on_path else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run_as() -> dict[str, Any]:
    """``Popen`` keywords that drop root to an unprivileged user (nothing when not root)."""
    if os.geteuid() != 0:
        return {}
    try:
        who = pwd.getpwnam("postgres")
    except KeyError:
        who = pwd.getpwnam("nobody")
    return {"user": who.pw_uid, "group": who.pw_gid, "extra_groups": []}


def _stop(proc: subprocess.Popen[bytes], sig: int, *, group: bool) -> None:
    """Signal ``proc`` (or its process group), wait, then kill what is left."""
    if proc.poll() is None:
        (os.killpg if group else os.kill)(proc.pid, sig)
        try:
            proc.wait(timeout=STOP_S)
        except subprocess.TimeoutExpired:
            (os.killpg if group else os.kill)(proc.pid, signal.SIGKILL)
            proc.wait(timeout=STOP_S)
    if group:  # children that outlived the leader (e.g. server workers)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


class ThrowawayPostgres:
    """``initdb`` + ``postgres`` in a temp dir; ``url`` is the ``mlflow`` database.

    Durability is switched off (``fsync``, ``synchronous_commit``): the cluster lives for
    one test. Stopped with SIGINT (PostgreSQL's fast shutdown: it does not wait for
    clients to hang up)."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.run_as = _run_as()
        self.root = Path(tempfile.mkdtemp(prefix="predops-pg-"))
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = self.root / "postgres.log"

    @property
    def url(self) -> str:
        """SQLAlchemy URL with the psycopg (3) driver named, whichever SQLAlchemy is the
        default for a bare ``postgresql://``."""
        return f"postgresql+psycopg://mlflow@127.0.0.1:{self.port}/mlflow"

    def __enter__(self) -> ThrowawayPostgres:
        if self.run_as:
            os.chown(self.root, self.run_as["user"], self.run_as["group"])
        data, sock = self.root / "data", self.root / "sock"
        subprocess.run(
            [
                *(str(self.bindir / "initdb"), "-D", str(data), "-U", "mlflow"),
                *("--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions"),
            ],
            check=True,
            capture_output=True,
            timeout=60,
            **self.run_as,
        )
        sock.mkdir(mode=0o700)
        if self.run_as:
            os.chown(sock, self.run_as["user"], self.run_as["group"])
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [
                    *(str(self.bindir / "postgres"), "-D", str(data), "-p", str(self.port)),
                    *("-k", str(sock), "-h", "127.0.0.1"),
                    *("-c", "fsync=off", "-c", "synchronous_commit=off"),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                **self.run_as,
            )
        self._wait_and_create_database()
        return self

    def _wait_and_create_database(self) -> None:
        import psycopg

        assert self.proc is not None
        deadline = time.monotonic() + READY_S
        admin = f"postgresql://mlflow@127.0.0.1:{self.port}/postgres"
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"postgres exited: {self.log.read_text()[-2000:]}")
            try:
                with psycopg.connect(admin, connect_timeout=2, autocommit=True) as con:
                    con.execute("CREATE DATABASE mlflow")
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"postgres not ready after {READY_S:g} s: {self.log.read_text()[-2000:]}"
                    ) from None
                time.sleep(0.1)

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.proc is not None:
            _stop(self.proc, signal.SIGINT, group=False)
        shutil.rmtree(self.root, ignore_errors=True)


class MlflowServer:
    """``mlflow server`` on ``backend`` with artifacts under ``artifacts``, on 127.0.0.1.

    One worker, no job runner (MLflow 3 otherwise starts seven ``huey`` consumers for
    its own jobs: minutes of CPU on a 2-core machine). Runs in its own process group,
    which :meth:`stop` signals, so no worker outlives it. :meth:`start` again after
    :meth:`stop` restarts it on the same port."""

    def __init__(self, backend: str, artifacts: Path, log: Path) -> None:
        self.backend, self.artifacts, self.log = backend, artifacts, log
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
        env.pop("MLFLOW_TRACKING_URI", None)
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [
                    *(sys.executable, "-m", "mlflow", "server"),
                    *("--backend-store-uri", self.backend),
                    *("--artifacts-destination", str(self.artifacts)),
                    *("--host", "127.0.0.1", "--port", str(self.port), "--workers", "1"),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        deadline = time.monotonic() + MLFLOW_READY_S
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mlflow server exited: {self.log.read_text()[-3000:]}")
            try:
                if requests.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(
                    f"mlflow server not healthy after {MLFLOW_READY_S:g} s: "
                    f"{self.log.read_text()[-3000:]}"
                )
            time.sleep(0.2)

    def stop(self) -> None:
        if self.proc is not None:
            _stop(self.proc, signal.SIGTERM, group=True)
            self.proc = None
