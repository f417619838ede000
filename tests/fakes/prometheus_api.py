"""A small, scriptable stand-in for the Prometheus HTTP API (``query_range``, label values
and series), to test chunking and retries where a real Prometheus cannot misbehave on cue.

It serves one series per node for any range query: the nodes whose node-label value
matches the query's ``<label>=~"<regex>"`` matcher (anchored, as Prometheus anchors
regexes), evaluated at ``start, start+step, ... <= end`` with ``value_fn(query, node,
t)``. ``script(n, path)`` picks what the n-th request (0-based) gets:

``ok`` | ``500`` (plain text) | ``503`` (Prometheus JSON error) | ``429`` | ``400``
(``bad_data``) | ``timeout`` (answers after ``slow_s``) | ``drop`` (closes the connection
without answering) | ``garbage`` (200 with a truncated JSON body) | ``down`` (drops the
connection and stops listening: every later request is refused).

The real Prometheus is tested in ``test_prometheus_integration.py``; this one only
checks what the adapter asks and how it copes with failures.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.fakes.local_server import base_url, start, stop

Script = Callable[[int, str], str]
ValueFn = Callable[[str, str, float], float]


@dataclass(frozen=True, slots=True)
class Seen:
    """One request the fake received."""

    method: str
    path: str
    params: dict[str, list[str]]
    headers: dict[str, str]
    answer: str


def always(action: str) -> Script:
    return lambda n, path: action


def first(n_bad: int, action: str) -> Script:
    """``action`` for the first ``n_bad`` requests, then ``ok``."""
    return lambda n, path: action if n < n_bad else "ok"


def at(bad: dict[int, str]) -> Script:
    """``bad[n]`` for the listed request numbers, ``ok`` otherwise."""
    return lambda n, path: bad.get(n, "ok")


def _default_value(query: str, node: str, t: float) -> float:
    return t / 300.0


@dataclass
class FakePrometheus:
    """Serve ``label_values`` (values of ``node_label`` only, ports included; any other
    label has none) and ``series`` (the series API's label sets) on 127.0.0.1."""

    label_values: list[str]
    node_label: str = "instance"
    series: list[dict[str, str]] = field(default_factory=list)
    script: Script = field(default=always("ok"))
    value_fn: ValueFn = _default_value
    slow_s: float = 1.0
    seen: list[Seen] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return base_url(self._server)

    def __enter__(self) -> FakePrometheus:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                fake._handle(self, parse_qs(urlsplit(self.path).query))

            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(n).decode()
                params = parse_qs(urlsplit(self.path).query) | parse_qs(body)
                fake._handle(self, params)

        self._server = start(Handler)
        return self

    def __exit__(self, *exc: object) -> None:
        stop(self._server)

    # ------------------------------------------------------------------ answers
    def range_requests(self) -> list[Seen]:
        return [s for s in self.seen if s.path.endswith("/query_range")]

    def _handle(self, h: BaseHTTPRequestHandler, params: dict[str, list[str]]) -> None:
        path = urlsplit(h.path).path
        with self._lock:
            n = len(self.seen)
            action = self.script(n, path)
            self.seen.append(Seen(h.command, path, params, dict(h.headers), action))
        if action == "down" and self._server is not None:
            server = self._server
            threading.Thread(target=lambda: (server.shutdown(), server.server_close())).start()
        if action in ("drop", "down"):
            h.close_connection = True
            h.connection.shutdown(socket.SHUT_RDWR)
            return
        if action == "timeout":
            time.sleep(self.slow_s)
        if action == "500":
            return self._send(h, 500, b"internal error", "text/plain")
        if action in ("503", "429", "400"):
            kind = {"503": "unavailable", "429": "too_many_requests", "400": "bad_data"}[action]
            body = {"status": "error", "errorType": kind, "error": f"scripted {action}"}
            return self._send(h, int(action), json.dumps(body).encode())
        if action == "garbage":
            return self._send(h, 200, b'{"status":"success","data":{"resultType":"mat')
        if path.startswith("/api/v1/label/") and path.endswith("/values"):
            mine = path == f"/api/v1/label/{self.node_label}/values"
            data = self.label_values if mine else []
            return self._send(h, 200, json.dumps({"status": "success", "data": data}).encode())
        if path == "/api/v1/series":
            return self._send(
                h, 200, json.dumps({"status": "success", "data": self.series}).encode()
            )
        if path == "/api/v1/query_range":
            return self._send(h, 200, json.dumps(self._range(params)).encode())
        return self._send(h, 404, b"not found", "text/plain")

    def _range(self, params: dict[str, list[str]]) -> dict[str, Any]:
        query = params["query"][0]
        start, end, step = (float(params[k][0]) for k in ("start", "end", "step"))
        m = re.search(rf'(?<![A-Za-z0-9_]){re.escape(self.node_label)}=~"((?:[^"\\]|\\.)*)"', query)
        if m is None:  # a query by another label: the fake's series carry none
            return {"status": "success", "data": {"resultType": "matrix", "result": []}}
        regex = re.compile(re.sub(r"\\(.)", r"\1", m.group(1)))
        result = []
        for value in self.label_values:
            if not regex.fullmatch(value):
                continue
            ts = []
            t = start
            while t <= end + 1e-9:
                ts.append(t)
                t += step
            result.append(
                {
                    "metric": {self.node_label: value},
                    "values": [[t, repr(self.value_fn(query, value, t))] for t in ts],
                }
            )
        return {"status": "success", "data": {"resultType": "matrix", "result": result}}

    @staticmethod
    def _send(
        h: BaseHTTPRequestHandler, code: int, body: bytes, ctype: str = "application/json"
    ) -> None:
        h.send_response(code)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)
