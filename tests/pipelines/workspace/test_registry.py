"""The MLflow registry module against a real MLflow on SQLite in tmp_path.

The model is a tiny Python object that predicts a constant, so logging stays fast; the
backtest loads each version through MLflow's pyfunc interface and scores its prediction
against a known target.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from click.testing import CliRunner

from predops.pipelines.cli.main import main
from predops.pipelines.jobs import promotion
from predops.pipelines.workspace import registry
from predops.pipelines.workspace.errors import RegistryError
from predops.pipelines.workspace.registry import Backtest
from predops.pipelines.workspace.settings import Settings

CUTOFF = datetime(2026, 5, 1, 12, tzinfo=UTC)
TARGET = 10.0
PIP = ["pandas"]


@dataclass
class ConstantModel:
    """Predicts ``level`` for every row (a plain object: no MLflow class)."""

    level: float


def predict_constant(model: ConstantModel, model_input: pd.DataFrame) -> pd.Series:
    return pd.Series([model.level] * len(model_input))


def abs_error(store: str) -> Callable[[str], float]:
    """A backtest on the store at ``store``: load the version through MLflow's pyfunc
    interface and score its prediction of TARGET."""

    def score(model_uri: str) -> float:
        pred = registry.load_uri(model_uri, uri=store).predict(pd.DataFrame({"x": [1.0]}))
        return abs(float(pred.iloc[0]) - TARGET)

    return score


def backtest_for_registry(settings: Any) -> Backtest:
    """The factory the CLI test plugs into promotion.BACKTESTS."""
    return Backtest(score=abs_error(settings.mlflow_uri), metric="abs_error")


def register(uri: str, level: float, **kw: Any) -> str:
    return registry.log_and_register(
        "toy",
        ConstantModel(level),
        predict=predict_constant,
        params={"level": level, "window": [1, 2]},
        metrics={"train_error": abs(level - TARGET)},
        feature_set_hash="abc123",
        data_cutoff=CUTOFF,
        pip_requirements=PIP,
        uri=uri,
        **kw,
    )


def aliases(uri: str) -> dict[str, str]:
    (model,) = registry.list_models(uri=uri)
    return {k: str(v) for k, v in model["aliases"].items()}


def test_first_version_is_champion_and_challenger_and_loads_with_provenance(
    uri: str, tmp_path: Path
) -> None:
    v1 = register(uri, 9.0, extra_tags={"source": "test"})
    assert v1 == "1"
    assert aliases(uri) == {"champion": "1", "challenger": "1"}
    model, version, prov = registry.load("toy", uri=uri)
    assert version == "1"
    assert float(model.predict(pd.DataFrame({"x": [0.0]})).iloc[0]) == 9.0
    # The logged object itself comes back, through MLflow's unwrap_python_model().
    obj, _, same = registry.load_python_model("toy", "1", uri=uri)
    assert obj == ConstantModel(9.0) and same == prov
    assert prov.model_name == "predops.toy" and prov.model_version == "1"
    assert prov.feature_set_hash == "abc123" and prov.data_cutoff == CUTOFF
    assert prov.run_id
    tags = registry.list_models(uri=uri)[0]["versions"][0]["tags"]
    assert tags["source"] == "test" and tags[registry.TAG_CUTOFF] == CUTOFF.isoformat()
    # Artifacts live beside the SQLite store, not in the current directory.
    assert (tmp_path / "mlartifacts").is_dir()


def test_promotion_refuses_worse_and_accepts_better_challenger(uri: str) -> None:
    register(uri, 9.0)  # champion, error 1
    register(uri, 7.0)  # challenger, error 3: worse
    refused = registry.promote("toy", Backtest(abs_error(uri), metric="abs_error"), uri=uri)
    assert refused["promoted"] is False and refused["champion_after"] == "1"
    assert refused["challenger"] == {"version": "2", "score": 3.0}
    assert refused["champion"] == {"version": "1", "score": 1.0}
    assert aliases(uri) == {"champion": "1", "challenger": "2"}
    tags = registry.list_models(uri=uri)[0]["versions"][1]["tags"]
    assert tags["promotion.decision"] == "refused"
    assert float(tags["promotion.challenger_score"]) == 3.0
    assert float(tags["promotion.champion_score"]) == 1.0
    assert "strictly lower" in tags["promotion.rule"]

    register(uri, 10.5)  # challenger, error 0.5: better
    accepted = registry.promote("toy", abs_error(uri), uri=uri)
    assert accepted["promoted"] is True and accepted["champion_after"] == "3"
    assert aliases(uri)["champion"] == "3"
    assert registry.list_models(uri=uri)[0]["champion_history"] == ["1", "3"]
    _, version, _ = registry.load("toy", uri=uri)
    assert version == "3"


def test_equal_score_is_not_better_and_higher_is_better_flips_the_rule(uri: str) -> None:
    register(uri, 9.0)
    register(uri, 11.0)  # same error
    tie = registry.promote("toy", abs_error(uri), uri=uri)
    assert tie["promoted"] is False
    flipped = registry.promote(
        "toy",
        Backtest(lambda u: -abs_error(uri)(u) + (1 if u.endswith("/2") else 0), "neg", True),
        uri=uri,
    )
    assert flipped["promoted"] is True and aliases(uri)["champion"] == "2"


def test_rollback_restores_previous_champion_and_keeps_history(uri: str) -> None:
    register(uri, 8.0)
    register(uri, 9.5)
    assert registry.promote("toy", abs_error(uri), uri=uri)["promoted"]
    back = registry.rollback("toy", uri=uri)
    assert back == {
        "model": "predops.toy",
        "rolled_back": "2",
        "champion_after": "1",
        "history": ["1"],
    }
    assert aliases(uri) == {"champion": "1"}  # the rolled-back challenger is not re-offered
    tags = registry.list_models(uri=uri)[0]["versions"][1]["tags"]
    assert tags["rollback.to_version"] == "1"
    with pytest.raises(RegistryError, match="no previous champion"):
        registry.rollback("toy", uri=uri)


def test_unknown_model_and_missing_backtest_are_clear(
    uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(RegistryError, match=re.escape("no registered model 'predops.nope'")):
        registry.load("nope", uri=uri)
    with pytest.raises(RegistryError, match="no backtest known"):
        promotion.backtest_for("other", settings=Settings(Path("unused"), Path("unused")))


def test_cli_promote_list_rollback(
    tmp_path: Path, uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setitem(promotion.BACKTESTS, "toy", backtest_for_registry)
    register(uri, 12.0)
    register(uri, 10.0)
    runner = CliRunner()
    ws = ["--workspace", str(tmp_path / "ws")]
    res = runner.invoke(main, [*ws, "models", "promote", "toy", "--json"])
    assert res.exit_code == 0, res.output
    decision = json.loads(res.stdout)
    assert decision["promoted"] is True and decision["metric"] == "abs_error"
    listed = json.loads(runner.invoke(main, [*ws, "models", "list", "--json"]).stdout)
    assert listed["models"][0]["aliases"]["champion"] == "2"
    text = runner.invoke(main, [*ws, "models", "list"]).stdout  # text without --json
    assert text.startswith("predops.toy:") and "{" not in text, text
    rows = [line.split() for line in text.splitlines()[2:]]
    assert [r[:3] for r in rows] == [
        ["1", "-", "2026-05-01T12:00:00+00:00"],
        ["2", "challenger,", "champion"],
    ], text
    res = runner.invoke(main, [*ws, "models", "rollback", "toy", "--json"])
    assert json.loads(res.stdout)["champion_after"] == "1"
    res = runner.invoke(main, [*ws, "models", "rollback", "missing", "--json"])
    assert res.exit_code != 0 and "no registered model" in json.loads(res.stdout)["error"]


def test_a_logged_object_loads_in_a_fresh_process(uri: str) -> None:
    """The pyfunc wrapper class is built lazily (MLflow's import is slow); a new
    interpreter must still resolve it when MLflow unpickles the model."""
    register(uri, 7.0)
    code = (
        "from predops.pipelines.workspace import registry\n"
        f"obj, v, _ = registry.load_python_model('toy', uri={uri!r})\n"
        "print(type(obj).__name__, obj.level, v)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).parent,  # so the test module (ConstantModel) imports
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert out.stdout.split() == ["ConstantModel", "7.0", "1"]


def test_mlflow_notes_about_our_own_signatures_are_not_printed() -> None:
    """The integer-columns hint and the type-hint note are about the signature MLflow
    infers from our example; nobody running predops can act on them."""
    import warnings

    from predops.pipelines.workspace.registry_store import ignore_signature_notes

    with warnings.catch_warnings(record=True) as seen:
        ignore_signature_notes()
        warnings.warn(
            "Hint: Inferred schema contains integer column(s). Integer columns ...",
            UserWarning,
            stacklevel=1,
        )
        warnings.warn(
            "Add type hints to the `predict` method to enable ...", UserWarning, stacklevel=1
        )
        warnings.warn("something else", UserWarning, stacklevel=1)
    assert [str(w.message) for w in seen] == ["something else"]


def test_building_the_model_wrapper_prints_no_type_hint_note() -> None:
    """MLflow raises its type-hint note when the wrapper class is created, under a
    "once" filter of its own that no warning filter of ours overrides; a fresh process
    (where the class is built, as when a model is loaded) prints nothing about it."""
    from tests.processes import fresh_stderr

    stderr = fresh_stderr(
        "from predops.pipelines.workspace import registry\nregistry._python_object_model()"
    )
    assert "type hints" not in stderr, stderr
    assert "UserWarning: kept" in stderr  # other warnings still show


def test_the_type_hint_note_is_dropped_and_other_warnings_kept() -> None:
    import warnings

    from predops.pipelines.workspace.registry_store import without_type_hint_note

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with without_type_hint_note(), warnings.catch_warnings():
            warnings.simplefilter("once", category=UserWarning)  # as MLflow does
            warnings.warn(
                "\x1b[33mAdd type hints to the `predict` method ...", UserWarning, stacklevel=1
            )
            warnings.warn("something else", UserWarning, stacklevel=1)
    assert [str(w.message) for w in seen] == ["something else"]
