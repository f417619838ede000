"""The calibration constants agree with the real traces they were computed from.

Recomputes every figure in ``calibration.CALIBRATED*`` from the public traces (the
``shared_data`` fixture) and checks each constant within its stated relative tolerance,
so neither the constants nor data/README.md can drift from the data silently.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from predops.pipelines.synthetic import calibration as cal
from predops.pipelines.synthetic.calibrate import all_figures

README = Path(__file__).resolve().parents[3] / "data" / "README.md"


@pytest.fixture(scope="module")
def figures(shared_data: Path) -> dict[str, dict[str, float]]:
    return all_figures(shared_data)


def _close(constant: float, figure: float, rel: float) -> bool:
    return math.isclose(constant, figure, rel_tol=rel, abs_tol=1e-9)


@pytest.mark.parametrize(
    ("name", "family", "figure", "tol"), cal.CALIBRATED, ids=[c[0] for c in cal.CALIBRATED]
)
def test_scalar_constant_matches_its_trace(
    figures: dict[str, dict[str, float]], name: str, family: str, figure: str, tol: float
) -> None:
    value = getattr(cal, name)
    measured = figures[family][figure]
    assert _close(value, measured, tol), f"{name} = {value}, {family}.{figure} = {measured}"


@pytest.mark.parametrize(
    ("name", "family", "prefix", "tol"),
    cal.CALIBRATED_MAPS,
    ids=[c[0] for c in cal.CALIBRATED_MAPS],
)
def test_mapping_constant_matches_its_trace(
    figures: dict[str, dict[str, float]], name: str, family: str, prefix: str, tol: float
) -> None:
    mapping = getattr(cal, name)
    measured = {
        k.removeprefix(prefix): v for k, v in figures[family].items() if k.startswith(prefix)
    }
    for key, value in mapping.items():
        assert str(key) in measured, f"{name}[{key!r}] has no figure {prefix}{key}"
        assert _close(value, measured[str(key)], tol), (name, key, value, measured[str(key)])


@pytest.mark.parametrize("cls", sorted(cal.CALIBRATED_QUANTILES))
def test_pod_size_quantiles_match_openb(figures: dict[str, dict[str, float]], cls: str) -> None:
    for column, (q10, q50, q90) in cal.CALIBRATED_QUANTILES[cls].items():
        for q, value in ((10, q10), (50, q50), (90, q90)):
            assert _close(value, figures["openb"][f"{cls}_{column}_q{q}"], 0.01), (cls, column, q)


def test_derived_constants_follow_from_calibrated_ones() -> None:
    # Benign look-alikes per precursor from the Backblaze counts.
    assert _close(cal.BENIGN_PER_PRECURSOR, 2.04, 0.01)
    # The training noise gives Helios's pending share at Helios's level (Monte Carlo).
    rng = np.random.default_rng(0)
    sd = cal.TRAINING_NOISE_SD
    demand = cal.TRAINING_DEMAND_LEVEL * np.exp(sd * rng.standard_normal(2_000_000) - sd * sd / 2)
    share = np.maximum(demand - 1.0, 0.0).sum() / demand.sum()
    assert _close(share, cal.HELIOS_PENDING_SHARE, 0.02), share
    assert 0.3 < sd < cal.HELIOS_VC_LOG_SD


def test_readme_states_the_calibrated_numbers() -> None:
    """Every calibrated scalar appears in data/README.md (rounded as written there)."""
    text = README.read_text(encoding="utf-8")
    missing = []
    for name, *_ in cal.CALIBRATED:
        value = float(getattr(cal, name))
        spellings = {f"{value:.3g}", f"{value:.2f}", f"{value:.3f}", f"{value:.1f}", f"{value:g}"}
        if not any(s in text for s in spellings):
            missing.append(f"{name}={value:.3g}")
    assert not missing, f"data/README.md does not state: {', '.join(missing)}"
