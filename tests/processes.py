"""Child processes of the tests: a free local port to give them, and a bounded stop."""

from __future__ import annotations

import signal
import socket
import subprocess


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
