"""The model slot: swaps only whole models, keeps the last good one on registry errors."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from predops.core.clock import FixedClock
from predops.core.contracts import Provenance
from predops.pipelines.workspace.promotion_records import AliasState
from predops.serving.models import ModelSlot


class Registry:
    """A registry stand-in for the slot's two callables (the real one is exercised by the
    server tests); ``fail`` makes every call raise as an unreachable store would."""

    def __init__(self) -> None:
        self.version = "1"
        self.fail = False
        self.loads: list[str] = []

    def version_of(self) -> AliasState:
        if self.fail:
            raise ConnectionError("registry unreachable")
        return AliasState("predops.x", "champion", self.version, self.version)

    def load(self, version: str) -> tuple[Any, Provenance]:
        if self.fail:
            raise ConnectionError("registry unreachable")
        self.loads.append(version)
        prov = Provenance("predops.x", version, "hash", datetime(2026, 1, 1, tzinfo=UTC))
        return {"model": version}, prov


def test_slot_loads_reloads_on_move_and_keeps_last_good() -> None:
    reg = Registry()
    slot = ModelSlot("x", reg.version_of, reg.load, FixedClock(datetime(2026, 1, 2, tzinfo=UTC)))
    assert slot.current is None
    assert slot.refresh() is True
    first = slot.current
    assert first is not None and first.version == "1" and first.model == {"model": "1"}
    assert slot.refresh() is False and reg.loads == ["1"]  # alias unchanged: no reload

    reg.version = "2"
    assert slot.refresh() is True
    assert slot.current is not None and slot.current.version == "2"
    assert first.model == {"model": "1"}  # a request holding the old one still has it whole

    reg.fail = True
    assert slot.refresh() is False
    assert slot.current.version == "2"
    status = slot.status()
    assert status["loaded"] and status["version"] == "2"
    assert "registry unreachable" in status["last_error"]

    reg.fail = False
    slot.refresh()
    assert slot.status()["last_error"] is None and slot.reloads == 2


def test_slot_serves_the_promoted_version_and_reports_a_hand_moved_alias() -> None:
    reg = Registry()
    states = iter(
        [
            AliasState("predops.x", "champion", "1", "1"),
            AliasState("predops.x", "champion", "2", "1", "moved by hand"),
            AliasState("predops.x", "champion", "2", None, "moved by hand, nothing promoted"),
        ]
    )
    slot = ModelSlot(
        "x", lambda: next(states), reg.load, FixedClock(datetime(2026, 1, 2, tzinfo=UTC))
    )
    assert slot.refresh() is True and slot.untrusted_alias() is None
    assert slot.refresh() is False  # the alias moved to v2, v1 is still the promoted one
    assert reg.loads == ["1"] and slot.current is not None and slot.current.version == "1"
    assert slot.untrusted_alias() == {
        "model": "x",
        "alias": "champion",
        "alias_version": "2",
        "served_version": "1",
        "problem": "moved by hand",
    }
    assert slot.refresh() is False  # no promoted version at all: keep the last good one
    assert slot.current.version == "1" and "nothing promoted" in (slot.last_error or "")
    assert slot.status()["alias"]["verified"] is False
