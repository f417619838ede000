"""The one module that talks to MLflow: log, register, load, promote and roll back models.
Over 500 lines: the one module allowed to import MLflow (an import-linter contract and
``tests/test_architecture.py`` check it), so every registry operation lives here.

Registered model names are ``predops.<name>`` (``predops.demand``, ``predops.node_failure``).
Every new version gets the alias ``challenger``; the very first version of a model (any
version, while none is promoted) also becomes ``champion``. Serving always loads
``champion``.

Promotion is a backtest, not a vote: ``promote(name, backtest)`` scores the challenger and
the champion with the *same* backtest (``backtest(model_uri) -> float``, lower is better
unless the backtest says otherwise) and moves ``champion`` only if the challenger is
strictly better. The rule, both scores and the decision are written as tags on the
challenger version, so the registry itself explains why a version serves.

``rollback(name)`` moves ``champion`` back to the previous champion. The champion history
is a JSON list of versions in the registered-model tag ``predops.champion_history``; each
rollback is also tagged on the version that was rolled back.

The gate cannot be bypassed by moving the alias by hand: whenever predops moves
``champion`` (first version, won backtest, rollback) it writes a promotion record on the
version (:mod:`predops.pipelines.workspace.promotion_records`), and :func:`load` and
:func:`alias_state` use the version with the newest valid record — the last one predops
promoted — whatever the alias says. An alias moved outside predops is reported by
:func:`alias_state` (the server's ``/readyz``, ``/metrics`` and models page say so).

Per-model backtests live with the jobs (:mod:`predops.pipelines.jobs.promotion`).

Models are plain Python objects: ``log_and_register(name, obj, predict=f, ...)`` wraps
``obj`` in :class:`PythonObjectModel` (an ``mlflow.pyfunc.PythonModel`` whose
``predict`` returns ``f(obj, model_input)``), so MLflow serves it through its pyfunc
interface, with a signature inferred from a few rows of input (``input_example``);
:func:`load_python_model` / :func:`python_object` give the object back through MLflow's
public ``unwrap_python_model()``. No other module imports MLflow
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
import logging
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
from predops.core.redaction import redact_url
from predops.pipelines.workspace import promotion_records as records
from predops.pipelines.workspace.errors import RegistryError, RegistryUnavailable
from predops.pipelines.workspace.promotion_records import AliasState, VersionTags
from predops.pipelines.workspace.registry_store import (
    ignore_signature_notes,
    quiet_mlflow_logs,
    store_problem,
    without_type_hint_note,
)

PREFIX = "predops."
CHAMPION = "champion"
CHALLENGER = "challenger"
EXPERIMENT = "predops"
HISTORY_TAG = "predops.champion_history"
# Version tags (the feature-set hash and data cutoff make a Provenance on load).
TAG_FEATURES = "predops.feature_set_hash"
TAG_CUTOFF = "predops.data_cutoff"
GATED_ALIASES = (CHAMPION,)
"""Aliases predops serves from, which only predops may move (see the module docstring);
``challenger`` only marks the newest version and is loaded as MLflow says."""

log = logging.getLogger(__name__)

STORE_WAIT_S = 5.0
"""How long the store probe waits for a locked SQLite file or a silent server (s)."""


def check_store(uri: str | None = None) -> str:
    """The resolved store URI, or :class:`RegistryUnavailable` saying why it cannot be
    used now (cheap: call it before spending minutes on training)."""
    resolved = tracking_uri(uri)
    problem = store_problem(resolved, STORE_WAIT_S)
    if problem is not None:
        raise RegistryUnavailable(f"MLflow store {redact_url(resolved)} is unavailable: {problem}")
    return resolved


def _store_error(uri: str, exc: BaseException) -> RegistryUnavailable:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if "database is locked" in first:
        first = "the database is locked by another process or connection"
    return RegistryUnavailable(f"MLflow store {redact_url(uri)} failed: {first[:300]}")


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

    ignore_signature_notes()
    with without_type_hint_note():  # the class's creation raises MLflow's type-hint note

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
    quiet_mlflow_logs()
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
            ignore_signature_notes()  # again here: an outer catch_warnings may have reset them
            # Logged at every registration: the signature is inferred from an example
            # (log_and_register), which is deliberately not stored with the model.
            warnings.filterwarnings(
                "ignore", message=".*An input example was not provided", category=UserWarning
            )
            yield MlflowClient(tracking_uri=resolved, registry_uri=resolved)
    except MlflowException as exc:
        raise _store_error(resolved, exc) from exc
    except ModuleNotFoundError as exc:  # e.g. postgresql:// without its driver
        raise RegistryUnavailable(
            f"MLflow store {redact_url(resolved)} needs the Python module {exc.name!r}"
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


def _now_iso(*, precise: bool = False) -> str:
    # The registry is a composition root: stamping tags with the wall clock is allowed here.
    return datetime.now(UTC).isoformat(timespec="microseconds" if precise else "seconds")


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
    json_artifacts: Mapping[str, Any] | None = None,
    uri: str | None = None,
) -> str:
    """Log ``obj`` (any picklable object; ``predict(obj, model_input)`` is its pyfunc
    prediction) in one run and register it.

    Returns the new version number (a string). The run gets ``params``, ``metrics`` and the
    tags; the version gets the feature-set hash, the data cutoff (ISO-8601, UTC) and
    ``extra_tags``, and the alias ``challenger``; also ``champion``, with a promotion
    record, when no version is promoted yet (there is nothing for it to beat).
    ``pip_requirements`` must be explicit: without them MLflow spends 10-30 s inferring them.
    ``input_example``: a few rows of model input; the model's signature is inferred from
    it and ``predict(obj, input_example)`` (see :func:`_signature`). The example itself
    is not stored: MLflow would re-check the stored copy after a JSON round trip that
    turns UTC timestamps into strings. ``json_artifacts``: file name -> JSON-able object,
    logged as artifacts of the run (:func:`run_json` reads one back).
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
    signature = None if input_example is None else _signature(obj, predict, input_example)
    with _mlflow(uri) as client:
        exp_id = _experiment_id(client, uri)
        with mlflow.start_run(experiment_id=exp_id, run_name=f"{full} {cutoff}") as run:
            mlflow.log_params({k: _param(v) for k, v in params.items()})
            mlflow.log_metrics({k: float(v) for k, v in metrics.items()})
            mlflow.set_tags(tags)
            for file, body in (json_artifacts or {}).items():
                mlflow.log_dict(body, file)
            info = mlflow.pyfunc.log_model(
                name="model",
                python_model=_python_object_model()(obj, predict),
                pip_requirements=list(pip_requirements),
                signature=signature,
                registered_model_name=full,
                await_registration_for=60,
            )
        version = str(info.registered_model_version)
        try:
            for key, value in {**tags, "predops.run_id": run.info.run_id}.items():
                client.set_model_version_tag(full, version, key, str(value))
            client.set_registered_model_alias(full, CHALLENGER, version)
            state = _alias_state(client, full, CHAMPION)
            if state.served_version is None:
                how = "first version" if state.alias_version is None else "no promoted champion"
                _promote_to(client, full, version, CHAMPION, how=how)
                client.set_model_version_tag(full, version, "promotion.decision", how)
        except Exception as exc:
            left = _discard_version(client, full, version)
            error = _store_error(tracking_uri(uri), exc)
            raise RegistryUnavailable(f"{error}; {left}") from exc
    return version


def _signature(obj: Any, predict: Predict, example: Any) -> Any:
    """The model signature inferred from ``example`` and ``predict(obj, example)``, with
    some column kinds widened so that MLflow's schema check at ``predict`` accepts what
    predops passes: datetimes become ``Any`` (MLflow's datetime type is timezone-naive
    and refuses the UTC-aware timestamps every predops frame carries), so do categorical
    columns (MLflow has no categorical type and refuses a pandas ``category`` column
    where it inferred strings), and 32-bit floats become doubles (a float64 frame of the
    same features is then accepted too)."""
    from mlflow.models import infer_signature
    from mlflow.models.signature import ModelSignature
    from mlflow.types.schema import AnyType, ColSpec, DataType, Schema

    inferred = infer_signature(example, predict(obj, example))
    inputs = inferred.inputs
    if inputs is None or not inputs.has_input_names():
        return inferred

    dtypes = getattr(example, "dtypes", {})
    categorical = {str(name) for name, dtype in dict(dtypes).items() if str(dtype) == "category"}

    def widen(col: Any) -> Any:
        if col.type == DataType.datetime or col.name in categorical:
            return ColSpec(AnyType(), col.name, col.required)  # type: ignore[no-untyped-call]
        if col.type == DataType.float:
            return ColSpec(DataType.double, col.name, col.required)
        return col

    return ModelSignature(
        Schema([widen(c) for c in inputs.inputs]), inferred.outputs, inferred.params
    )


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


def _versions(client: Any, full: str) -> list[VersionTags]:
    return [
        VersionTags(str(v.version), v.run_id, dict(v.tags))
        for v in client.search_model_versions(f"name = '{full}'")
    ]


def _alias_state(client: Any, full: str, alias: str) -> AliasState:
    pointed = _alias_version(client, full, alias)
    return records.resolve(full, alias, pointed, _versions(client, full))


def _promote_to(
    client: Any,
    full: str,
    version: str,
    alias: str,
    *,
    how: str,
    replaces: str | None = None,
    backtest: Mapping[str, Any] | None = None,
) -> None:
    """Write ``version``'s promotion record for ``alias``, then move the alias and (for
    ``champion``) append the history. The record goes first: once written, the version
    serves (it is the newest record) even if moving the alias then fails — the decision
    was made, the alias only lags, and :func:`alias_state` says so."""
    from predops.pipelines.workspace.settings import operator_identity

    mv = client.get_model_version(full, version)
    record = records.make_record(
        alias=alias,
        version=version,
        run_id=mv.run_id,
        seq=records.next_seq(_versions(client, full), alias),
        how=how,
        replaces=replaces,
        promoted_by=operator_identity(),
        promoted_at=_now_iso(precise=True),
        backtest=backtest,
    )
    client.set_model_version_tag(full, version, records.record_tag(alias), record)
    client.set_registered_model_alias(full, alias, version)
    if alias == CHAMPION:
        _push_history(client, full, version)


def _served_version(client: Any, full: str, alias: str) -> str:
    """The version ``alias`` resolves to: for a gated alias the last version predops
    promoted to it (a hand-moved alias is logged and ignored), else the alias itself."""
    if alias not in GATED_ALIASES:
        version = _alias_version(client, full, alias)
        if version is None:
            raise RegistryError(f"{full} has no version with alias {alias!r}")
        return version
    state = _alias_state(client, full, alias)
    if state.served_version is None:
        why = state.problem or f"{full} has no version with alias {alias!r}"
        raise RegistryError(f"{why}; no version of {full} was promoted to {alias!r} by predops")
    if not state.verified:
        log.warning("%s", state.problem)
    return state.served_version


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
    """The pyfunc model behind ``alias`` (or a version number), its version and
    provenance. ``champion`` means the last version predops promoted to it, wherever the
    alias was moved since (see :func:`alias_state`)."""
    import mlflow.pyfunc

    full = registered_name(name)
    with _mlflow(uri) as client:
        _require_model(client, full)
        version = alias if alias.isdigit() else _served_version(client, full, alias)
        mv = client.get_model_version(full, version)
        model = mlflow.pyfunc.load_model(model_uri(name, version))
    return model, str(version), _provenance(full, str(version), mv)


def served_provenance(name: str, alias: str = CHAMPION, *, uri: str | None = None) -> Provenance:
    """The provenance of the version :func:`load` would load for ``alias`` (registry
    reads only, no model loaded): what a caller holding that version's answers checks
    before re-using them."""
    full = registered_name(name)
    with _mlflow(uri) as client:
        _require_model(client, full)
        version = alias if alias.isdigit() else _served_version(client, full, alias)
        mv = client.get_model_version(full, version)
    return _provenance(full, str(version), mv)


def _provenance(full: str, version: str, mv: Any) -> Provenance:
    tags = dict(mv.tags)
    if TAG_CUTOFF not in tags or TAG_FEATURES not in tags:
        raise RegistryError(f"{full} version {version} lacks provenance tags; re-register it")
    return Provenance(
        model_name=full,
        model_version=version,
        feature_set_hash=tags[TAG_FEATURES],
        data_cutoff=datetime.fromisoformat(tags[TAG_CUTOFF]),
        run_id=mv.run_id,
    )


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


def alias_state(name: str, alias: str = CHAMPION, *, uri: str | None = None) -> AliasState:
    """Where ``alias`` points and which version predops serves for it (the last one it
    promoted there): what a server polls to notice a promotion, a rollback or an alias
    moved by hand. Two registry reads, no model loaded. Raises :class:`RegistryError`
    when the model does not exist."""
    full = registered_name(name)
    with _mlflow(uri) as client:
        _require_model(client, full)
        return _alias_state(client, full, alias)


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

    The champion is the version predops last promoted (an alias moved by hand is not
    judged on, see :func:`alias_state`); with none, the challenger becomes champion
    unjudged, as the first version does. A promotion writes the record (which backtest,
    both scores, the champion beaten) on the challenger.

    Returns the decision: ``{"model", "promoted", "reason", "metric", "challenger":
    {"version", "score"}, "champion": {"version", "score"}, "champion_after"}``, plus
    ``alias_problem`` when the alias had been moved outside predops.
    """
    bt = backtest if isinstance(backtest, Backtest) else Backtest(score=backtest)
    full = registered_name(name)
    with _mlflow(uri) as client:
        _require_model(client, full)
        chall = _alias_version(client, full, CHALLENGER)
        state = _alias_state(client, full, CHAMPION)
    champ = state.served_version
    base: dict[str, Any] = {"model": full, "metric": bt.metric, "promoted": False}
    if state.problem:
        base["alias_problem"] = state.problem
    if chall is None:
        return {**base, "reason": "no challenger", "champion_after": champ}
    if champ is None or chall == champ:
        reason = "challenger is already champion" if champ else "no promoted champion"
        if champ is None:
            with _mlflow(uri) as client:
                _promote_to(client, full, chall, CHAMPION, how=reason)
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
            evidence = {
                "metric": bt.metric,
                "higher_is_better": bt.higher_is_better,
                "rule": rule,
                "challenger": {"version": chall, "score": s_chall},
                "champion": {"version": champ, "score": s_champ},
            }
            _promote_to(
                client, full, chall, CHAMPION, how="backtest", replaces=champ, backtest=evidence
            )
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
    """Move ``champion`` back to the previous champion; the rolled-back version is tagged,
    loses its promotion record and ``challenger`` (so a later ``promote`` cannot silently
    re-promote it), and the previous champion gets a new record (``how: rollback``).

    What is rolled back is the version predops serves, even when the alias was moved by
    hand since (the alias then comes back to the previous champion too)."""
    full = registered_name(name)
    with _mlflow(uri) as client:
        _require_model(client, full)
        current = _alias_state(client, full, CHAMPION).served_version
        hist = _history(client, full)
        if current is None or len(hist) < 2:
            raise RegistryError(f"{full} has no previous champion to roll back to")
        if hist[-1] != current:
            # The history tag was edited outside predops; the records decide what serves.
            hist.append(current)
        hist.pop()
        previous = hist[-1]
        _promote_to(client, full, previous, CHAMPION, how="rollback", replaces=current)
        client.set_registered_model_tag(full, HISTORY_TAG, json.dumps(hist))
        client.delete_model_version_tag(full, current, records.record_tag(CHAMPION))
        client.set_model_version_tag(full, current, "rollback.at", _now_iso())
        client.set_model_version_tag(full, current, "rollback.to_version", previous)
        if _alias_version(client, full, CHALLENGER) == current:
            client.delete_registered_model_alias(full, CHALLENGER)
    return {"model": full, "rolled_back": current, "champion_after": previous, "history": hist}


def _ms_utc(ms: int | None) -> datetime | None:
    """MLflow's milliseconds since the epoch as a UTC time (None stays None)."""
    return None if ms is None else datetime.fromtimestamp(ms / 1000, UTC)


def list_models(*, uri: str | None = None) -> list[dict[str, Any]]:
    """Every ``predops.*`` registered model with its versions (``created_at`` when
    registered, UTC), aliases and tags, and ``alias_states``: each gated alias'
    :class:`AliasState` as a dict."""
    with _mlflow(uri) as client:
        out = []
        for rm in client.search_registered_models(filter_string=f"name LIKE '{PREFIX}%'"):
            versions = client.search_model_versions(f"name = '{rm.name}'")
            aliases: dict[str, list[str]] = {}
            for alias, ver in (rm.aliases or {}).items():
                aliases.setdefault(str(ver), []).append(alias)
            listed = [VersionTags(str(v.version), v.run_id, dict(v.tags)) for v in versions]
            pointed = {k: str(v) for k, v in (rm.aliases or {}).items()}
            out.append(
                {
                    "name": rm.name,
                    "aliases": pointed,
                    "alias_states": {
                        a: records.resolve(rm.name, a, pointed.get(a), listed).to_dict()
                        for a in GATED_ALIASES
                    },
                    "champion_history": json.loads(rm.tags.get(HISTORY_TAG, "[]")),
                    "versions": [
                        {
                            "version": str(v.version),
                            "run_id": v.run_id,
                            "aliases": sorted(aliases.get(str(v.version), [])),
                            "tags": dict(v.tags),
                            "created_at": _ms_utc(v.creation_timestamp),
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


def run_json(run_id: str, file: str, *, uri: str | None = None) -> Any:
    """A JSON artifact of a training run (``json_artifacts`` of :func:`log_and_register`);
    :class:`RegistryError` naming the run and file when the run has none."""
    import mlflow
    from mlflow.exceptions import MlflowException

    bar = os.environ.get(_PROGRESS_BAR)
    os.environ[_PROGRESS_BAR] = "false"  # a page read must not print a download bar
    try:
        with _mlflow(uri):
            try:
                return mlflow.artifacts.load_dict(f"runs:/{run_id}/{file}")
            except (MlflowException, OSError, ValueError) as exc:
                raise RegistryError(
                    f"run {run_id} has no readable artifact {file!r}: {exc}"
                ) from exc
    finally:
        if bar is None:
            os.environ.pop(_PROGRESS_BAR, None)
        else:
            os.environ[_PROGRESS_BAR] = bar


_PROGRESS_BAR = "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"


def run_links(run_ids: list[str], *, uri: str | None = None) -> dict[str, dict[str, str]]:
    """Each training run's ``experiment_id`` and ``artifact_uri`` (for a link to the
    tracking UI, or to show as text), by run id; runs the store no longer has are left
    out."""
    from mlflow.exceptions import MlflowException

    out: dict[str, dict[str, str]] = {}
    with _mlflow(uri) as client:
        for run_id in run_ids:
            try:
                info = client.get_run(run_id).info
            except MlflowException:
                continue
            out[run_id] = {
                "experiment_id": str(info.experiment_id),
                "artifact_uri": redact_url(str(info.artifact_uri)),
            }
    return out
