"""The pacing state file: absent, round trip, and a bad file named with its field."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from predops.pipelines.workspace.pacing_state import (
    PacingStateError,
    pacing_path,
    read_pacing,
    write_pacing,
)
from predops.policy.pacing import DomainPace, InFlight, PacingState

T = datetime(2026, 3, 1, 12, tzinfo=UTC)


def test_absent_round_trip_and_bad_files(tmp_path: Path) -> None:
    path = pacing_path(tmp_path)
    assert path == tmp_path / "policy" / "pacing.json" and read_pacing(path) is None
    state = PacingState(
        {"signal:xid_errors": DomainPace("paused", 1, T, T, "12 candidates")},
        {"node-1": InFlight(("pool:train", "signal:xid_errors"), T, T + timedelta(hours=2))},
        T,
    )
    write_pacing(path, state)
    assert read_pacing(path) == state
    path.write_text("{not json")
    with pytest.raises(PacingStateError, match=r"pacing\.json.*delete it"):
        read_pacing(path)
    path.write_text('{"domains": {"rack:r1": {"mode": "sleepy", "width": 1}}}')
    with pytest.raises(PacingStateError, match=r"pacing.json domains\['rack:r1'\]: field mode"):
        read_pacing(path)
