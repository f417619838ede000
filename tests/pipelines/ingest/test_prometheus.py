"""Prometheus adapter: chunking, node batching, retries and all-or-nothing staging, against
a scriptable local HTTP server (``tests.fakes.prometheus_api``). The real Prometheus
round trip is in ``test_prometheus_integration.py``."""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from predops.core.clock import FixedClock
from predops.core.schemas import TELEMETRY
from predops.pipelines.ingest import prometheus as prom
from predops.pipelines.ingest import prometheus_nodes as pnodes
from predops.pipelines.ingest.batch import IngestError
from predops.pipelines.ingest.registry import IngestOptions, adapter
from predops.pipelines.ingest.run import ingest
from predops.pipelines.workspace.lake import Lake
from tests.fakes.prometheus_api import FakePrometheus, always, at, first

T0 = datetime(2026, 1, 5, tzinfo=UTC)
STEP = 300.0
NODES = [
    "gpu-01.dc1",
    "gpu-02.dc1",
    "gpu-03.dc1",
    "cpu-01.dc1",
    "cpu-02.dc1",
    "cpu-03.dc1",
    "cpu-04.dc1",
]
INSTANCES = [f"{n}:9100" for n in NODES]


def temp_value(query: str, instance: str, t: float) -> float:
    """What the fake answers: a per-node offset plus a quarter per step (exact in float32,
    inside the contract's temperature range)."""
    return 10.0 * INSTANCES.index(instance) + 0.25 * (t - T0.timestamp()) / STEP


def options(steps: int, clock: FixedClock, **extra: str) -> IngestOptions:
    base = {"query.gpu_temp_c": "max by ($node) (DCGM_FI_DEV_GPU_TEMP{$sel})", "backoff": "0s"}
    only = {f"query.{c.name}": "" for c in TELEMETRY.columns[2:] if c.name != "gpu_temp_c"}
    return IngestOptions(
        clock=clock,
        start=T0,
        end=T0 + timedelta(seconds=STEP * (steps - 1)),
        step_s=STEP,
        extra={**only, **base, **extra},
    )


def selector_regex(query: str) -> re.Pattern[str]:
    """The node regex of a query's ``instance=~"..."`` matcher, PromQL escaping undone."""
    m = re.search(r'instance=~"((?:[^"\\]|\\.)*)"', query)
    assert m is not None, query
    return re.compile(re.sub(r"\\(.)", r"\1", m.group(1)))


def lake_digest(lake: Lake) -> dict[str, str]:
    if not lake.root.exists():
        return {}
    return {
        str(p.relative_to(lake.root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(lake.root.rglob("*"))
        if p.is_file()
    }


def stored(lake: Lake) -> pl.DataFrame:
    return lake.scan("telemetry").collect().sort("node_id", "ts")


# ---------------------------------------------------------------- pure chunking
@given(st.integers(1, 500), st.integers(1, 60))
def test_time_windows_hold_every_step_exactly_once(n_steps: int, points: int) -> None:
    end = T0 + timedelta(seconds=STEP * (n_steps - 1))
    windows = prom.time_windows(T0, end, STEP, points)
    grid: list[datetime] = []
    for a, b in windows:
        k = round((b - a).total_seconds() / STEP) + 1
        assert 1 <= k <= points
        grid.extend(a + timedelta(seconds=STEP * i) for i in range(k))
    assert grid == [T0 + timedelta(seconds=STEP * i) for i in range(n_steps)]


def test_forty_days_at_five_minutes_is_split_under_the_prometheus_limit() -> None:
    cfg = prom.PromConfig(url="http://x", start=T0, end=T0 + timedelta(days=40))
    assert prom.window_points(cfg, batch_nodes=1) == prom.PROMETHEUS_MAX_POINTS
    windows = prom.time_windows(cfg.start, cfg.end, cfg.step_s, prom.window_points(cfg, 1))
    sizes = [round((b - a).total_seconds() / STEP) + 1 for a, b in windows]
    assert sum(sizes) == 40 * 288 + 1 and max(sizes) <= 11_000 and len(sizes) == 2
    # 200 nodes per batch: the response budget (250k samples) bounds the window instead.
    assert prom.window_points(cfg, batch_nodes=200) == 1250


@pytest.mark.parametrize(
    ("value", "strip", "expected"),
    [
        ("gpu-01.dc1:9100", True, "gpu-01.dc1"),
        ("10.0.0.7:9400", True, "10.0.0.7"),
        ("[fe80::1]:9100", True, "[fe80::1]"),
        ("fe80::1", True, "fe80::1"),
        ("gpu-01", True, "gpu-01"),
        ("gpu-01.dc1:9100", False, "gpu-01.dc1:9100"),
    ],
)
def test_node_id_strips_ports_only(value: str, strip: bool, expected: str) -> None:
    assert pnodes.node_id(value, strip) == expected


def test_node_selector_is_anchored_and_escaped() -> None:
    sel = pnodes.node_selector("instance", ["gpu-01.dc1", 'a"b'], strip_port=True)
    label, literal = re.fullmatch(r'(\w+)=~"(.*)"', sel).groups()  # type: ignore[union-attr]
    regex = re.compile(re.sub(r"\\(.)", r"\1", literal))  # undo PromQL string escaping
    assert label == "instance"
    assert regex.fullmatch("gpu-01.dc1:9100") and regex.fullmatch("gpu-01.dc1")
    assert regex.fullmatch('a"b:1')
    assert not regex.fullmatch("gpu-01xdc1:9100")  # the dot is literal
    assert not regex.fullmatch("gpu-01.dc10:9100")  # anchored: no prefix matches
    assert not regex.fullmatch("gpu-01.dc1:http")


def test_default_mapping_covers_every_metric_column_and_renders() -> None:
    cols = {q.column for q in prom.DEFAULT_QUERIES}
    assert cols == {c.name for c in TELEMETRY.columns} - {"ts", "node_id"}
    cfg = prom.PromConfig(url="http://x", start=T0, end=T0)
    for q in prom.DEFAULT_QUERIES:
        for label in cfg.labels_for(q):
            text = prom.render(q, cfg, f'{label}=~"a"', label)
            assert "$" not in text and f'{label}=~"a"' in text
            assert f"by ({label})" in text
        assert pnodes.metric_names(q.expr), q.column
    ready = next(q for q in prom.DEFAULT_QUERIES if q.column == "node_ready")
    assert cfg.labels_for(ready) == ("node",)  # kube-state-metrics' own instance is no node
    cpu = next(q for q in prom.DEFAULT_QUERIES if q.column == "cpu_util_pct")
    assert cfg.labels_for(cpu) == ("node", "kubernetes_node", "Hostname", "instance")
    xid = next(q for q in prom.DEFAULT_QUERIES if q.column == "xid_errors_total")
    assert xid.accumulate and "[600000ms]" in prom.render(xid, cfg, "x")


# ---------------------------------------------------------------- options
def test_options_errors_are_clear(clock: FixedClock, tmp_path: Path) -> None:
    url = "http://127.0.0.1:9"
    with pytest.raises(IngestError, match="--start"):
        prom.config_from_options(url, IngestOptions(clock=clock))
    with pytest.raises(IngestError, match="11000"):
        prom.config_from_options(url, options(3, clock, max_points="20000"))
    with pytest.raises(IngestError, match=r"gpu_temp_c does not use \$sel"):
        prom.config_from_options(url, options(3, clock, **{"query.gpu_temp_c": "up"}))
    with pytest.raises(IngestError, match="not a telemetry metric column"):
        prom.config_from_options(url, options(3, clock, **{"query.bogus": "x{$sel}"}))
    with pytest.raises(IngestError, match="not an http"):
        prom.config_from_options("localhost:9090", options(3, clock))
    with pytest.raises(IngestError, match=r"unknown option.*node_batc[^h]"):
        prom.config_from_options(url, options(3, clock, node_batc="3"))
    with pytest.raises(IngestError, match="not a duration"):
        prom.config_from_options(url, options(3, clock, timeout="soon"))
    with pytest.raises(IngestError, match="not a duration"):
        prom.config_from_options(url, options(3, clock, backoff="nan"))
    assert prom.parse_duration("1h30m", "x") == 5400 and prom.parse_duration("90", "x") == 90
    bad = tmp_path / "map.toml"
    bad.write_text("[gpu_temp_c]\nnode_label = 'Hostname'\n")
    with pytest.raises(IngestError, match="needs an expr"):
        prom.config_from_options(url, options(3, clock, mapping=str(bad)))


def test_mapping_file_and_label_overrides(clock: FixedClock, tmp_path: Path) -> None:
    f = tmp_path / "map.toml"
    f.write_text('[gpu_temp_c]\nexpr = "max by ($node) (my_temp{$sel})"\nnode_label = "Hostname"\n')
    cfg = prom.config_from_options(
        "http://h:9090/",
        IngestOptions(
            clock=clock,
            start=T0,
            extra={
                "mapping": str(f),
                "label.node_ready": "kubernetes_node",
                "query.mce_total": "",
                "node_label": "node",
            },
        ),
    )
    by = {q.column: q for q in cfg.queries}
    assert by["gpu_temp_c"].expr.startswith("max by ($node) (my_temp")
    assert cfg.labels_for(by["gpu_temp_c"]) == ("Hostname",)
    assert cfg.labels_for(by["node_ready"]) == ("kubernetes_node",)
    assert cfg.labels_for(by["cpu_util_pct"]) == ("node",)
    assert "mce_total" not in by and cfg.url == "http://h:9090" and cfg.end == clock.now()


# ---------------------------------------------------------------- against the fake
def test_chunked_by_time_and_nodes_gets_every_row_once(lake: Lake, clock: FixedClock) -> None:
    steps = 23
    with FakePrometheus(INSTANCES, value_fn=temp_value) as fake:
        opts = options(steps, clock, node_batch="3", max_points="5")
        report = ingest(
            lake,
            "prometheus",
            adapter("prometheus").read(fake.url, opts),
            clock=clock,
            input_name=fake.url,
        )
        reqs = fake.range_requests()
    # 7 nodes in batches of 3 -> 3 batches; 23 steps in windows of 5 -> 5 windows.
    assert len(reqs) == 3 * 5
    nodes_asked: list[set[str]] = []
    for r in reqs:
        start, end, step = (float(r.params[k][0]) for k in ("start", "end", "step"))
        assert step == STEP and (end - start) / step + 1 <= 5
        assert r.method == "POST"
        asked = {i for i in INSTANCES if selector_regex(r.params["query"][0]).fullmatch(i)}
        assert 1 <= len(asked) <= 3
        nodes_asked.append(asked)
    assert set().union(*nodes_asked) == set(INSTANCES)
    got = stored(lake)
    assert report.rows_quarantined == 0
    assert report.tables["telemetry"].rows_written == got.height == len(NODES) * steps
    expected = pl.DataFrame(
        {
            "node_id": [n for n in NODES for _ in range(steps)],
            "ts": [T0 + timedelta(seconds=STEP * k) for _ in NODES for k in range(steps)],
            "gpu_temp_c": [10.0 * i + 0.25 * k for i in range(len(NODES)) for k in range(steps)],
        }
    ).with_columns(pl.col("ts").dt.cast_time_unit("us"), pl.col("gpu_temp_c").cast(pl.Float32))
    cmp = got.select("node_id", "ts", "gpu_temp_c").join(
        expected, on=["node_id", "ts"], how="full", coalesce=True
    )
    assert cmp.height == got.height
    assert (cmp["gpu_temp_c"] == cmp["gpu_temp_c_right"]).all()
    assert got["cpu_util_pct"].is_null().all()  # unmapped columns stay null


def test_accumulated_events_continue_across_windows(lake: Lake, clock: FixedClock) -> None:
    def one_every_third(query: str, instance: str, t: float) -> float:
        return 1.0 if round((t - T0.timestamp()) / STEP) % 3 == 0 else 0.0

    with FakePrometheus(INSTANCES[:2], value_fn=one_every_third) as fake:
        opts = options(
            10,
            clock,
            max_points="4",
            **{
                "query.gpu_temp_c": "",
                "query.xid_errors_total": "sum by ($node) (changes(xid{$sel}[$step]))",
            },
        )
        cfg = prom.config_from_options(fake.url, opts)
        assert [q.column for q in cfg.queries] == ["xid_errors_total"]
        cfg = replace(cfg, queries=(replace(cfg.queries[0], accumulate=True),))
        batches = list(prom.StagedRead(cfg, prom.PromClient(cfg)).batches())
    got = pl.concat([b.frame for b in batches]).sort("node_id", "ts")
    # events at steps 0, 3, 6, 9 -> running totals 1,1,1,2,2,2,3,3,3,4 for each node
    assert got.filter(pl.col("node_id") == NODES[0])["xid_errors_total"].to_list() == [
        1,
        1,
        1,
        2,
        2,
        2,
        3,
        3,
        3,
        4,
    ]
    assert got.height == 20


@pytest.mark.parametrize("fault", ["500", "503", "429", "timeout", "drop", "garbage"])
def test_transient_failures_are_retried_with_backoff(
    fault: str, lake: Lake, clock: FixedClock
) -> None:
    sleeps: list[float] = []
    # The client waits 1 s, a "timeout" answers after 2.5 s: an answer that is meant to
    # arrive does so with a second to spare, even on a loaded machine.
    with FakePrometheus(
        INSTANCES[:2], value_fn=temp_value, slow_s=2.5, script=first(3, fault)
    ) as fake:
        cfg = prom.config_from_options(
            fake.url, options(4, clock, timeout="1s", backoff="0.1s", backoff_max="0.3s")
        )
        client = prom.PromClient(cfg, sleep=sleeps.append, rng=random.Random(0), jitter=0.0)
        ingest(
            lake,
            "prometheus",
            prom.StagedRead(cfg, client).batches(),
            clock=clock,
            input_name=fake.url,
        )
        answers = [s.answer for s in fake.seen]
    # discovery by label node is request 0: 3 failures, then success; then discovery by
    # kubernetes_node, Hostname and instance, kube_node_info, and the range query
    assert answers == [fault, fault, fault] + ["ok"] * 6
    assert sleeps == [0.1, 0.2, 0.3]  # doubling, capped at backoff_max
    assert stored(lake).height == 2 * 4


def test_retries_exhausted_name_the_url_and_leave_the_lake_unchanged(
    lake: Lake, clock: FixedClock
) -> None:
    with FakePrometheus(INSTANCES, value_fn=temp_value) as fake:
        ingest(
            lake,
            "prometheus",
            adapter("prometheus").read(fake.url, options(3, clock)),
            clock=clock,
            input_name=fake.url,
        )
        before = lake_digest(lake)
        assert before
        fake.script = always("500")
        later = IngestOptions(
            clock=clock,
            start=T0 + timedelta(hours=1),
            end=T0 + timedelta(hours=2),
            step_s=STEP,
            extra={**options(1, clock).extra, "retries": "2"},
        )
        with pytest.raises(IngestError) as err:
            ingest(
                lake,
                "prometheus",
                adapter("prometheus").read(fake.url, later),
                clock=clock,
                input_name=fake.url,
            )
        n_failed = sum(1 for s in fake.seen if s.answer == "500")
    msg = str(err.value)
    assert f"{fake.url}/api/v1/label/node/values" in msg
    assert "failed after 3 attempt(s)" in msg and "HTTP 500: internal error" in msg
    assert n_failed == 3
    assert lake_digest(lake) == before


def test_failure_after_some_chunks_writes_nothing(lake: Lake, clock: FixedClock) -> None:
    # Discovery and the first 4 range queries succeed; the 5th keeps timing out.
    with FakePrometheus(
        INSTANCES,
        value_fn=temp_value,
        slow_s=2.5,
        script=lambda n, p: "timeout" if n >= 5 else "ok",
    ) as fake:
        opts = options(12, clock, node_batch="2", max_points="6", retries="1", timeout="1s")
        with pytest.raises(
            IngestError,
            match=r"query_range \(gpu_temp_c for 2 node\(s\).*"
            r"failed after 2 attempt\(s\); last error: "
            r"(ReadTimeout|ConnectionError)",
        ):
            ingest(
                lake,
                "prometheus",
                adapter("prometheus").read(fake.url, opts),
                clock=clock,
                input_name=fake.url,
            )
    assert lake_digest(lake) == {}


def test_a_bad_query_fails_at_once_with_prometheus_message(lake: Lake, clock: FixedClock) -> None:
    with FakePrometheus(INSTANCES, script=at({1: "400"})) as fake:
        with pytest.raises(IngestError, match="refused: HTTP 400: scripted 400"):
            list(adapter("prometheus").read(fake.url, options(3, clock)))
        assert len(fake.seen) == 2  # no retry of a 4xx


def test_two_series_for_one_node_is_a_clear_error(clock: FixedClock) -> None:
    with (
        FakePrometheus(["gpu-01:9100", "gpu-01:9400"]) as fake,
        pytest.raises(IngestError, match="more than one series for node 'gpu-01'"),
    ):
        list(adapter("prometheus").read(fake.url, options(3, clock)))


def test_explicit_nodes_skip_discovery_and_token_is_sent(clock: FixedClock, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    with FakePrometheus(INSTANCES, value_fn=temp_value) as fake:
        opts = options(2, clock, nodes="gpu-02.dc1,cpu-01.dc1", bearer_token_file=str(token))
        frames = [b.frame for b in adapter("prometheus").read(fake.url, opts)]
        seen = fake.seen
    # no label-values call; kube_node_info is still asked, for names
    assert {s.path for s in seen} == {"/api/v1/query_range", "/api/v1/series"}
    assert {s.headers["Authorization"] for s in seen} == {"Bearer s3cret"}
    assert sorted(pl.concat(frames)["node_id"].unique()) == ["cpu-01.dc1", "gpu-02.dc1"]
