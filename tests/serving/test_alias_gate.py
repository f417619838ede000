"""The promotion gate as the server and ``predops plan`` see it: a ``champion`` alias moved
with MLflow's own client (as the MLflow UI does) to a version predops never promoted is
not reloaded by the server nor used by the plan; /readyz, /metrics and the models page
report it; a promotion through predops then serves as before.

The raw ``MlflowClient`` comes from the registry's private ``_mlflow`` context (only the
registry module may import MLflow, see tests/test_architecture.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from predops.core.clock import FixedClock
from predops.models.failure.scorer import pyfunc_predict
from predops.pipelines.jobs import demand as demand_jobs
from predops.pipelines.jobs import failure as failure_jobs
from predops.pipelines.jobs.plan import plan_in_workspace
from predops.pipelines.workspace import registry
from tests.serving.api import bearer, fresh_clock, make_app
from tests.serving.conftest import settings_for

GAUGE = "predops_registry_alias_unverified"


def register_copy(uri: str, name: str, predict: Any, pip: list[str]) -> str:
    """A new version of ``name`` holding the champion's object again (no training)."""
    obj, _, prov = registry.load_python_model(name, uri=uri)
    return registry.log_and_register(
        name,
        obj,
        predict=predict,
        params={"copy_of": prov.model_version},
        metrics={},
        feature_set_hash=prov.feature_set_hash,
        data_cutoff=prov.data_cutoff,
        pip_requirements=pip,
        uri=uri,
    )


def move_alias_by_hand(uri: str, name: str, version: str) -> None:
    with registry._mlflow(uri) as client:
        client.set_registered_model_alias(registry.registered_name(name), "champion", version)


def test_hand_moved_alias_is_reported_not_served_and_promotion_still_works(
    served_workspace: Path, shared_data: Path
) -> None:
    settings = settings_for(served_workspace, shared_data)
    uri = settings.mlflow_uri
    fail_v2 = register_copy(uri, "node_failure", pyfunc_predict, failure_jobs.PIP_REQUIREMENTS)
    demand_v2 = register_copy(
        uri, "demand.hourly", demand_jobs.predict_forecasts, demand_jobs.PIP_REQUIREMENTS
    )
    assert fail_v2 == demand_v2 == "2"
    # The jobs that trained the champions logged their signatures.
    failure_sig = registry.load("node_failure", "1", uri=uri)[0].metadata.signature
    assert failure_sig is not None and "node__age_days" in failure_sig.inputs.input_names()
    demand_sig = registry.load("demand.hourly", "1", uri=uri)[0].metadata.signature
    assert demand_sig is not None and {"series_id", "ts", "value"} <= set(
        demand_sig.inputs.input_names()
    )
    app = make_app(served_workspace, shared_data)
    ctx = app.state.ctx
    with TestClient(app) as client:
        assert ctx.failure.current.version == "1"
        move_alias_by_hand(uri, "node_failure", "2")
        move_alias_by_hand(uri, "demand.hourly", "2")  # the slot "demand" serves it

        # The server's reload path keeps the promoted versions.
        ctx.refresh_models()
        assert ctx.failure.current.version == "1" and ctx.demand.current.version == "1"
        assert ctx.failure.reloads == 1 and ctx.failure.last_error is None
        ready = client.get("/readyz")
        assert ready.status_code == 200, ready.json()
        body = ready.json()
        untrusted = {u["model"]: u for u in body["champion_untrusted"]}
        assert set(untrusted) == {"node_failure", "demand"}
        assert untrusted["node_failure"]["alias_version"] == "2"
        assert untrusted["node_failure"]["served_version"] == "1"
        assert "was not set by predops" in untrusted["node_failure"]["problem"]
        assert body["models"]["node_failure"]["alias"]["verified"] is False
        metrics = client.get("/metrics").text
        assert f'{GAUGE}{{alias="champion",model="node_failure"}} 1.0' in metrics
        assert f'{GAUGE}{{alias="champion",model="demand"}} 1.0' in metrics
        page = client.get("/models", headers=bearer("viewer")).text
        assert "unverified: → v2" in page and "not promoted by predops" in page

        # The plan's inputs come from the promoted versions too.
        now = fresh_clock(served_workspace).now()
        risks = failure_jobs.current_risk(settings, now=now)
        assert risks and {r.provenance.model_version for r in risks if r.provenance} == {"1"}
        report = plan_in_workspace(settings, now, who="test", clock=FixedClock(now))
        assert report["inputs"]["forecasts"]["version"] == "1"

        # Promoting through predops (the backtest) serves v2 and clears the report.
        moved = registry.promote("node_failure", lambda u: float(not u.endswith("/2")), uri=uri)
        assert moved["promoted"], moved
        ctx.refresh_models()
        assert ctx.failure.current.version == "2" and ctx.failure.untrusted_alias() is None
        body = client.get("/readyz").json()
        assert [u["model"] for u in body["champion_untrusted"]] == ["demand"]
        metrics = client.get("/metrics").text
        assert f'{GAUGE}{{alias="champion",model="node_failure"}} 0.0' in metrics
