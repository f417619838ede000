"""Lake maintenance: compaction keeps every row and is idempotent, retention drops
exactly the expired partitions, removed files stay readable for running readers until
deleted, reads prune day partitions and push the time filter into the scan."""

from __future__ import annotations

import fcntl
import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq
import pytest

from predops.core.clock import FixedClock
from predops.core.validation import QUARANTINE_SCHEMA
from predops.pipelines.workspace import lake_commits
from predops.pipelines.workspace.config import ConfigError
from predops.pipelines.workspace.errors import LockHeld
from predops.pipelines.workspace.lake import Lake
from predops.pipelines.workspace.lake_maintenance import (
    LakeSettings,
    maintain,
    parse_lake_settings,
    status,
)
from tests.pipelines.workspace.lake_ingests import ingest_every

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def _clock() -> FixedClock:
    """Five minutes from now, read when a test runs (not at collection: in a long suite
    the commits a test makes come later). The commit log holds wall-clock times."""
    return FixedClock(datetime.now(UTC) + timedelta(minutes=5))


NODES = 6
EVERY = timedelta(minutes=30)
SETTINGS = LakeSettings(min_files=4, keep_removed=timedelta(0))


def rows(lake: Lake) -> pl.DataFrame:
    return Lake(lake.root).scan("telemetry").collect().sort("node_id", "ts")


@pytest.fixture
def three_days(lake: Lake) -> Lake:
    ingest_every(lake, nodes=NODES, start=T0, end=T0 + timedelta(days=3), every=EVERY)
    return lake


def test_compaction_keeps_every_row_and_a_second_run_does_nothing(three_days: Lake) -> None:
    lake = three_days
    before = rows(lake)
    assert len(lake.files("telemetry")) == 3 * 48
    report = maintain(lake, SETTINGS, clock=_clock())
    assert [c["files_before"] for c in report["compacted"]] == [48, 48, 48]
    assert [c["files_after"] for c in report["compacted"]] == [1, 1, 1]
    assert report["deleted"]["files_deleted"] == 3 * 48
    after = rows(lake)
    assert after.equals(before) and after.height == NODES * 3 * 48
    files = lake.files("telemetry")
    assert len(files) == 3
    assert not list(lake.root.glob("telemetry/**/part-*.parquet"))[3:]  # old ones deleted
    # Sorted by hour, then node, then time: row groups carry narrow statistics.
    one = pl.read_parquet(files[0])
    hour = one["ts"].dt.truncate("1h")
    assert one.with_columns(hour=hour).sort("hour", "node_id", "ts").drop("hour").equals(one)
    again = maintain(Lake(lake.root), SETTINGS, clock=_clock())
    assert again["changed"] == 0 and again["compacted"] == []
    # The log was checkpointed: the 144 ingests' files are all deleted, so their lines
    # went; the three compactions' lines stay (their files are the table now).
    log = [json.loads(x) for x in (lake.root / "_commits.jsonl").read_text().splitlines()]
    assert [e["maintenance"]["action"] for e in log] == ["compact"] * 3
    assert report["deleted"]["log_lines_dropped"] == 3 * 48


def test_the_log_checkpoint_keeps_every_line_a_file_on_disk_needs(three_days: Lake) -> None:
    lake = three_days
    before = rows(lake)
    # Compact with the default grace time: the replaced files wait on disk, so the
    # ingests' lines (their files) and the compactions' lines (their removals) stay.
    maintain(lake, LakeSettings(min_files=4), clock=_clock())
    text = (lake.root / "_commits.jsonl").read_text()
    assert len(text.splitlines()) == 3 * 48 + 3
    assert lake_commits.checkpoint(lake.root, lake._commits)["lines_after"] == 3 * 48 + 3
    assert (lake.root / "_commits.jsonl").read_text() == text  # nothing to drop: untouched
    # A quarantine's file keeps its line too; the deleted files' lines go.
    bad = pl.DataFrame(
        {"row": [3], "field": ["ts"], "reason": ["not a time"], "record": ["{}"]},
        schema=QUARANTINE_SCHEMA,
    )
    lake.quarantine("telemetry", "prometheus", bad, input_name="x.csv", ingested_at=T0)
    (qfile,) = lake.quarantine_files("telemetry")
    report = maintain(lake, SETTINGS, clock=_clock())
    assert report["deleted"]["log_lines_dropped"] == 3 * 48
    log = [json.loads(x) for x in (lake.root / "_commits.jsonl").read_text().splitlines()]
    assert len(log) == 4 and lake_commits.tx_of(qfile.name) in {e["tx"] for e in log}
    assert Lake(lake.root).read_quarantine("telemetry")["reason"].to_list() == ["not a time"]
    assert rows(lake).equals(before) and len(lake.files("telemetry")) == 3
    # An ingest after the checkpoint appends to the rewritten log as usual.
    ingest_every(
        lake,
        nodes=NODES,
        start=T0 + timedelta(days=3),
        end=T0 + timedelta(days=3, hours=1),
        every=EVERY,
    )
    assert rows(lake).height == before.height + NODES * 2


def test_slices_bound_memory_and_row_groups_span_an_hour(three_days: Lake) -> None:
    lake = three_days
    before = rows(lake)
    sliced = LakeSettings(min_files=4, keep_removed=timedelta(0), bucket_rows=12)
    maintain(lake, sliced, clock=_clock(), tables=["telemetry"])
    files = lake.files("telemetry")
    md = pq.read_metadata(files[0])
    assert md.num_rows == NODES * 48 and md.num_row_groups == 24  # one slice an hour
    spans = []
    for i in range(md.num_row_groups):
        st = md.row_group(i).column(md.schema.names.index("ts")).statistics
        spans.append(st.max - st.min)
    assert max(spans) < timedelta(hours=1)
    assert rows(lake).equals(before)
    # One slice for the whole day: the same order, so the same file contents.
    other = Lake(lake.root.parent / "other")
    ingest_every(other, nodes=NODES, start=T0, end=T0 + timedelta(days=1), every=EVERY)
    maintain(other, SETTINGS, clock=_clock())
    (whole,) = other.files("telemetry")
    assert pq.read_metadata(whole).num_row_groups == 1
    assert pl.read_parquet(whole).equals(pl.read_parquet(files[0]))


def test_the_current_day_is_left_alone_unless_asked(three_days: Lake) -> None:
    lake = three_days
    last_day_end = T0 + timedelta(days=3)
    report = maintain(lake, SETTINGS, clock=FixedClock(last_day_end + timedelta(minutes=10)))
    assert [c["partition"][-10:] for c in report["compacted"]] == ["2026-03-01", "2026-03-02"]
    report = maintain(lake, SETTINGS, clock=FixedClock(last_day_end), include_current=True)
    assert [c["partition"][-10:] for c in report["compacted"]] == ["2026-03-03"]


def test_a_dry_run_changes_nothing(three_days: Lake) -> None:
    lake = three_days
    listing = sorted(lake.root.rglob("*"))
    settings = LakeSettings(min_files=4, retention={"telemetry": timedelta(days=2)})
    dry = maintain(lake, settings, clock=FixedClock(T0 + timedelta(days=3, hours=2)), dry_run=True)
    assert [d["partitions"] for d in dry["dropped"]] == [
        ["telemetry/source=prometheus/date=2026-03-01"]
    ]
    assert [c["partition"][-10:] for c in dry["compacted"]] == ["2026-03-02", "2026-03-03"]
    assert dry["changed"] == 0 and sorted(lake.root.rglob("*")) == listing


def test_retention_drops_exactly_the_expired_partitions_and_says_so(three_days: Lake) -> None:
    lake = three_days
    keep = LakeSettings(
        min_files=1000, keep_removed=timedelta(hours=1), retention={"telemetry": timedelta(days=1)}
    )
    now = T0 + timedelta(days=2, hours=12)  # day 1 ended 36 h ago, day 2 12 h ago
    report = maintain(lake, keep, clock=FixedClock(now))
    (drop,) = report["dropped"]
    assert [p[-10:] for p in drop["partitions"]] == ["2026-03-01"]
    assert drop["rows"] == NODES * 48 and drop["files"] == 48
    left = rows(lake)
    assert left["ts"].min() == T0 + timedelta(days=1)
    assert left.height == NODES * 2 * 48
    # The commit line is the audit record; the files wait for keep_removed.
    last = json.loads((lake.root / "_commits.jsonl").read_text().splitlines()[-1])
    assert last["maintenance"]["action"] == "drop" and "retention" in last["maintenance"]["why"]
    assert (lake.root / "telemetry/source=prometheus/date=2026-03-01").is_dir()
    assert status(lake)["removed_files_on_disk"] == 48
    gone = maintain(lake, LakeSettings(keep_removed=timedelta(0), min_files=1000), clock=_clock())
    assert gone["deleted"]["files_deleted"] == 48
    assert not (lake.root / "telemetry/source=prometheus/date=2026-03-01").exists()
    assert rows(lake).equals(left)


def test_a_reader_that_listed_files_before_the_commit_still_reads_them(three_days: Lake) -> None:
    lake = three_days
    before = rows(lake)
    planned = Lake(lake.root).scan("telemetry")  # lists the small files now
    maintain(lake, LakeSettings(min_files=4), clock=_clock())  # keep_removed: the default 15 min
    assert planned.collect().sort("node_id", "ts").equals(before)
    assert rows(lake).equals(before)


def test_a_compaction_committing_while_a_reader_reads_the_log_is_seen_whole_or_not(
    three_days: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The commit lands right after the reader's first reading of the log. The reader
    then sees the old small files (its reading has neither the compaction's transaction
    nor its removals), never the old committed set with the new removals (no files)."""
    lake = three_days
    before = rows(lake)
    real = lake_commits.read_lines
    landed: list[bool] = []

    def read_then_compact(path: Path) -> list[dict[str, Any]]:
        got = real(path)
        if not landed and path.name == lake_commits.COMMIT_LOG:
            landed.append(True)
            maintain(Lake(lake.root), LakeSettings(min_files=4), clock=_clock())
        return got

    monkeypatch.setattr(lake_commits, "read_lines", read_then_compact)
    reader = Lake(lake.root)
    files = reader.files("telemetry")
    assert landed and len(files) == 3 * 48
    got = pl.scan_parquet(files).collect().sort("node_id", "ts")
    assert got.equals(before.drop("source"))
    monkeypatch.setattr(lake_commits, "read_lines", real)
    assert len(Lake(lake.root).files("telemetry")) == 3 and rows(lake).equals(before)


def test_readers_during_a_compaction_in_another_process_see_one_whole_set(lake: Lake) -> None:
    ingest_every(lake, nodes=NODES, start=T0, end=T0 + timedelta(days=6), every=EVERY)
    expected = rows(lake)
    code = (
        "import sys;"
        "from predops.pipelines.workspace.lake import Lake;"
        "from predops.pipelines.workspace.lake_maintenance import LakeSettings, maintain;"
        "from predops.pipelines.workspace.clock import SystemClock;"
        "maintain(Lake(sys.argv[1]), LakeSettings(min_files=4), clock=SystemClock())"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, str(lake.root)])
    reads = 0
    try:
        while proc.poll() is None or reads < 2:
            got = rows(lake)
            assert got.equals(expected), f"read {reads}: {got.height} rows"
            reads += 1
    finally:
        assert proc.wait(timeout=120) == 0
    assert len(lake.files("telemetry")) == 6 and rows(lake).equals(expected)


def test_compaction_waits_for_the_lake_lock_a_bounded_time(three_days: Lake) -> None:
    lake = Lake(three_days.root, lock_timeout=0.2)
    with open(lake.root / ".lake.lock", "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(LockHeld, match="lake lock"):
            maintain(lake, SETTINGS, clock=_clock())
    assert maintain(lake, SETTINGS, clock=_clock())["changed"] == 3


def test_reads_list_only_the_days_of_their_window_and_push_the_filter_down(
    three_days: Lake,
) -> None:
    lake = three_days
    start, end = T0 + timedelta(days=1, hours=23, minutes=30), T0 + timedelta(days=2, hours=1)
    files = lake.files("telemetry", start=start, end=end)
    assert {f.parent.name for f in files} == {"date=2026-03-02", "date=2026-03-03"}
    window = lake.scan("telemetry", start=start, end=end)
    plan = window.explain()
    assert "SELECTION" in plan and "2026-03-02 23:30:00" in plan
    got = window.collect()
    assert got["ts"].min() == start and got["ts"].max() == end
    assert got.height == NODES * 4
    with pytest.raises(Exception, match="UTC-aware"):
        lake.files("telemetry", start=datetime(2026, 3, 1))


def test_settings_name_the_bad_key() -> None:
    cfg = parse_lake_settings(
        {"lake": {"compact_min_files": 4, "retention": {"telemetry": "90d"}}}, "p.toml"
    )
    assert cfg.min_files == 4 and cfg.retention == {"telemetry": timedelta(days=90)}
    with pytest.raises(ConfigError, match=r"\[lake.retention\] telemtry"):
        parse_lake_settings({"lake": {"retention": {"telemtry": "90d"}}}, "p.toml")
    with pytest.raises(ConfigError, match=r"\[lake\] compact_min_file"):
        parse_lake_settings({"lake": {"compact_min_file": 4}}, "p.toml")
    with pytest.raises(ConfigError, match="telemetry"):
        parse_lake_settings({"lake": {"retention": {"telemetry": "0s"}}}, "p.toml")
    assert parse_lake_settings({}, "p.toml") == LakeSettings()


def test_the_latest_time_is_read_from_the_newest_day_only(three_days: Lake) -> None:
    lake = three_days
    last = T0 + timedelta(days=3) - EVERY
    assert lake.latest_time("telemetry") == last
    assert lake.latest_time("telemetry", "nobody") is None
    # A newest day whose files were all dropped does not count.
    maintain(lake, LakeSettings(retention={"telemetry": timedelta(days=1)}), clock=_clock())
    assert lake.latest_time("telemetry") is None


def test_a_file_reaching_the_target_size_is_closed_and_left_alone_after(lake: Lake) -> None:
    ingest_every(lake, nodes=2000, start=T0, end=T0 + timedelta(days=1), every=EVERY)
    before = rows(lake)
    small = LakeSettings(
        min_files=4, keep_removed=timedelta(0), target_file_mb=1, bucket_rows=10_000
    )
    (done,) = maintain(lake, small, clock=_clock())["compacted"]
    sizes = [f.stat().st_size for f in lake.files("telemetry")]
    assert done["files_after"] == len(sizes) >= 2
    assert all(s >= 1 << 20 for s in sizes[:-1])  # all but the last reached the target
    assert rows(lake).equals(before)
    assert maintain(lake, small, clock=_clock())["changed"] == 0


def _quarantine_on(lake: Lake, day: datetime, row: int) -> None:
    bad = pl.DataFrame(
        {"row": [row], "field": ["ts"], "reason": ["not a time"], "record": ["{}"]},
        schema=QUARANTINE_SCHEMA,
    )
    lake.quarantine("telemetry", "prometheus", bad, input_name=f"{row}.csv", ingested_at=day)


def test_quarantine_retention_drops_only_old_ingest_days_and_only_when_asked(
    three_days: Lake,
) -> None:
    lake = three_days
    for d in range(3):
        _quarantine_on(lake, T0 + timedelta(days=d, hours=1), row=d)
    now = T0 + timedelta(days=2, hours=12)
    # No setting: quarantined rows are kept whatever their age.
    assert maintain(lake, LakeSettings(min_files=1000), clock=FixedClock(now))["dropped"] == []
    assert len(Lake(lake.root).read_quarantine("telemetry")) == 3
    keep = LakeSettings(
        min_files=1000, keep_removed=timedelta(0), retention={"_quarantine": timedelta(days=1)}
    )
    dry = maintain(lake, keep, clock=FixedClock(now), dry_run=True)
    assert [d["status"] for d in dry["dropped"]] == ["dry run"]
    assert len(Lake(lake.root).read_quarantine("telemetry")) == 3
    report = maintain(lake, keep, clock=FixedClock(now))
    (drop,) = report["dropped"]
    assert drop["table"] == "_quarantine/telemetry" and drop["rows"] == 1
    assert [p[-10:] for p in drop["partitions"]] == ["2026-03-01"]
    assert "_quarantine" in drop["why"]
    left = Lake(lake.root).read_quarantine("telemetry")
    assert sorted(left["row"].to_list()) == [1, 2]
    assert rows(lake).height == NODES * 3 * 48  # the table itself is untouched
    st = status(lake, keep)
    assert st["quarantine"]["telemetry"]["files"] == 2
    assert st["quarantine_retention"] == "1d"
    assert maintain(lake, keep, clock=FixedClock(now))["dropped"] == []  # idempotent


def test_quarantine_retention_is_a_known_key() -> None:
    doc = {"lake": {"retention": {"_quarantine": "180d"}}}
    assert parse_lake_settings(doc, "p.toml").retention == {"_quarantine": timedelta(days=180)}
    with pytest.raises(ConfigError, match="_quarantine"):
        parse_lake_settings({"lake": {"retention": {"quarantine": "1d"}}}, "p.toml")
