"""Failures: the mode mix, precursors (most, not all), benign look-alikes, repairs,
maintenance windows without failures."""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from predops.pipelines.synthetic.run import Simulation

BRIEF_MODES = {"gpu_ecc", "gpu_xid", "thermal", "psu", "disk", "nic", "kernel"}


def test_failure_mix_covers_every_mode(wide_sim: Simulation) -> None:
    f = wide_sim.truth()["failures"].filter(pl.col("happened"))
    counts = dict(f.group_by("cause").len().iter_rows())
    assert set(counts) >= BRIEF_MODES, counts
    assert f.height > 80
    # No single mode dominates; GPU modes happen only on GPU nodes.
    assert max(counts.values()) < 0.5 * f.height
    gpu_nodes = set(wide_sim.inventory().filter(pl.col("gpus") > 0)["node_id"])
    gpu_failures = f.filter(pl.col("cause").str.starts_with("gpu_"))
    assert set(gpu_failures["node_id"]) <= gpu_nodes


def test_default_run_has_failures_of_several_modes(default_sim: Simulation) -> None:
    f = default_sim.failures
    assert 20 <= len(f) <= 90
    assert len(set(f.mode.tolist())) >= 6


def test_most_but_not_all_failures_have_precursors(wide_sim: Simulation) -> None:
    f = wide_sim.truth()["failures"].filter(pl.col("happened"))
    share = f["has_precursor"].mean()
    assert isinstance(share, float)
    assert 0.5 < share < 0.85, share


def test_precursor_lead_times_span_hours_to_days(wide_sim: Simulation) -> None:
    ep = wide_sim.truth()["episodes"].filter(pl.col("kind") == "precursor")
    lead_h = ((ep["failure_at"] - ep["start"]).dt.total_seconds() / 3600).to_numpy()
    assert lead_h.min() < 3 and lead_h.max() > 48
    assert ep["signal"].n_unique() >= 6


def test_benign_look_alikes_outnumber_precursors_and_lead_nowhere(wide_sim: Simulation) -> None:
    truth = wide_sim.truth()
    ep = truth["episodes"]
    pre = ep.filter(pl.col("kind") == "precursor")
    benign = ep.filter(pl.col("kind") == "benign")
    assert benign.height > 1.5 * pre.height
    # Same signals as precursors.
    assert set(benign["signal"]) >= set(pre["signal"]) - {"power"}
    fails = truth["failures"].filter(pl.col("happened")).select("node_id", "at")
    followed = benign.join(fails, on="node_id").filter(
        (pl.col("at") > pl.col("end")) & (pl.col("at") <= pl.col("end") + timedelta(hours=24))
    )
    assert followed["start"].n_unique() < 0.1 * benign.height


def test_precursors_show_in_the_counters(
    wide_sim: Simulation, wide_frames: dict[str, pl.DataFrame]
) -> None:
    """Black-box: counters move more in the 6 h before failures that had a counter
    precursor than in the 6 h before those that had none."""
    counters = {
        "sbe": "ecc_sbe_total",
        "pcie": "pcie_replay_total",
        "nic": "nic_flaps_total",
        "realloc": "disk_realloc_total",
        "mce": "mce_total",
    }
    truth = wide_sim.truth()
    pre = truth["episodes"].filter(
        (pl.col("kind") == "precursor") & pl.col("signal").is_in(list(counters))
    )
    tel = wide_frames["telemetry"].sort("node_id", "ts")
    rises_with: list[float] = []
    rises_without: list[float] = []
    fails = truth["failures"].filter(
        pl.col("happened")
        & pl.col("cause").is_in(["kernel", "memory", "cpu", "nic", "disk", "gpu_ecc"])
    )
    for node, at, has in fails.select("node_id", "at", "has_precursor").iter_rows():
        sig = pre.filter((pl.col("node_id") == node) & (pl.col("failure_at") == at))["signal"]
        col = counters[sig[0]] if sig.len() else "mce_total"
        w = (
            tel.filter(
                (pl.col("node_id") == node)
                & (pl.col("ts") < at)
                & (pl.col("ts") >= at - timedelta(hours=6))
            )[col]
            .drop_nulls()
            .to_numpy()
        )
        if w.size < 2:
            continue
        rise = float(w.max() - w.min())
        (rises_with if has and sig.len() else rises_without).append(rise)
    assert len(rises_with) > 10 and len(rises_without) > 5
    assert sum(rises_with) / len(rises_with) > 3 * (sum(rises_without) / len(rises_without) + 1)


def test_every_failure_is_repaired_before_the_next(default_frames: dict[str, pl.DataFrame]) -> None:
    ev = default_frames["events"].filter(pl.col("kind").is_in(["failure", "repair"]))
    seq = ev.sort("node_id", "at").group_by("node_id", maintain_order=True).agg(pl.col("kind"))
    for kinds in seq["kind"].to_list():
        # failure, repair, failure, repair, ... (the last repair may fall after the run)
        assert kinds[::2] == ["failure"] * len(kinds[::2])
        assert kinds[1::2] == ["repair"] * len(kinds[1::2])
    f = ev.filter(pl.col("kind") == "failure").sort("node_id", "at")
    r = ev.filter(pl.col("kind") == "repair").sort("node_id", "at")
    dur = f.join_asof(
        r.select("node_id", pl.col("at").alias("rep")),
        left_on="at",
        right_on="rep",
        by="node_id",
        strategy="forward",
        check_sortedness=False,
    ).drop_nulls("rep")
    hours = ((dur["rep"] - dur["at"]).dt.total_seconds() / 3600).to_numpy()
    assert hours.min() >= 5 / 60 and hours.max() <= 14 * 24
    assert 0.3 < float(sorted(hours)[len(hours) // 2]) < 24  # reboot minutes .. part-swap day


def test_maintenance_is_a_full_sequence_without_failures(
    default_frames: dict[str, pl.DataFrame],
) -> None:
    ev = default_frames["events"]
    order = ["cordon", "drain", "maintenance_start", "maintenance_end", "uncordon"]
    m = ev.filter(pl.col("kind").is_in(order)).sort("node_id", "at")
    assert m.filter(pl.col("kind") == "maintenance_start").height > 5
    for kinds in m.group_by("node_id", maintain_order=True).agg(pl.col("kind"))["kind"].to_list():
        assert kinds == order * (len(kinds) // 5)
    starts = m.filter(pl.col("kind") == "cordon").select("node_id", pl.col("at").alias("a"))
    ends = m.filter(pl.col("kind") == "uncordon").select("node_id", pl.col("at").alias("b"))
    windows = pl.concat([starts, ends.select("b")], how="horizontal")
    fails = ev.filter(pl.col("kind") == "failure").select("node_id", "at")
    inside = fails.join(windows, on="node_id").filter(
        (pl.col("at") >= pl.col("a")) & (pl.col("at") <= pl.col("b"))
    )
    assert inside.height == 0
    # Whole racks go into maintenance together.
    inv = default_frames["inventory"].select("node_id", "rack")
    ms = ev.filter(pl.col("kind") == "maintenance_start").join(inv, on="node_id")
    per_window = (
        ms.group_by("rack", "at")
        .len()
        .join(inv.group_by("rack").len().rename({"len": "rack_size"}), on="rack")
    )
    assert (per_window["len"] == per_window["rack_size"]).mean() > 0.8  # type: ignore[operator]
