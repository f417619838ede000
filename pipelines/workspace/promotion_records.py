"""Promotion records: how predops marks the registry versions it promoted, and which
version an alias may serve.

MLflow lets anyone with write access move an alias (the UI has a button for it), which
would bypass the promotion backtest. So whenever predops moves a gated alias — a backtest
won (``predops models promote``), the first version registered, a rollback — it writes a
record on the version, in the model-version tag ``predops.promotion.<alias>``, as one
compact JSON object (one tag write, so a record is never half there)::

    {"alias": "champion", "version": "3", "run_id": "...", "seq": 4, "how": "backtest",
     "replaces": "2", "promoted_by": "alice via predops",
     "promoted_at": "2026-05-01T12:00:00.123456+00:00",
     "backtest": {"metric": "wql", "higher_is_better": false, "rule": "...",
                  "challenger": {"version": "3", "score": 0.41},
                  "champion": {"version": "2", "score": 0.44}}}

A record is valid for the version that carries it only if it names that alias, that
version number and that version's run. The version to serve is the one whose valid record
is newest (highest ``seq``); the alias is *verified* only when it points there. An alias
moved outside predops is reported (:class:`AliasState`) and the last promoted version
keeps serving.

Why no digest or HMAC: the threat is a promotion that skips the gate by accident or
habit (a click in the UI, a script calling ``set_registered_model_alias``), not a forger.
Whoever can move an alias can write tags too; a signature would only move that trust to a
key every training job and server must share and rotate, which the registry's own access
control (MLflow auth, database grants) already does better. Naming the version and its
run is what makes a record non-transferable: copied to another version it is invalid.

No MLflow import here: :mod:`predops.pipelines.workspace.registry` reads and writes the
tags; this module only builds, checks and chooses.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

RECORD_PREFIX = "predops.promotion."
"""The record's tag is this prefix plus the alias: ``predops.promotion.champion``."""


def record_tag(alias: str) -> str:
    return RECORD_PREFIX + alias


@dataclass(frozen=True, slots=True)
class VersionTags:
    """What the records are checked against: one registry version as MLflow lists it."""

    version: str
    run_id: str | None
    tags: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class AliasState:
    """Where a gated alias points and which version predops serves for it.

    ``served_version`` is the version with the newest valid promotion record (None when
    no version has one); ``problem`` says why ``alias_version`` is not it."""

    model: str
    alias: str
    alias_version: str | None
    served_version: str | None
    problem: str | None = None

    @property
    def verified(self) -> bool:
        return self.alias_version is not None and self.alias_version == self.served_version

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "alias": self.alias,
            "alias_version": self.alias_version,
            "served_version": self.served_version,
            "verified": self.verified,
            "problem": self.problem,
        }


def make_record(
    *,
    alias: str,
    version: str,
    run_id: str | None,
    seq: int,
    how: str,
    promoted_by: str,
    promoted_at: str,
    replaces: str | None = None,
    backtest: Mapping[str, Any] | None = None,
) -> str:
    """The record's tag value (compact JSON, keys sorted). ``how``: ``first version``,
    ``no promoted champion``, ``backtest`` or ``rollback``; ``replaces``: the version
    served before."""
    body = {
        "alias": alias,
        "version": str(version),
        "run_id": run_id,
        "seq": int(seq),
        "how": how,
        "replaces": replaces,
        "promoted_by": promoted_by,
        "promoted_at": promoted_at,
        "backtest": dict(backtest) if backtest is not None else None,
    }
    return json.dumps(body, separators=(",", ":"), sort_keys=True, default=str)


def parse_record(text: str | None) -> dict[str, Any] | None:
    """The record as a dict, or None when there is none or it is not a JSON object."""
    if not text:
        return None
    try:
        body = json.loads(text)
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def record_problem(v: VersionTags, alias: str) -> str | None:
    """Why ``v`` has no valid record for ``alias`` (None when it has one)."""
    body = parse_record(v.tags.get(record_tag(alias)))
    if body is None:
        return f"version {v.version} has no promotion record by predops for {alias!r}"
    for key, want in (("alias", alias), ("version", v.version), ("run_id", v.run_id)):
        if body.get(key) != want:
            return (
                f"version {v.version}'s promotion record names {key} {body.get(key)!r}, "
                f"not {want!r} (copied from another version?)"
            )
    if not isinstance(body.get("seq"), int):
        return f"version {v.version}'s promotion record has no sequence number"
    return None


def valid_records(versions: Iterable[VersionTags], alias: str) -> list[tuple[int, int, str]]:
    """``(seq, version number, version)`` of every version with a valid record, oldest
    first."""
    out = []
    for v in versions:
        if record_problem(v, alias) is None:
            body = parse_record(v.tags.get(record_tag(alias)))
            assert body is not None
            out.append((int(body["seq"]), int(v.version), v.version))
    return sorted(out)


def next_seq(versions: Iterable[VersionTags], alias: str) -> int:
    """The sequence number of the next record for ``alias`` (1 for the first)."""
    found = valid_records(versions, alias)
    return found[-1][0] + 1 if found else 1


def resolve(
    model: str, alias: str, alias_version: str | None, versions: Iterable[VersionTags]
) -> AliasState:
    """Which version ``alias`` may serve (see the module docstring)."""
    listed = list(versions)
    found = valid_records(listed, alias)
    served = found[-1][2] if found else None
    if alias_version is None:
        problem = None if served is None else f"the alias {alias!r} is not set"
        return AliasState(model, alias, None, served, problem)
    if alias_version == served:
        return AliasState(model, alias, alias_version, served)
    at = next((v for v in listed if v.version == alias_version), None)
    why = record_problem(at, alias) if at is not None else None
    if why is None:  # a valid but older record: a former champion put back by hand
        why = (
            f"version {alias_version} was promoted to {alias!r} before version {served}; "
            "moving it back is a rollback (`predops models rollback`)"
        )
    moved = f"{model}@{alias} -> v{alias_version} was not set by predops: {why}"
    tail = f"; serving v{served}, the last version predops promoted" if served else ""
    return AliasState(model, alias, alias_version, served, moved + tail)
