"""A node's state on the pages: from the lake's events and pods and predops' loans,
only for the nodes a page names."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl

from predops.core.schemas import EVENTS, PODS
from predops.pipelines.workspace.lake import Lake
from predops.policy.lending import Loan
from predops.serving.dashboards.node_state import node_states, state_text

T0 = datetime(2026, 5, 1, tzinfo=UTC)


def _events(rows: list[tuple[str, str, int, str | None]]) -> pl.DataFrame:
    """Rows of (node, kind, hours after T0, cause) in the events contract."""
    frame = pl.DataFrame(
        {
            "node_id": [r[0] for r in rows],
            "kind": [r[1] for r in rows],
            "at": [T0 + timedelta(hours=r[2]) for r in rows],
            "cause": [r[3] for r in rows],
            "detail": [None] * len(rows),
        },
        schema_overrides={"at": pl.Datetime("us", "UTC"), "detail": pl.String()},
    )
    assert frame.columns == [c.name for c in EVENTS.columns]
    return frame


def _pods(rows: list[tuple[str, str, int, int | None]]) -> pl.DataFrame:
    """Rows of (pod, node, scheduled hours after T0, deleted hours after T0 or None)."""
    n = len(rows)
    hours = [T0 + timedelta(hours=r[2]) for r in rows]
    frame = pl.DataFrame(
        {
            "pod_id": [r[0] for r in rows],
            "job_id": [None] * n,
            "gang_id": [None] * n,
            "gang_size": [None] * n,
            "pool": ["p"] * n,
            "cpu_milli": [1000] * n,
            "memory_mib": [1024] * n,
            "num_gpu": [0] * n,
            "gpu_milli": [0] * n,
            "gpu_spec": [None] * n,
            "qos": [None] * n,
            "priority": [None] * n,
            "phase": [None] * n,
            "created_at": hours,
            "scheduled_at": hours,
            "deleted_at": [None if r[3] is None else T0 + timedelta(hours=r[3]) for r in rows],
            "node_id": [r[1] for r in rows],
        },
        schema={c.name: c.dtype for c in PODS.columns},
    )
    return frame


def test_states_in_words_at_a_time(tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake")
    lake.write(
        "events",
        "test",
        _events(
            [
                ("n1", "cordon", 1, "predops"),
                ("n2", "failure", 2, "gpu"),
                ("n3", "cordon", 1, "alice"),
                ("n3", "uncordon", 3, None),
                ("n4", "failure", 1, "disk"),
                ("n4", "repair", 5, None),
                ("n6", "maintenance_start", 1, "firmware"),
                ("n7", "maintenance_start", 1, "firmware"),
                ("n7", "maintenance_end", 2, None),
            ]
        ),
    )
    now = T0 + timedelta(hours=4)
    words = {k: v.text for k, v in node_states(tmp_path / "lake", ["n1", "n2", "n3"], now).items()}
    assert words == {"n1": "cordoned by predops", "n2": "in repair", "n3": "ready"}
    got = node_states(tmp_path / "lake", ["n4", "n5", "n6", "n7"], now)
    assert {k: v.word for k, v in got.items()} == {
        "n4": "in repair",  # the repair is after `now`
        "n5": "ready",
        "n6": "in maintenance",
        "n7": "ready",
    }
    assert all(v.pods is None and v.busy is None for v in got.values())  # no pods table
    later = node_states(tmp_path / "lake", ["n4"], T0 + timedelta(hours=6))
    assert later["n4"].word == "ready"
    assert node_states(tmp_path / "empty", ["n1"], now)["n1"].word == "ready"


def test_a_drain_is_draining_until_its_pods_are_gone_and_busy_is_pods_running(
    tmp_path: Path,
) -> None:
    lake = Lake(tmp_path / "lake")
    lake.write(
        "events", "test", _events([("d1", "drain", 1, "predops"), ("d2", "drain", 1, "bob")])
    )
    lake.write(
        "pods",
        "test",
        _pods(
            [
                ("a", "d1", 0, None),  # still running on the drained node
                ("b", "d2", 0, 2),  # evicted
                ("c", "busy", 0, None),
                ("d", "busy", 1, None),
                ("e", "idle", 0, 3),  # gone before now
                ("f", "later", 5, None),  # scheduled after now
            ]
        ),
    )
    now = T0 + timedelta(hours=4)
    got = node_states(tmp_path / "lake", ["d1", "d2", "busy", "idle", "later"], now)
    assert {k: (v.text, v.pods, v.busy) for k, v in got.items()} == {
        "d1": ("draining by predops", 1, False),
        "d2": ("drained by bob", 0, False),
        "busy": ("ready", 2, True),
        "idle": ("ready", 0, False),
        "later": ("ready", 0, False),
    }
    assert not got["d1"].in_service and got["idle"].in_service
    assert str(state_text(got["busy"])) == "ready · 2 pods"
    assert str(state_text(got["idle"])) == "ready · idle"
    assert str(state_text(got["d2"])) == "drained by bob · 0 pods"


def test_a_lent_node_names_its_borrower_and_return_time(tmp_path: Path) -> None:
    until = T0 + timedelta(hours=8)
    loans = {"n1": Loan("n1", "inference", "training", until)}
    lake = Lake(tmp_path / "lake")
    lake.write("events", "test", _events([("n2", "cordon", 1, "alice")]))
    now = T0 + timedelta(hours=4)
    got = node_states(tmp_path / "lake", ["n1", "n2"], now, loans=loans)
    assert (got["n1"].word, got["n1"].text, got["n1"].due) == ("lent", "lent to training", until)
    assert got["n1"].in_service and got["n2"].word == "cordoned"
    shown = str(state_text(got["n1"]))
    assert shown.startswith("lent to training, due back <time") and "2026-05-01 08:00" in shown


def _direct(lake: Lake, node: str, now: datetime) -> int:
    """The running pods of ``node`` at ``now``, read straight from the table."""
    pods = lake.scan("pods").collect()
    return pods.filter(
        (pl.col("node_id") == node)
        & (pl.col("scheduled_at") <= now)
        & (pl.col("deleted_at").is_null() | (pl.col("deleted_at") > now))
    )["pod_id"].n_unique()


def test_running_pod_counts_follow_time_and_new_files(tmp_path: Path) -> None:
    """The counts are kept between calls; they must still change when a pod is
    scheduled or deleted at a later ``now``, and when the table gets a new file."""
    from predops.serving.dashboards.node_state import running_pod_counts

    lake = Lake(tmp_path / "lake")
    lake.write("pods", "a", _pods([("a", "n1", 0, 3), ("b", "n1", 2, None), ("c", "n2", 5, 6)]))
    for hour in (1, 2, 3, 4, 5, 6, 7, 1):
        now = T0 + timedelta(hours=hour)
        got = running_pod_counts(lake, ["n1", "n2"], now)
        assert got == {n: _direct(lake, n, now) for n in ("n1", "n2")}, hour
    now = T0 + timedelta(hours=7)  # after every change the table holds: kept as it is
    assert running_pod_counts(lake, ["n1", "n2"], now) == {"n1": 1, "n2": 0}
    lake.write("pods", "b", _pods([("d", "n2", 0, None)]))
    assert running_pod_counts(lake, ["n1", "n2"], now) == {"n1": 1, "n2": 1}
