"""The plan's snapshot of running pods, kept between cycles, equals a new one whenever it
is re-used, and every change to what it was built from is a miss."""

from __future__ import annotations

import os
import pickle
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from predops.allocator.snapshot import ClusterSnapshot
from predops.core.clock import FixedClock
from predops.pipelines.ingest.batch import Batch
from predops.pipelines.ingest.run import ingest
from predops.pipelines.synthetic.run import SimConfig, simulate_to_lake
from predops.pipelines.workspace import snapshot_cache
from predops.pipelines.workspace.fleet_state import fleet_from_lake
from predops.pipelines.workspace.lake import Lake

START = datetime(2026, 2, 2, tzinfo=UTC)


@pytest.fixture(scope="module")
def fleet_lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """20 nodes x 2 days of hourly telemetry, with pods."""
    root = tmp_path_factory.mktemp("snapshot_lake") / "lake"
    cfg = SimConfig(nodes=20, days=2, interval=timedelta(hours=1), seed=3, start=START)
    simulate_to_lake(Lake(root), cfg, clock=FixedClock(cfg.end), progress=False)
    return root


def _copy(src: Path, tmp_path: Path) -> Lake:
    shutil.copytree(src, tmp_path / "lake")
    return Lake(tmp_path / "lake")


def _reused(lake: Lake, now: datetime, cache: Path) -> bool:
    """Whether the cached snapshot was used at ``now``; asserts it equals a new one."""
    got = fleet_from_lake(lake, now, snapshot_cache=cache)
    new = fleet_from_lake(lake, now)
    assert ClusterSnapshot.same_state(got.snapshot.state(), new.snapshot.state())
    assert got.fleet == new.fleet  # the topology kept with it too, and the node states
    assert got.notes["pods"] == new.notes["pods"]
    assert got.notes["inventory_at"] == new.notes["inventory_at"]
    reused = got.notes["snapshot_reused"]
    assert isinstance(reused, bool)
    got.give_back()  # as a plan does when done with it
    return reused


def test_the_snapshot_is_reused_while_its_inputs_hold(fleet_lake: Path, tmp_path: Path) -> None:
    lake = _copy(fleet_lake, tmp_path)
    cache = tmp_path / snapshot_cache.FILE
    now = START + timedelta(days=1)
    until = snapshot_cache.next_change(lake, now)
    assert until is not None and until > now
    first = fleet_from_lake(lake, now, snapshot_cache=cache)
    assert first.notes["snapshot_reused"] is False and first.notes["pods"]["placed"] > 0
    assert _reused(lake, now, cache)
    assert _reused(lake, now + (until - now) / 2, cache)  # nothing changed by then
    assert not _reused(lake, until, cache)  # a pod started or stopped (or a node moved)
    assert _reused(lake, until, cache)  # kept again (brought up to date)
    assert not _reused(lake, until - timedelta(microseconds=1), cache)  # before it was built


@pytest.mark.parametrize("change", ["unreadable", "code", "pods file", "inventory file"])
def test_anything_else_is_a_miss(
    fleet_lake: Path, tmp_path: Path, change: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    lake = _copy(fleet_lake, tmp_path)
    cache = tmp_path / snapshot_cache.FILE
    now = START + timedelta(days=1)
    fleet_from_lake(lake, now, snapshot_cache=cache)
    if change == "unreadable":
        cache.write_bytes(cache.read_bytes()[:-100])
    elif change == "code":
        monkeypatch.setattr(snapshot_cache, "code_digest", lambda: "another")
    else:
        table = "pods" if change == "pods file" else "inventory"
        old = lake.scan(table).drop("source").head(3).collect()
        at = START + timedelta(days=3)
        ingest(lake, "other", [Batch(table, old)], clock=FixedClock(at), input_name=change)
    assert not _reused(lake, now, cache)


def test_a_pickled_snapshot_takes_new_versions_and_an_open_fork_is_refused(
    fleet_lake: Path,
) -> None:
    snap = fleet_from_lake(Lake(fleet_lake), START + timedelta(days=1)).snapshot
    back = pickle.loads(pickle.dumps(snap))
    assert ClusterSnapshot.same_state(back.state(), snap.state())
    assert int(back.version[: back.n_nodes].min()) > int(snap.version[: snap.n_nodes].max())
    snap.fork()
    with pytest.raises(RuntimeError, match="open forks"):
        pickle.dumps(snap)


def test_the_memo_belongs_to_one_snapshot(fleet_lake: Path, tmp_path: Path) -> None:
    lake = _copy(fleet_lake, tmp_path)
    cache = tmp_path / snapshot_cache.FILE
    now = START + timedelta(days=1)
    built = fleet_from_lake(lake, now, snapshot_cache=cache)
    reused = fleet_from_lake(lake, now, snapshot_cache=cache)
    assert reused.notes["snapshot_reused"] and built.snapshot_token == reused.snapshot_token
    assert built.snapshot_token is not None
    assert fleet_from_lake(lake, now).snapshot_token is None  # nothing kept: no memo
    assert snapshot_cache.read_memo(cache, built.snapshot_token) == {}
    snapshot_cache.write_memo(cache, built.snapshot_token, {"k": [3, "{}"]})
    assert snapshot_cache.read_memo(cache, built.snapshot_token) == {"k": [3, "{}"]}
    until = snapshot_cache.next_change(lake, now)
    assert until is not None
    rebuilt = fleet_from_lake(lake, until, snapshot_cache=cache)  # pods changed by then
    assert not rebuilt.notes["snapshot_reused"] and rebuilt.snapshot_token is not None
    assert rebuilt.snapshot_token != built.snapshot_token
    assert snapshot_cache.read_memo(cache, rebuilt.snapshot_token) == {}
    cache.with_name(f"{cache.stem}.memo.json").write_text("{not json")
    assert snapshot_cache.read_memo(cache, built.snapshot_token) == {}


def test_a_long_running_process_keeps_the_snapshot_it_reverted(
    fleet_lake: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The process keeps the snapshot it read: given back after a plan's fork and
    revert, the next call has it without unpickling; while it is lent, or once the file
    is replaced, the file is read."""
    lake = _copy(fleet_lake, tmp_path)
    cache = tmp_path / snapshot_cache.FILE
    now = START + timedelta(days=1)
    first = fleet_from_lake(lake, now, snapshot_cache=cache)
    assert first.lent is not None
    pristine = first.snapshot.state()
    loads: list[int] = []
    real_load = pickle.load

    def counting_load(fh: object) -> object:
        loads.append(1)
        return real_load(fh)  # type: ignore[arg-type]

    monkeypatch.setattr(snapshot_cache.pickle, "load", counting_load)
    # lent: a second caller reads the file and gets its own snapshot
    other = fleet_from_lake(lake, now, snapshot_cache=cache)
    assert other.snapshot is not first.snapshot and len(loads) == 2
    other.give_back()  # the newest one read is the one kept now
    # a plan's changes on a fork, reverted, then given back
    kept = fleet_from_lake(lake, now, snapshot_cache=cache)
    assert kept.snapshot is other.snapshot and len(loads) == 2
    snap = kept.snapshot
    snap.fork()
    row = next(i for i in range(snap.n_nodes) if snap.pods_on[i])
    for pod in list(snap.pods_on[row]):
        snap.remove(pod)
    snap.set_schedulable([snap.node_ids[row]], False)
    snap.revert()
    kept.give_back()
    again = fleet_from_lake(lake, now, snapshot_cache=cache)
    assert again.snapshot is snap and len(loads) == 2 and again.notes["snapshot_reused"]
    assert ClusterSnapshot.same_state(again.snapshot.state(), pristine)
    again.give_back()
    # the file replaced by another process (same content, another inode): read again
    body, was = cache.read_bytes(), os.stat(cache)
    cache.unlink()
    cache.write_bytes(body)
    os.utime(cache, ns=(was.st_atime_ns, was.st_mtime_ns + 10**9))  # not within one tick
    fresh = fleet_from_lake(lake, now, snapshot_cache=cache)
    assert fresh.snapshot is not snap and len(loads) == 4
    assert ClusterSnapshot.same_state(fresh.snapshot.state(), pristine)


def _same(a: ClusterSnapshot, b: ClusterSnapshot) -> bool:
    """Same state, and the containers iterate in the same order."""
    return (
        ClusterSnapshot.same_state(a.state(), b.state())
        and list(a.placements) == list(b.placements)
        and all(list(x) == list(y) for x, y in zip(a.pods_on, b.pods_on, strict=True))
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_snapshot_brought_up_to_date_equals_a_new_one(fleet_lake: Path, seed: int) -> None:
    """Pods start, stop, move and change requests, some no longer fit: the snapshot
    updated node by node equals one built from scratch, counts included, step after
    step."""
    import numpy as np
    import polars as pl

    from predops.pipelines.workspace.fleet_state import topology_at
    from predops.pipelines.workspace.pod_snapshot import (
        running_pods,
        snapshot_of,
        update_snapshot,
    )

    lake = Lake(fleet_lake)
    rng = np.random.default_rng(seed)
    t = START + timedelta(hours=20)
    topology, _ = topology_at(lake, t)
    snap, _ = snapshot_of(topology, running_pods(lake, t))
    nodes = [n.node_id for n in topology.nodes]
    for step in range(6):
        t += timedelta(hours=int(rng.integers(1, 5)))
        pods = running_pods(lake, t)
        assert pods.height > 10
        keep = rng.random(pods.height) > 0.2
        moved = rng.random(pods.height) < 0.1
        pods = pods.filter(pl.Series(keep)).with_columns(
            pl.when(pl.Series(moved[keep]))
            .then(pl.Series([nodes[i] for i in rng.integers(0, len(nodes), int(keep.sum()))]))
            .otherwise(pl.col("node_id"))
            .alias("node_id"),
            pl.when(pl.Series(rng.random(int(keep.sum())) < 0.05))
            .then(pl.col("cpu_milli") * 3)  # grown: may no longer fit
            .otherwise(pl.col("cpu_milli"))
            .alias("cpu_milli"),
        )
        if step == 3:
            pods = pods.with_columns(
                pl.when(pl.arange(0, pods.height) == 0)
                .then(pl.lit("node-gone"))
                .otherwise(pl.col("node_id"))
                .alias("node_id")
            )
        pods = pods.sort("pod_id")
        new, new_counts = snapshot_of(topology, pods)
        counts, redone = update_snapshot(snap, pods)
        assert counts == new_counts and 0 < redone <= len(nodes)
        assert _same(snap, new)
    counts, redone = update_snapshot(snap, pods)  # nothing changed: only unfit pods' nodes
    assert counts == new_counts and redone <= counts["does_not_fit"]
    assert _same(snap, new)
    counts, _ = update_snapshot(snap, pl.DataFrame())  # no pods table: every pod gone
    empty, empty_counts = snapshot_of(topology, pl.DataFrame())
    assert counts == empty_counts and _same(snap, empty)


def test_a_process_brings_its_snapshot_up_to_date_when_pods_change(
    fleet_lake: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pods file added: the kept snapshot is updated node by node (equal to a new one)
    instead of rebuilt; kept in memory while few nodes changed, written when many did."""
    from predops.pipelines.workspace import fleet_state

    lake = _copy(fleet_lake, tmp_path)
    cache = tmp_path / snapshot_cache.FILE
    now = START + timedelta(days=1)
    fleet_from_lake(lake, now, snapshot_cache=cache).give_back()
    until = snapshot_cache.next_change(lake, now)
    assert until is not None
    rebuilt: list[int] = []
    real = fleet_state.snapshot_of

    def counting(*a: object, **k: object) -> object:
        rebuilt.append(1)
        return real(*a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(fleet_state, "snapshot_of", counting)
    stamp = cache.stat().st_mtime_ns
    later = fleet_from_lake(lake, until, snapshot_cache=cache)
    redone = later.notes["snapshot_nodes_redone"]
    assert rebuilt == [] and not later.notes["snapshot_reused"] and redone >= 1
    new = fleet_from_lake(lake, until)  # (counted: a new one, for the comparison)
    assert _same(later.snapshot, new.snapshot) and later.notes["pods"] == new.notes["pods"]
    assert later.snapshot_token is not None
    later.give_back()
    written = redone * 4 > len(later.fleet.topology)
    assert (cache.stat().st_mtime_ns != stamp) == written
    again = fleet_from_lake(lake, until, snapshot_cache=cache)
    assert again.notes["snapshot_reused"] and again.snapshot is later.snapshot
    assert again.snapshot_token == later.snapshot_token
