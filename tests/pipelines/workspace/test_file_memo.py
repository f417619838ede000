"""A file's parsed value is kept only while the file is the one it was read from, a
lent value goes to one caller at a time, and the memo stays within its capacity."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from predops.pipelines.workspace.atomic import atomic_write_text
from predops.pipelines.workspace.file_memo import FileMemo, identity


def _write(path: Path, text: str) -> None:
    atomic_write_text(path, text)


def test_a_value_lives_while_its_file_does(tmp_path: Path) -> None:
    f = tmp_path / "state.json"
    _write(f, "one")
    memo = FileMemo()
    memo.put(f, "parsed one", identity(f))
    assert memo.get(f) == "parsed one"
    _write(f, "two")  # replaced (same size): another inode
    assert memo.get(f) is None and len(memo) == 0
    memo.put(f, "parsed two", identity(f))
    with f.open("a") as fh:  # changed in place: size and mtime
        fh.write("!")
    assert memo.get(f) is None
    memo.put(f, "parsed", identity(f))
    st = os.stat(f)
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 1))  # touched
    assert memo.get(f) is None
    memo.put(f, "parsed", identity(f))
    f.unlink()
    assert memo.get(f) is None
    memo.put(f, "never", None)  # a file that could not be read keeps nothing
    assert len(memo) == 0


def test_a_lent_value_goes_to_one_caller_at_a_time(tmp_path: Path) -> None:
    f = tmp_path / "snap.pickle"
    _write(f, "x")
    memo = FileMemo()
    value = ["snapshot"]
    memo.put(f, value, identity(f), lent=True)  # the writer goes on using it
    assert memo.borrow(f) is None
    memo.give_back(f, ["another object"])  # only the lent object itself returns it
    assert memo.borrow(f) is None
    memo.give_back(f, value)
    got = memo.borrow(f)
    assert got is value and memo.borrow(f) is None
    memo.give_back(f, value)
    # threads: each borrow that succeeds is alone until it gives back
    holders: list[int] = []
    seen_together: list[bool] = []
    gate = threading.Lock()

    def use() -> None:
        for _ in range(200):
            v = memo.borrow(f)
            if v is None:
                continue
            with gate:
                holders.append(1)
                seen_together.append(len(holders) > 1)
            with gate:
                holders.pop()
            memo.give_back(f, v)

    threads = [threading.Thread(target=use) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen_together and not any(seen_together)


def test_the_memo_keeps_its_capacity_least_recent_first(tmp_path: Path) -> None:
    memo = FileMemo(capacity=2)
    files = [tmp_path / f"f{i}" for i in range(3)]
    for i, f in enumerate(files):
        _write(f, str(i))
    memo.put(files[0], 0, identity(files[0]))
    memo.put(files[1], 1, identity(files[1]))
    assert memo.get(files[0]) == 0  # now the most recent
    memo.put(files[2], 2, identity(files[2]))
    assert len(memo) == 2
    assert memo.get(files[1]) is None
    assert memo.get(files[0]) == 0 and memo.get(files[2]) == 2
    with pytest.raises(ValueError, match="capacity"):
        FileMemo(capacity=0)
