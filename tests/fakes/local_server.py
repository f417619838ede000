"""The local HTTP server the fakes stand on: 127.0.0.1, a free port, a daemon thread per
connection, quiet about clients that hang up (what the fault tests provoke)."""

from __future__ import annotations

import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that timed out or gave up closes its end; anything else is a bug here.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def start(handler: type[BaseHTTPRequestHandler]) -> QuietServer:
    """Serve ``handler`` on 127.0.0.1 at a free port, in a background thread."""
    server = QuietServer(("127.0.0.1", 0), handler)
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
    ).start()
    return server


def base_url(server: ThreadingHTTPServer | None) -> str:
    assert server is not None, "the server is not started"
    host, port = server.server_address[:2]
    return f"http://{host!s}:{port}"


def stop(server: ThreadingHTTPServer | None) -> None:
    assert server is not None, "the server is not started"
    server.shutdown()  # returns at once when already down
    server.server_close()
