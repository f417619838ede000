"""Point-in-time correctness, as properties over generated data:

- changing or adding any telemetry / event row after ``t`` never changes a feature at
  or before ``t``;
- a frame built as of a cutoff is unchanged by anything after the cutoff;
- labels at ``t`` never use data at or before ``t``.
"""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from predops.features.frames import node_features, training_frame
from predops.features.labels import add_failure_labels
from tests.features import builders

HOURS = 14
CUTOFF = builders.T0 + timedelta(hours=HOURS)
SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _frames(seed: int) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    rng = np.random.default_rng(seed)
    tel = builders.telemetry(rng, nodes=3, hours=HOURS, step_s=120)
    ev = builders.events(
        [
            ("n0", "failure", builders.T0 + timedelta(hours=float(rng.uniform(1, HOURS)))),
            ("n1", "maintenance_start", builders.T0 + timedelta(hours=3)),
            ("n1", "maintenance_end", builders.T0 + timedelta(hours=5)),
        ]
    )
    return tel, builders.inventory(3), ev


def _perturb_after(tel: pl.DataFrame, t, rng: np.random.Generator) -> pl.DataFrame:
    later = tel.filter(pl.col("ts") > t)
    early = tel.filter(pl.col("ts") <= t)
    noise = rng.normal(0, 20, later.height).astype(np.float32)
    changed = later.with_columns(
        (pl.col("gpu_temp_c") + pl.Series(noise)).clip(-40, 150),
        (pl.col("ecc_dbe_total") + 7),
        pl.lit(False).alias("node_ready"),
    )
    extra = early.tail(5).with_columns(
        pl.col("ts") + (t - early["ts"].max()) + timedelta(seconds=37),
        pl.lit("n9").alias("node_id"),
    )
    return pl.concat([early, changed, extra.filter(pl.col("ts") > t)])


def _compare(a: pl.DataFrame, b: pl.DataFrame) -> None:
    assert a.height == b.height
    for c in a.columns:
        if a[c].dtype == pl.Categorical:
            assert a[c].cast(pl.String).equals(b[c].cast(pl.String)), c
        else:
            assert a[c].equals(b[c]), c


@SETTINGS
@given(seed=st.integers(0, 10_000), minutes=st.integers(30, HOURS * 60 - 30))
def test_rows_after_t_never_change_features_at_or_before_t(seed: int, minutes: int) -> None:
    tel, inv, ev = _frames(seed)
    t = builders.T0 + timedelta(minutes=minutes)
    rng = np.random.default_rng(seed + 1)
    tel2 = _perturb_after(tel, t, rng)
    ev2 = pl.concat(
        [
            ev,
            builders.events(
                [
                    ("n2", "failure", t + timedelta(minutes=1)),
                    ("n0", "repair", t + timedelta(hours=2)),
                ]
            ),
        ]
    )
    a = node_features(tel.lazy(), inv.lazy(), ev.lazy(), cutoff=CUTOFF).collect()
    b = node_features(tel2.lazy(), inv.lazy(), ev2.lazy(), cutoff=CUTOFF).collect()
    _compare(
        a.filter(pl.col("ts") <= t).sort("node_id", "ts"),
        b.filter(pl.col("ts") <= t).sort("node_id", "ts"),
    )


@SETTINGS
@given(seed=st.integers(0, 10_000), cut_min=st.integers(60, HOURS * 60 - 60))
def test_a_frame_as_of_a_cutoff_ignores_everything_after_it(seed: int, cut_min: int) -> None:
    tel, inv, ev = _frames(seed)
    cutoff = builders.T0 + timedelta(minutes=cut_min)
    rng = np.random.default_rng(seed)
    tel2 = _perturb_after(tel, cutoff, rng)
    ev2 = pl.concat([ev, builders.events([("n1", "failure", cutoff + timedelta(minutes=5))])])
    a = training_frame(tel.lazy(), inv.lazy(), ev.lazy(), cutoff=cutoff).collect()
    b = training_frame(tel2.lazy(), inv.lazy(), ev2.lazy(), cutoff=cutoff).collect()
    _compare(a.sort("node_id", "ts"), b.sort("node_id", "ts"))
    assert a["ts"].max() <= cutoff


@SETTINGS
@given(
    seed=st.integers(0, 10_000),
    minutes=st.integers(60, HOURS * 60 - 60),
    before=st.lists(
        st.tuples(
            st.sampled_from(["n0", "n1", "n2"]),
            st.sampled_from(["failure", "repair", "maintenance_start", "maintenance_end"]),
            st.integers(0, 600),
        ),
        max_size=6,
    ),
)
def test_labels_at_t_never_use_data_at_or_before_t(
    seed: int, minutes: int, before: list[tuple[str, str, int]]
) -> None:
    _, _, ev = _frames(seed)
    t = builders.T0 + timedelta(minutes=minutes)
    rows = pl.DataFrame({"node_id": ["n0", "n1", "n2"], "ts": [t] * 3}).with_columns(
        pl.col("ts").cast(pl.Datetime("us", "UTC"))
    )
    extra = builders.events([(n, k, t - timedelta(minutes=m)) for n, k, m in before])
    horizons = (timedelta(hours=1), timedelta(hours=6))
    a = add_failure_labels(rows.lazy(), ev.lazy(), horizons=horizons, label_cutoff=CUTOFF)
    b = add_failure_labels(
        rows.lazy(), pl.concat([ev, extra]).lazy(), horizons=horizons, label_cutoff=CUTOFF
    )
    cols = ["node_id", "fails_within_1h", "fails_within_6h"]
    assert a.collect().sort("node_id").select(cols).equals(b.collect().sort("node_id").select(cols))


def test_labels_are_censored_not_negative_past_the_cutoff() -> None:
    t = CUTOFF - timedelta(hours=2)
    rows = pl.DataFrame({"node_id": ["n0"], "ts": [t]}).with_columns(
        pl.col("ts").cast(pl.Datetime("us", "UTC"))
    )
    out = add_failure_labels(
        rows.lazy(),
        builders.events([]).lazy(),
        horizons=(timedelta(hours=1), timedelta(hours=6)),
        label_cutoff=CUTOFF,
    ).collect()
    assert out["fails_within_1h"].to_list() == [0]
    assert out["fails_within_6h"].to_list() == [None]


def test_down_and_maintenance_rows_are_not_usable() -> None:
    T = builders.T0
    ev = builders.events(
        [
            ("n0", "failure", T + timedelta(hours=2)),
            ("n0", "repair", T + timedelta(hours=5)),
            ("n1", "maintenance_start", T + timedelta(hours=1)),
            ("n1", "maintenance_end", T + timedelta(hours=3)),
        ]
    )
    rows = pl.DataFrame(
        {
            "node_id": ["n0"] * 4 + ["n1"] * 2,
            "ts": [T + timedelta(hours=h) for h in (1, 2, 4, 6, 2, 4)],
        }
    ).with_columns(pl.col("ts").cast(pl.Datetime("us", "UTC")))
    out = (
        add_failure_labels(
            rows.lazy(), ev.lazy(), horizons=(timedelta(hours=1),), label_cutoff=CUTOFF
        )
        .collect()
        .sort("node_id", "ts")
    )
    assert out["usable"].to_list() == [True, False, False, True, False, True]
    assert out["fails_within_1h"].to_list() == [1, 0, 0, 0, 0, 0]
