"""The last demand forecasts, re-used while neither their inputs nor the model changed.

A demand forecast is a function of the served model version and of two frames alone:
the model's input window of the lake's demand on the model's grid, complete buckets only
(:func:`predops.models.demand.grid.resampled`, the first step of
:meth:`DemandForecaster.predict`), and the calendar. The scheduled pipeline forecasts
every few minutes, but an hourly grid gains a bucket once an hour: in between, the rows
the lake gained fill a bucket still open, which the grid leaves out. So when the served
version (name, version, run id) is the one saved, and the grid and the calendar computed
now have the saved digests, the saved forecasts are those the model would issue again;
the model is not even loaded. Anything else — another version, another grid or calendar
(a new bucket, late rows, a rewritten file), a missing or unreadable file — is a miss:
the caller loads the model, forecasts and saves.

The grid is computed with the saved model's grid spec and lookback (a registered version
never changes, so the same version has the same spec). The file
(``<features>/online/forecast_cache.<horizon>.json``) holds one entry: the key, the grid
spec and lookback, and the forecast rows (bucket times in microseconds since the epoch,
UTC; JSON floats round-trip exactly). Memory: the forecasts of one pass.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from predops.core.contracts import Provenance
from predops.features.demand import DemandFeatureSpec, polars_every
from predops.models.demand.grid import resampled
from predops.pipelines.workspace.atomic import atomic_write_text

VERSION = 1
FORECAST_COLUMNS = ("series_id", "issued_at", "valid_at", "p10", "p50", "p90", "method")


def path_for(features_dir: Path, horizon: str) -> Path:
    """The cache file of the ``horizon`` demand model (``hourly`` / ``weekly``)."""
    return features_dir / "online" / f"forecast_cache.{horizon}.json"


def input_since(end: datetime, freq: timedelta, lookback: int) -> datetime:
    """Start (exclusive) of the demand rows a forecast from data ending at ``end`` reads:
    ``lookback`` buckets of ``freq`` plus one of slack, truncated as the grid's buckets
    are (:func:`features.demand.resample_demand`) — so the first bucket read is whole,
    and the window's grid moves only when a bucket ends."""
    since = pl.Series([end - (lookback + 1) * freq], dtype=pl.Datetime("us", "UTC"))
    out = since.dt.truncate(polars_every(freq)).item()
    assert isinstance(out, datetime)
    return out


def frame_digest(frame: pl.DataFrame | None) -> str:
    """SHA-256 of a frame's column names, dtypes and rows (``"none"`` for no frame)."""
    if frame is None:
        return "none"
    body = json.dumps(
        [[[n, str(t)] for n, t in frame.schema.items()], frame.rows()],
        default=str,
        separators=(",", ":"),
    )
    return hashlib.sha256(body.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Window:
    """What the model reads: its grid spec and its lookback (buckets)."""

    spec: DemandFeatureSpec
    lookback: int

    def to_json(self) -> dict[str, Any]:
        s = self.spec
        spec = {"freq_s": s.freq.total_seconds(), "lags": s.lags, "windows": s.windows}
        return {"spec": {**spec, "agg": s.agg, "hash": s.hash}, "lookback": self.lookback}

    @classmethod
    def from_json(cls, body: Any) -> Window:
        """Raises KeyError / TypeError / ValueError on anything but a saved window."""
        s = body["spec"]
        spec = DemandFeatureSpec(
            freq=timedelta(seconds=float(s["freq_s"])),
            lags=tuple(int(k) for k in s["lags"]),
            windows=tuple(int(w) for w in s["windows"]),
            agg=str(s["agg"]),
        )
        if spec.hash != s["hash"]:
            raise ValueError("the saved grid spec does not rebuild")
        return cls(spec, int(body["lookback"]))

    def inputs(self, demand: pl.DataFrame) -> pl.DataFrame:
        """The demand rows a forecast reads (``demand`` sorted by series and time)."""
        end = demand["ts"].max()
        assert isinstance(end, datetime)
        since = input_since(end, self.spec.freq, self.lookback)
        return demand.filter(pl.col("ts") > since)

    def grid_digest(self, inputs: pl.DataFrame) -> str:
        """Digest of ``inputs`` on the model's grid (what the forecast is a function of)."""
        return frame_digest(resampled(inputs, self.spec).collect())


def model_key(prov: Provenance) -> list[str | None]:
    return [prov.model_name, prov.model_version, prov.run_id]


def lookup(
    path: Path, prov: Provenance, demand: pl.DataFrame, calendar: pl.DataFrame | None
) -> pl.DataFrame | None:
    """The saved forecast rows (as the model's output frame) when ``prov``'s version,
    the grid of ``demand`` (the lake's rows, sorted) and ``calendar`` are those saved;
    None on a miss."""
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(saved, dict) or saved.get("version") != VERSION:
            return None
        if saved.get("model") != model_key(prov):
            return None
        window = Window.from_json(saved["window"])
        if saved.get("calendar") != frame_digest(calendar):
            return None
        if saved.get("grid") != window.grid_digest(window.inputs(demand)):
            return None
        rows = saved["forecasts"]
        frame = pl.DataFrame(
            rows,
            schema={
                "series_id": pl.String,
                "issued_at": pl.Int64,
                "valid_at": pl.Int64,
                "p10": pl.Float64,
                "p50": pl.Float64,
                "p90": pl.Float64,
                "method": pl.String,
            },
            orient="row",
        )
    except (OSError, ValueError, KeyError, TypeError, pl.exceptions.PolarsError):
        return None
    utc = pl.Datetime("us", "UTC")
    return frame.with_columns(pl.col("issued_at").cast(utc), pl.col("valid_at").cast(utc))


def save(
    path: Path,
    prov: Provenance,
    window: Window,
    grid: str,
    calendar: pl.DataFrame | None,
    forecasts: pl.DataFrame,
) -> None:
    """Keep one pass's forecast rows (the model's output frame) under its key,
    atomically."""
    us = pl.Datetime("us", "UTC")
    rows = forecasts.select(
        pl.col("series_id"),
        pl.col("issued_at").cast(us).dt.epoch("us"),
        pl.col("valid_at").cast(us).dt.epoch("us"),
        *[pl.col(q).cast(pl.Float64) for q in ("p10", "p50", "p90")],
        pl.col("method"),
    ).rows()
    body = {
        "version": VERSION,
        "model": model_key(prov),
        "window": window.to_json(),
        "grid": grid,
        "calendar": frame_digest(calendar),
        "forecasts": rows,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(body, separators=(",", ":")))


__all__ = ["Window", "frame_digest", "input_since", "lookup", "path_for", "save"]
