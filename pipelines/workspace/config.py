"""Configuration files every face reads: one TOML file plus ``PREDOPS_*`` overrides.

The scheduler (:mod:`predops.pipelines.scheduler.config`), the server
(:mod:`predops.serving.config`) and the policy (:mod:`predops.pipelines.workspace.
policy_config`) validate their sections of the same kind of file with
:class:`ConfigTable`, whose errors name the file, the table and the key.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

from predops.pipelines.workspace.timeparse import parse_duration

ENV_PREFIX = "PREDOPS_"

SECTIONS_BY_READER: Mapping[str, tuple[str, ...]] = {
    "scheduler": ("scheduler", "jobs", "ingest", "features", "retrain"),
    "server": ("server", "tokens"),
    "policy": ("policy",),
    "lake": ("lake",),
}
"""The top-level tables of a ``predops.toml`` and who validates each: one file may feed
the scheduler, the server and the CLI. Each reader validates its own tables (unknown keys
are errors there) and leaves the others' to them; a table no reader knows is a typo."""


class ConfigError(ValueError):
    """The configuration is invalid; the message names the file and the key."""


def merge_env(raw: dict[str, Any], env: Mapping[str, str], where: str) -> list[str]:
    """Apply ``PREDOPS_A__B=value`` onto ``raw`` (in place); returns the keys applied."""
    applied = []
    for name, value in sorted(env.items()):
        if not name.startswith(ENV_PREFIX) or "__" not in name:
            continue
        path = [p.lower() for p in name.removeprefix(ENV_PREFIX).split("__")]
        if any(not p for p in path):
            raise ConfigError(f"environment: {name} is not a PREDOPS_SECTION__KEY name")
        node = raw
        for part in path[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"environment: {name}: {where} [{part}] is not a table")
            node = child
        node[path[-1]] = value
        applied.append(name)
    return applied


def check_sections(document: Mapping[str, Any], where: str) -> None:
    """Raise :class:`ConfigError` naming the first top-level table of ``document`` that no
    reader of :data:`SECTIONS_BY_READER` knows (``[schedular]``, ``[polcy]``)."""
    known = sorted({name for names in SECTIONS_BY_READER.values() for name in names})
    unknown = sorted(set(document) - set(known))
    if unknown:
        raise ConfigError(f"{where}: [{unknown[0]}]: unknown section (known: {', '.join(known)})")


def read_toml(path: Path | None) -> tuple[str, dict[str, Any]]:
    """``(where, table)``: the file's name for error messages and its parsed TOML
    (``"configuration"`` and an empty table when ``path`` is None). Raises
    :class:`ConfigError` naming the file when it is missing or not valid TOML."""
    if path is None:
        return "configuration", {}
    try:
        with open(path, "rb") as fh:
            return str(path), tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such configuration file") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None


class ConfigTable:
    """One TOML table being validated: typed getters that name the key on error and
    an unknown-key check at the end."""

    def __init__(self, raw: Any, where: str, name: str) -> None:
        if not isinstance(raw, dict):
            raise ConfigError(f"{where}: [{name}] must be a table")
        self.raw, self.where, self.name, self.seen = raw, where, name, set[str]()

    def fail(self, key: str, why: str) -> ConfigError:
        return ConfigError(f"{self.where}: [{self.name}] {key}: {why}")

    def get(self, key: str) -> Any:
        self.seen.add(key)
        return self.raw.get(key)

    def text(self, key: str, default: str | None = None) -> str | None:
        v = self.get(key)
        if v is None:
            return default
        if not isinstance(v, str) or not v.strip():
            raise self.fail(key, f"{v!r} must be a non-empty string")
        return v.strip()

    def required_text(self, key: str) -> str:
        v = self.text(key)
        if v is None:
            raise self.fail(key, "is required")
        return v

    def duration(
        self, key: str, default: timedelta | None, *, allow_zero: bool = False
    ) -> timedelta | None:
        """A duration written like ``"90s"``, ``"6h"``, ``"7d"``; positive unless
        ``allow_zero`` (then ``"0s"`` is accepted too)."""
        v = self.get(key)
        if v is None:
            return default
        if not isinstance(v, str):
            raise self.fail(key, f"{v!r} must be a duration string like 30s, 5m, 1h, 2d")
        try:
            d = parse_duration(v)
        except ValueError as exc:
            raise self.fail(key, str(exc)) from None
        if d < timedelta(0) or (d == timedelta(0) and not allow_zero):
            raise self.fail(key, f"{v!r} must be {'zero or more' if allow_zero else 'positive'}")
        return d

    def integer(self, key: str, default: int, low: int, high: int | None = None) -> int:
        """An integer in ``low`` .. ``high`` (inclusive; no upper bound when None)."""
        v = self.get(key)
        if v is None:
            return default
        if isinstance(v, str):  # environment overrides are text
            try:
                v = int(v)
            except ValueError:
                raise self.fail(key, f"{v!r} is not an integer") from None
        if isinstance(v, bool) or not isinstance(v, int) or v < low:
            raise self.fail(key, f"{v!r} must be an integer >= {low}")
        if high is not None and v > high:
            raise self.fail(key, f"{v!r} must be an integer in {low}..{high}")
        return v

    def number(self, key: str, default: float, low: float, high: float | None = None) -> float:
        """A finite number (an integer is taken as one) in ``low`` .. ``high`` (inclusive;
        no upper bound when None)."""
        v = self.get(key)
        if v is None:
            return default
        if isinstance(v, str):  # environment overrides are text
            try:
                v = float(v)
            except ValueError:
                raise self.fail(key, f"{v!r} is not a number") from None
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            raise self.fail(key, f"{v!r} must be a number")
        if v < low or (high is not None and v > high):
            bounds = f">= {low}" if high is None else f"in [{low}, {high}]"
            raise self.fail(key, f"{v!r} must be {bounds}")
        return float(v)

    def boolean(self, key: str, default: bool) -> bool:
        v = self.get(key)
        if v is None:
            return default
        if isinstance(v, str) and v.lower() in ("true", "false", "1", "0"):
            return v.lower() in ("true", "1")
        if not isinstance(v, bool):
            raise self.fail(key, f"{v!r} must be true or false")
        return v

    def choice(self, key: str, default: str, choices: tuple[str, ...]) -> str:
        v = self.text(key, default)
        assert v is not None
        if v not in choices:
            raise self.fail(key, f"{v!r} is not one of {', '.join(choices)}")
        return v

    def done(self) -> None:
        unknown = sorted(set(self.raw) - self.seen)
        if unknown:
            raise self.fail(unknown[0], f"unknown key (known: {', '.join(sorted(self.seen))})")
