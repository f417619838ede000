"""An HTTP server on 127.0.0.1 that misbehaves on purpose: trickles its answer a byte at a
time, sends more bytes than any client should hold, accepts and never answers, answers
malformed JSON, or redirects elsewhere. Every request gets the same ``behaviour``.

``tests.fakes.prometheus_api`` answers like Prometheus; this one answers like a broken
proxy or a hostile server, to test the limits the Prometheus adapter sets itself.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.fakes.local_server import base_url, start, stop

Behaviour = Callable[[BaseHTTPRequestHandler, threading.Event], None]
"""Writes the whole answer to one request; returns early once the event is set."""


def _head(h: BaseHTTPRequestHandler, code: int, headers: dict[str, str]) -> None:
    h.send_response(code)
    for k, v in headers.items():
        h.send_header(k, v)
    h.end_headers()
    h.wfile.flush()


def answer(body: Any, code: int = 200) -> Behaviour:
    """``body`` as JSON (bytes and str as they are), with its length."""
    raw = body if isinstance(body, bytes) else str(body).encode()
    if not isinstance(body, bytes | str):
        raw = json.dumps(body).encode()

    def behave(h: BaseHTTPRequestHandler, stop: threading.Event) -> None:
        _head(h, code, {"Content-Type": "application/json", "Content-Length": str(len(raw))})
        h.wfile.write(raw)

    return behave


def success(result: Any, result_type: str = "matrix") -> Behaviour:
    """A Prometheus success envelope around ``result``."""
    return answer({"status": "success", "data": {"resultType": result_type, "result": result}})


def trickle(interval_s: float = 1.0, length: int = 10_000) -> Behaviour:
    """Headers at once (``Content-Length: length``), then one byte per ``interval_s``."""

    def behave(h: BaseHTTPRequestHandler, stop: threading.Event) -> None:
        _head(h, 200, {"Content-Type": "application/json", "Content-Length": str(length)})
        body = b'{"status":"success","data":{"resultType":"matrix","result":[' + b" " * length
        for i in range(length):
            if stop.wait(interval_s):
                return
            h.wfile.write(body[i : i + 1])
            h.wfile.flush()

    return behave


def huge(size: int, *, declare_length: bool) -> Behaviour:
    """A valid success answer of ``size`` bytes (whitespace padding), written in 64 KiB
    pieces so the server never holds it; without a declared length the body ends when
    the connection closes."""

    def behave(h: BaseHTTPRequestHandler, stop: threading.Event) -> None:
        head = b'{"status":"success","data":{"resultType":"matrix","result":['
        tail = b"]}}"
        headers = {"Content-Type": "application/json"}
        if declare_length:
            headers["Content-Length"] = str(size)
        else:
            h.close_connection = True
            headers["Connection"] = "close"
        _head(h, 200, headers)
        h.wfile.write(head)
        left = size - len(head) - len(tail)
        piece = b" " * 65536
        while left > 0 and not stop.is_set():
            n = min(left, len(piece))
            h.wfile.write(piece[:n])
            left -= n
        h.wfile.write(tail)

    return behave


def hang(h: BaseHTTPRequestHandler, stop: threading.Event) -> None:
    """Read the request, never answer."""
    stop.wait()


def redirect(location: str, code: int = 302) -> Behaviour:
    def behave(h: BaseHTTPRequestHandler, stop: threading.Event) -> None:
        _head(h, code, {"Location": location, "Content-Length": "0"})

    return behave


@dataclass
class MisbehavingServer:
    """``with MisbehavingServer(trickle()) as s: ... s.url``; ``s.requests`` counts."""

    behaviour: Behaviour
    requests: int = 0
    headers: list[dict[str, str]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return base_url(self._server)

    def __enter__(self) -> MisbehavingServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                server._serve(self)

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                server._serve(self)

        self._server = start(Handler)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        stop(self._server)

    def _serve(self, h: BaseHTTPRequestHandler) -> None:
        self.requests += 1
        self.headers.append(dict(h.headers))
        self.paths.append(h.path)
        self.behaviour(h, self._stop)
