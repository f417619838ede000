"""``predops ingest files`` with malformed files (issue 19): each one is a clear error
naming the file and the column or line, or its bad rows are quarantined with the line and
the reason; nothing is guessed or silently coerced."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from predops.core.clock import FixedClock
from predops.pipelines.cli.main import main
from predops.pipelines.ingest import files
from predops.pipelines.ingest.batch import IngestError
from predops.pipelines.ingest.options import IngestOptions
from predops.pipelines.ingest.run import IngestReport, ingest
from predops.pipelines.workspace.lake import Lake

GOOD = Path(__file__).resolve().parents[2] / "corpus" / "good"
HEADER = "ts,node_id,cpu_util_pct,ecc_sbe_total,node_ready"
ROW = "2026-03-01T00:00:00Z,gpu-0001,41.5,3,true"


def ingest_path(lake: Lake, clock: FixedClock, path: Path, **kw: Any) -> IngestReport:
    table = kw.pop("table", "telemetry")
    opts = IngestOptions(clock=clock, table=table)
    return ingest(
        lake, "files", files.read(str(path), opts), clock=clock, input_name=path.name, **kw
    )


@pytest.fixture
def fleet(lake: Lake, clock: FixedClock) -> Lake:
    """A lake that knows the corpus nodes gpu-0001 and gpu-0002."""
    ingest_path(lake, clock, GOOD / "inventory.csv", table="inventory")
    return lake


def quarantined(lake: Lake, table: str = "telemetry") -> list[dict[str, Any]]:
    return lake.read_quarantine(table).sort("row").to_dicts()


def write_parquet(path: Path, table: pa.Table) -> Path:
    pq.write_table(table, path)
    return path


def telemetry_table(**columns: pa.Array) -> pa.Table:
    base: dict[str, pa.Array] = {
        "ts": pa.array([datetime(2026, 3, 1, tzinfo=UTC)], pa.timestamp("us", "UTC")),
        "node_id": pa.array(["gpu-0001"]),
    }
    base.update(columns)
    return pa.table(base)


def cli_json(tmp_path: Path, path: Path, table: str = "telemetry") -> tuple[int, dict[str, Any]]:
    """Exit code and the one JSON object ``ingest files --json`` prints on stdout."""
    args = ["--workspace", str(tmp_path / "ws"), "ingest", "files", str(path)]
    res = CliRunner().invoke(main, [*args, "--table", table, "--json"])
    lines = res.stdout.strip().splitlines()
    assert len(lines) == 1, (res.stdout, res.exception)
    return res.exit_code, json.loads(lines[0])


# ------------------------------------------------------------ case 2: numeric times


@pytest.mark.parametrize(
    "ts",
    [
        pa.array([1_772_323_200], pa.int64()),  # epoch seconds
        pa.array([1_772_323_200_000], pa.int64()),  # epoch milliseconds
        pa.array([1_772_323_200.5], pa.float64()),  # float seconds
    ],
    ids=["int-seconds", "int-millis", "float-seconds"],
)
def test_numeric_time_column_in_parquet_is_refused_naming_file_and_column(
    fleet: Lake, clock: FixedClock, tmp_path: Path, ts: pa.Array
) -> None:
    path = write_parquet(tmp_path / "epoch.parquet", telemetry_table(ts=ts))
    with pytest.raises(IngestError, match=r"epoch\.parquet.*column ts.*unit"):
        ingest_path(fleet, clock, path)
    assert fleet.files("telemetry") == []
    assert fleet.read_quarantine("telemetry").height == 0


def test_numeric_datetime_column_other_than_the_time_column_is_refused(
    lake: Lake, clock: FixedClock, tmp_path: Path
) -> None:
    inv = pl.read_csv(GOOD / "inventory.csv").with_columns(
        pl.lit(1_748_736_000).alias("installed_at")
    )
    path = tmp_path / "inv.parquet"
    inv.write_parquet(path)
    with pytest.raises(IngestError, match=r"inv\.parquet.*column installed_at"):
        ingest_path(lake, clock, path, table="inventory")


def test_cli_refuses_numeric_time_column_as_one_json_error(tmp_path: Path) -> None:
    ts = pa.array([1_772_323_200], pa.int64())
    path = write_parquet(tmp_path / "epoch.parquet", telemetry_table(ts=ts))
    code, err = cli_json(tmp_path, path)
    assert code != 0
    assert err["type"] == "IngestError"
    assert "epoch.parquet" in err["error"] and "column ts" in err["error"]


# ------------------------------------------------------------ case 6: ragged CSV


def test_truncated_last_line_is_quarantined_with_its_line(
    fleet: Lake, clock: FixedClock, tmp_path: Path
) -> None:
    path = tmp_path / "cut.csv"
    path.write_text(f"{HEADER}\n{ROW}\n2026-03-01T00:05:00Z,gpu-0001,4")
    rep = ingest_path(fleet, clock, path).tables["telemetry"]
    assert (rep.rows_written, rep.rows_quarantined) == (1, 1)
    (q,) = quarantined(fleet)
    assert q["row"] == 2  # the data row; the reason gives the line
    assert "line 3" in q["reason"] and "ends mid-row" in q["reason"]
    assert "3 fields, header has 5" in q["reason"]
    assert json.loads(q["record"])["cpu_util_pct"] == "4"


def test_ragged_rows_are_quarantined_with_line_and_field_count(
    fleet: Lake, clock: FixedClock, tmp_path: Path
) -> None:
    path = tmp_path / "ragged.csv"
    path.write_text(
        f"{HEADER}\n"
        f"{ROW}\n"
        "2026-03-01T00:05:00Z,gpu-0001,41.5\n"  # too few
        "2026-03-01T00:10:00Z,gpu-0001,41.5,3,true,surplus\n"  # too many
        "\n"  # blank line
        "2026-03-01T00:15:00Z,gpu-0001,41.5,3,true\n"
    )
    rep = ingest_path(fleet, clock, path).tables["telemetry"]
    assert (rep.rows_written, rep.rows_quarantined) == (2, 3)
    got = [(q["row"], q["field"], q["reason"]) for q in quarantined(fleet)]
    assert got == [
        (2, "ecc_sbe_total", "line 3: 3 fields, header has 5"),
        (3, "node_ready", "line 4: 6 fields, header has 5"),
        (4, "ts", "line 5: blank line, header has 5 fields"),
    ]
    # The extra value is kept with the row: nothing is lost.
    record = json.loads(quarantined(fleet)[1]["record"])
    assert record["node_ready"] == "true" and record["_extra"] == ["surplus"]


def test_quoted_newlines_still_work_and_lines_count_them(
    lake: Lake, clock: FixedClock, tmp_path: Path
) -> None:
    path = tmp_path / "events.csv"
    path.write_text(
        "node_id,kind,at,cause,detail\n"
        'gpu-0001,failure,2026-03-01T00:00:00Z,gpu_xid,"xid 79\nfell off the bus"\n'
        "gpu-0001,repair,2026-03-01T01:00:00Z\n"
    )
    rep = ingest_path(lake, clock, path, table="events", check_entities=False).tables["events"]
    assert (rep.rows_written, rep.rows_quarantined) == (1, 1)
    assert lake.scan("events").collect()["detail"].to_list() == ["xid 79\nfell off the bus"]
    (q,) = quarantined(lake, "events")
    assert q["row"] == 2 and q["reason"] == "line 4: 3 fields, header has 5"


REFUSED_CSV = {
    # a quoted field that never closes: the rest of the file would be one value
    "open_quote.csv": (
        f'{HEADER}\n{ROW}\n2026-03-01T00:05:00Z,"gpu-0001,41.5,3,true\n{ROW}\n',
        r"open_quote\.csv: line 3: .*never closes",
    ),
    # case 8: polars would rename the second copy cpu_util_pct_duplicated_0 and drop it
    "dup.csv": (
        f"{HEADER},cpu_util_pct\n{ROW},99\n",
        r"dup\.csv: column 'cpu_util_pct' appears 2 times",
    ),
}


@pytest.mark.parametrize("name", sorted(REFUSED_CSV))
def test_unreadable_csv_is_refused_naming_file_and_place(
    fleet: Lake, clock: FixedClock, tmp_path: Path, name: str
) -> None:
    text, pattern = REFUSED_CSV[name]
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(IngestError, match=pattern):
        ingest_path(fleet, clock, path)
    assert fleet.files("telemetry") == []
    code, err = cli_json(tmp_path, path)
    assert code != 0 and err["type"] == "IngestError" and name in err["error"]


# ------------------------------------------------------------ case 7: silent coercions


def test_big_integers_round_trip_exactly(fleet: Lake, clock: FixedClock, tmp_path: Path) -> None:
    big = 2**53 + 1
    path = tmp_path / "big.csv"
    path.write_text(
        f"{HEADER}\n"
        f"2026-03-01T00:00:00Z,gpu-0001,1,{big},true\n"
        f"2026-03-01T00:05:00Z,gpu-0001,1,{big}.0,true\n"
        "2026-03-01T00:10:00Z,gpu-0001,1,12.0,true\n"
        f"2026-03-01T00:15:00Z,gpu-0001,1,{big}.5,true\n"
    )
    rep = ingest_path(fleet, clock, path).tables["telemetry"]
    assert (rep.rows_written, rep.rows_quarantined) == (3, 1)
    stored = fleet.scan("telemetry").sort("ts").collect()["ecc_sbe_total"].to_list()
    assert stored == [big, big, 12]
    (q,) = quarantined(fleet)
    assert (q["row"], q["field"]) == (4, "ecc_sbe_total")


def test_float_beyond_exact_integers_is_not_stored_as_a_counter(
    fleet: Lake, clock: FixedClock, tmp_path: Path
) -> None:
    counts = pa.array([float(2**53 + 2)], pa.float64())
    path = write_parquet(tmp_path / "f.parquet", telemetry_table(ecc_sbe_total=counts))
    rep = ingest_path(fleet, clock, path).tables["telemetry"]
    assert (rep.rows_written, rep.rows_quarantined) == (0, 1)
    assert quarantined(fleet)[0]["field"] == "ecc_sbe_total"


@pytest.mark.parametrize("flag", ["2", "yes", "y", "t", "-1", "1.5"])
def test_booleans_accept_only_true_false_0_1_in_csv(
    fleet: Lake, clock: FixedClock, tmp_path: Path, flag: str
) -> None:
    path = tmp_path / "flags.csv"
    good = ["TRUE", "False", "0", "1"]
    lines = [f"2026-03-01T00:0{i}:00Z,gpu-0001,1,1,{v}" for i, v in enumerate([*good, flag])]
    path.write_text("\n".join([HEADER, *lines]) + "\n")
    rep = ingest_path(fleet, clock, path).tables["telemetry"]
    assert (rep.rows_written, rep.rows_quarantined) == (4, 1)
    stored = fleet.scan("telemetry").sort("ts").collect()["node_ready"].to_list()
    assert stored == [True, False, False, True]
    (q,) = quarantined(fleet)
    assert (q["row"], q["field"]) == (5, "node_ready") and flag in q["reason"]


def test_integer_booleans_in_parquet_accept_only_0_and_1(
    fleet: Lake, clock: FixedClock, tmp_path: Path
) -> None:
    frame = pa.table(
        {
            "ts": pa.array(
                [datetime(2026, 3, 1, h, tzinfo=UTC) for h in range(3)], pa.timestamp("us", "UTC")
            ),
            "node_id": pa.array(["gpu-0001"] * 3),
            "node_ready": pa.array([1, 0, 2], pa.int64()),
        }
    )
    path = write_parquet(tmp_path / "ready.parquet", frame)
    rep = ingest_path(fleet, clock, path).tables["telemetry"]
    assert (rep.rows_written, rep.rows_quarantined) == (2, 1)
    assert fleet.scan("telemetry").sort("ts").collect()["node_ready"].to_list() == [True, False]
    (q,) = quarantined(fleet)
    assert (q["row"], q["field"]) == (3, "node_ready") and "2" in q["reason"]


def test_timestamps_before_the_earliest_are_quarantined(
    fleet: Lake, clock: FixedClock, tmp_path: Path
) -> None:
    path = tmp_path / "old.csv"
    path.write_text(
        f"{HEADER}\n{ROW}\n0001-01-01T00:00:00Z,gpu-0001,41.5,3,true\n"
        "1989-12-31T23:59:59Z,gpu-0001,41.5,3,true\n"
    )
    rep = ingest_path(fleet, clock, path).tables["telemetry"]
    assert (rep.rows_written, rep.rows_quarantined) == (1, 2)
    assert [p.parent.name for p in fleet.files("telemetry")] == ["date=2026-03-01"]
    got = [(q["row"], q["field"], q["reason"]) for q in quarantined(fleet)]
    assert [(r, f) for r, f, _ in got] == [(2, "ts"), (3, "ts")]
    assert all("before the earliest accepted 1990-01-01" in reason for _, _, reason in got)


def test_the_earliest_timestamp_is_settable(fleet: Lake, clock: FixedClock, tmp_path: Path) -> None:
    path = tmp_path / "old.csv"
    path.write_text(f"{HEADER}\n1985-06-01T00:00:00Z,gpu-0001,41.5,3,true\n")
    rep = ingest_path(fleet, clock, path, earliest=datetime(1980, 1, 1, tzinfo=UTC))
    assert rep.tables["telemetry"].rows_written == 1


def test_cli_earliest_option(tmp_path: Path) -> None:
    path = tmp_path / "old.csv"
    path.write_text("series_id,ts,value\ns1,1985-06-01T00:00:00Z,1.0\n")
    ws = ["--workspace", str(tmp_path / "ws"), "ingest", "files", str(path), "--table", "series"]
    runner = CliRunner()
    res = runner.invoke(main, [*ws, "--json"])
    assert json.loads(res.stdout)["tables"]["series"]["rows_quarantined"] == 1
    res = runner.invoke(main, [*ws, "--earliest", "1980-01-01", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["tables"]["series"]["rows_written"] == 1


# ------------------------------------------------------------ case 8: odd columns


def test_duplicate_parquet_column_is_refused_naming_it(tmp_path: Path) -> None:
    ts = pa.array([datetime(2026, 3, 1, tzinfo=UTC)], pa.timestamp("us", "UTC"))
    node = pa.array(["gpu-0001"])
    table = pa.Table.from_arrays([ts, node, node], names=["ts", "node_id", "node_id"])
    path = write_parquet(tmp_path / "dup.parquet", table)
    code, err = cli_json(tmp_path, path)
    assert code != 0 and err["type"] == "IngestError"
    assert "dup.parquet" in err["error"] and "node_id" in err["error"]


@pytest.mark.parametrize(
    "column",
    [
        pa.array([[1.0, 2.0]], pa.list_(pa.float64())),
        pa.array([{"a": 1.0}], pa.struct([("a", pa.float64())])),
    ],
    ids=["list", "struct"],
)
def test_nested_parquet_column_is_refused_naming_it(tmp_path: Path, column: pa.Array) -> None:
    path = write_parquet(tmp_path / "nested.parquet", telemetry_table(cpu_util_pct=column))
    code, err = cli_json(tmp_path, path)
    assert code != 0 and err["type"] == "IngestError"
    assert "nested.parquet" in err["error"] and "column cpu_util_pct" in err["error"]


def test_nested_column_the_contract_ignores_is_just_ignored(
    fleet: Lake, clock: FixedClock, tmp_path: Path
) -> None:
    tags = pa.array([["a", "b"]], pa.list_(pa.string()))
    path = write_parquet(tmp_path / "tags.parquet", telemetry_table(tags=tags))
    rep = ingest_path(fleet, clock, path).tables["telemetry"]
    assert (rep.rows_written, rep.ignored_columns) == (1, ["tags"])
