"""Child processes of the tests: a free local port to give them, a bounded stop, and the
stderr of a fresh Python process (which library warnings reach a user)."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stop(proc: subprocess.Popen[bytes], timeout_s: float = 30) -> None:
    """SIGTERM, then SIGKILL after ``timeout_s``; returns once ``proc`` is gone."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def fresh_stderr(code: str, timeout_s: float = 300) -> str:
    """What a fresh Python process running ``code`` writes to stderr, every warning
    shown once (``default``), after it warns ``kept`` itself: a test of which library
    warnings reach a user asserts on this and that ``UserWarning: kept`` is there."""
    prelude = "import warnings; warnings.simplefilter('default')\n"
    done = subprocess.run(
        [sys.executable, "-c", prelude + code + "\nwarnings.warn('kept', UserWarning)\n"],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=True,
    )
    return done.stderr
