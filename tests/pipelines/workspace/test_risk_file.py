"""risk.json encoded in parts is byte for byte the records' JSON, whatever the risks
share or do not."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import numpy as np

from predops.core.contracts import FailureRisk, Provenance, Reason
from predops.pipelines.workspace.atomic import atomic_write_records
from predops.pipelines.workspace.risk_file import risks_text, write_risks

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def _expected(tmp_path: Path, risks: list[FailureRisk]) -> str:
    path = tmp_path / "expected.json"
    atomic_write_records(path, [r.to_dict() for r in risks])
    return path.read_text()


def test_the_text_is_the_records_json(tmp_path: Path) -> None:
    prov = Provenance("predops.failure", "7", "h1", T0, run_id="r")
    other = Provenance("predops.failure", "8", "h1", T0 + timedelta(hours=1))
    shared = (Reason("temp", 0.25, "temp 91 °C — hot"), Reason("ecc", -0.0, 'ecc "x"'))
    risks = [
        FailureRisk("n-1", T0, timedelta(hours=24), 0.1, shared, prov),
        FailureRisk("n-2", T0, timedelta(hours=24), float(np.float64(1 / 3)), shared, prov),
        FailureRisk("n-3", T0 + timedelta(minutes=5), timedelta(hours=6), 0.0, (), None),
        FailureRisk(
            "nœud-4",
            datetime(2026, 3, 1, tzinfo=timezone(timedelta(0))),
            timedelta(minutes=90),
            1.0,
            (Reason("x", math.nan, "nan"), Reason("y", 1e-300, "tiny")),
            other,
        ),
        FailureRisk("n-5", T0, timedelta(hours=24), 0.5, (Reason("temp", 0.0, "t"),), prov),
    ]
    assert risks_text(risks) == _expected(tmp_path, risks)
    # the same tuples again (encoded last time), a new as_of and provenance
    later = T0 + timedelta(minutes=5)
    again = [FailureRisk(r.node_id, later, r.horizon, r.p_fail, r.reasons, other) for r in risks]
    assert risks_text(again) == _expected(tmp_path, again)
    # equal reasons in a new tuple, and -0.0 against 0.0, are not mixed up
    flipped = [
        FailureRisk("n-6", T0, timedelta(hours=24), 0.2, (Reason("temp", -0.0, "t"),), prov),
        *risks,
    ]
    assert risks_text(flipped) == _expected(tmp_path, flipped)
    assert risks_text([]) == _expected(tmp_path, [])
    write_risks(tmp_path / "risk.json", risks)
    assert (tmp_path / "risk.json").read_text() == _expected(tmp_path, risks)
