"""The one module that talks to MLflow: log, register, load, promote and roll back models.
Over 500 lines: the one module allowed to import MLflow (an import-linter contract and
``tests/test_architecture.py`` check it), so every registry operation lives here.

Registered model names are ``predops.<name>`` (``predops.demand``, ``predops.node_failure``).
Every new version gets the alias ``challenger``; the very first version of a model also
becomes ``champion``. Serving always loads ``champion``.

Promotion is a backtest, not a vote: ``promote(name, backtest)`` scores the challenger and
the champion with the *same* backtest (``backtest(model_uri) -> float``, lower is better
unless the backtest says otherwise) and moves ``champion`` only if the challenger is
strictly better. The rule, both scores and the decision are written as tags on the
challenger version, so the registry itself explains why a version serves.

``rollback(name)`` moves ``champion`` back to the previous champion. The champion history
is a JSON list of versions in the registered-model tag ``predops.champion_history``; each
rollback is also tagged on the version that was rolled back.

Per-model backtests live with the jobs (:mod:`predops.pipelines.jobs.promotion`).

Models are plain Python objects: ``log_and_register(name, obj, predict=f, ...)`` wraps
``obj`` in :class:`PythonObjectModel` (an ``mlflow.pyfunc.PythonModel`` whose
``predict`` returns ``f(obj, model_input)``), so MLflow serves it through its pyfunc
interface; :func:`load_python_model` / :func:`python_object` give the object back through
MLflow's public ``unwrap_python_model()``. No other module imports MLflow
(``tests/test_architecture.py`` checks).

A store that cannot answer (a SQLite file locked by another process, a tracking server
that is down) is probed before MLflow is given it
(:mod:`predops.pipelines.workspace.registry_store`) and
any store error MLflow raises becomes a :class:`RegistryUnavailable` naming the store
(password redacted), in one line. A version whose registration fails half-way (after
MLflow created it, before its tags and aliases) is deleted again.

The tracking URI comes from settings (SQLite in the workspace by default, or
``MLFLOW_TRACKING_URI``); any MLflow URI works. For a SQLite store the artifacts go beside
the database (``<workspace>/mlartifacts``), never into the current directory.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

from predops.core.contracts import Provenance
from predops.pipelines.workspace.errors import RegistryError, RegistryUnavailable
from predops.pipelines.workspace.registry_store import (
    quiet_mlflow_db_errors,
    redact_uri,
    store_problem,
)

PREFIX = "predops."
CHAMPION = "champion"
CHALLENGER = "challenger"
EXPERIMENT = "predops"
HISTORY_TAG = "predops.champion_history"
# Version tags (the feature-set hash and data cutoff make a Provenance on load).
TAG_FEATURES = "predops.feature_set_hash"
TAG_CUTOFF = "predops.data_cutoff"

STORE_WAIT_S = 5.0
"""How long the store probe waits for a locked SQLite file or a silent server (s)."""


def check_store(uri: str | None = None) -> str:
    """The resolved store URI, or :class:`RegistryUnavailable` saying why it cannot be
    used now (cheap: call it before spending minutes on training)."""
    resolved = tracking_uri(uri)
    problem = store_problem(resolved, STORE_WAIT_S)
    if problem is not None:
        raise RegistryUnavailable(f"MLflow store {redact_uri(resolved)} is unavailable: {problem}")
    return resolved


def _store_error(uri: str, exc: BaseException) -> RegistryUnavailable:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if "database is locked" in first:
        first = "the database is locked by another process or connection"
    return RegistryUnavailable(f"MLflow store {redact_uri(uri)} failed: {first[:300]}")


@dataclass(frozen=True, slots=True)
class Backtest:
    """A promotion backtest: ``score(model_uri)`` on data both candidates are judged on.

    ``metric`` names the score in tags and reports; ``higher_is_better`` flips the rule.
    """

    score: Callable[[str], float]
    metric: str = "score"
    higher_is_better: bool = False


Predict = Callable[[Any, Any], Any]
"""``predict(obj, model_input) -> output``: what the pyfunc model of ``obj`` returns."""


@cache
def _python_object_model() -> type:
    """:class:`PythonObjectModel`, built on first use: importing ``mlflow.pyfunc`` costs
    about 2 s of CPU, which commands that never touch a model should not pay."""
    import mlflow.pyfunc

    class PythonObjectModel(mlflow.pyfunc.PythonModel):  # type: ignore[misc,name-defined]
        """A Python object and its predict function as an MLflow pyfunc model."""

        def __init__(self, obj: Any, predict: Predict) -> None:
            self.obj = obj
            self.predict_fn = predict

        # No type hints on purpose: MLflow reads them as an input schema and warns.
        def predict(self, context, model_input, params=None):  # type: ignore[no-untyped-def]
            return self.predict_fn(self.obj, model_input)

    # Pickles name the class ``predops.pipelines.workspace.registry.PythonObjectModel``;
    # the module's __getattr__ resolves that name when a model is loaded in a fresh process.
    PythonObjectModel.__module__ = __name__
    PythonObjectModel.__qualname__ = "PythonObjectModel"
    return PythonObjectModel


def __getattr__(name: str) -> Any:
    if name == "PythonObjectModel":
        return _python_object_model()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def python_object(pyfunc_model: Any) -> Any:
    """The Python object inside a loaded pyfunc model that :func:`log_and_register`
    logged (through MLflow's public ``unwrap_python_model()``)."""
    inner = pyfunc_model.unwrap_python_model()
    if not isinstance(inner, _python_object_model()):
        raise RegistryError(
            f"the model holds a {type(inner).__name__}, not a predops PythonObjectModel; "
            "it was logged by another tool or an older predops: retrain it"
        )
    return getattr(inner, "obj")  # noqa: B009 (the class is built at run time)


def registered_name(name: str) -> str:
    """``"demand"`` -> ``"predops.demand"`` (an already prefixed name is kept)."""
    if not name or not name.replace("_", "").replace(".", "").isalnum():
        raise RegistryError(f"model name {name!r} must be letters, digits and underscores")
    return name if name.startswith(PREFIX) else PREFIX + name


_MLFLOW_URI_ENV = ("MLFLOW_TRACKING_URI", "MLFLOW_REGISTRY_URI")


def tracking_uri(uri: str | None = None) -> str:
    """The given URI, else ``MLFLOW_TRACKING_URI``, else SQLite in the workspace."""
    if uri:
        return uri
    from predops.pipelines.workspace.settings import load_settings

    return load_settings().mlflow_uri


def _sqlite_artifact_root(uri: str) -> str | None:
    """``sqlite:////abs/ws/mlflow.db`` -> ``file:///abs/ws/mlartifacts`` (None otherwise)."""
    if not uri.startswith("sqlite:///"):
        return None
    db = Path(uri.removeprefix("sqlite:///"))
    return (db.resolve().parent / "mlartifacts").as_uri()


@contextmanager
def _mlflow(uri: str | None) -> Iterator[Any]:
    """Point MLflow (a process-global library) at ``uri`` and yield a client for it."""
    import mlflow
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    resolved = check_store(uri)
    quiet_mlflow_db_errors()
    if resolved.startswith("sqlite:///"):
        Path(resolved.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    # mlflow.set_*_uri also export MLFLOW_*_URI into os.environ; left there, they would
    # point every later workspace of this process (tests, the scheduler, the server) at
    # this store. Put the environment back as it was.
    saved = {k: os.environ.get(k) for k in _MLFLOW_URI_ENV}
    mlflow.set_tracking_uri(resolved)
    mlflow.set_registry_uri(resolved)
    try:
        with warnings.catch_warnings():
            # MLflow warns about its own internals (pydantic, setuptools) on import paths.
            warnings.simplefilter("ignore", category=FutureWarning)
            yield MlflowClient(tracking_uri=resolved, registry_uri=resolved)
    except MlflowException as exc:
        raise _store_error(resolved, exc) from exc
    except ModuleNotFoundError as exc:  # e.g. postgresql:// without its driver
        raise RegistryUnavailable(
            f"MLflow store {redact_uri(resolved)} needs the Python module {exc.name!r}"
        ) from exc
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _experiment_id(client: Any, uri: str | None) -> str:
    exp = client.get_experiment_by_name(EXPERIMENT)
    if exp is not None:
        return str(exp.experiment_id)
    root = _sqlite_artifact_root(tracking_uri(uri))
    return str(client.create_experiment(EXPERIMENT, artifact_location=root))


def _now_iso() -> str:
    # The registry is a composition root: stamping tags with the wall clock is allowed here.
    return datetime.now(UTC).isoformat(timespec="seconds")


def log_and_register(
    name: str,
    obj: Any,
    *,
    predict: Predict,
    params: Mapping[str, Any],
    metrics: Mapping[str, float],
    feature_set_hash: str,
    data_cutoff: datetime,
    pip_requirements: list[str],
    input_example: Any = None,
    extra_tags: Mapping[str, str] | None = None,
    uri: str | None = None,
) -> str:
    """Log ``obj`` (any picklable object; ``predict(obj, model_input)`` is its pyfunc
    prediction) in one run and register it.

    Returns the new version number (a string). The run gets ``params``, ``metrics`` and the
    tags; the version gets the feature-set hash, the data cutoff (ISO-8601, UTC) and
    ``extra_tags``, and the alias ``challenger`` (also ``champion`` if it is the first).
    ``pip_requirements`` must be explicit: without them MLflow spends 10-30 s inferring them.
    """
    import mlflow

    full = registered_name(name)
    if data_cutoff.tzinfo is None:
        raise RegistryError("data_cutoff must be UTC-aware")
    if not feature_set_hash:
        raise RegistryError("feature_set_hash is required")
    if not pip_requirements:
        raise RegistryError("pip_requirements must be given explicitly")
    cutoff = data_cutoff.astimezone(UTC).isoformat()
    tags = {TAG_FEATURES: feature_set_hash, TAG_CUTOFF: cutoff, **dict(extra_tags or {})}
    with _mlflow(uri) as client:
        exp_id = _experiment_id(client, uri)
        with mlflow.start_run(experiment_id=exp_id, run_name=f"{full} {cutoff}") as run:
            mlflow.log_params({k: _param(v) for k, v in params.items()})
            mlflow.log_metrics({k: float(v) for k, v in metrics.items()})
            mlflow.set_tags(tags)
            info = mlflow.pyfunc.log_model(
                name="model",
                python_model=_python_object_model()(obj, predict),
                pip_requirements=list(pip_requirements),
                input_example=input_example,
                registered_model_name=full,
                await_registration_for=60,
            )
        version = str(info.registered_model_version)
        try:
            for key, value in {**tags, "predops.run_id": run.info.run_id}.items():
                client.set_model_version_tag(full, version, key, str(value))
            client.set_registered_model_alias(full, CHALLENGER, version)
            if _alias_version(client, full, CHAMPION) is None:
                client.set_registered_model_alias(full, CHAMPION, version)
                _push_history(client, full, version)
                client.set_model_version_tag(full, version, "promotion.decision", "first version")
        except Exception as exc:
            left = _discard_version(client, full, version)
            error = _store_error(tracking_uri(uri), exc)
            raise RegistryUnavailable(f"{error}; {left}") from exc
    return version


def _discard_version(client: Any, full: str, version: str) -> str:
    """Delete a version whose registration failed half-way (no aliases, tags missing),
    and the model too if that was its only version; returns what was done."""
    try:
        client.delete_model_version(full, version)
        if not client.search_model_versions(f"name = '{full}'"):
            client.delete_registered_model(full)
    except Exception as cleanup:  # the store is failing: say what is left behind
        return (
            f"{full} version {version} was registered half-way and could not be deleted "
            f"({type(cleanup).__name__}); it has no alias, so nothing loads it"
        )
    return f"{full} version {version} was registered half-way and deleted again"


def _param(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text[:6000]  # MLflow's limit on one param value


def _alias_version(client: Any, full: str, alias: str) -> str | None:
    from mlflow.exceptions import MlflowException

    try:
        return str(client.get_model_version_by_alias(full, alias).version)
    except MlflowException:
        return None


def _history(client: Any, full: str) -> list[str]:
    tags = client.get_registered_model(full).tags
    return [str(v) for v in json.loads(tags.get(HISTORY_TAG, "[]"))]


def _push_history(client: Any, full: str, version: str) -> None:
    hist = _history(client, full)
    hist.append(version)
    client.set_registered_model_tag(full, HISTORY_TAG, json.dumps(hist))


def _require_model(client: Any, full: str) -> None:
    from mlflow.exceptions import MlflowException

    try:
        client.get_registered_model(full)
    except MlflowException:
        raise RegistryError(f"no registered model {full!r}; train one first") from None


def model_uri(name: str, alias_or_version: str = CHAMPION) -> str:
    """``models:/predops.demand@champion`` or ``models:/predops.demand/3``."""
    full = registered_name(name)
    if alias_or_version.isdigit():
        return f"models:/{full}/{alias_or_version}"
    return f"models:/{full}@{alias_or_version}"


def load(
    name: str, alias: str = CHAMPION, *, uri: str | None = None
) -> tuple[Any, str, Provenance]:
    """The pyfunc model behind ``alias`` (or a version number), its version and provenance."""
    import mlflow.pyfunc

    full = registered_name(name)
    with _mlflow(uri) as client:
        _require_model(client, full)
        version = alias if alias.isdigit() else _alias_version(client, full, alias)
        if version is None:
            raise RegistryError(f"{full} has no version with alias {alias!r}")
        mv = client.get_model_version(full, version)
        model = mlflow.pyfunc.load_model(model_uri(name, version))
    tags = dict(mv.tags)
    if TAG_CUTOFF not in tags or TAG_FEATURES not in tags:
        raise RegistryError(f"{full} version {version} lacks provenance tags; re-register it")
    prov = Provenance(
        model_name=full,
        model_version=str(version),
        feature_set_hash=tags[TAG_FEATURES],
        data_cutoff=datetime.fromisoformat(tags[TAG_CUTOFF]),
        run_id=mv.run_id,
    )
    return model, str(version), prov


def load_python_model(
    name: str, alias: str = CHAMPION, *, uri: str | None = None
) -> tuple[Any, str, Provenance]:
    """The Python object behind ``alias`` (or a version number), its version and
    provenance: :func:`load` then :func:`python_object`."""
    model, version, prov = load(name, alias, uri=uri)
    return python_object(model), version, prov


def alias_version(name: str, alias: str = CHAMPION, *, uri: str | None = None) -> str:
    """The version number behind ``alias`` — a cheap look-up (no model is loaded) that a
    server polls to notice that the alias moved. Raises :class:`RegistryError` when the
    model or alias does not exist."""
    full = registered_name(name)
    with _mlflow(uri) as client:
        _require_model(client, full)
        version = _alias_version(client, full, alias)
    if version is None:
        raise RegistryError(f"{full} has no version with alias {alias!r}")
    return version


def load_uri(model_uri: str, *, uri: str | None = None) -> Any:
    """The pyfunc model at ``model_uri`` (``models:/...``) from the store at ``uri``
    (backtests get URIs from :func:`promote` and load them through this)."""
    import mlflow.pyfunc

    with _mlflow(uri):
        return mlflow.pyfunc.load_model(model_uri)


def promote(
    name: str,
    backtest: Backtest | Callable[[str], float],
    *,
    uri: str | None = None,
) -> dict[str, Any]:
    """Score challenger and champion with ``backtest``; move ``champion`` only if better.

    Returns the decision: ``{"model", "promoted", "reason", "metric", "challenger":
    {"version", "score"}, "champion": {"version", "score"}, "champion_after"}``.
    """
    bt = backtest if isinstance(backtest, Backtest) else Backtest(score=backtest)
    full = registered_name(name)
    with _mlflow(uri) as client:
        _require_model(client, full)
        chall = _alias_version(client, full, CHALLENGER)
        champ = _alias_version(client, full, CHAMPION)
    base: dict[str, Any] = {"model": full, "metric": bt.metric, "promoted": False}
    if chall is None:
        return {**base, "reason": "no challenger", "champion_after": champ}
    if champ is None or chall == champ:
        reason = "challenger is already champion" if champ else "no champion"
        if champ is None:
            with _mlflow(uri) as client:
                client.set_registered_model_alias(full, CHAMPION, chall)
                _push_history(client, full, chall)
            base["promoted"] = True
        return {**base, "reason": reason, "champion_after": chall}
    # Both scores come from the same backtest call path, in one process, back to back.
    s_chall = float(bt.score(model_uri(name, chall)))
    s_champ = float(bt.score(model_uri(name, champ)))
    better = s_chall > s_champ if bt.higher_is_better else s_chall < s_champ
    direction = "higher" if bt.higher_is_better else "lower"
    rule = f"promote if challenger {bt.metric} is strictly {direction} than champion's"
    reason = f"challenger {bt.metric} {s_chall:.6g} vs champion {s_champ:.6g}: " + (
        "better, promoted" if better else "not better, champion kept"
    )
    with _mlflow(uri) as client:
        tags = {
            "promotion.rule": rule,
            "promotion.metric": bt.metric,
            "promotion.challenger_score": repr(s_chall),
            "promotion.champion_score": repr(s_champ),
            "promotion.champion_version": champ,
            "promotion.decision": "promoted" if better else "refused",
            "promotion.at": _now_iso(),
        }
        for key, value in tags.items():
            client.set_model_version_tag(full, chall, key, value)
        if better:
            client.set_registered_model_alias(full, CHAMPION, chall)
            _push_history(client, full, chall)
    return {
        **base,
        "promoted": better,
        "reason": reason,
        "rule": rule,
        "challenger": {"version": chall, "score": s_chall},
        "champion": {"version": champ, "score": s_champ},
        "champion_after": chall if better else champ,
    }


def rollback(name: str, *, uri: str | None = None) -> dict[str, Any]:
    """Move ``champion`` back to the previous champion; the rolled-back version is tagged
    and loses ``challenger`` (so a later ``promote`` cannot silently re-promote it)."""
    full = registered_name(name)
    with _mlflow(uri) as client:
        _require_model(client, full)
        current = _alias_version(client, full, CHAMPION)
        hist = _history(client, full)
        if current is None or len(hist) < 2:
            raise RegistryError(f"{full} has no previous champion to roll back to")
        if hist[-1] != current:
            # The alias was moved outside predops; trust the alias, keep the history honest.
            hist.append(current)
        hist.pop()
        previous = hist[-1]
        client.set_registered_model_alias(full, CHAMPION, previous)
        client.set_registered_model_tag(full, HISTORY_TAG, json.dumps(hist))
        client.set_model_version_tag(full, current, "rollback.at", _now_iso())
        client.set_model_version_tag(full, current, "rollback.to_version", previous)
        if _alias_version(client, full, CHALLENGER) == current:
            client.delete_registered_model_alias(full, CHALLENGER)
    return {"model": full, "rolled_back": current, "champion_after": previous, "history": hist}


def list_models(*, uri: str | None = None) -> list[dict[str, Any]]:
    """Every ``predops.*`` registered model with its versions, aliases and tags."""
    with _mlflow(uri) as client:
        out = []
        for rm in client.search_registered_models(filter_string=f"name LIKE '{PREFIX}%'"):
            versions = client.search_model_versions(f"name = '{rm.name}'")
            aliases: dict[str, list[str]] = {}
            for alias, ver in (rm.aliases or {}).items():
                aliases.setdefault(str(ver), []).append(alias)
            out.append(
                {
                    "name": rm.name,
                    "aliases": {k: str(v) for k, v in (rm.aliases or {}).items()},
                    "champion_history": json.loads(rm.tags.get(HISTORY_TAG, "[]")),
                    "versions": [
                        {
                            "version": str(v.version),
                            "run_id": v.run_id,
                            "aliases": sorted(aliases.get(str(v.version), [])),
                            "tags": dict(v.tags),
                        }
                        for v in sorted(versions, key=lambda v: int(v.version))
                    ],
                }
            )
    return sorted(out, key=lambda m: m["name"])


def run_metrics(run_ids: list[str], *, uri: str | None = None) -> dict[str, dict[str, float]]:
    """The metrics each training run logged (a version's ``run_id`` from
    :func:`list_models`), by run id; runs the store no longer has are left out."""
    from mlflow.exceptions import MlflowException

    out: dict[str, dict[str, float]] = {}
    with _mlflow(uri) as client:
        for run_id in run_ids:
            try:
                out[run_id] = dict(client.get_run(run_id).data.metrics)
            except MlflowException:
                continue
    return out
