"""NAB scoring against its published definition, on cases small enough to work out."""

from __future__ import annotations

import numpy as np
import pytest

from predops.models.anomaly.nab import nab_score, prepare_file, probation_length, scaled_sigmoid

T = np.datetime64("2014-01-01T00:00") + np.arange(1000).astype("timedelta64[m]")
WIN = [(T[500], T[599])]  # one window of 100 points


def score(detect_at: list[int], profile: str = "standard") -> dict[str, float]:
    s = np.zeros(T.size)
    s[detect_at] = 1.0
    return nab_score([prepare_file(T, s, WIN)], profile)


def test_scaled_sigmoid_published_points() -> None:
    assert scaled_sigmoid(-1.0) == pytest.approx(0.98661, abs=1e-5)
    assert scaled_sigmoid(0.0) == pytest.approx(0.0)
    assert scaled_sigmoid(1.0) == pytest.approx(-0.98661, abs=1e-5)
    assert scaled_sigmoid(3.0) == -1.0
    assert probation_length(1000) == 150 and probation_length(10_000) == 750


def test_null_and_perfect_detectors_score_0_and_100() -> None:
    assert score([])["score"] == pytest.approx(0.0)
    assert score([500])["score"] == pytest.approx(100.0)  # first point of the window


def test_late_detection_earns_less_and_only_the_earliest_counts() -> None:
    mid = score([550])  # halfway: S(-0.5) / S(-1)
    expected_raw = scaled_sigmoid(-0.5) / scaled_sigmoid(-1.0)
    assert mid["raw"] == pytest.approx(expected_raw)
    assert score([520, 550])["raw"] == pytest.approx(score([520])["raw"])


def test_false_positives_cost_by_distance_and_probation_is_free() -> None:
    # A detection far after the window costs the full fp weight, at the best threshold
    # it is only worth keeping together with the true positive.
    both = score([500, 900])
    assert both["raw"] == pytest.approx(1.0 - 0.11)
    assert score([500, 100])["raw"] == pytest.approx(1.0)  # index 100 < probation (150)
    near = score([500, 605])  # 6 points after a 100-point window: y = 6 / 99
    assert near["raw"] == pytest.approx(1.0 + 0.11 * scaled_sigmoid(6 / 99))


def test_the_threshold_is_chosen_for_the_whole_corpus() -> None:
    s = np.linspace(0, 0.5, T.size)  # rising noise, highest at the end (far FPs)
    s[500] = 0.9
    out = nab_score([prepare_file(T, s, WIN)])
    assert out["threshold"] == pytest.approx(0.9)
    assert out["score"] == pytest.approx(100.0)
