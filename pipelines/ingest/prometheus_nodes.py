"""Which node each Prometheus series is about: the label a series names its node by, node
discovery through the label-values API, the matchers that ask for one batch of nodes and
``kube_node_info``'s addresses. Reconciling a label value with the inventory is
:mod:`.identity`'s.

A series names its node by the first label of ``-o node_label`` (default
``node,kubernetes_node,Hostname,instance``) it carries: kube-state-metrics' ``node``, a
relabelled ``kubernetes_node``, the DCGM exporter's ``Hostname``, else the scrape target
``instance``. So one ingest maps node-exporter, DCGM and kube-state-metrics series alike.
When the first label's value maps to no node, a later label is not tried: on DCGM and
kube-state-metrics series ``instance`` names the exporter pod, not the node. Each query
runs once per label that has series (per node batch), its selectors matching only series
without the labels before it (``node=""`` matches a series that has no ``node``), so each
series is read once, under its own label. A single label (``-o node_label=instance``)
reads every series carrying it, whatever else it carries, as before.

Discovery asks the label-values API, per query and label, which values the query's
metrics carry in the range; each value is resolved to a node once, and the nodes are
asked for in batches, every label value of a batch's nodes exactly. Values that resolve
to no node are not asked for: the ingest report counts and names them. ``-o nodes=a,b``
skips discovery and asks every label for those values (any port when stripping ports).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, TypeVar

from predops.pipelines.ingest import identity
from predops.pipelines.ingest import prometheus_answers as answers
from predops.pipelines.ingest.batch import IngestError

T = TypeVar("T")

DEFAULT_NODE_LABELS = "node,kubernetes_node,Hostname,instance"
_LABEL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Query(Protocol):
    """What discovery reads of a :class:`~predops.pipelines.ingest.prometheus.MetricQuery`."""

    @property
    def column(self) -> str: ...
    @property
    def expr(self) -> str: ...


class NodeConfig(Protocol):
    """What discovery reads of a :class:`~predops.pipelines.ingest.prometheus.PromConfig`
    (a protocol, so that this module does not import the adapter back)."""

    @property
    def start(self) -> datetime: ...
    @property
    def end(self) -> datetime: ...
    @property
    def queries(self) -> Sequence[Query]: ...
    @property
    def nodes(self) -> tuple[str, ...] | None: ...
    @property
    def strip_port(self) -> bool: ...
    @property
    def node_map(self) -> str | None: ...
    @property
    def node_info(self) -> str: ...

    def labels_for(self, q: Any) -> tuple[str, ...]: ...


class ApiCaller(Protocol):
    """What discovery needs of :class:`~predops.pipelines.ingest.prometheus.PromClient`."""

    def call(
        self,
        path: str,
        params: Mapping[str, Any],
        *,
        what: str,
        post: bool,
        parse: Callable[[Any], T],
    ) -> T: ...


def label_order(text: str, what: str = "node_label") -> tuple[str, ...]:
    """``node,Hostname,instance`` -> the labels a series may name its node by, in order."""
    labels = tuple(x.strip() for x in text.split(",") if x.strip())
    bad = [x for x in labels if not _LABEL_NAME.fullmatch(x)]
    if not labels or bad or len(set(labels)) != len(labels):
        raise IngestError(
            f"prometheus: -o {what}={text!r} is not a comma-separated list of distinct label "
            "names, like node,kubernetes_node,Hostname,instance"
        )
    return labels


def node_id(value: str, strip_port: bool) -> str:
    """A label value as a raw node id: ``host:9100`` -> ``host``, ``[::1]:9100`` ->
    ``[::1]``; an unbracketed IPv6 address is left whole."""
    if strip_port:
        m = re.match(r"^([^:]+|\[[^\]]+\]):\d+$", value)
        if m:
            return m.group(1)
    return value


def _quote(regex: str) -> str:
    return '"' + regex.replace("\\", "\\\\").replace('"', '\\"') + '"'


def node_selector(label: str, nodes: Sequence[str], strip_port: bool) -> str:
    """A PromQL matcher selecting exactly ``nodes`` (with any port when stripping)."""
    alts = "|".join(re.escape(n) for n in nodes)
    regex = f"(?:{alts})" + ("(?::[0-9]+)?" if strip_port else "")
    return f"{label}=~{_quote(regex)}"


def without(labels: Sequence[str]) -> list[str]:
    """Matchers for series that carry none of ``labels``."""
    return [f'{h}=""' for h in labels]


_METRIC_BEFORE_SEL = re.compile(r"([A-Za-z_:][A-Za-z0-9_:]*)\s*\{[^{}]*\$sel")
_NAME_MATCHER_WITH_SEL = re.compile(r'\{\s*__name__\s*=~?\s*"([^"]+)"[^{}]*\$sel')


def metric_names(expr: str) -> list[str]:
    """Metric names (or name regexes) of the selectors that carry ``$sel``."""
    return sorted(set(_METRIC_BEFORE_SEL.findall(expr)) | set(_NAME_MATCHER_WITH_SEL.findall(expr)))


def ts_param(t: datetime) -> str:
    return f"{t.timestamp():.3f}"


def kube_node_info(client: ApiCaller, cfg: NodeConfig) -> list[tuple[str, str]]:
    """(internal_ip, node) of every ``kube_node_info`` series in the range (series API)."""
    params = {"match[]": cfg.node_info, "start": ts_param(cfg.start), "end": ts_param(cfg.end)}
    found = client.call(
        "/api/v1/series",
        params,
        post=False,
        what=f"node addresses from {cfg.node_info}",
        parse=answers.series_labels,
    )
    return sorted(
        {(s["internal_ip"], s["node"]) for s in found if s.get("internal_ip") and s.get("node")}
    )


# ----------------------------------------------------------------------------- the plan
@dataclass(slots=True)
class NodePlan:
    """The nodes to ask for and, per query and label, the label values naming each."""

    cfg: NodeConfig
    resolver: identity.NodeResolver
    tally: identity.IdentityTally
    values: dict[tuple[str, str], dict[str, list[str]]] = field(default_factory=dict)
    """(column, label) -> node -> the label values discovery found naming it (none with
    ``-o nodes``), so a batch's matchers cost its size, not the fleet's."""
    node_of: dict[tuple[str, str], str | None] = field(default_factory=dict)
    nodes: list[str] = field(default_factory=list)
    """What batches are made of: node ids, or the ``-o nodes`` values."""

    def node(self, label: str, value: str) -> str | None:
        """The node a series naming it ``label=value`` belongs to (None: no known node)."""
        key = (label, value)
        if key not in self.node_of:
            match = self.resolver.resolve(value)
            self.tally.add(label, value, match)
            self.node_of[key] = match.node
        return self.node_of[key]

    def selectors(self, q: Query, batch: Sequence[str]) -> list[tuple[str, str]]:
        """(label, ``$sel``) for each label with series of ``batch`` for query ``q``."""
        labels = self.cfg.labels_for(q)
        out = []
        for i, label in enumerate(labels):
            excluded = without(labels[:i])
            if self.cfg.nodes is not None:
                match = node_selector(label, batch, self.cfg.strip_port)
            else:
                found = self.values.get((q.column, label), {})
                values = [v for n in batch for v in found.get(n, ())]
                if not values:
                    continue
                match = f"{label}=~{_quote('|'.join(re.escape(v) for v in values))}"
            out.append((label, ", ".join([match, *excluded])))
        return out

    def check(self) -> None:
        """Refuse an ingest whose series all name nodes the inventory does not know."""
        t = self.tally
        if not self.resolver.strict or t.mapped or not t.seen:
            return
        assert self.resolver.known is not None
        known = self.resolver.known
        raise IngestError(
            f"prometheus: none of the {t.unmatched} node label value(s) found "
            f"(by {', '.join(t.labels)}) maps to a node of the inventory of source "
            f"{known.source!r} ({len(known.names)} node(s)), e.g. {t.show_examples()}. "
            "List aliases with -o node_map=FILE (CSV alias,node_id), record the nodes' "
            "addresses (predops ingest kubernetes) or pick the inventory with "
            f"-o inventory_source=. identity: {json.dumps(t.to_dict(), sort_keys=True)}"
        )


def plan_nodes(client: ApiCaller, cfg: NodeConfig, known: identity.KnownNodes | None) -> NodePlan:
    """Discover the label values of every query, resolve each to a node, and refuse when
    none maps to an inventory node (:meth:`NodePlan.check`)."""
    node_map = identity.read_node_map(cfg.node_map) if cfg.node_map else None

    def info() -> list[tuple[str, str]]:
        return kube_node_info(client, cfg) if cfg.node_info else []

    resolver = identity.NodeResolver(
        known,
        node_map=node_map,
        node_info=info,
        raw=lambda v: node_id(v, cfg.strip_port),
    )
    labels: list[str] = []
    for q in cfg.queries:
        labels += [x for x in cfg.labels_for(q) if x not in labels]
    tally = identity.IdentityTally(known.source if known else None, tuple(labels))
    plan = NodePlan(cfg, resolver, tally)
    if cfg.nodes is not None:
        plan.nodes = list(cfg.nodes)
        return plan
    asked: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for q in cfg.queries:
        names = metric_names(q.expr)
        order = cfg.labels_for(q)
        if not names:
            continue
        for i, label in enumerate(order):
            key = ("|".join(names), order[: i + 1])
            if key not in asked:
                matchers = [f'__name__=~"{"|".join(names)}"', *without(order[:i])]
                asked[key] = client.call(
                    f"/api/v1/label/{label}/values",
                    {
                        "match[]": "{" + ", ".join(matchers) + "}",
                        "start": ts_param(cfg.start),
                        "end": ts_param(cfg.end),
                    },
                    post=False,
                    what=f"node discovery by label {label}",
                    parse=answers.label_values,
                )
            by_node = plan.values.setdefault((q.column, label), {})
            for v in sorted(asked[key]):
                if (n := plan.node(label, v)) is not None:
                    by_node.setdefault(n, []).append(v)
    plan.nodes = sorted({n for by_node in plan.values.values() for n in by_node})
    plan.check()
    return plan
