"""Every broken input in tests/corpus/bad_inputs: a clear error or the right quarantine,
and nothing already in the lake lost or changed."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from predops.core.clock import FixedClock
from predops.core.validation import SchemaError
from predops.pipelines.cli.main import main
from predops.pipelines.ingest import files
from predops.pipelines.ingest.batch import IngestError
from predops.pipelines.ingest.registry import IngestOptions
from predops.pipelines.ingest.run import IngestReport, ingest
from predops.pipelines.workspace.lake import Lake

CORPUS = Path(__file__).resolve().parent.parent / "corpus"
BAD = CORPUS / "bad_inputs"
GOOD = CORPUS / "good"


def ingest_file(
    lake: Lake, clock: FixedClock, path: Path, table: str = "telemetry"
) -> IngestReport:
    opts = IngestOptions(clock=clock, table=table)
    return ingest(lake, "files", files.read(str(path), opts), clock=clock, input_name=path.name)


def snapshot(lake: Lake) -> dict[str, str]:
    """Digest of every stored table file (quarantine and logs excluded)."""
    out = {}
    for p in sorted(lake.root.rglob("*.parquet")):
        rel = p.relative_to(lake.root)
        if rel.parts[0].startswith("_"):
            continue
        out[str(rel)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


@pytest.fixture
def seeded(lake: Lake, clock: FixedClock) -> tuple[Lake, dict[str, str], int]:
    ingest_file(lake, clock, GOOD / "inventory.csv", table="inventory")
    rep = ingest_file(lake, clock, GOOD / "telemetry.csv")
    assert rep.tables["telemetry"].rows_written == 12
    return lake, snapshot(lake), 12


def assert_nothing_lost(lake: Lake, before: dict[str, str], rows_before: int) -> None:
    after = snapshot(lake)
    for path, digest in before.items():
        assert after.get(path) == digest, f"{path} changed or vanished"
    assert lake.scan("telemetry").select(pl.len()).collect().item() >= rows_before


def quarantined(lake: Lake) -> list[tuple[int, str, str]]:
    q = lake.read_quarantine("telemetry").sort("row")
    return list(zip(q["row"].to_list(), q["field"].to_list(), q["reason"].to_list(), strict=True))


QUARANTINE_CASES = {
    # file: (rows written, [(row, field, words in the reason)])
    "wrong_types.csv": (
        1,
        [
            (1, "cpu_util_pct", "cannot read forty"),
            (2, "mem_used_bytes", "cannot read 64GiB"),
            (3, "node_ready", "cannot read maybe"),
            (4, "ts", "cannot read yesterday"),
            (5, "ecc_sbe_total", "cannot read 3.5"),
        ],
    ),
    "nan_inf.csv": (
        1,
        [
            (1, "gpu_temp_c", "NaN"),
            (2, "gpu_power_w", "not finite"),
            (3, "cpu_util_pct", "not finite"),
        ],
    ),
    "negative_counters.csv": (
        1,
        [
            (1, "ecc_dbe_total", "counter -3 below minimum 0"),
            (2, "xid_errors_total", "counter -1 below minimum 0"),
        ],
    ),
    "duplicate_keys.csv": (2, [(2, "node_id", "duplicate key (node_id, ts)")]),
    "far_future.csv": (1, [(1, "ts", "ahead of ingest time")]),
    "unknown_node.csv": (1, [(1, "node_id", "unknown node_id gpu-9999")]),
}


@pytest.mark.parametrize("name", sorted(QUARANTINE_CASES))
def test_bad_rows_are_quarantined_with_row_and_field(
    seeded: tuple[Lake, dict[str, str], int], clock: FixedClock, name: str
) -> None:
    lake, before, rows = seeded
    written, expected = QUARANTINE_CASES[name]
    rep = ingest_file(lake, clock, BAD / name)
    t = rep.tables["telemetry"]
    assert t.rows_written == written
    assert t.rows_quarantined == len(expected)
    got = quarantined(lake)
    assert [(r, f) for r, f, _ in got] == [(r, f) for r, f, _ in expected]
    for (_, _, reason), (_, _, words) in zip(got, expected, strict=True):
        assert words in reason
    # The original values are kept with the reason: nothing is lost.
    q = lake.read_quarantine("telemetry")
    assert all(json.loads(r)["node_id"] for r in q["record"])
    assert set(q["input"]) == {name}
    assert_nothing_lost(lake, before, rows)
    # Re-ingesting the same input changes nothing and quarantines nothing new.
    again = ingest_file(lake, clock, BAD / name).tables["telemetry"]
    assert (again.rows_written, again.rows_quarantined) == (0, 0)
    assert lake.read_quarantine("telemetry").height == len(expected)


def test_duplicate_key_keeps_the_first_value(
    seeded: tuple[Lake, dict[str, str], int], clock: FixedClock
) -> None:
    lake, _, _ = seeded
    ingest_file(lake, clock, BAD / "duplicate_keys.csv")
    stored = lake.scan("telemetry").filter(pl.col("ts").dt.hour() == 4).collect()
    assert stored.sort("ts")["cpu_util_pct"].to_list() == [10.0, 41.5]
    record = json.loads(lake.read_quarantine("telemetry")["record"][0])
    assert record["cpu_util_pct"] == "99"


def test_out_of_order_timestamps_are_stored_in_order(
    seeded: tuple[Lake, dict[str, str], int], clock: FixedClock
) -> None:
    lake, before, rows = seeded
    rep = ingest_file(lake, clock, BAD / "out_of_order.csv")
    assert rep.tables["telemetry"].rows_written == 6
    assert rep.tables["telemetry"].rows_quarantined == 0
    for f in lake.files("telemetry"):
        frame = pl.read_parquet(f)
        assert frame.equals(frame.sort("node_id", "ts"))
    assert_nothing_lost(lake, before, rows)


def test_extra_column_is_reported_and_ignored(
    seeded: tuple[Lake, dict[str, str], int], clock: FixedClock
) -> None:
    lake, before, rows = seeded
    rep = ingest_file(lake, clock, BAD / "extra_column.csv")
    assert rep.tables["telemetry"].ignored_columns == ["gpu_serial"]
    assert rep.tables["telemetry"].rows_written == 1
    assert "gpu_serial" not in lake.scan("telemetry").collect_schema().names()
    assert_nothing_lost(lake, before, rows)


def test_header_only_file_adds_nothing(
    seeded: tuple[Lake, dict[str, str], int], clock: FixedClock
) -> None:
    lake, before, _ = seeded
    rep = ingest_file(lake, clock, BAD / "header_only.csv")
    assert rep.tables["telemetry"].rows_in == 0
    assert snapshot(lake) == before


ERROR_CASES = {
    "missing_column.csv": (SchemaError, "missing required column(s) node_id"),
    "empty.csv": (IngestError, "empty file"),
    "empty.parquet": (IngestError, "empty file"),
    "truncated.parquet": (IngestError, "truncated Parquet file"),
    "huge_footer.parquet": (IngestError, "footer claims 4,294,967,280 bytes"),
    "not_parquet.parquet": (IngestError, "not a Parquet file"),
    "huge_header.csv.gz": (IngestError, "header line is 2,097,155 bytes"),
    "non_utf8.csv": (IngestError, "line 3"),
}


@pytest.mark.parametrize("name", sorted(ERROR_CASES))
def test_unreadable_inputs_fail_clearly_and_write_nothing(
    seeded: tuple[Lake, dict[str, str], int], clock: FixedClock, name: str
) -> None:
    lake, before, rows = seeded
    exc_type, words = ERROR_CASES[name]
    with pytest.raises(exc_type) as info:
        ingest_file(lake, clock, BAD / name)
    assert words in str(info.value)
    if exc_type is IngestError:
        assert name in str(info.value)
    assert snapshot(lake) == before
    assert lake.read_quarantine("telemetry").height == 0
    assert_nothing_lost(lake, before, rows)


def test_one_bad_file_in_a_folder_fails_the_whole_folder_before_writing(
    seeded: tuple[Lake, dict[str, str], int], clock: FixedClock, tmp_path: Path
) -> None:
    lake, before, _ = seeded
    folder = tmp_path / "drop"
    folder.mkdir()
    (folder / "a.csv").write_bytes((BAD / "out_of_order.csv").read_bytes())
    (folder / "b.parquet").write_bytes((BAD / "truncated.parquet").read_bytes())
    with pytest.raises(IngestError, match=r"b\.parquet"):
        ingest_file(lake, clock, folder)
    assert snapshot(lake) == before


def test_raw_input_is_never_modified(
    seeded: tuple[Lake, dict[str, str], int], clock: FixedClock
) -> None:
    lake, _, _ = seeded
    digests = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in BAD.iterdir()}
    for name in sorted(QUARANTINE_CASES):
        ingest_file(lake, clock, BAD / name)
    assert digests == {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in BAD.iterdir()}


def test_cli_reports_errors_as_one_json_object(tmp_path: Path) -> None:
    runner = CliRunner()
    res = runner.invoke(
        main,
        [
            "--workspace",
            str(tmp_path),
            "ingest",
            "files",
            str(BAD / "truncated.parquet"),
            "--table",
            "telemetry",
            "--json",
        ],
    )
    assert res.exit_code == 1
    first = res.stdout.strip().splitlines()[0]
    err = json.loads(first)
    assert err["type"] == "IngestError" and "truncated" in err["error"]


def test_cli_ingest_and_stats_json(tmp_path: Path) -> None:
    runner = CliRunner()
    ws = ["--workspace", str(tmp_path)]
    inv = runner.invoke(
        main,
        [*ws, "ingest", "files", str(GOOD / "inventory.csv"), "--table", "inventory", "--json"],
    )
    assert inv.exit_code == 0, inv.output
    res = runner.invoke(
        main,
        [*ws, "ingest", "files", str(BAD / "wrong_types.csv"), "--table", "telemetry", "--json"],
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["tables"]["telemetry"]["rows_quarantined"] == 5
    assert len(out["input_sha256"]) == 64
    stats = runner.invoke(main, [*ws, "lake", "stats", "--json"])
    s = json.loads(stats.stdout)["tables"]
    assert s["telemetry"]["rows"] == 1
    assert s["telemetry"]["quarantined_rows"] == 5
    assert s["inventory"]["rows"] == 2
    assert s["telemetry"]["time_min"] == "2026-03-01T01:25:00+00:00"
