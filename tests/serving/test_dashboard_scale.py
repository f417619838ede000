"""The dashboards' data functions that had to change for a 10,000-node fleet: the heat
map's per-rack summary (one group-by) and the calibration plot's bounded sample."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl

from predops.core.contracts import FailureRisk
from predops.features.labels import label_name
from predops.models.failure.config import PRIMARY_HORIZON
from predops.serving.dashboards import registry_view
from predops.serving.dashboards.fleet import rack_cells
from predops.serving.dashboards.risk import FleetRisk

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def _inventory(n: int) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "node_id": [f"n{i:04d}" for i in range(n)],
            "pool": [("gpu" if i % 3 else "cpu") for i in range(n)],
            "spine": [f"sp{i // 40}" for i in range(n)],
            "rack": [f"sp{i // 40}-rk{(i // 8) % 5}" for i in range(n)],
        }
    )


def test_rack_cells_match_a_per_rack_loop() -> None:
    inv = _inventory(200)
    rng = np.random.default_rng(3)
    scored = [i for i in range(200) if i % 7]  # some nodes unscored (stale)
    p = rng.uniform(0, 0.4, size=len(scored))
    risks = tuple(
        FailureRisk(f"n{i:04d}", T0, PRIMARY_HORIZON, float(x), (), None)  # type: ignore[arg-type]
        for i, x in zip(scored, p, strict=True)
    )
    cells = rack_cells(inv, FleetRisk(T0, PRIMARY_HORIZON, risks))
    by_node = {r.node_id: r.p_fail for r in risks}
    assert len(cells) == inv.select("spine", "rack").unique().height
    for c in cells:
        rows = inv.filter(pl.col("rack") == c.rack)
        ps = [by_node[n] for n in rows["node_id"] if n in by_node]
        assert c.spine == rows["spine"][0] and c.position == c.rack.removeprefix(f"{c.spine}-")
        assert c.nodes == rows.height and c.scored == len(ps)
        assert c.p_max == max(ps)
        assert c.p_mean is not None and abs(c.p_mean - sum(ps) / len(ps)) < 1e-12
        assert c.pools == ", ".join(sorted(set(rows["pool"])))
    assert [(c.spine, c.position) for c in cells] == sorted((c.spine, c.position) for c in cells)


def test_rack_cells_of_an_empty_inventory() -> None:
    empty = _inventory(0)
    assert rack_cells(empty, FleetRisk(T0, PRIMARY_HORIZON)) == []


class _ByFeature:
    """A model whose P(fail) is the row's ``x`` (the function under test only calls
    ``horizons`` and ``predict_proba``)."""

    horizons = (PRIMARY_HORIZON,)

    def predict_proba(self, rows: pl.DataFrame) -> np.ndarray:
        return rows["x"].to_numpy().reshape(-1, 1)


def _held_out(nodes: int, hours: int) -> pl.DataFrame:
    rng = np.random.default_rng(5)
    n = nodes * hours
    x = rng.uniform(0, 0.2, size=n)
    return pl.DataFrame(
        {
            "node_id": np.repeat([f"n{i:04d}" for i in range(nodes)], hours),
            "ts": [T0 + timedelta(hours=h) for h in range(hours)] * nodes,
            "x": x,
            label_name(PRIMARY_HORIZON): (rng.uniform(size=n) < x).astype(np.int8),
        }
    )


def test_reliability_scores_every_held_out_row_under_the_cap() -> None:
    frame = _held_out(20, 48)
    last = frame["ts"].max()
    out = registry_view._reliability(_ByFeature(), T0, frame.lazy(), last, 10)
    labelled = frame.filter(pl.col("ts") + PRIMARY_HORIZON <= last).height
    assert out["rows"] == labelled and out["held_out_rows"] == frame.height
    assert out["sample"] is None and out["table"]


def test_reliability_samples_whole_nodes_above_the_cap(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(registry_view, "RELIABILITY_ROWS", 200)
    frame = _held_out(40, 48)  # 1,920 held-out rows: one node in 10 is kept
    last = frame["ts"].max()
    out = registry_view._reliability(_ByFeature(), T0, frame.lazy(), last, 10)
    assert out["held_out_rows"] == frame.height
    assert out["sample"] == "1 node in 10 of 40"
    per_node = frame.filter(pl.col("ts") + PRIMARY_HORIZON <= last).height // 40
    assert 0 < out["rows"] < frame.height and out["rows"] % per_node == 0  # whole nodes
    assert out["table"] and 0.0 <= out["brier"] <= 1.0


def test_plan_ids_parse_each_plan_file_once(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import json
    import os

    from predops.serving.dashboards.plans import plan_ids

    def write(name: str, created: str) -> None:
        (tmp_path / f"{name}.json").write_text(json.dumps({"created_at": created}))

    write("plan-a", "2026-03-01T00:00:00+00:00")
    write("plan-b", "2026-03-02T00:00:00+00:00")
    assert plan_ids(tmp_path) == ["plan-b", "plan-a"]
    # same size and modification time, unparseable now: the listing does not read it again
    b = tmp_path / "plan-b.json"
    st = b.stat()
    b.write_text("x" * st.st_size)
    os.utime(b, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert plan_ids(tmp_path) == ["plan-b", "plan-a"]
    # a rewritten file is read again
    write("plan-a", "2026-03-03T00:00:00+00:00")
    os.utime(tmp_path / "plan-a.json", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert plan_ids(tmp_path) == ["plan-a", "plan-b"]
    (tmp_path / "plan-a.json").unlink()
    assert plan_ids(tmp_path) == ["plan-b"]


def test_latest_time_reads_the_last_day_first_and_ignores_the_future(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from predops.core.schemas import schema_for
    from predops.pipelines.workspace.lake import Lake

    lake = Lake(tmp_path / "lake")
    now = T0 + timedelta(days=10, hours=5)

    def demand(*times: datetime) -> pl.DataFrame:
        n = len(times)
        return pl.DataFrame(
            {
                "series_id": ["p/cpu_cores"] * n,
                "ts": list(times),
                "value": [1.0] * n,
                "running": [1.0] * n,
                "pending": [0.0] * n,
                "capacity": [2.0] * n,
                "pool": ["p"] * n,
                "resource": ["cpu_cores"] * n,
                "gpu_model": [None] * n,
            },
            schema=schema_for("demand").polars_schema(),
        )

    lake.write("demand", "test", demand(T0, T0 + timedelta(days=3)))
    # nothing in the last day: the whole history answers
    assert registry_view._latest(lake, "demand", "ts", now) == T0 + timedelta(days=3)
    lake.write("demand", "test", demand(now - timedelta(hours=2), now + timedelta(hours=1)))
    # the row after now is not "latest"
    assert registry_view._latest(lake, "demand", "ts", now) == now - timedelta(hours=2)
    empty = Lake(tmp_path / "empty")
    assert registry_view._latest(empty, "demand", "ts", now) is None
