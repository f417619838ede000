"""Files holding secrets or approvals are the owner's only (0600, directories 0700),
whatever mode they had before and whatever the umask."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from predops.pipelines.workspace.audit import AuditLog
from predops.pipelines.workspace.private import private_dir, write_private_text


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def open_umask() -> Iterator[None]:
    """A umask that lets everyone read new files."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def test_a_private_file_is_0600_new_or_replacing_an_open_one(
    tmp_path: Path, open_umask: None
) -> None:
    fresh = tmp_path / "fresh"
    write_private_text(fresh, "s1")
    assert mode(fresh) == 0o600 and fresh.read_text() == "s1"
    loose = tmp_path / "loose"
    loose.write_text("old")
    loose.chmod(0o666)
    write_private_text(loose, "s2")
    assert mode(loose) == 0o600 and loose.read_text() == "s2"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh", "loose"]  # no temp left


def test_a_private_directory_is_0700_new_or_already_there(tmp_path: Path, open_umask: None) -> None:
    assert mode(private_dir(tmp_path / "a" / "b")) == 0o700
    loose = tmp_path / "loose"
    loose.mkdir(mode=0o755)
    assert mode(private_dir(loose)) == 0o700


def test_the_audit_log_is_0600_and_an_older_open_one_is_closed(
    tmp_path: Path, open_umask: None
) -> None:
    at = datetime(2026, 3, 1, tzinfo=UTC)
    what = {"kind": "plan", "target": "p", "params": {}}
    new = AuditLog(tmp_path / "new.jsonl", who="t")
    new.append(at=at, outcome="approved", what=what, why="ok")
    assert mode(new.path) == 0o600
    old_path = tmp_path / "old.jsonl"
    old_path.write_text("")
    old_path.chmod(0o644)
    AuditLog(old_path, who="t").append(at=at, outcome="approved", what=what, why="ok")
    assert mode(old_path) == 0o600
