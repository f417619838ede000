"""Is the MLflow store there? Quick probes before
:mod:`predops.pipelines.workspace.registry` hands a store to MLflow, and store URIs made
safe to print.

MLflow waits a long time on a store that cannot answer: 20 s per statement on a SQLite
file another process holds locked, and minutes of retries (7, doubling) on a tracking
server that does not answer. A training job that only finds out when it registers has
spent its fitting time for nothing, so the registry probes first:

- ``sqlite:///path``: a read-only connection that waits at most ``wait_s`` seconds for
  a shared lock (an exclusive lock held elsewhere -> "locked"); a missing file is fine
  (MLflow creates it);
- ``http(s)://``: ``GET <uri>/health`` with a ``wait_s`` timeout; no answer or a 5xx
  -> unreachable (any other answer means something listens there);
- other schemes (``postgresql://``, ``mysql://``, ``file:``...) are not probed; their
  errors are reported when MLflow meets them.

No MLflow import here (only :mod:`predops.pipelines.workspace.registry` talks to MLflow).
"""

from __future__ import annotations

import logging
import sqlite3
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from urllib.parse import quote

import requests


def store_problem(uri: str, wait_s: float) -> str | None:
    """Why the store at ``uri`` cannot be used now, or None when it looks usable."""
    if uri.startswith("sqlite:///"):
        return _sqlite_problem(Path(uri.removeprefix("sqlite:///")), wait_s)
    if uri.startswith(("http://", "https://")):
        return _http_problem(uri.rstrip("/"), wait_s)
    return None


def _sqlite_problem(db: Path, wait_s: float) -> str | None:
    if not db.exists():
        return None
    try:
        con = sqlite3.connect(f"file:{quote(str(db))}?mode=ro", uri=True, timeout=wait_s)
        try:
            con.execute("SELECT count(*) FROM sqlite_master").fetchone()
        finally:
            con.close()
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            return (
                f"the database is locked by another process or connection "
                f"(waited {wait_s:g} s); try again when it lets go"
            )
        return f"the database cannot be read ({exc})"
    except sqlite3.DatabaseError as exc:
        return f"the file is not an SQLite database ({exc})"
    return None


def _http_problem(base: str, wait_s: float) -> str | None:
    try:
        r = requests.get(f"{base}/health", timeout=wait_s)
    except requests.Timeout:
        return f"no answer within {wait_s:g} s"
    except requests.RequestException as exc:
        cause = exc.__context__ or exc
        while cause.__context__ is not None and cause.__context__ is not cause:
            cause = cause.__context__
        return f"cannot connect ({type(cause).__name__}: {cause})"
    if r.status_code >= 500:
        return f"the tracking server answers HTTP {r.status_code}"
    return None


class _DropDbErrorDumps(logging.Filter):
    """MLflow logs every SQLAlchemy error with its SQL and traceback before raising it;
    the registry reports the error itself, in one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("SQLAlchemy database error")


class _DropExtraInputNotes(logging.Filter):
    """MLflow warns at every ``predict`` whose frame has columns the model's signature does
    not name. predops frames always carry more (ids, times, labels) than a model reads,
    and the signature names what it reads on purpose: the note is no news."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Found extra inputs in the model input")


class _DropPickleNotes(logging.Filter):
    """MLflow warns at every registration that a Python object is pickled; predops
    models are pickled objects by design (loaded only from the workspace's own store)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Passing a Python object as `python_model`")


@cache
def quiet_mlflow_logs() -> None:
    """Install the filters above on MLflow's loggers (once per process)."""
    db = logging.getLogger("mlflow.store.db.utils")
    db.addFilter(_DropDbErrorDumps())
    # "Creating initial MLflow database tables..." at a new workspace's first command: no
    # news to whoever runs it (its warnings and errors still show).
    db.setLevel(logging.WARNING)
    logging.getLogger("mlflow.models.utils").addFilter(_DropExtraInputNotes())
    logging.getLogger("mlflow.pyfunc").addFilter(_DropPickleNotes())
    ignore_signature_notes()


TYPE_HINT_NOTE = "Add type hints to the `predict` method"


@contextmanager
def without_type_hint_note() -> Iterator[None]:
    """Drop MLflow's type-hint note raised inside the block; re-raise any other warning.

    MLflow raises that note when a ``PythonModel`` subclass is created, inside its own
    ``catch_warnings`` with a "once" filter put first, so no filter of ours reaches it
    (:func:`ignore_signature_notes` does not). Recording the block's warnings does:
    MLflow's inner ``catch_warnings`` keeps our recorder."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for w in caught:
        if TYPE_HINT_NOTE not in str(w.message):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)


def ignore_signature_notes() -> None:
    """Warning filters for MLflow's notes on the signatures it infers from our examples."""
    # Raised when the wrapper class is built or loaded: its predict is typed by the
    # signature, not by Python type hints (for the process: every load and log).
    warnings.filterwarnings(
        "ignore", message=".*Add type hints to the `predict` method", category=UserWarning
    )
    # Raised when a signature is inferred from an example with integer columns: the
    # signature is only the model's record of its inputs; scoring never enforces it.
    warnings.filterwarnings(
        "ignore", message="Hint: Inferred schema contains integer column", category=UserWarning
    )
