"""The promotion gate against a real MLflow on SQLite: predops records every move of
``champion`` on the version, and an alias moved past predops — with MLflow's own client,
as the UI does — is reported and never loaded. Also: logged models carry a signature.

The raw ``MlflowClient`` comes from the registry's private ``_mlflow`` context (only the
registry module may import MLflow, see tests/test_architecture.py)."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import pytest

from predops.pipelines.workspace import promotion_records, registry
from predops.pipelines.workspace.errors import RegistryError
from predops.pipelines.workspace.registry import Backtest
from tests.pipelines.workspace.test_registry import abs_error, register

RECORD = promotion_records.record_tag(registry.CHAMPION)


def move_alias_by_hand(uri: str, version: str) -> None:
    """What the MLflow UI's alias button does: ``set_registered_model_alias``."""
    with registry._mlflow(uri) as client:
        client.set_registered_model_alias("predops.toy", registry.CHAMPION, version)


def version_tags(uri: str, version: str) -> dict[str, str]:
    (model,) = registry.list_models(uri=uri)
    return next(v["tags"] for v in model["versions"] if v["version"] == version)


def record_of(uri: str, version: str) -> dict[str, Any] | None:
    return promotion_records.parse_record(version_tags(uri, version).get(RECORD))


def served(uri: str) -> str:
    return registry.load("toy", uri=uri)[1]


def test_first_version_and_won_backtest_write_a_promotion_record(
    uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PREDOPS_OPERATOR", "alice")
    register(uri, 9.0)
    first = record_of(uri, "1")
    assert first is not None
    assert first["alias"] == "champion" and first["version"] == "1"
    assert first["how"] == "first version" and first["backtest"] is None
    assert first["promoted_by"] == "alice" and first["seq"] == 1
    assert first["run_id"] == registry.load("toy", uri=uri)[2].run_id

    register(uri, 10.5)  # error 0.5 beats 1.0
    decision = registry.promote("toy", Backtest(abs_error(uri), metric="abs_error"), uri=uri)
    assert decision["promoted"] is True
    second = record_of(uri, "2")
    assert second is not None and second["how"] == "backtest" and second["replaces"] == "1"
    assert second["seq"] == 2
    assert second["backtest"] == {
        "metric": "abs_error",
        "higher_is_better": False,
        "rule": decision["rule"],
        "challenger": {"version": "2", "score": 0.5},
        "champion": {"version": "1", "score": 1.0},
    }
    state = registry.alias_state("toy", uri=uri)
    assert state.verified and state.alias_version == state.served_version == "2"
    assert state.problem is None


def test_alias_moved_with_the_raw_client_is_reported_and_not_loaded(uri: str) -> None:
    register(uri, 9.0)
    register(uri, 3.0)  # a much worse challenger, never promoted
    move_alias_by_hand(uri, "2")
    assert registry.alias_version("toy", uri=uri) == "2"  # MLflow itself says v2
    state = registry.alias_state("toy", uri=uri)
    assert state.alias_version == "2" and state.served_version == "1"
    assert not state.verified
    assert state.problem is not None and "predops.toy@champion -> v2" in state.problem
    assert "serving v1" in state.problem
    # Everything that loads "champion" gets the promoted version.
    model, version, prov = registry.load("toy", uri=uri)
    assert version == "1" and prov.model_version == "1"
    assert float(model.predict(pd.DataFrame({"x": [0.0]})).iloc[0]) == 9.0
    assert registry.load_python_model("toy", uri=uri)[1] == "1"
    (listed,) = registry.list_models(uri=uri)
    assert listed["alias_states"]["champion"]["verified"] is False
    assert listed["alias_states"]["champion"]["served_version"] == "1"
    # An explicit version number still loads as asked.
    assert registry.load("toy", "2", uri=uri)[1] == "2"


def test_a_record_copied_to_another_version_does_not_verify_it(uri: str) -> None:
    register(uri, 9.0)
    register(uri, 3.0)
    with registry._mlflow(uri) as client:
        client.set_model_version_tag("predops.toy", "2", RECORD, version_tags(uri, "1")[RECORD])
    move_alias_by_hand(uri, "2")
    state = registry.alias_state("toy", uri=uri)
    assert state.served_version == "1" and not state.verified
    assert "names version '1', not '2'" in (state.problem or "")
    # Rewriting the version in the copy is not enough either: the run differs.
    forged = {**json.loads(version_tags(uri, "1")[RECORD]), "version": "2"}
    with registry._mlflow(uri) as client:
        client.set_model_version_tag("predops.toy", "2", RECORD, json.dumps(forged))
    assert "names run_id" in (registry.alias_state("toy", uri=uri).problem or "")
    assert served(uri) == "1"


def test_promote_judges_against_the_promoted_champion_not_the_moved_alias(uri: str) -> None:
    register(uri, 9.0)  # v1 champion, error 1
    register(uri, 3.0)  # v2, error 7, moved to by hand
    move_alias_by_hand(uri, "2")
    register(uri, 8.5)  # v3 challenger, error 1.5: beats v2, not v1
    decision = registry.promote("toy", abs_error(uri), uri=uri)
    assert decision["promoted"] is False and decision["champion"]["version"] == "1"
    assert "v2" in decision["alias_problem"]
    assert served(uri) == "1"
    register(uri, 10.2)  # v4: error 0.2 beats v1; the promotion also repairs the alias
    assert registry.promote("toy", abs_error(uri), uri=uri)["promoted"] is True
    state = registry.alias_state("toy", uri=uri)
    assert state.verified and state.served_version == "4"


def test_rollback_moves_the_record_and_a_hand_restored_old_champion_is_unverified(
    uri: str,
) -> None:
    register(uri, 8.0)  # v1, error 2
    register(uri, 9.5)  # v2, error 0.5
    assert registry.promote("toy", abs_error(uri), uri=uri)["promoted"]
    move_alias_by_hand(uri, "1")  # a rollback done in the UI: v1's record is older
    state = registry.alias_state("toy", uri=uri)
    assert state.served_version == "2" and "rollback" in (state.problem or "")
    back = registry.rollback("toy", uri=uri)
    assert back["rolled_back"] == "2" and back["champion_after"] == "1"
    assert record_of(uri, "2") is None  # the rolled-back version lost its record
    restored = record_of(uri, "1")
    assert restored is not None and restored["how"] == "rollback"
    assert restored["replaces"] == "2" and restored["seq"] == 3
    assert registry.alias_state("toy", uri=uri).verified and served(uri) == "1"
    move_alias_by_hand(uri, "2")  # the rolled-back version cannot be put back by hand
    assert served(uri) == "1"


def test_no_promoted_version_at_all_loads_nothing_then_training_promotes(uri: str) -> None:
    register(uri, 9.0)
    with registry._mlflow(uri) as client:  # a registry from before promotion records
        client.delete_model_version_tag("predops.toy", "1", RECORD)
    with pytest.raises(RegistryError, match=r"no version of predops\.toy was promoted"):
        registry.load("toy", uri=uri)
    register(uri, 9.5)  # nothing to beat: the new version becomes a promoted champion
    assert record_of(uri, "2")["how"] == "no promoted champion"  # type: ignore[index]
    assert served(uri) == "2" and registry.alias_state("toy", uri=uri).verified


def test_logged_model_has_a_signature_and_still_predicts(uri: str) -> None:
    example = pd.DataFrame(
        {
            "x": pd.Series([1.0, 2.0], dtype="float32"),
            "ts": pd.to_datetime(["2026-05-01", "2026-05-02"], utc=True),
            "node_id": ["n1", "n2"],
            "pool": pd.Series(["a", "b"], dtype="category"),
        }
    )
    register(uri, 9.0, input_example=example)
    model, _, _ = registry.load("toy", uri=uri)
    signature = model.metadata.signature
    assert signature is not None
    assert signature.inputs.input_names() == ["x", "ts", "node_id", "pool"]
    types = {c.name: getattr(c.type, "name", str(c.type)) for c in signature.inputs.inputs}
    assert types["x"] == "double" and types["node_id"] == "string"
    assert types["ts"] == types["pool"] == "Any"  # UTC times and categories pass the check
    assert signature.outputs is not None
    # The schema check accepts what predops passes: UTC times, categories, float64, extra
    # columns.
    frame = example.astype({"x": "float64"}).assign(label=[0, 1])
    assert list(model.predict(frame)) == [9.0, 9.0]
    with pytest.raises(Exception, match="node_id"):
        model.predict(frame.drop(columns="node_id"))
