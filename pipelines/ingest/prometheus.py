"""Prometheus HTTP API -> telemetry: ``query_range``, chunked by time and by node, retried.
Over 500 lines: one adapter. The query templates, the retried client, the chunked fetch
and the staged read share one ``PromConfig`` and are read together; a tenth of the file
is this docstring, which documents every default query. The bounded HTTP exchange
(:mod:`.bounded_http`) and the shape of the API's answers (:mod:`.prometheus_answers`)
live beside it. Its seam, if it grows: the configuration parsing (``MetricQuery`` ..
``config_from_options``).

``predops ingest prometheus URL --start T0 [--end T1] [--step 5m] [-o KEY=VALUE ...]``

Each telemetry column is one PromQL expression (:data:`DEFAULT_QUERIES`, printed below)
that must return one series per node, labelled with the node label. Templates use
``$node`` (the node label name), ``$sel`` (a matcher selecting one batch of nodes, put it
inside every selector), ``$step``, ``$window`` (rate window, default = step),
``$lookback`` (how far back a previous sample may lie, default 5m) and
``$step_plus_lookback``. Override one column with ``-o query.COLUMN='EXPR'`` (empty =
leave the column null) and its node label with ``-o label.COLUMN=LABEL``, or many at once
with ``-o mapping=FILE.toml`` (``[COLUMN]`` tables with ``expr``, ``node_label``,
``accumulate``).

Defaults and what they mean (node-exporter, DCGM exporter, smartctl_exporter,
kube-state-metrics):

- ``cpu_util_pct``: 100 x (1 - mean over CPUs of the idle rate of
  ``node_cpu_seconds_total``) over the rate window: the mean utilisation of the last step.
- ``mem_used_bytes``: ``MemTotal - MemAvailable`` (page cache that can be dropped is free).
- ``gpu_util_pct`` mean, ``gpu_temp_c`` max, ``gpu_power_w`` sum over the node's GPUs
  (``DCGM_FI_DEV_GPU_UTIL`` / ``_GPU_TEMP`` / ``_POWER_USAGE``).
- ``ecc_sbe_total`` / ``ecc_dbe_total`` / ``pcie_replay_total``: sums over GPUs of
  ``DCGM_FI_DEV_ECC_SBE_VOL_TOTAL`` / ``_DBE_VOL_TOTAL`` / ``_PCIE_REPLAY_COUNTER``.
  Volatile ECC counts restart at driver reload, and a GPU that falls off the bus leaves
  the sum: both look like counter resets, as a reboot does.
- ``xid_errors_total``: ``DCGM_FI_DEV_XID_ERRORS`` is not a counter, it holds the code of
  the last XID seen. We count changes of that value per step: ``changes()`` over
  step + lookback minus ``changes()`` over the lookback ending one step earlier counts
  exactly the transitions whose later sample falls in the step (a plain
  ``changes(x[$step])`` misses transitions that straddle step boundaries), counted only
  while the GPU's series is current (``and x``), so a node that stopped reporting gets no
  XID value either. The adapter sums those per-step counts from the start of the range
  (``accumulate``), so the total restarts at 0 with each ingested range, which readers
  treat as a counter reset. A repeat of the same XID code, several changes between two
  scrapes, or a change across a scrape gap longer than the lookback counts once or not
  at all.
- ``nic_flaps_total``: ``node_network_carrier_changes_total`` summed over physical
  interfaces (virtual ones - veth, cali, cni, docker, flannel, ... - churn with pods).
- ``disk_realloc_total``: smartctl_exporter's ``Reallocated_Sector_Ct`` raw values,
  summed over devices (NVMe drives have no such attribute).
- ``mce_total``: node-exporter's EDAC correctable + uncorrectable memory-controller
  errors (machine checks that EDAC decodes). For the raw machine-check count, point it at
  ``node_interrupts_total{type="MCE"}`` (the interrupts collector, off by default).
- ``node_ready``: kube-state-metrics ``kube_node_status_condition{condition="Ready",
  status="true"}``, which labels the node with ``node`` (not ``instance``).

Node identity: a series names its node by the first of ``-o node_label=`` (default
``node,kubernetes_node,Hostname,instance``; one label to use only that one) it carries
(:mod:`.prometheus_nodes`), and that value is reconciled with the node names of the
inventory of ``-o inventory_source=`` (default: the source the ingest writes) through
``-o node_map=FILE.csv`` (``alias,node_id`` lines), the nodes' recorded addresses,
``kube_node_info`` (``-o node_info=``; empty: not asked), and short / FQDN names
(:mod:`.identity`). The report's ``identity`` counts mapped and unmatched values with
examples; when there is an inventory, unmatched series are not fetched and an ingest where
none maps fails. Without an inventory the node id is the label value unless the node map
or ``kube_node_info``'s node names resolve it, its port stripped (``-o strip_port=false``
to keep it): ``10.0.0.7:9100`` and ``10.0.0.7:9400`` are one node.

Chunking: the node list comes from the label-values API (or ``-o nodes=a,b``, label
values); nodes are asked for in batches (``-o node_batch=200``) through regex matchers,
and the range in windows of at most ``-o max_points`` steps (Prometheus refuses more
than 11,000 points per series) and ``-o max_samples`` samples per response. Requests go
by POST, as Prometheus allows, so long node regexes never hit URL length limits.

Retries: connection errors, timeouts, dropped connections, 429 and 5xx are retried with
exponential backoff (``-o retries=4``, ``-o backoff=0.5s``, doubling, capped at
``-o backoff_max=30s``, with jitter); after the last attempt an :class:`IngestError`
names the URL and the last error. Other 4xx answers (a bad expression) fail at once.
Every chunk is fetched completely and staged to a temporary Parquet file before the
first batch is yielded, so a failure anywhere leaves the lake unchanged.

Limits: ``-o timeout=60s`` is the longest silence on a connection (and the evaluation
timeout Prometheus is asked to keep); it restarts with every byte, so three more bound
what a slow or hostile server can cost:

- ``-o request_deadline=2m``: each attempt's whole answer, redirects included, must be in
  within it; an attempt that misses it is retried like a timeout. The default is 2m or
  twice ``timeout`` when that is longer: Prometheus's evaluation plus time to send.
- ``-o ingest_deadline=15m``: every request of one ingest together (discovery, all
  chunks, retries and backoff), counted from the first request; reaching it stops the
  ingest at once. Raise it for long backfills.
- ``-o max_response_bytes=64MiB`` (units B, KB, MB, GB, KiB, MiB, GiB): the largest
  answer, after decompression; it is read in 64 KiB pieces and abandoned once larger,
  not retried. The default response budget (250,000 samples) takes about 8 MB.

A redirect is followed only within the same scheme, host and port (at most 5 hops);
one to another origin is an error. Each limit hit is one :class:`IngestError` naming
the request and the option. So is an answer of the wrong shape (``result`` not a list,
a label that is not a string, a sample that is not ``[timestamp, "value"]``, ...),
naming the series by its labels and the field.

Credentials: ``http://user:password@host`` is sent as basic auth and a query string on
the URL (``?token=...``) with every request; messages, reports and stored rows quote
the URL with both masked (:func:`predops.core.redaction.redact_url`).

Prometheus evaluates each step at the latest sample no older than its lookback delta
(5m by default), so a gap shorter than that repeats the previous value, unless the
series ended with a staleness marker (live scrapes write those, backfills cannot).
"""

from __future__ import annotations

import json
import math
import random
import re
import string
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit, urlunsplit

import polars as pl
import requests

from predops.core.redaction import redact_url
from predops.core.schemas import TELEMETRY, UTC_TS
from predops.pipelines.ingest import prometheus_answers as answers
from predops.pipelines.ingest.batch import Batch, IngestError
from predops.pipelines.ingest.bounded_http import (
    MAX_REDIRECTS,
    AnswerTooLarge,
    DeadlinePassed,
    Limits,
    RedirectRefused,
    exchange,
    origin,
)
from predops.pipelines.ingest.identity import KnownNodes
from predops.pipelines.ingest.options import IngestOptions
from predops.pipelines.ingest.prometheus_nodes import (
    DEFAULT_NODE_LABELS,
    NodePlan,
    label_order,
    plan_nodes,
    ts_param,
)

T = TypeVar("T")

SOURCE = "prometheus"
HELP = "Prometheus HTTP API query_range (node-exporter, DCGM, kube-state-metrics) -> telemetry"

MiB = 1 << 20
PROMETHEUS_MAX_POINTS = 11_000
"""Prometheus refuses a range query with more points per series than this."""
VIRTUAL_NICS = (
    "lo|veth.*|cali.*|cni.*|flannel.*|docker.*|virbr.*|vxlan.*|tunl.*|br-.*|kube-.*|tap.*"
)
"""Interfaces whose carrier changes are pod churn, not link flaps."""


@dataclass(frozen=True, slots=True)
class MetricQuery:
    """One telemetry column as a PromQL template returning one series per node.

    ``node_label`` overrides the global node label for this column; ``accumulate`` marks
    an expression giving events per step, which the adapter sums into a running total.
    """

    column: str
    expr: str
    node_label: str | None = None
    accumulate: bool = False


_XID = "DCGM_FI_DEV_XID_ERRORS{$sel}"
DEFAULT_QUERIES: tuple[MetricQuery, ...] = (
    MetricQuery(
        "cpu_util_pct",
        '100 * (1 - avg by ($node) (rate(node_cpu_seconds_total{mode="idle", $sel}[$window])))',
    ),
    MetricQuery(
        "mem_used_bytes",
        "sum by ($node) (node_memory_MemTotal_bytes{$sel} - node_memory_MemAvailable_bytes{$sel})",
    ),
    MetricQuery("gpu_util_pct", "avg by ($node) (DCGM_FI_DEV_GPU_UTIL{$sel})"),
    MetricQuery("gpu_temp_c", "max by ($node) (DCGM_FI_DEV_GPU_TEMP{$sel})"),
    MetricQuery("gpu_power_w", "sum by ($node) (DCGM_FI_DEV_POWER_USAGE{$sel})"),
    MetricQuery("ecc_sbe_total", "sum by ($node) (DCGM_FI_DEV_ECC_SBE_VOL_TOTAL{$sel})"),
    MetricQuery("ecc_dbe_total", "sum by ($node) (DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{$sel})"),
    MetricQuery(
        "xid_errors_total",
        f"sum by ($node) (((changes({_XID}[$step_plus_lookback])"
        f" - changes({_XID}[$lookback] offset $step)) or changes({_XID}[$step_plus_lookback]))"
        f" and {_XID})",
        accumulate=True,
    ),
    MetricQuery("pcie_replay_total", "sum by ($node) (DCGM_FI_DEV_PCIE_REPLAY_COUNTER{$sel})"),
    MetricQuery(
        "nic_flaps_total",
        f'sum by ($node) (node_network_carrier_changes_total{{device!~"{VIRTUAL_NICS}", $sel}})',
    ),
    MetricQuery(
        "disk_realloc_total",
        'sum by ($node) (smartctl_device_attribute{attribute_name="Reallocated_Sector_Ct",'
        ' attribute_value_type="raw", $sel})',
    ),
    MetricQuery(
        "mce_total",
        'sum by ($node) ({__name__=~"node_edac_(un)?correctable_errors_total", $sel})',
    ),
    MetricQuery(
        "node_ready",
        'max by ($node) (kube_node_status_condition{condition="Ready", status="true", $sel})',
        node_label="node",
    ),
)


@dataclass(frozen=True, slots=True)
class PromConfig:
    """Everything one ingest needs; times UTC, durations in seconds."""

    url: str
    start: datetime
    end: datetime
    step_s: float = 300.0
    queries: tuple[MetricQuery, ...] = DEFAULT_QUERIES
    node_label: str = DEFAULT_NODE_LABELS
    strip_port: bool = True
    nodes: tuple[str, ...] | None = None
    node_batch: int = 200
    max_points: int = PROMETHEUS_MAX_POINTS
    max_samples: int = 250_000
    window_s: float | None = None
    lookback_s: float = 300.0
    timeout_s: float = 60.0
    request_deadline_s: float = 120.0
    ingest_deadline_s: float = 900.0
    max_response_bytes: int = 64 * MiB
    retries: int = 4
    backoff_s: float = 0.5
    backoff_max_s: float = 30.0
    bearer_token: str | None = None
    verify: bool | str = True
    staging_dir: str | None = None
    node_map: str | None = None
    inventory_source: str | None = None
    inventory_required: bool = False
    """True when ``-o inventory_source`` named the source: it must have an inventory."""
    node_info: str = "kube_node_info"

    def labels_for(self, q: MetricQuery) -> tuple[str, ...]:
        """The labels a series of ``q`` may name its node by, in order."""
        return label_order(q.node_label or self.node_label)


# ----------------------------------------------------------------------------- options
_DUR = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)")
_DUR_S = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


def parse_duration(text: str, what: str) -> float:
    """A Prometheus duration (``90s``, ``5m``, ``1h30m``) or plain seconds -> seconds."""
    t = text.strip()
    if re.fullmatch(r"\d+(?:\.\d*)?", t):
        return float(t)
    parts = _DUR.findall(t)
    if not parts or "".join(n + u for n, u in parts) != t:
        raise IngestError(f"prometheus: {what} {text!r} is not a duration like 30s, 5m, 1h30m")
    return sum(float(n) * _DUR_S[u] for n, u in parts)


def show_duration(seconds: float) -> str:
    """Seconds as a message shows them: ``1.5s``, ``900s``."""
    return f"{seconds:g}s"


_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*(B|KB|MB|GB|KiB|MiB|GiB)?")
_SIZE_UNITS = {
    "B": 1,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "KiB": 1 << 10,
    "MiB": MiB,
    "GiB": 1 << 30,
}


def parse_size(text: str, what: str) -> int:
    """A positive byte count, plain or with a unit: ``1048576``, ``500KB``, ``64MiB``."""
    m = _SIZE.fullmatch(text.strip())
    n = round(float(m.group(1)) * _SIZE_UNITS[m.group(2) or "B"]) if m else 0
    if n < 1:
        raise IngestError(
            f"prometheus: -o {what}={text!r} is not a size like 1048576, 500KB or 64MiB"
        )
    return n


def show_size(n: int) -> str:
    """Bytes as a message shows them: ``64MiB``, ``1500 bytes``."""
    for unit, size in (("GiB", 1 << 30), ("MiB", MiB), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size}{unit}"
    return f"{n} bytes"


def prom_duration(seconds: float) -> str:
    """Seconds as a PromQL duration literal (whole milliseconds)."""
    return f"{round(seconds * 1000)}ms"


def _int(extra: Mapping[str, str], key: str, default: int, low: int) -> int:
    if key not in extra:
        return default
    try:
        value = int(extra[key])
    except ValueError:
        raise IngestError(f"prometheus: -o {key}={extra[key]!r} is not an integer") from None
    if value < low:
        raise IngestError(f"prometheus: -o {key}={value} must be at least {low}")
    return value


def _deadline(extra: Mapping[str, str], key: str, default_s: float) -> float:
    if key not in extra:
        return default_s
    seconds = parse_duration(extra[key], key)
    if seconds <= 0:
        raise IngestError(f"prometheus: -o {key}={extra[key]!r} must be longer than 0s")
    return seconds


def _bool(extra: Mapping[str, str], key: str, default: bool) -> bool:
    v = extra.get(key)
    if v is None:
        return default
    if v.lower() in ("1", "true", "yes", "on"):
        return True
    if v.lower() in ("0", "false", "no", "off"):
        return False
    raise IngestError(f"prometheus: -o {key}={v!r} is not true/false")


def _mapping_file(path: str) -> dict[str, MetricQuery]:
    try:
        doc = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise IngestError(f"{path}: not a readable TOML mapping file ({exc})") from exc
    out = {}
    for col, entry in doc.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("expr"), str):
            raise IngestError(f'{path}: [{col}] needs an expr = "..." string')
        label = entry.get("node_label")
        out[col] = MetricQuery(col, entry["expr"], label, bool(entry.get("accumulate", False)))
    return out


def with_overrides(
    queries: tuple[MetricQuery, ...], extra: Mapping[str, str]
) -> tuple[MetricQuery, ...]:
    """The default mapping with ``mapping=FILE``, ``query.COL=`` and ``label.COL=`` applied."""
    by_col = {q.column: q for q in queries}
    if "mapping" in extra:
        by_col.update(_mapping_file(extra["mapping"]))
    for key, value in extra.items():
        kind, _, col = key.partition(".")
        if kind not in ("query", "label") or not col:
            continue
        if col not in by_col and kind == "query":
            by_col[col] = MetricQuery(col, value)
        elif col not in by_col:
            raise IngestError(f"prometheus: -o {key}: no query for column {col!r}")
        elif kind == "query":
            by_col[col] = replace(by_col[col], expr=value)
        else:
            by_col[col] = replace(by_col[col], node_label=value or None)
    for col, q in by_col.items():
        if not TELEMETRY.has(col) or col in ("ts", "node_id"):
            raise IngestError(f"prometheus: {col!r} is not a telemetry metric column")
        if q.expr.strip() and "$sel" not in q.expr:
            raise IngestError(
                f"prometheus: the query for {col} does not use $sel; put $sel inside its "
                "selectors so nodes can be asked for in batches"
            )
    return tuple(q for q in by_col.values() if q.expr.strip())


OPTION_KEYS = frozenset(
    {
        "mapping",
        "node_label",
        "node_map",
        "inventory_source",
        "node_info",
        "strip_port",
        "nodes",
        "node_batch",
        "max_points",
        "max_samples",
        "window",
        "lookback",
        "timeout",
        "request_deadline",
        "ingest_deadline",
        "max_response_bytes",
        "retries",
        "backoff",
        "backoff_max",
        "bearer_token_file",
        "ca_file",
        "verify_tls",
        "staging_dir",
    }
)


def config_from_options(url: str, options: IngestOptions) -> PromConfig:
    """Turn CLI options (``--start/--end/--step``, ``-o KEY=VALUE``) into a config."""
    try:
        parts = urlsplit(url)
        valid = parts.scheme in ("http", "https") and bool(parts.hostname) and parts.port != 0
    except ValueError:  # a port that is not a number
        valid = False
    if not valid:
        raise IngestError(
            f"prometheus: {redact_url(url)!r} is not an http(s) URL of a Prometheus server"
        )
    if options.start is None:
        raise IngestError("prometheus: say which range to read with --start (--end: now)")
    end = options.end or options.clock.now()
    step = options.step_s if options.step_s is not None else 300.0
    if step <= 0 or end < options.start:
        raise IngestError(
            f"prometheus: need step > 0 and end >= start; got {step}s, "
            f"{options.start.isoformat()}..{end.isoformat()}"
        )
    x = options.extra
    unknown = sorted(
        k for k in x if k not in OPTION_KEYS and k.partition(".")[0] not in ("query", "label")
    )
    if unknown:
        raise IngestError(
            f"prometheus: unknown option(s) {', '.join(unknown)}; known: "
            f"{', '.join(sorted(OPTION_KEYS))}, query.COLUMN, label.COLUMN"
        )
    token = None
    if "bearer_token_file" in x:
        try:
            token = Path(x["bearer_token_file"]).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise IngestError(
                f"{x['bearer_token_file']}: cannot read bearer token ({exc})"
            ) from exc
    verify: bool | str = x.get("ca_file") or _bool(x, "verify_tls", True)
    nodes = (
        tuple(sorted({n.strip() for n in x["nodes"].split(",") if n.strip()}))
        if ("nodes" in x)
        else None
    )
    max_points = _int(x, "max_points", PROMETHEUS_MAX_POINTS, 1)
    if max_points > PROMETHEUS_MAX_POINTS:
        raise IngestError(
            f"prometheus: max_points {max_points} exceeds Prometheus's limit "
            f"of {PROMETHEUS_MAX_POINTS} points per series"
        )
    timeout = parse_duration(x.get("timeout", "60s"), "timeout")
    queries = with_overrides(DEFAULT_QUERIES, x)
    for q in queries:
        if q.node_label:
            label_order(q.node_label, f"label.{q.column}")
    node_info = x.get("node_info", "kube_node_info").strip()
    if node_info and not re.fullmatch(r"[A-Za-z_:][A-Za-z0-9_:]*", node_info):
        raise IngestError(f"prometheus: -o node_info={node_info!r} is not a metric name")
    return PromConfig(
        url=url.rstrip("/"),
        start=options.start.astimezone(UTC),
        end=end.astimezone(UTC),
        step_s=step,
        queries=queries,
        node_label=",".join(label_order(x.get("node_label", DEFAULT_NODE_LABELS))),
        strip_port=_bool(x, "strip_port", True),
        nodes=nodes,
        node_batch=_int(x, "node_batch", 200, 1),
        max_points=max_points,
        max_samples=_int(x, "max_samples", 250_000, 1),
        window_s=parse_duration(x["window"], "window") if "window" in x else None,
        lookback_s=parse_duration(x.get("lookback", "5m"), "lookback"),
        timeout_s=timeout,
        request_deadline_s=_deadline(x, "request_deadline", max(120.0, 2 * timeout)),
        ingest_deadline_s=_deadline(x, "ingest_deadline", 900.0),
        max_response_bytes=parse_size(x.get("max_response_bytes", "64MiB"), "max_response_bytes"),
        retries=_int(x, "retries", 4, 0),
        backoff_s=parse_duration(x.get("backoff", "0.5s"), "backoff"),
        backoff_max_s=parse_duration(x.get("backoff_max", "30s"), "backoff_max"),
        bearer_token=token,
        verify=verify,
        staging_dir=x.get("staging_dir"),
        node_map=x.get("node_map") or None,
        inventory_source=x.get("inventory_source") or options.source,
        inventory_required=bool(x.get("inventory_source")),
        node_info=node_info,
    )


# ----------------------------------------------------------------------------- HTTP
class PromClient:
    """JSON calls to one Prometheus with bounded, exponentially backed-off retries.

    Every answer is read within the request deadline and the ingest deadline (which
    starts with the first call) and the response cap (:mod:`.bounded_http`). User-info in
    the URL becomes basic auth, a query string in it is sent with every request, and
    every message quotes the URL with its credentials masked.

    ``sleep``, ``rng`` and ``clock`` are injectable so tests see the delays without
    waiting.
    """

    def __init__(
        self,
        cfg: PromConfig,
        *,
        session: requests.Session | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        jitter: float = 0.2,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cfg = cfg
        self.session = session or requests.Session()
        if cfg.bearer_token:
            self.session.headers["Authorization"] = f"Bearer {cfg.bearer_token}"
        self.session.verify = cfg.verify
        parts = urlsplit(cfg.url)
        if parts.username is not None:
            self.session.auth = (unquote(parts.username), unquote(parts.password or ""))
        self._base = parts._replace(netloc=parts.netloc.rpartition("@")[2], fragment="")
        self.sleep = sleep
        self.rng = rng or random.Random()
        self.jitter = jitter
        self.clock = clock
        self._ingest_ends: float | None = None

    def endpoint(self, path: str) -> str:
        """The URL of API ``path`` (``/api/v1/...``) under the configured one."""
        return urlunsplit(self._base._replace(path=self._base.path.rstrip("/") + path))

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry ``attempt`` (0-based): base x 2^attempt, capped."""
        d = min(self.cfg.backoff_max_s, self.cfg.backoff_s * 2.0**attempt)
        d *= 1 + self.jitter * self.rng.random()
        if retry_after is not None:
            d = max(d, min(retry_after, self.cfg.backoff_max_s))
        return d

    def limits(self) -> Limits:
        """The bounds of one attempt starting now: the request deadline, cut to what is
        left of the ingest deadline."""
        now = self.clock()
        if self._ingest_ends is None:
            self._ingest_ends = now + self.cfg.ingest_deadline_s
        return Limits(
            deadline=min(now + self.cfg.request_deadline_s, self._ingest_ends),
            max_bytes=self.cfg.max_response_bytes,
            connect_timeout_s=min(10.0, self.cfg.timeout_s),
            read_timeout_s=self.cfg.timeout_s,
            clock=self.clock,
        )

    def _ingest_over(self, within: float = 0.0) -> bool:
        return self._ingest_ends is not None and self.clock() + within >= self._ingest_ends

    def call(
        self,
        path: str,
        params: Mapping[str, Any],
        *,
        what: str,
        post: bool,
        parse: Callable[[Any], T],
    ) -> T:
        """``parse(data)`` of a successful API answer; an :class:`IngestError` otherwise.

        ``parse`` checks the shape of ``data``
        (:mod:`~predops.pipelines.ingest.prometheus_answers`).
        """
        url = self.endpoint(path)
        method = "POST" if post else "GET"

        def fail(detail: str) -> IngestError:
            return IngestError(redact_url(f"prometheus: {method} {url} ({what}){detail}"))

        cfg = self.cfg
        last = ""
        attempts = cfg.retries + 1
        for attempt in range(attempts):
            retry_after = None
            limits = self.limits()
            try:
                answer = exchange(self.session, method, url, params, limits)
            except DeadlinePassed:
                if limits.deadline == self._ingest_ends:  # the binding one
                    raise fail(self._ingest_deadline_hit(attempt, last)) from None
                last = (
                    "no complete answer within the request deadline of "
                    f"{show_duration(cfg.request_deadline_s)} (-o request_deadline)"
                )
            except AnswerTooLarge as exc:
                raise fail(
                    ": the answer is larger than the response cap of "
                    f"{show_size(cfg.max_response_bytes)} (-o max_response_bytes): {exc}; "
                    "ask for less at a time with -o max_samples or -o node_batch"
                ) from None
            except RedirectRefused as exc:
                scheme, host, port = origin(url)
                raise fail(
                    f": {exc} (only redirects within {scheme}://{host}:{port} are "
                    f"followed, at most {MAX_REDIRECTS})"
                ) from None
            except (
                requests.ConnectionError,
                requests.Timeout,
                requests.exceptions.ChunkedEncodingError,
                requests.exceptions.ContentDecodingError,
            ) as exc:
                last = f"{type(exc).__name__}: {_root_cause(exc)}"
            else:
                body = _json(answer.body)
                if answer.status == 200 and body is not None:
                    if body.get("status") != "success":
                        raise fail(f": {body.get('errorType')}: {body.get('error')}")
                    try:
                        return parse(body.get("data"))
                    except answers.MalformedAnswer as exc:
                        raise fail(f": malformed answer: {exc}") from None
                text = answer.body[:300].decode("utf-8", "replace")
                last = f"HTTP {answer.status}: {body.get('error') if body else text}"
                if answer.status == 200:
                    last = "HTTP 200 with a body that is not JSON (truncated answer?)"
                elif answer.status != 429 and answer.status < 500:
                    raise fail(f" refused: {last}")
                retry_after = _retry_after(answer.headers)
            if attempt + 1 < attempts:
                pause = self.delay(attempt, retry_after)
                if self._ingest_over(within=pause):
                    raise fail(self._ingest_deadline_hit(attempt + 1, last))
                self.sleep(pause)
        raise fail(f" failed after {attempts} attempt(s); last error: {last}")

    def _ingest_deadline_hit(self, failed: int, last: str) -> str:
        done = f" after {failed} failed attempt(s); last error: {last}" if last else ""
        return (
            f": stopped at the ingest deadline of {show_duration(self.cfg.ingest_deadline_s)} "
            f"(-o ingest_deadline), which bounds all requests of one ingest together{done}"
        )


def _root_cause(exc: BaseException) -> BaseException:
    """The innermost error under ``exc`` ("[Errno 111] Connection refused" rather than
    urllib3's pool message repeating the whole URL); ``exc`` itself when that says more."""
    cause = exc
    while (inner := cause.__cause__ or cause.__context__) is not None and inner is not cause:
        cause = inner
    return exc if isinstance(cause, TimeoutError) else cause


def _json(body: bytes | bytearray) -> dict[str, Any] | None:
    try:
        doc = json.loads(body)
    except ValueError:  # not JSON, or not UTF-8
        return None
    return doc if isinstance(doc, dict) else None


def _retry_after(headers: Mapping[str, str]) -> float | None:
    try:
        return float(headers.get("Retry-After", ""))
    except ValueError:
        return None


# ----------------------------------------------------------------------------- chunking
def time_windows(
    start: datetime, end: datetime, step_s: float, points: int
) -> list[tuple[datetime, datetime]]:
    """Split the step grid start, start+step, ..., <= end into windows of <= ``points``
    steps; windows share no step, and together they hold every step once."""
    step_us = round(step_s * 1e6)
    n = (round((end - start).total_seconds() * 1e6)) // step_us + 1
    out = []
    for first in range(0, n, points):
        last = min(first + points, n) - 1
        out.append(
            (
                start + timedelta(microseconds=first * step_us),
                start + timedelta(microseconds=last * step_us),
            )
        )
    return out


def render(q: MetricQuery, cfg: PromConfig, sel: str, label: str | None = None) -> str:
    """``q``'s expression for one batch: ``$node`` is ``label`` (default: the query's
    first node label), ``$sel`` the batch's matchers."""
    window = cfg.window_s or cfg.step_s
    return string.Template(q.expr).substitute(
        node=label or cfg.labels_for(q)[0],
        sel=sel,
        step=prom_duration(cfg.step_s),
        window=prom_duration(window),
        lookback=prom_duration(cfg.lookback_s),
        step_plus_lookback=prom_duration(cfg.step_s + cfg.lookback_s),
    )


# ----------------------------------------------------------------------------- frames
def matrix_frame(
    result: list[answers.Series], label: str, plan: NodePlan, column: str
) -> pl.DataFrame:
    """A checked ``matrix`` answer as (node_id, ts, value, series), the node found through
    ``plan``; series of no known node are left out (the plan counts them). NaN and
    infinite values stay, for validation to quarantine."""
    nodes: list[str] = []
    shown: list[str] = []
    stamps: list[int] = []
    values: list[float] = []
    for series in result:
        if label not in series.labels:
            raise IngestError(
                f"prometheus: the query for {column} returned a series without "
                f"label {label!r}: {answers.show_labels(series.labels)}; aggregate it "
                "`by ($node)`"
            )
        node = plan.node(label, series.labels[label])
        if node is None:
            continue
        nodes.extend([node] * len(series.stamps))
        shown.extend([answers.show_labels({label: series.labels[label]})] * len(series.stamps))
        stamps.extend(round(t * 1e6) for t in series.stamps)
        values.extend(series.values)
    return pl.DataFrame(
        {"node_id": nodes, "ts": stamps, "value": values, "series": shown}, schema=_MATRIX
    ).with_columns(pl.col("ts").cast(pl.Datetime("us")).dt.replace_time_zone("UTC"))


_MATRIX = {"node_id": pl.String(), "ts": pl.Int64(), "value": pl.Float64(), "series": pl.String()}


def one_series_per_node(parts: list[pl.DataFrame], column: str) -> pl.DataFrame:
    """The frames of one column's queries as (node_id, ts, value); two series of one node
    are an error naming both."""
    if not parts:
        return pl.DataFrame(schema={**_MATRIX, "ts": UTC_TS}).drop("series")
    frame = pl.concat(parts)
    dup = frame.filter(pl.struct("node_id", "ts").is_duplicated())
    if dup.height:
        node = dup["node_id"][0]
        both = " and ".join(dup.filter(pl.col("node_id") == node)["series"].unique().sort())
        raise IngestError(
            f"prometheus: the query for {column} returned more than one series for node "
            f"{node!r} ({both}); aggregate it to one series per node with `by ($node)`, "
            "or keep one of the scrape targets"
        )
    return frame.drop("series")


def telemetry_frame(per_column: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """Long per-column frames -> one row per (node, ts) in the contract's columns.

    Counters and gauges stay Float64 (validation casts them and quarantines non-integral
    counts); ``node_ready`` becomes ``true``/``false`` text so that anything but 0/1 is
    quarantined rather than coerced.
    """
    longs = [f.with_columns(pl.lit(c).alias("column")) for c, f in per_column.items()]
    if not longs or all(f.height == 0 for f in longs):
        return pl.DataFrame()
    wide = pl.concat(longs).pivot(on="column", index=["node_id", "ts"], values="value")
    cols: list[pl.Expr] = []
    for c in TELEMETRY.columns[2:]:
        if c.name not in wide.columns:
            cols.append(pl.lit(None, pl.Float64).alias(c.name))
        elif c.name == "node_ready":
            v = pl.col(c.name)
            cols.append(
                pl.when(v == 1)
                .then(pl.lit("true"))
                .when(v == 0)
                .then(pl.lit("false"))
                .otherwise(v.cast(pl.String))
                .alias(c.name)
            )
        else:
            cols.append(pl.col(c.name))
    return wide.select(pl.col("ts"), pl.col("node_id"), *cols).sort("node_id", "ts")


def window_points(cfg: PromConfig, batch_nodes: int) -> int:
    """Steps per query window: Prometheus's per-series limit and our response budget."""
    return max(1, min(cfg.max_points, cfg.max_samples // max(1, batch_nodes)))


def fetch_chunks(
    client: PromClient, cfg: PromConfig, plan: NodePlan | None = None
) -> Iterator[pl.DataFrame]:
    """Complete telemetry frames, one per (node batch, time window), in time order per
    batch. Each is fully fetched before it is yielded. ``plan``: which label values name
    which node (default: discovered, with no inventory)."""
    plan = plan or plan_nodes(client, cfg, None)
    nodes = plan.nodes
    for i in range(0, len(nodes), cfg.node_batch):
        batch = nodes[i : i + cfg.node_batch]
        carry: dict[str, dict[str, float]] = {q.column: {} for q in cfg.queries if q.accumulate}
        windows = time_windows(cfg.start, cfg.end, cfg.step_s, window_points(cfg, len(batch)))
        selectors = {q.column: plan.selectors(q, batch) for q in cfg.queries}
        for w_start, w_end in windows:
            per_column: dict[str, pl.DataFrame] = {}
            for q in cfg.queries:
                parts = []
                for label, sel in selectors[q.column]:
                    params = {
                        "query": render(q, cfg, sel, label),
                        "start": ts_param(w_start),
                        "end": ts_param(w_end),
                        "step": f"{cfg.step_s:g}",
                        "timeout": prom_duration(cfg.timeout_s),
                    }
                    what = (
                        f"{q.column} for {len(batch)} node(s) {batch[0]}..{batch[-1]} by "
                        f"{label}, {w_start.isoformat()}..{w_end.isoformat()}"
                    )
                    result = client.call(
                        "/api/v1/query_range", params, what=what, post=True, parse=answers.matrix
                    )
                    parts.append(matrix_frame(result, label, plan, q.column))
                frame = one_series_per_node(parts, q.column)
                if q.accumulate:
                    frame = _accumulate(frame, carry[q.column])
                per_column[q.column] = frame
            chunk = telemetry_frame(per_column)
            if chunk.height:
                yield chunk


def _accumulate(frame: pl.DataFrame, carry: dict[str, float]) -> pl.DataFrame:
    """Per-step event counts -> running totals per node, continuing from ``carry``."""
    if frame.height == 0:
        return frame
    base = pl.DataFrame(
        {"node_id": list(carry), "__base": list(carry.values())},
        schema={"node_id": pl.String(), "__base": pl.Float64()},
    )
    out = (
        frame.sort("node_id", "ts")
        .join(base, on="node_id", how="left")
        .with_columns(
            (
                pl.col("value").fill_nan(None).cum_sum().over("node_id")
                + pl.col("__base").fill_null(0.0)
            ).alias("value")
        )
        .drop("__base")
    )
    for nid, total in out.group_by("node_id").agg(pl.col("value").drop_nulls().last()).iter_rows():
        if total is not None and not math.isnan(total):
            carry[nid] = total
    return out


@dataclass(slots=True)
class StagedRead:
    """Fetch every chunk to Parquet files first, then hand them out as batches.

    ``inventory`` gives the known nodes of a lake source (None: no inventory); the first
    batch carries the ``identity`` report (an empty telemetry batch when no rows came)."""

    cfg: PromConfig
    client: PromClient
    inventory: Callable[[str], KnownNodes | None] | None = None
    staged_rows: list[int] = field(default_factory=list)

    def batches(self) -> Iterator[Batch]:
        src = self.cfg.inventory_source
        known = self.inventory(src) if self.inventory is not None and src else None
        if known is None and self.cfg.inventory_required:
            raise IngestError(
                f"prometheus: -o inventory_source={src}: the lake has no inventory of source "
                f"{src!r} to reconcile node names with"
            )
        with tempfile.TemporaryDirectory(prefix="predops-prom-", dir=self.cfg.staging_dir) as d:
            plan = plan_nodes(self.client, self.cfg, known)
            files = []
            for n, chunk in enumerate(fetch_chunks(self.client, self.cfg, plan)):
                path = Path(d) / f"chunk-{n:06d}.parquet"
                chunk.write_parquet(path)
                files.append(path)
                self.staged_rows.append(chunk.height)
            plan.check()  # with -o nodes, the values are resolved as answers come
            notes: dict[str, Any] | None = {"identity": plan.tally.to_dict()}
            if not files:
                yield Batch("telemetry", TELEMETRY.empty(), notes=notes)
            first = 1
            for path in files:
                frame = pl.read_parquet(path)
                yield Batch("telemetry", frame, first_row=first, notes=notes)
                notes = None
                first += frame.height


def read(path: str, options: IngestOptions) -> Iterator[Batch]:
    cfg = config_from_options(path, options)
    return StagedRead(cfg, PromClient(cfg), options.inventory).batches()
