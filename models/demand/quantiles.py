"""A forecast's p10 / p50 / p90 per horizon and the method that made them (shared by
the baselines and the classical candidates' modules)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class Quantiles:
    """p10/p50/p90 per horizon and the method that made them."""

    p10: np.ndarray
    p50: np.ndarray
    p90: np.ndarray
    method: str


__all__ = ["Quantiles"]
