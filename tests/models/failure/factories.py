"""Builders for failure-model tests: small tabular failure data with a time axis."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import polars as pl

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def failure_rows(
    rng: np.random.Generator,
    *,
    n: int = 6000,
    base_rate: float = 0.03,
    signal: float = 2.0,
    categories: int = 4,
    nan_share: float = 0.05,
) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """Rows in time order: ``errors`` (counts that rise before failures), ``temp``
    (noise plus a weaker signal), ``noise`` and a categorical ``sku`` whose levels have
    different base rates; labels from a logistic model; times one minute apart."""
    sku = rng.integers(0, categories, n)
    latent = rng.normal(size=n)
    logit = np.log(base_rate / (1 - base_rate)) + signal * latent + 0.3 * (sku - categories / 2)
    y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)
    errors = rng.poisson(np.exp(0.8 * latent)).astype(float)
    temp = 60 + 3 * latent + rng.normal(0, 3, n)
    temp[rng.random(n) < nan_share] = np.nan
    X = pd.DataFrame(
        {
            "errors": errors,
            "temp": temp,
            "noise": rng.normal(size=n),
            "sku": pd.Categorical([f"sku-{k}" for k in sku]),
        }
    )
    t = np.datetime64(T0.replace(tzinfo=None), "us") + np.arange(n).astype("timedelta64[m]")
    return X, y, t


def node_frame(rng: np.random.Generator, *, nodes: int = 30, hours: int = 24 * 6) -> pl.DataFrame:
    """A small node feature frame (a few real feature names) with 6 h and 24 h labels:
    frail nodes show SBE bursts before failing; ``ts`` hourly."""
    rows = []
    for k in range(nodes):
        frail = rng.random() < 0.3
        for h in range(hours):
            sbe = rng.poisson(6.0 if frail and h % 48 > 30 else 0.3)
            rows.append(
                {
                    "node_id": f"n{k:03d}",
                    "ts": T0 + timedelta(hours=h),
                    "ecc_sbe__increase_6h": float(sbe),
                    "gpu_temp_c__mean_1h__rack_dev": float(rng.normal(2.0 if frail else 0, 2)),
                    "node__sku": "gpu-a" if k % 2 else "gpu-b",
                    "fails_within_24h": int(frail and h % 48 > 36 and rng.random() < 0.5),
                    "fails_within_6h": int(frail and h % 48 > 42 and rng.random() < 0.5),
                    "usable": True,
                }
            )
    return pl.DataFrame(rows).with_columns(pl.col("node__sku").cast(pl.Categorical))
