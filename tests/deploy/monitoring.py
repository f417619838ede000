"""Helpers of the monitoring tests: the Grafana dashboard's queries with its template
variables filled in, and the series an alert expression reads."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

import yaml

from tests.deploy.k8s import DEPLOY

DASHBOARD = DEPLOY / "grafana" / "predops.json"
RULES = DEPLOY / "prometheus" / "rules.yaml"
GRAFANA_BUILTINS = ("__rate_interval", "__interval", "__range")
VARIABLE = re.compile(r"\$(\w+)|\$\{(\w+)\}")
SELECTOR = re.compile(r"\b(predops_[a-z0-9_]+)(\{[^}]*\})?")


def dashboard() -> dict[str, Any]:
    found: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return found


def panels(dash: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel that queries (rows and panels folded inside rows included)."""
    for p in dash["panels"]:
        if p["type"] == "row":
            yield from p.get("panels", [])
        else:
            yield p


def panel_queries(dash: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(panel title, PromQL) of every target of every panel."""
    return [(p["title"], t["expr"]) for p in panels(dash) for t in p["targets"]]


def variables(dash: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in dash["templating"]["list"]}


def used_variables(text: str) -> set[str]:
    return {a or b for a, b in VARIABLE.findall(text)}


def substitute(expr: str, values: Mapping[str, str]) -> str:
    """``expr`` with ``$name`` / ``${name}`` replaced by ``values[name]`` (KeyError for a
    variable without a value)."""
    return VARIABLE.sub(lambda m: values[m.group(1) or m.group(2)], expr)


def alerts() -> list[dict[str, Any]]:
    doc = yaml.safe_load(RULES.read_text())
    return [r for g in doc["groups"] for r in g["rules"] if "alert" in r]


def selectors(expr: str) -> list[str]:
    """The vector selectors (metric name and matchers) ``expr`` reads, in order."""
    return list(dict.fromkeys(name + (matchers or "") for name, matchers in SELECTOR.findall(expr)))
