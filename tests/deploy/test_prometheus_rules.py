"""deploy/prometheus: the alert rules pass ``promtool check rules`` and their unit tests
(``promtool test rules``), every alert has a case that fires, and the PrometheusRule holds
the same groups as the plain rule file."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.k8s import DEPLOY

RULES_DIR = DEPLOY / "prometheus"
RULES = RULES_DIR / "rules.yaml"


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.fail("promtool not found: install Debian's prometheus package")
    return found


def alerts(path: Path = RULES) -> list[dict[str, Any]]:
    doc = yaml.safe_load(path.read_text())
    return [r for g in doc["groups"] for r in g["rules"] if "alert" in r]


def run(*args: str, cwd: Path = RULES_DIR) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool(), *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_promtool_checks_the_rules() -> None:
    res = run("check", "rules", RULES.name)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"SUCCESS: {len(alerts())} rules found" in res.stdout


def test_promtool_unit_tests_pass() -> None:
    res = run("test", "rules", "rules_test.yaml")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "SUCCESS" in res.stdout


def test_every_alert_has_a_firing_case_and_says_what_to_do() -> None:
    tests = yaml.safe_load((RULES_DIR / "rules_test.yaml").read_text())
    fired = {
        case["alertname"]
        for t in tests["tests"]
        for case in t.get("alert_rule_test", [])
        if case["exp_alerts"]
    }
    names = [a["alert"] for a in alerts()]
    assert len(names) == len(set(names))
    assert sorted(set(names) - fired) == []
    for a in alerts():
        assert a["labels"]["severity"] in ("critical", "warning", "info"), a["alert"]
        assert a["annotations"]["summary"] and a["annotations"]["description"], a["alert"]
        assert a["alert"].startswith("Predops"), a["alert"]


def test_the_prometheusrule_wraps_the_same_groups() -> None:
    crd = yaml.safe_load((RULES_DIR / "prometheusrule.yaml").read_text())
    assert crd["apiVersion"] == "monitoring.coreos.com/v1" and crd["kind"] == "PrometheusRule"
    assert crd["metadata"]["name"] == "predops"
    assert crd["spec"]["groups"] == yaml.safe_load(RULES.read_text())["groups"]
