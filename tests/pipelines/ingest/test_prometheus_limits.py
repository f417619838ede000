"""The Prometheus adapter's own limits, against a server that misbehaves on purpose
(``tests.fakes.misbehaving_http``): a deadline per request and per ingest, a cap on the
bytes of one answer, same-origin redirects only, and one clear error for any answer whose
shape is not the API's. Each run is timed against the limit it sets."""

from __future__ import annotations

import threading
import time
import tracemalloc
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from typing import Any

import polars as pl
import pytest

from predops.core.clock import FixedClock
from predops.pipelines.ingest import prometheus as prom
from predops.pipelines.ingest.batch import IngestError
from predops.pipelines.ingest.registry import IngestOptions, adapter
from tests.fakes.misbehaving_http import (
    Behaviour,
    MisbehavingServer,
    answer,
    hang,
    huge,
    redirect,
    success,
    trickle,
)
from tests.fakes.prometheus_api import FakePrometheus, always
from tests.pipelines.ingest.test_prometheus import INSTANCES, T0, temp_value
from tests.pipelines.ingest.test_prometheus import options as prom_options

NODE = "gpu-01.dc1"
MiB = 1 << 20


def options(steps: int = 3, **extra: str) -> IngestOptions:
    """Only gpu_temp_c, for one known node by ``instance`` (no discovery or kube_node_info
    request: one range query per window), no backoff."""
    known = {"nodes": NODE, "node_label": "instance", "node_info": "", "retries": "0"}
    return prom_options(steps, FixedClock(T0), **{**known, **extra})


@contextmanager
def within(seconds: float) -> Iterator[None]:
    t0 = time.monotonic()
    yield
    took = time.monotonic() - t0
    assert took < seconds, f"took {took:.1f}s, limit {seconds}s"


def read_all(url: str, opts: IngestOptions) -> list[pl.DataFrame]:
    return [b.frame for b in adapter("prometheus").read(url, opts)]


# ---------------------------------------------------------------- deadlines
def test_a_trickling_answer_ends_at_the_request_deadline() -> None:
    # A byte every 0.25 s never lets the 3 s read timeout fire.
    with MisbehavingServer(trickle(0.25)) as slow:
        opts = options(timeout="3s", retries="1", request_deadline="1.5s")
        with within(6), pytest.raises(IngestError) as err:
            read_all(slow.url, opts)
        assert slow.requests == 2  # a missed deadline is retried like a timeout
    msg = str(err.value)
    assert "gpu_temp_c for 1 node(s)" in msg and "failed after 2 attempt(s)" in msg
    assert "request deadline of 1.5s (-o request_deadline)" in msg


def test_a_server_that_never_answers_ends_at_the_request_deadline() -> None:
    with MisbehavingServer(hang) as silent, within(5), pytest.raises(IngestError) as err:
        read_all(silent.url, options(request_deadline="1s", retries="1"))
    assert "request deadline of 1s" in str(err.value)


def test_the_ingest_deadline_bounds_every_chunk_together() -> None:
    # 12 windows of one step, each answered correctly after 0.4 s: 4.8 s in all.
    with (
        FakePrometheus(INSTANCES, value_fn=temp_value, slow_s=0.4, script=always("timeout")) as f,
        within(4),
        pytest.raises(IngestError) as err,
    ):
        read_all(f.url, options(12, max_points="1", ingest_deadline="1.5s"))
    msg = str(err.value)
    assert "ingest deadline of 1.5s (-o ingest_deadline)" in msg and "gpu_temp_c" in msg
    assert 2 <= len(f.seen) <= 5


def test_the_ingest_deadline_cuts_a_request_short() -> None:
    with MisbehavingServer(trickle(0.25)) as slow, within(4), pytest.raises(IngestError) as e:
        read_all(slow.url, options(request_deadline="1m", ingest_deadline="1s", retries="3"))
    assert "ingest deadline of 1s" in str(e.value) and slow.requests == 1


# ---------------------------------------------------------------- size
def gzip_bomb(size: int) -> Behaviour:
    """A gzip body of a few hundred KiB that decodes to ``size`` bytes."""

    def behave(h: BaseHTTPRequestHandler, stop: threading.Event) -> None:
        z = zlib.compressobj(wbits=31)
        parts = [z.compress(b'{"status":"success","data":{"resultType":"matrix","result":[')]
        piece = b" " * MiB
        parts += [z.compress(piece) for _ in range(size // MiB)]
        body = b"".join([*parts, z.compress(b"]}}"), z.flush()])
        h.send_response(200)
        h.send_header("Content-Encoding", "gzip")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    return behave


@pytest.mark.parametrize(
    "behaviour",
    [
        huge(150_000_000, declare_length=True),
        huge(150_000_000, declare_length=False),
        gzip_bomb(150_000_000),
    ],
    ids=["declared", "undeclared", "gzip"],
)
def test_an_answer_over_the_cap_is_refused_without_being_held(behaviour: Behaviour) -> None:
    with MisbehavingServer(behaviour) as big:
        tracemalloc.start()
        try:
            with within(10), pytest.raises(IngestError) as err:
                read_all(big.url, options(max_response_bytes="1MiB", retries="2"))
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert big.requests == 1  # the same question would get the same answer
    assert peak < 16 * MiB, f"peak {peak / MiB:.0f} MiB for a 1 MiB cap"
    msg = str(err.value)
    assert "gpu_temp_c for 1 node(s)" in msg
    assert "response cap of 1MiB (-o max_response_bytes)" in msg


def test_an_answer_under_the_cap_is_read() -> None:
    with FakePrometheus(INSTANCES, value_fn=temp_value) as fake:
        frames = read_all(fake.url, options(max_response_bytes="2KiB"))
    assert pl.concat(frames).height == 3


# ---------------------------------------------------------------- redirects
def test_a_redirect_to_another_port_is_refused() -> None:
    with MisbehavingServer(success([])) as elsewhere:
        target = f"{elsewhere.url}/api/v1/query_range"
        with MisbehavingServer(redirect(target, 307)) as moved, pytest.raises(IngestError) as e:
            read_all(moved.url, options())
        assert elsewhere.requests == 0
    msg = str(e.value)
    assert f"refused a redirect to another origin: {target}" in msg and moved.url in msg


def test_same_origin_redirects_are_followed_a_bounded_number_of_times() -> None:
    def moved_prefix(h: BaseHTTPRequestHandler, stop: threading.Event) -> None:
        if h.path.startswith("/old/"):
            return redirect(h.path.removeprefix("/old"), 308)(h, stop)
        series = {"metric": {"instance": f"{NODE}:9100"}, "values": [[T0.timestamp(), "41"]]}
        return success([series])(h, stop)

    with MisbehavingServer(moved_prefix) as s:
        frames = read_all(s.url + "/old", options(1))
        assert s.paths == ["/old/api/v1/query_range", "/api/v1/query_range"]
    assert pl.concat(frames)["gpu_temp_c"].to_list() == [41.0]
    with MisbehavingServer(redirect("/again")) as loop, pytest.raises(IngestError, match="redir"):
        read_all(loop.url, options())
    assert loop.requests == prom.MAX_REDIRECTS + 1


# ---------------------------------------------------------------- malformed answers
M = {"instance": f"{NODE}:9100"}
TS = T0.timestamp()
SHOWN = f'{{instance="{NODE}:9100"}}'


@pytest.mark.parametrize(
    ("data", "names"),
    [
        ([1], "data is a list"),
        ({"resultType": "vector", "result": []}, "resultType 'vector'"),
        ({"resultType": "matrix", "result": {"a": 1}}, "result is a dict"),
        ({"resultType": "matrix", "result": [[1]]}, "result[0] is a list"),
        ({"resultType": "matrix", "result": [{"values": [[TS, "1"]]}]}, "result[0] has no metric"),
        ({"resultType": "matrix", "result": [{"metric": [1], "values": []}]}, "result[0] metric"),
        (
            {"resultType": "matrix", "result": [{"metric": {"instance": 5}, "values": []}]},
            "result[0] label 'instance' is an int",
        ),
        (
            {"resultType": "matrix", "result": [{"metric": M, "values": {"a": 1}}]},
            f"series {SHOWN}: values is a dict",
        ),
        (
            {"resultType": "matrix", "result": [{"metric": M, "values": [[TS, "abc"]]}]},
            f"series {SHOWN}: values[0] value 'abc' is not a number",
        ),
        (
            {"resultType": "matrix", "result": [{"metric": M, "values": [[TS, True]]}]},
            f"series {SHOWN}: values[0] value True is not a number",
        ),
        (
            {
                "resultType": "matrix",
                "result": [{"metric": M, "values": [[TS, "1"], [TS, "1", 2]]}],
            },
            f"series {SHOWN}: values[1] has 3 element(s)",
        ),
        (
            {"resultType": "matrix", "result": [{"metric": M, "values": [["x", "1"]]}]},
            f"series {SHOWN}: values[0] timestamp 'x' is not a number",
        ),
        (
            {"resultType": "matrix", "result": [{"metric": M, "values": [[float("nan"), "1"]]}]},
            f"series {SHOWN}: values[0] timestamp nan is not",
        ),
        (
            {"resultType": "matrix", "result": [{"metric": M, "values": [[1e300, "1"]]}]},
            f"series {SHOWN}: values[0] timestamp 1e+300 is not",
        ),
    ],
    ids=lambda v: None if isinstance(v, str) else "",
)
def test_a_malformed_answer_is_one_clear_error(data: Any, names: str) -> None:
    served = answer({"status": "success", "data": data})
    with MisbehavingServer(served) as s, pytest.raises(IngestError) as err:
        read_all(s.url, options())
    msg = str(err.value)
    assert "query_range (gpu_temp_c for 1 node(s)" in msg and "malformed answer" in msg
    assert names in msg, msg


@pytest.mark.parametrize("data", [{"a": 1}, ["gpu-01:9100", 7]])
def test_malformed_label_values_are_one_clear_error(data: Any) -> None:
    opts = prom_options(3, FixedClock(T0), retries="0")
    served = answer({"status": "success", "data": data})
    with (
        MisbehavingServer(served) as s,
        pytest.raises(IngestError, match=r"node discovery by label node.*malformed"),
    ):
        read_all(s.url, opts)


def test_nan_and_infinite_values_are_kept_for_validation() -> None:
    values = [[TS, "NaN"], [TS + 300, "+Inf"], [TS + 600, "-Inf"]]
    with MisbehavingServer(success([{"metric": M, "values": values}])) as s:
        frame = pl.concat(read_all(s.url, options()))
    got = frame["gpu_temp_c"].to_list()
    assert got[0] != got[0] and got[1:] == [float("inf"), float("-inf")]


# ---------------------------------------------------------------- options
def test_limits_have_defaults_and_parse_sizes_and_durations() -> None:
    clock = FixedClock(datetime(2026, 1, 5, tzinfo=UTC))
    cfg = prom.config_from_options("http://p:9090", IngestOptions(clock=clock, start=T0))
    assert (cfg.request_deadline_s, cfg.ingest_deadline_s) == (120.0, 900.0)
    assert cfg.max_response_bytes == 64 * MiB
    cfg = prom.config_from_options(
        "http://p:9090",
        options(request_deadline="90", ingest_deadline="1h", max_response_bytes="5MB"),
    )
    assert (cfg.request_deadline_s, cfg.ingest_deadline_s) == (90.0, 3600.0)
    assert cfg.max_response_bytes == 5_000_000
    slow = prom.config_from_options("http://p:9090", options(timeout="5m"))
    assert slow.request_deadline_s == 600.0  # twice a timeout longer than 1m
    assert prom.parse_size("1048576", "x") == MiB and prom.parse_size("1.5KiB", "x") == 1536
    for bad in ("lots", "-1MiB", "0", "1 parsec"):
        with pytest.raises(IngestError, match="max_response_bytes"):
            prom.config_from_options("http://p", options(max_response_bytes=bad))
    with pytest.raises(IngestError, match="request_deadline"):
        prom.config_from_options("http://p", options(request_deadline="0s"))
