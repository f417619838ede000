"""The simulator at fleet scale keeps its figures: a small seeded run's figures pinned
from the code before the speed-ups, and seeds run side by side (processes, Dask) equal
to the same seeds one after the other."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from predops.pipelines.whatif.run import OpsConfig, parse_seeds, simulate_ops, simulate_seeds
from predops.pipelines.whatif.world import WorldConfig

PINNED = Path(__file__).parent / "data" / "pinned_80x2_seed3.json"
"""``simulate_ops`` of :data:`PINNED_RUN` (three policies), run by the simulator as it
was before the fleet-scale work (commit e2db56d): the world and every policy's figures."""
PINNED_RUN = OpsConfig(world=WorldConfig(nodes=80, days=2, seed=3, warmup_days=7))
SMALL = OpsConfig(
    world=WorldConfig(nodes=30, days=1, seed=5, warmup_days=7),
    policies=("reactive", "oracle"),
    sizing_every=6,
)


def _figures(out: dict[str, Any]) -> dict[str, Any]:
    """World and policy figures as JSON values, without the fits' timings and without
    the figures added after the pin (the inspections of the drains, the fits' label
    counts and average precision), which change nothing the pin holds."""
    got: dict[str, Any] = json.loads(
        json.dumps({"world": out["world"], "policies": out["policies"]}, default=str)
    )
    later = ("train_rows_labelled", "train_positives", "scored_rows", "scored_positives")
    for f in got["policies"].values():
        f.pop("inspections", None)
        for fit in f.get("failure_model_fits", []):
            fit.pop("fit_seconds")
            for k in (*later, "average_precision"):
                fit.pop(k, None)
    return got


@pytest.mark.slow
def test_a_seeded_run_keeps_its_pinned_figures() -> None:
    want = _figures(json.loads(PINNED.read_text()))
    got = _figures(simulate_ops(PINNED_RUN))
    assert got["world"] == want["world"]
    for policy, figures in want["policies"].items():
        assert got["policies"][policy] == figures, policy


def _strip(runs: dict[int, dict[str, Any]]) -> str:
    for r in runs.values():
        r.pop("seconds")
    return json.dumps(runs, sort_keys=True, default=str)


def test_seeds_in_processes_equal_one_after_the_other() -> None:
    alone = simulate_seeds(SMALL, [5, 6])
    side = simulate_seeds(SMALL, [5, 6], jobs=2)
    assert list(alone) == [5, 6]
    assert _strip(alone) == _strip(side)
    assert alone[5]["policies"] != alone[6]["policies"]  # two worlds, not one twice
    assert alone[6]["config"]["world"]["seed"] == 6


def test_seeds_on_a_dask_cluster_equal_the_local_run() -> None:
    from distributed import Client, LocalCluster

    local = simulate_seeds(SMALL, [5])
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        dask = simulate_seeds(SMALL, [5], engine="dask", scheduler=client)
    assert _strip(local) == _strip(dask)


def test_seed_options_are_checked() -> None:
    assert parse_seeds("7, 11,13") == [7, 11, 13]
    with pytest.raises(ValueError, match="'x' is not an integer"):
        parse_seeds("7,x")
    with pytest.raises(ValueError, match="distinct"):
        simulate_seeds(SMALL, [5, 5])
    with pytest.raises(ValueError, match="needs --scheduler"):
        simulate_seeds(SMALL, [5], engine="dask")
    with pytest.raises(ValueError, match="unknown engine"):
        simulate_seeds(SMALL, [5], engine="spark")


def test_measured_series_equal_the_frame_queries() -> None:
    from datetime import UTC, datetime, timedelta

    import polars as pl

    from predops.core.contracts import Provenance
    from predops.pipelines.whatif.forecasts import HOURS_AHEAD, Measured, _degenerate, observed

    t0 = datetime(2026, 1, 5, tzinfo=UTC)
    ts = pl.datetime_range(
        t0, t0 + timedelta(hours=40), interval="1h", time_zone="UTC", eager=True
    ).cast(pl.Datetime("us", "UTC"))
    demand = pl.concat(
        [
            pl.DataFrame({"series_id": sid, "ts": ts, "value": [float(i % k) for i in range(41)]})
            for sid, k in (("b/cpu_cores", 7), ("a/gpus/H100", 5))
        ]
    ).sort("ts", descending=True)  # any order in: both sort
    m = Measured(demand)
    demand = demand.sort("series_id", "ts")  # as the forecasts hold it
    prov = Provenance("demand", "truth", "truth", t0)
    for hour in (0, 3, 17, 40, 45):
        now = t0 + timedelta(hours=hour)
        for history in (timedelta(0), timedelta(hours=6), timedelta(days=7)):
            assert m.observed(now, history) == observed(demand, now, history)
        ahead = demand.filter(
            (pl.col("ts") > now) & (pl.col("ts") <= now + timedelta(hours=HOURS_AHEAD))
        )
        rows = m.rows(now, now + timedelta(hours=HOURS_AHEAD), closed_low=False)
        want = _degenerate(ahead, now, "truth", prov)
        assert m.forecasts(rows, now, "truth", prov) == want
        assert [f.issued_at.isoformat() for f in want] == [
            f.issued_at.isoformat() for f in m.forecasts(rows, now, "truth", prov)
        ]
