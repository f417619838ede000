"""Buckets carried from one bucket end to the next give the window the full aggregation
gives, value for value: counters with gaps, resets and a last value older than the
window, nodes that appear and vanish, samples on bucket boundaries, several bucket ends
at once and a partial newest bucket; and so the same latest features."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from predops.features.carry import carry_forward, exact_buckets, oldest_end, window_buckets
from predops.features.definitions import NodeFeatureSpec
from predops.features.node import END, NODE, bucket_telemetry, latest_window_features

SPEC = NodeFeatureSpec()
T0 = datetime(2026, 3, 1, tzinfo=UTC)
BUCKET = SPEC.bucket


def _telemetry(seed: int, hours: int = 40) -> pl.DataFrame:
    """Eight nodes, 5-minute samples (some on bucket boundaries, some 1 s past), with
    gaps of hours, counters null for a while, resets, and a node that starts late."""
    rng = np.random.default_rng(seed)
    rows: dict[str, list] = {c: [] for c in [NODE, "ts", *SPEC.gauges, *SPEC.counters]}
    rows["node_ready"] = []
    for n in range(8):
        first = 0 if n != 3 else 30 * 12  # node 3 appears after 30 h
        counts = {c: int(rng.integers(0, 50)) for c in SPEC.counters}
        gap = set(range(100 + 12 * n, 100 + 12 * n + int(rng.integers(0, 40)))) if n % 2 else set()
        for k in range(first, hours * 12):
            if k in gap or rng.random() < 0.05:
                continue
            rows[NODE].append(f"n{n}")
            rows["ts"].append(T0 + k * timedelta(minutes=5) + timedelta(seconds=int(k % 7 == 0)))
            for g in SPEC.gauges:
                rows[g].append(None if rng.random() < 0.1 else float(rng.normal(50, 10)))
            for c in SPEC.counters:
                if rng.random() < 0.02:
                    counts[c] = 0  # a reset
                counts[c] += int(rng.poisson(0.3))
                silent = n == 5 and 60 <= k < 400  # null for ~28 h: the last value ages out
                rows[c].append(None if silent or rng.random() < 0.15 else counts[c])
            rows["node_ready"].append(bool(rng.random() > 0.03))
    schema = {NODE: pl.String, "ts": pl.Datetime("us", "UTC"), "node_ready": pl.Boolean}
    schema |= {g: pl.Float64 for g in SPEC.gauges} | {c: pl.Int64 for c in SPEC.counters}
    return pl.DataFrame(rows, schema=schema)


def _full(tel: pl.DataFrame, end: datetime, visible: datetime) -> pl.DataFrame:
    """The latest rows' aggregation of the online window (``online_window_start``
    onwards), in parts of a few nodes."""
    start = oldest_end(end, SPEC) - BUCKET
    lf = tel.lazy().filter(pl.col("ts") > start)
    return exact_buckets(lf, SPEC, cutoff=visible, part_rows=1000)


def _same(a: pl.DataFrame, b: pl.DataFrame) -> None:
    assert_frame_equal(a.sort(NODE, END), b.sort(NODE, END), check_exact=True)


@pytest.mark.parametrize("seed", [1, 2])
def test_carried_buckets_equal_the_full_aggregation(seed: int) -> None:
    tel = _telemetry(seed)
    end = T0 + timedelta(hours=25)
    visible = end + timedelta(minutes=7)
    window, kept = window_buckets(tel.lazy(), SPEC, end=end, visible=visible)
    _same(window, _full(tel, end, visible))
    kept_end = end
    # one bucket end at a time, the same end again (partial bucket only), then a jump
    steps = [1] * 8 + [0, 3, 1, 5] + [1] * 20 + [2, 4]
    for k in steps:
        end = kept_end + k * BUCKET
        visible = end + timedelta(minutes=int(k % 3) * 4)
        window, fresh = carry_forward(
            kept, tel.lazy(), SPEC, kept_end=kept_end, end=end, visible=visible
        )
        full = _full(tel, end, visible)
        _same(window, full)
        a = latest_window_features(window.lazy(), SPEC, cutoff=visible).collect()
        b = latest_window_features(full.lazy(), SPEC, cutoff=visible).collect()
        assert_frame_equal(a.sort(NODE), b.sort(NODE), check_exact=True)
        kept = pl.concat([kept.filter(pl.col(END) >= oldest_end(end, SPEC)), fresh])
        kept_end = end


def test_buckets_that_miss_the_window_or_lie_ahead_are_refused() -> None:
    tel = _telemetry(3, hours=30)
    end = T0 + timedelta(hours=25)
    _, kept = window_buckets(tel.lazy(), SPEC, end=end, visible=end)
    with pytest.raises(ValueError, match="cannot carry"):
        carry_forward(kept, tel.lazy(), SPEC, kept_end=end, end=end - BUCKET, visible=end)
    far = end + max(SPEC.windows) + 2 * BUCKET
    with pytest.raises(ValueError, match="miss the window"):
        carry_forward(kept, tel.lazy(), SPEC, kept_end=end, end=far, visible=far)


def test_exact_buckets_are_bucket_telemetry_summed_in_order() -> None:
    tel = _telemetry(4, hours=30)
    cutoff = T0 + timedelta(hours=29, minutes=50)
    ours = exact_buckets(tel.lazy(), SPEC, cutoff=cutoff, first_zero=True, part_rows=500)
    theirs = bucket_telemetry(tel.lazy(), SPEC, cutoff=cutoff, first_zero=True).collect()
    assert ours.schema == theirs.schema and ours.height == theirs.height > 100
    a, b = ours.sort(NODE, END), theirs.sort(NODE, END)
    sums = [
        c for c in a.columns if c.endswith(("__s", "__ss", "__st", "__stt", "__stx", "inc", "inc0"))
    ]
    assert len(sums) == 5 * len(SPEC.gauges) + 2 * len(SPEC.counters)
    # counts, maxima, last values and times: the same values
    assert_frame_equal(a.drop(sums), b.drop(sums), check_exact=True)
    # sums: the same up to the order of addition
    assert_frame_equal(
        a.select(sums), b.select(sums), check_exact=False, rel_tol=1e-12, abs_tol=1e-9
    )
    # in parts of any size, the same bits
    assert_frame_equal(
        exact_buckets(tel.lazy(), SPEC, cutoff=cutoff, first_zero=True, part_rows=10**9).sort(
            NODE, END
        ),
        a,
        check_exact=True,
    )
    empty = exact_buckets(tel.clear().lazy(), SPEC, cutoff=cutoff)
    assert (
        empty.height == 0
        and empty.schema == bucket_telemetry(tel.clear().lazy(), SPEC).collect_schema()
    )
