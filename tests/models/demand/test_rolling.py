"""The combination's rolling state (``models.demand.rolling``): ring buffers that keep
the last ``cap`` values per (key, column), whatever the keys' interleaving."""

from __future__ import annotations

import pickle
from collections import deque
from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from predops.models.demand.rolling import RollingWindows
from predops.models.demand.selection import SelectedForecaster

from .factories import series_frame
from .test_selection import CFG, CHEAP, _daily

KEYS = [("s1", "1-6"), ("s2", "1-6"), ("s1", "7-12")]

batches = st.lists(
    st.tuples(
        st.sampled_from(["a", "b"]),
        st.lists(
            st.tuples(
                st.sampled_from(KEYS),
                st.floats(-1e6, 1e6, allow_nan=False, width=32),
            ),
            max_size=20,
        ),
    ),
    max_size=12,
)


@settings(max_examples=200, deadline=None)
@given(batches=batches, cap=st.integers(1, 7))
def test_each_window_holds_the_last_cap_values_in_order(
    batches: list[tuple[str, list[tuple[tuple[str, str], float]]]], cap: int
) -> None:
    """Against a deque per (key, column): the same values, oldest first, and their mean;
    a batch longer than the window keeps its tail."""
    store = RollingWindows(("a", "b"), cap)
    ref: dict[tuple[tuple[str, str], str], deque[float]] = {}
    for column, rows in batches:
        store.extend([k for k, _ in rows], column, np.array([v for _, v in rows]))
        for k, v in rows:
            ref.setdefault((k, column), deque(maxlen=cap)).append(v)
    for key in KEYS:
        for column in ("a", "b"):
            want = list(ref.get((key, column), []))
            assert store.values(key, column).tolist() == want
            assert store.count(key, column) == len(want)
    means = store.means(KEYS)
    for i, key in enumerate(KEYS):
        for j, column in enumerate(("a", "b")):
            want = list(ref.get((key, column), []))
            if want:
                assert means[i, j] == pytest.approx(float(np.mean(want)), rel=1e-9, abs=1e-9)
            else:
                assert np.isnan(means[i, j])
    assert sorted(store.keys()) == sorted({k for (k, _) in ref})


def test_a_key_s_mean_does_not_depend_on_the_other_keys_or_their_order() -> None:
    rng = np.random.default_rng(3)
    seqs = {(f"s{i}", "1-6"): rng.gamma(2.0, 10.0 ** rng.uniform(-2, 3), 50) for i in range(20)}
    one = RollingWindows(("a",), 16)
    for k, v in seqs.items():  # one key at a time
        one.extend([k] * v.size, "a", v)
    mixed = RollingWindows(("a",), 16)
    keys = list(seqs)
    for t in range(50):  # interleaved, keys in a new order every step
        order = [keys[i] for i in rng.permutation(len(keys))]
        mixed.extend(order, "a", np.array([seqs[k][t] for k in order]))
    assert one.means(keys).tolist() == mixed.means(keys).tolist()
    assert one.means([("new", "1-6")])[0, 0] != one.means([("new", "1-6")])[0, 0]  # NaN


def test_bad_input_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="cap must be >= 1"):
        RollingWindows(("a",), 0)
    with pytest.raises(ValueError, match="distinct"):
        RollingWindows(("a", "a"), 3)
    store = RollingWindows(("a",), 3)
    with pytest.raises(KeyError, match="unknown column 'z'; known: a"):
        store.extend([("s", "1-6")], "z", np.array([1.0]))
    with pytest.raises(KeyError, match="unknown column 'z'"):
        store.extend([], "z", np.array([]))  # even with nothing to append
    with pytest.raises(ValueError, match=r"column 'a': non-finite .* at position\(s\) \[1\]"):
        store.extend([("s", "1-6")] * 2, "a", np.array([1.0, np.nan]))
    with pytest.raises(ValueError, match=r"beyond float32 value at position\(s\) \[0, 2\]"):
        store.extend([("s", "1-6")] * 3, "a", np.array([-1e39, 1.0, 1e300]))
    with pytest.raises(ValueError, match="2 keys but values of shape"):
        store.extend([("s", "1-6")] * 2, "a", np.array([1.0]))
    assert len(store) == 0  # nothing half-written


def test_memory_is_bounded_by_the_keys_not_by_time() -> None:
    store = RollingWindows(("a", "b"), 10)
    keys = [(f"s{i}", "1-6") for i in range(100)]
    for _ in range(50):
        store.extend(keys, "a", np.ones(100))
        store.extend(keys, "b", np.ones(100))
    grown = store.nbytes
    for _ in range(50):
        store.extend(keys, "a", np.ones(100))
    assert store.nbytes == grown
    assert grown <= 150 * 2 * 10 * 4 + 2 * 150 * 2 * 4  # rows grow by half: at most 150


def test_a_model_pickled_with_lists_loads_into_ring_buffers() -> None:
    """Models registered before the ring buffers kept their windows as lists per key
    (and before the fitted candidate list, ``candidates_``, existed): they load, and
    forecast as the same model whose windows are buffers."""
    demand = series_frame("a/gpus", _daily(24 * 12, np.random.default_rng(4)))
    model = SelectedForecaster(CFG, candidates=CHEAP).fit(demand)
    state = model.__getstate__()
    del state["candidates_"]
    state["errors_"] = {
        k: {c: model.errors_.values(k, c).tolist() for c in CHEAP if model.errors_.count(k, c)}
        for k in model.errors_
    }
    state["resid_"] = {k: model.resid_.values(k, "resid").tolist() for k in model.resid_}
    old = SelectedForecaster.__new__(SelectedForecaster)
    old.__setstate__(state)
    assert isinstance(old.errors_, RollingWindows) and isinstance(old.resid_, RollingWindows)
    got = pickle.loads(pickle.dumps(old)).predict(demand)
    want = model.predict(demand)
    for col in ("p10", "p50", "p90"):
        assert np.allclose(got[col].to_numpy(), want[col].to_numpy(), rtol=1e-12)
    assert old.selection()["weights_now"] == model.selection()["weights_now"]
    assert old.candidates_ == CHEAP


def test_forecasts_pending_from_an_older_model_are_scored_as_new_ones() -> None:
    """The issued forecasts awaiting their actuals keep only what scoring reads; a model
    pickled while it kept every candidate's band as well (float64) scores them the same."""
    demand = series_frame("a/gpus", _daily(24 * 12, np.random.default_rng(5)))
    cut = demand["ts"].max() - timedelta(days=1)
    model = SelectedForecaster(CFG, candidates=CHEAP).fit(demand.filter(pl.col("ts") <= cut))
    model.predict(demand.filter(pl.col("ts") <= cut))
    assert model.pending_ is not None
    assert not any(c.endswith(("__p10", "__p90")) for c in model.pending_.columns)
    wide = pickle.loads(pickle.dumps(model))  # as the previous release pickled it:
    assert wide.pending_ is not None
    wide.pending_ = wide.pending_.with_columns(
        *(pl.col(f"{c}__p50").cast(pl.Float64) for c in CHEAP),
        *(
            pl.col(f"{c}__p50").cast(pl.Float64).alias(f"{c}__{q}")
            for c in CHEAP
            for q in ("p10", "p90")
        ),
    )
    old = pickle.loads(pickle.dumps(wide))
    key = ("a/gpus", "1-6")
    before = model.errors_.count(key, "theta")
    want = model.predict(demand)
    got = old.predict(demand)
    assert model.errors_.count(key, "theta") == before + 6  # the day's 1-6 h targets scored
    assert old.errors_.count(key, "theta") == before + 6
    assert got.equals(want)


def test_a_wild_candidate_is_kept_as_the_worst_error_not_a_crash() -> None:
    """An error beyond what float32 holds (a candidate that forecast 1e300) is kept as
    the largest float32: that candidate gets no weight, and nothing raises."""
    m = SelectedForecaster(CFG, candidates=CHEAP)
    m.candidates_ = CHEAP
    m.errors_ = m._windows(CHEAP)
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    scored = pl.DataFrame(
        {
            "series_id": ["s"] * 3,
            "issued_at": [t0] * 3,
            "horizon": [1, 2, 3],
            "bucket": ["1-6"] * 3,
            "actual": [10.0, 11.0, 12.0],
            "seasonal_naive__p50": [9.0, 11.5, 12.0],
            "theta__p50": [1e300, 1e300, 1e300],
        }
    )
    m._learn(scored, errors_only=True)
    assert m.errors_.count(("s", "1-6"), "theta") == 3
    assert m._key_mae(("s", "1-6"))[1] == pytest.approx(float(np.finfo(np.float32).max))
    assert m._key_weights(("s", "1-6"), None)[1] < 1e-60
