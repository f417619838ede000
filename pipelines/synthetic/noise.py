"""Seeded random streams and autocorrelated noise shared by the simulator's stages."""

from __future__ import annotations

import math

import numpy as np
from scipy.signal import lfilter

# Stream ids: each stage draws from its own generator, so adding draws to one stage
# never shifts another's numbers.
STREAMS: dict[str, int] = {
    "topology": 1,
    "failures": 2,
    "episodes": 3,
    "demand": 4,
    "pods": 5,
    "nodes": 6,
    "telemetry": 7,
}


def stream(seed: int, name: str, *extra: int) -> np.random.Generator:
    """The generator of stage ``name`` (and sub-stream ``extra``, e.g. a node block)."""
    return np.random.default_rng(np.random.SeedSequence([seed, STREAMS[name], *extra]))


def ar1(
    rng: np.random.Generator, shape: tuple[int, int], *, step_s: float, tau_s: float, sd: float
) -> np.ndarray:
    """Stationary AR(1) noise along axis 1 (float32): sd ``sd``, correlation time ``tau_s``.

    ``phi = exp(-step / tau)`` keeps the same correlation in time whatever the step.
    """
    phi = math.exp(-step_s / tau_s)
    gain = sd * math.sqrt(1.0 - phi * phi)
    e = rng.standard_normal(shape, dtype=np.float32)
    if shape[1] == 0:
        return e
    # Start each row in the stationary distribution.
    e[:, 0] /= max(math.sqrt(1.0 - phi * phi), 1e-6)
    out: np.ndarray = lfilter([gain], [1.0, -phi], e, axis=1).astype(np.float32, copy=False)
    return out
