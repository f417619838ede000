from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from predops.core.schemas import PURCHASE_ORDERS, SCHEMAS, STOCK, TELEMETRY, schema_for
from predops.core.validation import SchemaError, validate

NOW = datetime(2026, 6, 1, tzinfo=UTC)
CORPUS_GOOD = Path(__file__).resolve().parents[1] / "corpus" / "good"


def test_every_schema_is_consistent() -> None:
    for name, schema in SCHEMAS.items():
        assert schema.name == name
        assert all(c == c.lower() for c in schema.names)
        assert schema.empty().schema == schema.polars_schema()
        assert not schema.column(schema.time_column).nullable
    with pytest.raises(KeyError, match="unknown table 'nope'"):
        schema_for("nope")


def test_missing_required_column_names_it() -> None:
    with pytest.raises(SchemaError, match="missing required column\\(s\\) node_id"):
        validate(pl.DataFrame({"ts": [NOW]}), TELEMETRY)


def test_nullable_columns_may_be_absent() -> None:
    res = validate(pl.DataFrame({"ts": [NOW], "node_id": ["n1"]}), TELEMETRY)
    assert res.good.height == 1 and res.good.schema == TELEMETRY.polars_schema()


def test_timestamps_in_many_spellings_become_utc() -> None:
    spellings = [
        "2026-03-01T10:00:00Z",
        "2026-03-01 10:00:00",
        "2026-03-01T11:00:00+01:00",
        "2026-03-01T10:00:00.000000",
        "2026-03-01T10:00",
    ]
    frame = pl.DataFrame({"ts": spellings, "node_id": [f"n{i}" for i in range(5)]})
    res = validate(frame, TELEMETRY)
    assert res.quarantined.height == 0
    assert set(res.good["ts"].to_list()) == {datetime(2026, 3, 1, 10, tzinfo=UTC)}


gauges = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True, width=32))
counters = st.one_of(st.none(), st.integers(min_value=-5, max_value=10**12))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 20), gauges, counters), min_size=0, max_size=40
    )
)
def test_every_row_is_either_good_and_valid_or_quarantined(rows: list) -> None:
    frame = pl.DataFrame(
        {
            "node_id": [f"n{r[0]}" for r in rows],
            "ts": [NOW - timedelta(minutes=r[1]) for r in rows],
            "gpu_temp_c": [r[2] for r in rows],
            "ecc_dbe_total": [r[3] for r in rows],
        },
        schema={
            "node_id": pl.String,
            "ts": pl.Datetime("us", "UTC"),
            "gpu_temp_c": pl.Float32,
            "ecc_dbe_total": pl.Int64,
        },
    )
    res = validate(frame, TELEMETRY, now=NOW)
    assert res.good.height + res.quarantined.height == len(rows)
    assert res.good.select("node_id", "ts").is_duplicated().sum() == 0
    for t in res.good["gpu_temp_c"].to_list():
        assert t is None or (math.isfinite(t) and -40 <= t <= 150)
    assert all(c is None or c >= 0 for c in res.good["ecc_dbe_total"].to_list())
    assert res.quarantined["row"].is_unique().all()
    assert res.quarantined["reason"].null_count() == 0


def test_unknown_entities_are_quarantined_only_when_an_inventory_is_known() -> None:
    frame = pl.DataFrame({"ts": [NOW, NOW], "node_id": ["n1", "ghost"]})
    assert validate(frame, TELEMETRY).quarantined.height == 0
    res = validate(frame, TELEMETRY, known_entities={"n1"})
    assert res.quarantined["reason"].to_list() == ["unknown node_id ghost (not in inventory)"]


def test_rows_are_numbered_from_first_row() -> None:
    frame = pl.DataFrame({"ts": [NOW, None], "node_id": ["a", "b"]})
    res = validate(frame, TELEMETRY, first_row=101)
    assert res.quarantined["row"].to_list() == [102]
    assert res.quarantined["field"].to_list() == ["ts"]


def test_stock_and_purchase_order_rows_are_checked_field_by_field() -> None:
    stock = pl.DataFrame(
        {
            "ts": [NOW] * 4,
            "sku": ["a", "b", "c", "d"],
            "region": ["eu"] * 4,
            "on_hand": [1, 1, 1, 1],
            "lead_time_days": [70.0, 0.5, 70.0, 70.0],
            "shortage_cost": [None, 10.0, 0.0, 10.0],
            "order_multiple": [None, 1, 1, 0],
        }
    )
    res = validate(stock, STOCK, now=NOW)
    assert res.good["sku"].to_list() == ["a"]
    assert res.good["idle_cost"].to_list() == [None]  # optional columns may be absent
    bad = {r["row"]: (r["field"], r["reason"]) for r in res.quarantined.iter_rows(named=True)}
    assert bad == {
        2: ("lead_time_days", "value 0.5 below minimum 1.0"),
        3: ("shortage_cost", "value 0.0 below minimum 0.01"),
        4: ("order_multiple", "value 0 below minimum 1"),
    }
    orders = pl.DataFrame(
        {
            "ts": [NOW, NOW],
            "po_id": ["po-1", "po-2"],
            "sku": ["a", "a"],
            "region": ["eu", "eu"],
            "nodes": [4, 4],
            "expected_at": [NOW + timedelta(days=90), None],
            "status": ["open", "open"],
        }
    )
    res = validate(orders, PURCHASE_ORDERS, now=NOW)
    assert res.good["po_id"].to_list() == ["po-1"]
    assert res.quarantined.select("row", "field", "reason").row(0) == (
        2,
        "expected_at",
        "missing value",
    )


def test_integers_from_text_round_trip_exactly() -> None:
    big = 2**53 + 1
    counts = [str(big), f"{big}.0", "12.0", "1e3", "12.5", f"{big}.5", "1e300"]
    frame = pl.DataFrame(
        {
            "ts": [NOW - timedelta(minutes=i) for i in range(len(counts))],
            "node_id": ["n1"] * len(counts),
            "ecc_sbe_total": counts,
        }
    )
    res = validate(frame, TELEMETRY, now=NOW)
    assert res.good["ecc_sbe_total"].to_list() == [big, big, 12, 1000]
    assert res.quarantined["row"].to_list() == [5, 6, 7]
    assert set(res.quarantined["field"]) == {"ecc_sbe_total"}


def test_floats_become_integers_only_while_exact() -> None:
    frame = pl.DataFrame(
        {
            "ts": [NOW, NOW - timedelta(minutes=1)],
            "node_id": ["n1", "n1"],
            "ecc_sbe_total": [float(2**53 - 1), float(2**53)],
        }
    )
    res = validate(frame, TELEMETRY, now=NOW)
    assert res.good["ecc_sbe_total"].to_list() == [2**53 - 1]
    assert res.quarantined.select("row", "field").row(0) == (2, "ecc_sbe_total")


@pytest.mark.parametrize(
    ("flags", "good"),
    [
        (["true", "FALSE", " True ", "1", "0"], [True, False, True, True, False]),
        ([1, 0, 1.0], [True, False, True]),
    ],
)
def test_booleans_read_true_false_1_0_only(flags: list, good: list[bool]) -> None:
    bad = ["yes", "t", "2", "-1"] if isinstance(flags[0], str) else [2, -1, 0.5]
    values = [*flags, *bad]
    frame = pl.DataFrame(
        {
            "ts": [NOW - timedelta(minutes=i) for i in range(len(values))],
            "node_id": ["n1"] * len(values),
            "node_ready": values,
        },
        strict=False,
    )
    res = validate(frame, TELEMETRY, now=NOW)
    assert res.good["node_ready"].to_list() == good
    assert res.quarantined["row"].to_list() == list(range(len(flags) + 1, len(values) + 1))
    assert all(r.startswith("cannot read") for r in res.quarantined["reason"])


def test_timestamps_before_the_earliest_are_quarantined_in_every_time_column() -> None:
    inventory = pl.read_csv(CORPUS_GOOD / "inventory.csv", infer_schema=False)
    inventory = inventory.with_columns(installed_at=pl.Series(["1985-01-01", "0001-01-01"]))
    res = validate(inventory, SCHEMAS["inventory"], now=NOW)
    assert res.quarantined["field"].to_list() == ["installed_at", "installed_at"]
    assert res.quarantined["reason"][1].startswith("timestamp 0001-01-01")
    assert "before the earliest accepted 1990-01-01" in res.quarantined["reason"][1]
    older = datetime(1980, 1, 1, tzinfo=UTC)
    assert validate(inventory, SCHEMAS["inventory"], earliest=older).good.height == 1
    assert validate(inventory, SCHEMAS["inventory"], earliest=None).good.height == 2


@pytest.mark.parametrize(
    ("column", "values", "words"),
    [
        ("ts", pl.Series([1_772_323_200]), "column ts is Int64; a number has no time unit"),
        ("ts", pl.Series([1_772_323_200.5]), "column ts is Float64; a number has no time unit"),
        ("ts", pl.Series([True]), "column ts is Boolean; a time column must be"),
        ("gpu_temp_c", pl.Series([[60.0, 61.0]]), "column gpu_temp_c is List(Float64); a nested"),
        ("node_id", pl.Series([{"id": "n1"}]), "column node_id is Struct"),
    ],
)
def test_a_column_of_the_wrong_kind_is_refused_naming_it(
    column: str, values: pl.Series, words: str
) -> None:
    frame = pl.DataFrame({"ts": [NOW], "node_id": ["n1"]}).with_columns(values.alias(column))
    with pytest.raises(SchemaError) as info:
        validate(frame, TELEMETRY, now=NOW)
    assert words in str(info.value)


def test_a_nested_column_outside_the_contract_is_ignored() -> None:
    frame = pl.DataFrame({"ts": [NOW], "node_id": ["n1"], "tags": [["a", "b"]]})
    res = validate(frame, TELEMETRY, now=NOW)
    assert res.good.height == 1 and res.ignored_columns == ("tags",)
