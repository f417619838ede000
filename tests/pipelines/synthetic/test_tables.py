"""Every simulated table keeps its contract, and the telemetry obeys the fleet's rules."""

from __future__ import annotations

from datetime import timedelta

import polars as pl
import pytest

from predops.core.schemas import SCHEMAS
from predops.core.validation import validate
from predops.pipelines.synthetic.run import TABLES

from .conftest import START

GPU_ONLY = [
    "gpu_util_pct",
    "gpu_temp_c",
    "gpu_power_w",
    "ecc_sbe_total",
    "ecc_dbe_total",
    "xid_errors_total",
    "pcie_replay_total",
]
COUNTERS = [c.name for c in SCHEMAS["telemetry"].columns if c.counter]


@pytest.mark.parametrize("table", TABLES)
def test_table_has_exact_schema_and_validates_clean(
    default_frames: dict[str, pl.DataFrame], table: str
) -> None:
    frame = default_frames[table]
    schema = SCHEMAS[table]
    assert frame.height > 0, f"{table} is empty"
    assert frame.columns == schema.names
    assert dict(frame.schema) == dict(schema.polars_schema())
    known = set(default_frames["inventory"]["node_id"]) if schema.entity_column else None
    end = START + timedelta(days=14)
    res = validate(frame, schema, now=end, known_entities=known)
    assert res.quarantined.height == 0, res.quarantined.head(5)
    assert res.good.height == frame.height


def test_counters_never_decrease_per_node(default_frames: dict[str, pl.DataFrame]) -> None:
    tel = default_frames["telemetry"].sort("node_id", "ts")
    for c in COUNTERS:
        seen = tel.filter(pl.col(c).is_not_null())
        drops = seen.select((pl.col(c).diff().over("node_id") < 0).sum()).item()
        assert drops == 0, f"{c} decreases {drops} times"
    # ... and they do move: every counter increases somewhere.
    rises = tel.select([(pl.col(c).max() > pl.col(c).min()) for c in COUNTERS])
    assert all(rises.row(0))


def _down_intervals(events: pl.DataFrame) -> pl.DataFrame:
    """(node_id, from, to) from failure->repair and maintenance_start->end events."""
    out = []
    for a, b in (("failure", "repair"), ("maintenance_start", "maintenance_end")):
        s = events.filter(pl.col("kind") == a).select("node_id", pl.col("at").alias("from"))
        e = events.filter(pl.col("kind") == b).select("node_id", pl.col("at").alias("to"))
        pairs = s.sort("from").join_asof(
            e.sort("to"),
            left_on="from",
            right_on="to",
            by="node_id",
            strategy="forward",
            check_sortedness=False,
        )
        out.append(pairs.with_columns(pl.col("to").fill_null(START + timedelta(days=999))))
    return pl.concat(out)


def test_no_ready_sample_while_a_node_is_down(default_frames: dict[str, pl.DataFrame]) -> None:
    tel = default_frames["telemetry"]
    down = _down_intervals(default_frames["events"])
    assert down.height > 20
    inside = tel.join(down, on="node_id").filter(
        (pl.col("ts") >= pl.col("from")) & (pl.col("ts") < pl.col("to"))
    )
    assert inside.height > 100, "down periods should be visible in telemetry"
    assert not inside["node_ready"].any()
    # A down node reports readiness only: its exporter is down.
    assert inside.select(pl.col("cpu_util_pct").is_not_null().sum()).item() == 0


def test_not_ready_also_happens_without_failure(default_frames: dict[str, pl.DataFrame]) -> None:
    """Kubelet flaps: NotReady while metrics still arrive (the reactive rule's false alarms)."""
    tel = default_frames["telemetry"]
    flap_rows = tel.filter(~pl.col("node_ready") & pl.col("cpu_util_pct").is_not_null())
    assert flap_rows.height > 0
    kinds = default_frames["events"]["kind"].value_counts()
    assert {"not_ready", "ready"} <= set(kinds["kind"])


def test_gpu_columns_null_on_cpu_nodes_only(default_frames: dict[str, pl.DataFrame]) -> None:
    inv = default_frames["inventory"].select("node_id", pl.col("gpus") > 0)
    tel = default_frames["telemetry"].join(inv, on="node_id")
    cpu_nodes = tel.filter(~pl.col("gpus"))
    gpu_up = tel.filter(pl.col("gpus") & pl.col("cpu_util_pct").is_not_null())
    assert cpu_nodes.height > 0 and gpu_up.height > 0
    assert cpu_nodes.select(pl.col(GPU_ONLY).null_count()).row(0) == (cpu_nodes.height,) * len(
        GPU_ONLY
    )
    assert gpu_up.select(pl.col(GPU_ONLY).null_count()).row(0) == (0,) * len(GPU_ONLY)


def test_gauges_are_plausible(default_frames: dict[str, pl.DataFrame]) -> None:
    tel = default_frames["telemetry"]
    s = tel.select(
        pl.col("gpu_temp_c").median().alias("temp"),
        pl.col("gpu_temp_c").max().alias("temp_max"),
        pl.col("cpu_util_pct").mean().alias("cpu"),
        pl.col("gpu_util_pct").mean().alias("gpu"),
    ).row(0, named=True)
    assert 35 < s["temp"] < 80 and s["temp_max"] < 121
    assert 10 < s["cpu"] < 90 and 20 < s["gpu"] < 95


def test_nodes_sometimes_stop_reporting_more_so_before_failures(
    wide_frames: dict[str, pl.DataFrame],
) -> None:
    tel = wide_frames["telemetry"]
    step = timedelta(minutes=5)
    expected = 7 * 288
    per_node = tel.group_by("node_id").len()
    assert (per_node["len"] < expected).sum() > 0.2 * per_node.height, "gaps are common"
    overall_missing = 1 - tel.height / (expected * per_node.height)
    fails = wide_frames["events"].filter(
        (pl.col("kind") == "failure") & (pl.col("at") >= START + timedelta(hours=3))
    )
    window = timedelta(hours=3)
    rows = tel.join(fails.select("node_id", "at"), on="node_id").filter(
        (pl.col("ts") >= pl.col("at") - window) & (pl.col("ts") < pl.col("at"))
    )
    before = 1 - rows.height / (fails.height * (window / step))
    assert before > 5 * overall_missing, (before, overall_missing)


def test_topology_is_a_strict_hierarchy(default_frames: dict[str, pl.DataFrame]) -> None:
    inv = default_frames["inventory"]
    for child, parent in (("rack", "spine"), ("spine", "zone"), ("zone", "region")):
        parents = inv.group_by(child).agg(pl.col(parent).n_unique())
        assert (parents[parent] == 1).all(), f"a {child} sits in two {parent}s"
    assert inv["zone"].n_unique() >= 2
    assert set(inv["pool"]) == {"online", "bigdata", "training", "inference"}
    gpu = inv.filter(pl.col("gpus") > 0)
    assert (gpu["gpus"] == 8).all() and (gpu["numa_nodes"] == 2).all()
    assert gpu["gpu_model"].n_unique() >= 3
    training = gpu.filter(pl.col("pool") == "training")
    assert training["nvlink_domain"].null_count() == 0
    assert training["nvlink_domain"].n_unique() == training.height
    racks = inv.group_by("rack").agg(pl.col("sku").n_unique())
    assert (racks["sku"] == 1).all(), "racks hold one SKU"
