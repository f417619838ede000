"""The risk cache gives back exactly what was saved, restamped, from its file or (in the
process that wrote or read it) from memory while the file holds; anything else is a
miss."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from predops.core.contracts import FailureRisk, Provenance, Reason
from predops.pipelines.jobs import risk_cache

T0 = datetime(2026, 3, 1, tzinfo=UTC)
PROV = Provenance("predops.failure", "4", "abc123", T0, run_id="r1")


def _risks(as_of: datetime, prov: Provenance) -> list[FailureRisk]:
    return [
        FailureRisk(
            node_id=f"node-{i:03d}",
            as_of=as_of,
            horizon=timedelta(hours=24),
            p_fail=i / 7 % 1.0,  # floats that do not print short
            reasons=tuple(Reason(f"f{j}", (i - j) / 3, f"f{j} is {i}") for j in range(i % 4)),
            provenance=prov,
        )
        for i in range(12)
    ]


def test_saved_risks_come_back_restamped_from_memory_or_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / risk_cache.FILE
    key = risk_cache.cache_key(PROV, "rows-1", [timedelta(hours=24)])
    assert key is not None
    risk_cache.save(path, key, _risks(T0, PROV))
    later, prov = T0 + timedelta(minutes=5), Provenance("predops.failure", "4", "abc123", T0)
    want = _risks(later, prov)
    ids = [r.node_id for r in want]

    def unread(fh: object) -> object:
        raise AssertionError("the file was read")

    with monkeypatch.context() as m:
        m.setattr(risk_cache.pickle, "load", unread)  # the writer's process kept it
        assert risk_cache.lookup(path, key, ids, as_of=later, provenance=prov) == want
        assert risk_cache.lookup(path, key, ids[5:7], as_of=later, provenance=prov) == want[5:7]
    risk_cache._MEMO.clear()  # another process: the file
    assert risk_cache.lookup(path, key, ids, as_of=later, provenance=prov) == want
    other = {**key, "rows_id": "rows-2"}
    assert risk_cache.lookup(path, other, ids, as_of=later, provenance=prov) is None
    assert risk_cache.lookup(path, key, [*ids, "node-new"], as_of=later, provenance=prov) is None
    # rewritten by another process: read again, and a torn file is a miss
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) - 40])
    assert risk_cache.lookup(path, key, ids, as_of=later, provenance=prov) is None
    risk_cache.save(path, None, want)  # no key: nothing kept
    assert not path.exists()
    assert risk_cache.lookup(path, key, ids, as_of=later, provenance=prov) is None
