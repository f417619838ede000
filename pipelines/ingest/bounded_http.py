"""One HTTP exchange with hard limits: a deadline for the whole answer, a cap on its
bytes, and redirects followed only within the origin (scheme, host and port).

requests' ``timeout`` bounds the silence between two reads, so a server that sends a
byte a second keeps it waiting for ever, and ``Response.content`` holds whatever the
server sends (decompressed). Here the body is read in pieces of at most
:data:`CHUNK` bytes (decoded), each read waiting no longer than the time left, and the
exchange stops as soon as the deadline passes or the body outgrows the cap; at most the
cap plus one piece is ever held.

The status line and headers are read by ``http.client`` under the read timeout
(itself cut to the time left), so a server that never answers is bounded by the
deadline; one that trickles its *headers* is bounded only by that timeout per byte and
``http.client``'s header limits (64 KiB a line, 100 lines).

Transport failures keep requests' exception types (``ConnectionError``, ``Timeout``,
``ChunkedEncodingError``), so a caller retries them as before; a limit hit raises a
:class:`LimitExceeded`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit

import requests
import urllib3

CHUNK = 64 * 1024
"""Bytes asked for per read of the body (decoded)."""
MAX_REDIRECTS = 5
REDIRECT_CODES = frozenset({301, 302, 303, 307, 308})
_DEADLINE_SLACK_S = 0.01
"""A socket timeout that fires this close to the deadline counts as the deadline."""


class LimitExceeded(Exception):
    """A limit of this module stopped the exchange; the message says which."""


class DeadlinePassed(LimitExceeded):
    pass


class AnswerTooLarge(LimitExceeded):
    pass


class RedirectRefused(LimitExceeded):
    pass


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds of one exchange: seconds and bytes.

    ``deadline`` is a time of ``clock`` (``time.monotonic`` by default) by which the
    whole answer must be in, redirects included.
    """

    deadline: float
    max_bytes: int
    connect_timeout_s: float
    read_timeout_s: float
    clock: Callable[[], float] = time.monotonic

    def left(self) -> float:
        """Seconds to the deadline; :class:`DeadlinePassed` once there are none."""
        left = self.deadline - self.clock()
        if left <= 0:
            raise DeadlinePassed("the deadline passed")
        return left

    def passed(self) -> bool:
        return self.clock() >= self.deadline - _DEADLINE_SLACK_S


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    headers: Mapping[str, str]
    body: bytearray
    url: str
    """The URL that answered (after same-origin redirects)."""


def origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) with the scheme's default port filled in."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    port = parts.port or {"http": 80, "https": 443}.get(scheme)
    return scheme, (parts.hostname or "").lower(), port


def exchange(
    session: requests.Session,
    method: str,
    url: str,
    params: Mapping[str, Any],
    limits: Limits,
) -> Answer:
    """Send ``params`` (a form body for POST, the query for GET) to ``url`` and read the
    whole answer within ``limits``.

    A redirect within the origin is followed (at most :data:`MAX_REDIRECTS`; 301, 302
    and 303 turn the request into a GET, as browsers do); one to another origin raises
    :class:`RedirectRefused` naming the target.
    """
    for _ in range(MAX_REDIRECTS + 1):
        r = _send(session, method, url, params, limits)
        with r:
            location = r.headers.get("Location")
            if r.status_code not in REDIRECT_CODES or not location:
                return Answer(r.status_code, r.headers, _body(r, limits), url)
        target = urljoin(url, location)
        if origin(target) != origin(url):
            raise RedirectRefused(f"refused a redirect to another origin: {target}")
        url = target
        if r.status_code in (301, 302, 303):
            method = "GET"
    raise RedirectRefused(f"more than {MAX_REDIRECTS} redirects")


def _send(
    session: requests.Session,
    method: str,
    url: str,
    params: Mapping[str, Any],
    limits: Limits,
) -> requests.Response:
    left = limits.left()
    timeout = (min(limits.connect_timeout_s, left), min(limits.read_timeout_s, left))
    post = method == "POST"
    try:
        return session.request(
            method,
            url,
            data=params if post else None,
            params=None if post else params,
            timeout=timeout,
            stream=True,
            allow_redirects=False,
        )
    except requests.Timeout as exc:
        if limits.passed():
            raise DeadlinePassed("the deadline passed while waiting for an answer") from exc
        raise


def _body(r: requests.Response, limits: Limits) -> bytearray:
    declared = r.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > limits.max_bytes:
        raise AnswerTooLarge(f"it declares {declared} bytes")
    buf = bytearray()
    while True:
        _wait_at_most(r, min(limits.read_timeout_s, limits.left()))
        try:
            piece = r.raw.read1(min(CHUNK, limits.max_bytes + 1 - len(buf)), decode_content=True)
        except urllib3.exceptions.ReadTimeoutError as exc:
            if limits.passed():
                raise DeadlinePassed("the deadline passed while reading the answer") from exc
            raise requests.exceptions.ReadTimeout(str(exc)) from exc
        except urllib3.exceptions.DecodeError as exc:
            raise requests.exceptions.ContentDecodingError(str(exc)) from exc
        except urllib3.exceptions.HTTPError as exc:  # a dropped or truncated answer
            raise requests.exceptions.ChunkedEncodingError(str(exc)) from exc
        if not piece:
            return buf
        buf += piece
        if len(buf) > limits.max_bytes:
            raise AnswerTooLarge(f"reading stopped after {len(buf)} bytes")


def _wait_at_most(r: requests.Response, seconds: float) -> None:
    """Make the next read of ``r``'s socket wait at most ``seconds``."""
    sock = getattr(getattr(r.raw, "connection", None), "sock", None)
    if sock is not None:
        sock.settimeout(max(seconds, 0.001))
