"""Which inventory node a telemetry label value names: ``10.0.0.5:9100``, ``gpu-01`` and
``gpu-01.dc1`` -> ``gpu-01.dc1``.

Exporters name a node in their own way: node-exporter by its scrape target
(``instance="10.0.0.5:9100"`` or ``"gpu-01.dc1:9100"``), the DCGM exporter by
``Hostname`` (often the short host name), kube-state-metrics by the Kubernetes node name
(``node``), relabelled targets by ``kubernetes_node``. :class:`NodeResolver` turns one such
value into the inventory's node name, trying in order:

1. the explicit mapping file (``node_map``, CSV ``alias,node_id``; :func:`read_node_map`);
2. a node name of the inventory;
3. an address the inventory's source recorded for a node (``node_addresses``: the
   Kubernetes adapter's InternalIP / ExternalIP / Hostname / DNS names); an address
   several nodes held goes to the one that held it at the latest snapshot;
4. ``kube_node_info``'s ``internal_ip`` -> ``node``, when the telemetry source has it;
5. a short host name for an FQDN node name or the reverse (``gpu-01`` and
   ``gpu-01.dc1``, never ``gpu-01.dc2`` and ``gpu-01.dc1``), when exactly one node fits.

Values and aliases are compared normalised (:func:`normalise`): trimmed, lower-case,
without a port (``:9100``), IPv6 brackets or a trailing dot, IP addresses in canonical
form. A value that two nodes fit at the first step that finds any is ambiguous and is
refused, never guessed: a ``node_map`` line settles it.

Without an inventory (``known is None``) the node names ``kube_node_info`` reports stand
in for one; a value they do not resolve keeps its raw label value (port stripped), as
ingest always did: nothing is refused. :class:`IdentityTally` counts what was mapped,
how, and what was not, with examples, for the ingest report.
"""

from __future__ import annotations

import csv
import io
import ipaddress
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl

from predops.pipelines.ingest.batch import IngestError
from predops.pipelines.workspace.lake import Lake

MAX_NODE_MAP_BYTES = 64 << 20
"""A mapping file larger than this is refused (10,000 nodes x a few aliases is ~1 MB)."""
MAX_EXAMPLES = 5
NODE_MAP_HEADER = ("alias", "node_id")


@dataclass(frozen=True, slots=True)
class KnownNodes:
    """An inventory's node names and the addresses its source recorded for them."""

    source: str
    names: frozenset[str]
    addresses: tuple[tuple[str, str, datetime | None], ...] = ()
    """(address, node_id, snapshot time) for each node's latest snapshot."""


def known_nodes(lake: Lake, source: str) -> KnownNodes | None:
    """The inventory of ``source`` as identity needs it; None when it has none."""
    if not lake.files("inventory", source):
        return None
    names = lake.scan("inventory", source).select("node_id").unique().collect()
    latest = (
        lake.scan("node_addresses", source)
        .filter(pl.col("ts") == pl.col("ts").max().over("node_id"))
        .select("address", "node_id", "ts")
        .unique()
        .collect()
    )
    return KnownNodes(source, frozenset(names["node_id"]), tuple(latest.iter_rows()))


# ----------------------------------------------------------------------------- values
_HOST_PORT = re.compile(r"([^:]+):\d+")
_BRACKETED = re.compile(r"\[([^\]]+)\](?::\d+)?")


def normalise(value: str) -> str:
    """The form values and aliases are compared in: ``GPU-01.dc1.:9100`` -> ``gpu-01.dc1``,
    ``[FE80::0001]:9100`` -> ``fe80::1``."""
    v = value.strip().lower()
    m = _BRACKETED.fullmatch(v) or _HOST_PORT.fullmatch(v)
    if m:
        v = m.group(1)
    try:
        return str(ipaddress.ip_address(v))
    except ValueError:
        return v.rstrip(".")


def is_ip(key: str) -> bool:
    try:
        ipaddress.ip_address(key)
    except ValueError:
        return False
    return True


def read_node_map(path: str) -> dict[str, str]:
    """A node map file: CSV with the header ``alias,node_id``, then one alias per line
    (``10.0.0.5:9100,gpu-01.dc1``); blank lines and lines starting with ``#`` are skipped.
    Returns normalised alias -> node id. An alias given for two nodes is an error naming
    both lines."""
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > MAX_NODE_MAP_BYTES:
            raise IngestError(
                f"{path}: node map is {size} bytes, more than the {MAX_NODE_MAP_BYTES >> 20} MiB "
                "a mapping file may hold"
            )
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise IngestError(f"{path}: cannot read the node map ({exc})") from exc
    lines = [
        (n, line)
        for n, line in enumerate(text.splitlines(), start=1)
        if line.strip() and not line.lstrip().startswith("#")
    ]
    if not lines:
        raise IngestError(f"{path}: the node map is empty; it needs the header alias,node_id")
    out: dict[str, str] = {}
    where: dict[str, int] = {}
    for i, (n, line) in enumerate(lines):
        try:
            fields = [f.strip() for f in next(csv.reader(io.StringIO(line)))]
        except csv.Error as exc:
            raise IngestError(f"{path}:{n}: not a CSV line ({exc})") from exc
        if i == 0:
            if tuple(f.lower() for f in fields) != NODE_MAP_HEADER:
                raise IngestError(
                    f"{path}:{n}: the node map starts with the header alias,node_id, "
                    f"not {line.strip()!r}"
                )
            continue
        if len(fields) != 2 or not all(fields):
            raise IngestError(f"{path}:{n}: expected alias,node_id, got {line.strip()!r}")
        alias, node = normalise(fields[0]), fields[1]
        if out.get(alias, node) != node:
            raise IngestError(
                f"{path}:{n}: alias {fields[0]!r} maps to {node!r} here and to "
                f"{out[alias]!r} on line {where[alias]}"
            )
        out[alias], where[alias] = node, n
    return out


# ----------------------------------------------------------------------------- resolving
@dataclass(frozen=True, slots=True)
class Match:
    """What a label value resolved to: ``node`` (None: refused), ``how`` (``node_map``,
    ``name``, ``address``, ``kube_node_info``, ``short_name``, ``raw`` or ``unmatched``)
    and, when it was not reconciled, ``why``."""

    node: str | None
    how: str
    why: str = ""


def _index(pairs: Iterable[tuple[str, str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for key, node in pairs:
        out.setdefault(key, set()).add(node)
    return out


def _show(nodes: Iterable[str]) -> str:
    return ", ".join(sorted(nodes))


class NodeResolver:
    """Label values -> node names, by the steps of the module docstring.

    ``known`` is the inventory (None: there is none, and unresolved values keep their
    ``raw`` id); ``node_map`` maps normalised aliases to node ids; ``node_info`` gives
    (internal_ip, node) pairs from ``kube_node_info``, called at most once and only when
    a value gets that far (with an inventory) or at the first value (without one, where
    its node names stand in for the inventory's).
    """

    def __init__(
        self,
        known: KnownNodes | None,
        *,
        node_map: Mapping[str, str] | None = None,
        node_info: Callable[[], Iterable[tuple[str, str]]] = tuple,
        raw: Callable[[str], str] = str,
    ) -> None:
        self.known = known
        self.raw = raw
        self.node_map = dict(node_map or {})
        self._load_info = node_info
        self._info: dict[str, set[str]] | None = None
        self._names: dict[str, set[str]] = {}
        self._prefixes: dict[str, set[str]] = {}
        self._addresses: dict[str, set[str]] = {}
        if known is not None:
            self._know(known.names)
            latest: dict[str, dict[str, datetime | None]] = {}
            for address, node, ts in known.addresses:
                if node in known.names:
                    latest.setdefault(normalise(address), {})[node] = ts
            self._addresses = {k: _latest(v) for k, v in latest.items()}

    def _know(self, names: Iterable[str]) -> None:
        self._names = _index((normalise(n), n) for n in names)
        prefixes = []
        for key, nodes in self._names.items():
            parts = key.split(".")
            if len(parts) > 1 and not is_ip(key):
                prefixes += [(".".join(parts[:i]), n) for i in range(1, len(parts)) for n in nodes]
        self._prefixes = _index(prefixes)

    def _node_info(self) -> dict[str, set[str]]:
        if self._info is None:
            pairs = [(normalise(ip), node) for ip, node in self._load_info() if ip and node]
            self._info = _index(pairs)
            if self.known is None:
                self._know({node for _, node in pairs})
        return self._info

    @property
    def strict(self) -> bool:
        """True when values must resolve to an inventory node (there is an inventory)."""
        return self.known is not None

    def _name(self, key: str) -> set[str]:
        return self._names.get(key, set())

    def _target(self, node: str) -> str | None:
        """An alias's target as the inventory spells it, or None when it has no such node."""
        if not self.strict:
            return node
        found = self._name(normalise(node))
        return next(iter(found)) if len(found) == 1 else None

    def resolve(self, value: str) -> Match:
        key = normalise(value)
        if not self.strict:
            self._node_info()  # its node names are the only ones known
        if key in self.node_map:
            node = self.node_map[key]
            target = self._target(node)
            if target is None:
                return self._refuse(value, f"node_map maps it to {node!r}, {self._missing()}")
            return Match(target, "node_map")
        steps: tuple[tuple[str, Callable[[str], set[str]]], ...] = (
            ("name", self._name),
            ("address", lambda k: self._addresses.get(k, set())),
            ("kube_node_info", self._via_info),
            ("short_name", self._short),
        )
        for how, find in steps:
            nodes = find(key)
            if len(nodes) == 1:
                return Match(next(iter(nodes)), how)
            if nodes:
                return self._refuse(
                    value, f"ambiguous: {how} fits {_show(nodes)}; settle it in -o node_map"
                )
        if self.strict:
            return self._refuse(value, "no inventory node has this name, address or short name")
        return Match(self.raw(value), "raw")

    def _via_info(self, key: str) -> set[str]:
        out = set()
        for node in self._node_info().get(key, set()):
            target = self._target(node)
            if target is None:
                return set()  # kube_node_info names a node the inventory lacks
            out.add(target)
        return out

    def _short(self, key: str) -> set[str]:
        if is_ip(key):
            return set()
        longer = self._prefixes.get(key, set())  # gpu-01 -> gpu-01.dc1
        parts = key.split(".")
        shorter = {
            n for i in range(1, len(parts)) for n in self._name(".".join(parts[:i]))
        }  # gpu-01.dc1.example.com -> gpu-01
        return longer | shorter

    def _missing(self) -> str:
        assert self.known is not None
        return f"which the inventory of source {self.known.source!r} does not have"

    def _refuse(self, value: str, why: str) -> Match:
        if self.strict:
            return Match(None, "unmatched", why)
        return Match(self.raw(value), "raw", why)


def _latest(held: Mapping[str, datetime | None]) -> set[str]:
    """The nodes that held an address at its latest snapshot."""
    stamps = [t for t in held.values() if t is not None]
    if not stamps:
        return set(held)
    last = max(stamps)
    return {n for n, t in held.items() if t == last}


# ----------------------------------------------------------------------------- reporting
@dataclass(slots=True)
class IdentityTally:
    """Every (label, value) a telemetry source named a node by, and what it resolved to."""

    inventory: str | None
    labels: tuple[str, ...]
    seen: dict[tuple[str, str], Match] = field(default_factory=dict)

    def add(self, label: str, value: str, match: Match) -> None:
        self.seen.setdefault((label, value), match)

    @property
    def mapped(self) -> int:
        return sum(1 for m in self.seen.values() if m.node is not None)

    @property
    def unmatched(self) -> int:
        return len(self.seen) - self.mapped

    def examples(self) -> list[dict[str, Any]]:
        """Up to five label sets that were not reconciled (refused or kept raw), with why:
        the first of each label in turn, so that every label with some is shown."""
        order = {label: i for i, label in enumerate(self.labels)}
        per_label: dict[str, list[tuple[str, Match]]] = {}
        for (lab, v), m in sorted(self.seen.items()):
            if m.how in ("unmatched", "raw"):
                per_label.setdefault(lab, []).append((v, m))
        labels = sorted(per_label, key=lambda x: (order.get(x, len(order)), x))
        rows = [
            (lab, *per_label[lab][i])
            for i in range(max(map(len, per_label.values()), default=0))
            for lab in labels
            if i < len(per_label[lab])
        ]
        out = []
        for lab, v, m in rows[:MAX_EXAMPLES]:
            why = m.why or f"no inventory: the node id is the label value {m.node!r}"
            out.append({"labels": {lab: v}, "why": why})
        return out

    def to_dict(self) -> dict[str, Any]:
        by_label: dict[str, dict[str, int]] = {}
        by_match: dict[str, int] = {}
        for (label, _), m in sorted(self.seen.items()):
            counts = by_label.setdefault(label, {"mapped": 0, "unmatched": 0})
            counts["mapped" if m.node is not None else "unmatched"] += 1
            by_match[m.how] = by_match.get(m.how, 0) + 1
        return {
            "inventory": self.inventory,
            "node_ids": "inventory node names" if self.inventory else "raw label values",
            "labels": list(self.labels),
            "mapped": self.mapped,
            "unmatched": self.unmatched,
            "nodes": len({m.node for m in self.seen.values() if m.node is not None}),
            "by_label": by_label,
            "by_match": dict(sorted(by_match.items())),
            "examples": self.examples(),
        }

    def show_examples(self) -> str:
        """The examples as a message lists them: ``{instance="a:9100"}, {node="b"}: why``."""
        by_why: dict[str, list[str]] = {}
        for e in self.examples():
            shown = "{" + ", ".join(f'{k}="{v}"' for k, v in e["labels"].items()) + "}"
            by_why.setdefault(e["why"], []).append(shown)
        return "; ".join(f"{', '.join(shown)}: {why}" for why, shown in by_why.items())
