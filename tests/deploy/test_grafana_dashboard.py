"""deploy/grafana/predops.json: the sections the issue asks for, node drill-down by pool,
rack and node, every query on the ``datasource`` variable, every variable it uses
defined, a layout that fits Grafana's 24 columns without overlaps. (That every query
returns data from a real Prometheus is test_monitoring_integration's.)"""

from __future__ import annotations

from tests.deploy.monitoring import (
    GRAFANA_BUILTINS,
    dashboard,
    panel_queries,
    panels,
    selectors,
    used_variables,
    variables,
)

SECTIONS = ("Fleet risk", "Node drill-down", "Demand vs capacity", "Plan outcomes")


def test_sections_and_drill_down_variables() -> None:
    dash = dashboard()
    assert dash["uid"] == "predops" and dash["title"].startswith("predops")
    rows = [p["title"] for p in dash["panels"] if p["type"] == "row"]
    for section in (*SECTIONS, "Pipeline health"):
        assert any(r.startswith(section) for r in rows), section
    v = variables(dash)
    assert v["datasource"]["type"] == "datasource" and v["datasource"]["query"] == "prometheus"
    assert v["pool"]["definition"] == "label_values(predops_node_failure_probability, pool)"
    assert v["rack"]["definition"].endswith(", rack)")
    assert used_variables(v["rack"]["definition"]) == {"pool"}
    assert v["node"]["definition"].endswith(", node)")
    assert used_variables(v["node"]["definition"]) == {"pool", "rack"}
    for name in ("pool", "rack"):
        assert v[name]["includeAll"] and v[name]["allValue"] == ".*"
    assert not v["node"]["multi"]  # the drill-down shows one node


def test_every_panel_queries_prometheus_through_the_variable() -> None:
    dash = dashboard()
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    for p in panels(dash):
        assert p["targets"], p["title"]
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
        for t in p["targets"]:
            assert t["datasource"] == p["datasource"] and t["expr"].strip(), p["title"]
            assert selectors(t["expr"]), (p["title"], t["expr"])


def test_every_variable_used_is_defined() -> None:
    dash = dashboard()
    defined = set(variables(dash)) | set(GRAFANA_BUILTINS)
    texts = [e for _, e in panel_queries(dash)]
    texts += [p["title"] for p in dash["panels"]]
    texts += [v.get("definition", "") for v in variables(dash).values()]
    for text in texts:
        assert used_variables(text) <= defined, text


def test_the_layout_fits_and_nothing_overlaps() -> None:
    dash = dashboard()
    taken: set[tuple[int, int]] = set()
    for p in dash["panels"]:
        g = p["gridPos"]
        assert g["x"] >= 0 and g["x"] + g["w"] <= 24, p["title"]
        cells = {
            (x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])
        }
        assert not cells & taken, p["title"]
        taken |= cells
