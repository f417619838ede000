"""``UsageForecaster``: per node, the p50 / p95 / p99 of its peak usage over the next
window, from one LightGBM model per quantile across every node (a global model, as the
demand forecaster), with a split-conformal correction and an online one for drift.

- **Target.** The highest usage sample in ``(t, t + window]`` (5-minute steps for the
  Azure VMs), as a share of the node's allocatable, minus the node's last-hour mean;
  the inputs are :mod:`models.usage.design`. A training pair is one (node, origin).
- **Quantiles.** One LightGBM quantile model per level of ``levels`` (0.5, 0.9, 0.95,
  0.99 by default); per row the levels are made non-decreasing.
- **Conformal.** Inside ``fit`` the last ``calibration`` of every node's history is
  held out: models trained on the pairs whose target window ends before it forecast
  the held-out pairs, and per level the conformal quantile of the miss, in units of
  the origin's 24 h standard deviation (+ a floor), shifts the bound so that the level
  holds on the held-out window. With ``refit`` the final models are trained on every
  pair and keep those shifts (as the demand forecaster's band).
- **Online.** :class:`models.usage.online.OnlineCorrection` (``aci_gamma``): each
  resolved forecast moves its node's offsets, so a node whose usage drifts up widens
  its own band within a few windows. ``update`` feeds it; ``predict`` applies it.
- **Memory.** ``fit`` and ``predict`` read ``chunk_series`` nodes at a time from the
  history (a polars LazyFrame, e.g. a Parquet scan, is filtered per chunk; a
  DataFrame is only sliced): the trailing statistics of a chunk (~20 float64 arrays of
  chunk x steps: 256 nodes x 30 days at 5 minutes is ~0.4 GB) and the sampled training
  pairs (``max_train_rows`` x 23 float32, 28 MB at 300,000) are all that is held, for
  any fleet size. ``predict`` reads only the last :data:`LOOKBACK` of each node.

Pure: numpy / polars / LightGBM; no I/O, no clock, no environment.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from statistics import NormalDist
from typing import Any

import numpy as np
import polars as pl

from predops.core.contracts import UsageForecast
from predops.models.usage.design import FEATURES, Design
from predops.models.usage.grid import SERIES, UsageGrid, history_columns, to_grid
from predops.models.usage.online import OnlineCorrection

LEVELS = (0.5, 0.9, 0.95, 0.99)
API_LEVELS = (0.5, 0.95, 0.99)
LOOKBACK = timedelta(days=8)
"""History ``predict`` reads per node: the 7-day statistics plus a day's window."""
MIN_TRAIN_ROWS = 200
MIN_CAL_ROWS = 100
METHOD = "lightgbm-quantile"
TARGETS = ("peak", "step")


def level_name(level: float) -> str:
    """0.95 -> "p95", 0.995 -> "p99_5" (the frame column of a level)."""
    text = f"{level * 100:g}".replace(".", "_")
    return f"p{text}"


def at_level(q: np.ndarray, levels: tuple[float, ...], z: float | np.ndarray) -> np.ndarray:
    """Peak at normal-score levels ``z`` (0 = p50, 1.645 = p95, 2.326 = p99; a float or
    a 1-D array of K) from quantiles ``q`` (..., levels): linear in the normal score
    between fitted levels, extended beyond them with the outermost segments' slopes
    (never decreasing). Shape (...) for a float ``z``, (..., K) for an array."""
    zs = np.array([NormalDist().inv_cdf(v) for v in levels])
    zq = np.atleast_1d(np.asarray(z, dtype=np.float64))
    i = np.clip(np.searchsorted(zs, zq) - 1, 0, zs.size - 2)
    lo, hi = q[..., i], q[..., i + 1]
    slope = np.maximum(hi - lo, 0.0) / (zs[i + 1] - zs[i])
    out: np.ndarray = lo + slope * (zq - zs[i])
    return out[..., 0] if np.ndim(z) == 0 else out


def monotone(q: np.ndarray) -> np.ndarray:
    """Quantiles made non-decreasing along the last axis (no crossing)."""
    out: np.ndarray = np.maximum.accumulate(q, axis=-1)
    return out


class UsageForecaster:
    """Global quantile forecaster of each node's peak usage (see the module docstring).

    Parameters: ``window`` (the forecast window, at most a day; default 1 h) and
    ``step`` (the sample grid, default 5 minutes); ``levels`` (must hold 0.5, 0.95 and
    0.99); LightGBM's ``n_estimators``, ``learning_rate``, ``num_leaves``,
    ``min_child_samples``; ``max_train_rows`` (pairs kept, sampled evenly per node);
    ``min_history`` (a node's first origin); ``calibration`` (held-out tail) and
    ``refit``; ``aci_gamma`` (online step, 0 = off); ``target`` ("peak": the window's
    highest sample, the default; "step": the usage at a step of the window drawn
    uniformly, so a bound held over the window at level q is exceeded in about 1 - q
    of its steps); ``chunk_series`` (nodes read at
    once); ``random_state``; ``n_jobs`` (LightGBM threads, None = its default).
    """

    def __init__(
        self,
        window: timedelta = timedelta(hours=1),
        step: timedelta = timedelta(minutes=5),
        levels: tuple[float, ...] = LEVELS,
        n_estimators: int = 200,
        learning_rate: float = 0.05,
        num_leaves: int = 31,
        min_child_samples: int = 50,
        max_train_rows: int = 300_000,
        min_history: timedelta = timedelta(days=1),
        calibration: timedelta = timedelta(days=2),
        refit: bool = True,
        aci_gamma: float = 0.02,
        target: str = "peak",
        chunk_series: int = 256,
        random_state: int = 0,
        n_jobs: int | None = None,
    ) -> None:
        self.window = window
        self.step = step
        self.levels = tuple(float(v) for v in levels)
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.num_leaves = num_leaves
        self.min_child_samples = min_child_samples
        self.max_train_rows = max_train_rows
        self.min_history = min_history
        self.calibration = calibration
        self.refit = refit
        self.aci_gamma = aci_gamma
        self.target = target
        self.chunk_series = chunk_series
        self.random_state = random_state
        self.n_jobs = n_jobs
        self._validate()
        self.online = OnlineCorrection(self.levels, float(aci_gamma))
        self.models_: dict[float, Any] = {}

    # ---------------------------------------------------------------- settings
    def _validate(self) -> None:
        if self.step <= timedelta(0):
            raise ValueError(f"step must be positive, got {self.step}")
        if not timedelta(0) < self.window <= timedelta(days=1):
            raise ValueError(f"window must be in (0, 1 day], got {self.window}")
        if self.window % self.step:
            raise ValueError(f"window {self.window} is not a whole number of steps {self.step}")
        lv = self.levels
        if list(lv) != sorted(set(lv)) or not all(0 < v < 1 for v in lv):
            raise ValueError(f"levels must be increasing and inside (0, 1), got {lv}")
        if not set(API_LEVELS) <= set(lv):
            raise ValueError(f"levels must hold {API_LEVELS}, got {lv}")
        if self.target not in TARGETS:
            raise ValueError(f"target must be one of {TARGETS}, got {self.target!r}")
        if int(self.max_train_rows) < MIN_TRAIN_ROWS:
            raise ValueError(f"max_train_rows must be >= {MIN_TRAIN_ROWS}")
        if int(self.chunk_series) < 1 or int(self.n_estimators) < 1:
            raise ValueError("chunk_series and n_estimators must be >= 1")

    @property
    def window_steps(self) -> int:
        return int(self.window / self.step)

    def _steps(self, d: timedelta) -> int:
        return math.ceil(d / self.step)

    # ---------------------------------------------------------------- reading
    def _chunks(
        self, lf: pl.LazyFrame, spans: pl.DataFrame, lookback: timedelta | None = None
    ) -> Iterator[UsageGrid]:
        """``chunk_series`` series at a time on their own grid (from their first sample,
        or from ``lookback`` before each one's last), read with a filter on the lazy
        history: only that chunk's rows are ever collected."""
        n = int(self.chunk_series)
        step_us = int(self.step.total_seconds() * 1_000_000)
        for lo in range(0, spans.height, n):
            part = spans.slice(lo, n)
            names = part[SERIES].to_list()
            first, last = part["a"].to_numpy(), part["b"].to_numpy()
            q = lf.filter(pl.col(SERIES).is_in(names))
            if lookback is not None:
                lb = int(lookback.total_seconds() * 1_000_000)
                first = np.maximum(first, last - lb + 1)
                cut = pl.DataFrame({SERIES: names, "__from__": first})
                q = q.filter(pl.col("ts").dt.epoch("us") >= int(first.min()))
                q = q.join(cut.lazy(), on=SERIES).filter(
                    pl.col("ts").dt.epoch("us") >= pl.col("__from__")
                )
                q = q.drop("__from__")
            t0 = int(first.min()) - int(first.min()) % step_us
            steps = (int(last.max()) - t0) // step_us + 1
            yield to_grid(q.collect(), t0_us=t0, step=self.step, steps=steps)

    def _span(self, lf: pl.LazyFrame) -> pl.DataFrame:
        """Per series (sorted), its first and last sample time (epoch us: ``a``, ``b``);
        one streaming pass over the history."""
        s = (
            lf.group_by(SERIES)
            .agg(
                pl.col("ts").min().dt.epoch("us").alias("a"),
                pl.col("ts").max().dt.epoch("us").alias("b"),
            )
            .collect(engine="streaming")
            .sort(SERIES)
        )
        if s.height == 0:
            raise ValueError("usage history is empty")
        return s

    # ---------------------------------------------------------------- fit
    def fit(self, history: pl.DataFrame | pl.LazyFrame) -> UsageForecaster:
        """Fit on a history frame (series_id, ts, usage[, max][, allocatable])."""
        self._validate()
        lf = history_columns(history)
        spans = self._span(lf)
        w = self.window_steps
        cap = max(1, int(self.max_train_rows) // spans.height)
        cal = self._steps(self.calibration)
        first = self._steps(self.min_history)
        rng = np.random.default_rng(int(self.random_state))
        parts: list[tuple[np.ndarray, ...]] = []
        for grid in self._chunks(lf, spans):
            d = Design(grid, w)
            rows_l, cols_l, calf_l = [], [], []
            for i in range(len(grid.series)):
                seen = np.flatnonzero(np.isfinite(grid.usage[i]))
                if seen.size == 0:
                    continue
                last = int(seen[-1])
                cols = np.arange(int(seen[0]) + first, last - w + 1)
                if cols.size == 0:
                    continue
                r = np.full(cols.size, i)
                ok = np.isfinite(d.target(r, cols)) & np.isfinite(d.current(r, cols))
                cols = cols[ok]
                if cols.size > cap:
                    cols = np.sort(rng.choice(cols, size=cap, replace=False))
                rows_l.append(np.full(cols.size, i))
                cols_l.append(cols)
                calf_l.append(cols + w > last - cal)
            if not rows_l:
                continue
            r, c = np.concatenate(rows_l), np.concatenate(cols_l)
            y = d.target(r, c)
            if self.target == "step":  # one step of each pair's window, drawn uniformly
                y = d.step_usage(r, c, rng.integers(1, w + 1, size=c.size))
            keep = np.isfinite(y)
            r, c, y, calf = r[keep], c[keep], y[keep], np.concatenate(calf_l)[keep]
            parts.append(
                (
                    d.inputs(r, c),
                    y,
                    d.reference(r, c),
                    d.scale(r, c),
                    calf,
                )
            )
        if not parts:
            raise ValueError(
                f"no training pair: every series is shorter than min_history "
                f"{self.min_history} + window {self.window}"
            )
        x, y, ref, scale, is_cal = (np.concatenate([p[k] for p in parts]) for k in range(5))
        if y.size < MIN_TRAIN_ROWS:
            raise ValueError(f"{y.size} training pairs; at least {MIN_TRAIN_ROWS} needed")
        z = y - ref
        self.n_series_ = spans.height
        self.n_train_rows_ = int(y.size)
        self.data_cutoff_ = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(
            microseconds=int(spans["b"].max())  # type: ignore[arg-type]
        )
        self.shift_ = np.zeros(len(self.levels))
        self.calibration_ = "none"
        early = ~is_cal
        if early.sum() >= MIN_TRAIN_ROWS and is_cal.sum() >= MIN_CAL_ROWS:
            held = self._train_all(x[early], z[early])
            q = self._raw(held, x[is_cal], ref[is_cal])
            e = (y[is_cal, None] - q) / scale[is_cal, None]
            n = e.shape[0]
            self.shift_ = np.array(
                [
                    np.quantile(e[:, j], min(1.0, math.ceil((n + 1) * lv) / n))
                    for j, lv in enumerate(self.levels)
                ]
            )
            self.calibration_ = f"split: {n} held-out pairs"
            self.heldout_coverage_ = {
                level_name(lv): float(np.mean(e[:, j] <= 0)) for j, lv in enumerate(self.levels)
            }
            self.models_ = self._train_all(x, z) if self.refit else held
        else:
            self.models_ = self._train_all(x, z)
        return self

    def _train_all(self, x: np.ndarray, z: np.ndarray) -> dict[float, Any]:
        import lightgbm as lgb

        data = lgb.Dataset(
            x,
            z,
            feature_name=list(FEATURES),
            free_raw_data=False,
            params={"verbose": -1, "num_threads": self._threads()},
        ).construct()
        return {lv: self._train(data, lv) for lv in self.levels}

    def _threads(self) -> int:
        return 0 if self.n_jobs is None else int(self.n_jobs)

    def _train(self, data: Any, level: float) -> Any:
        import lightgbm as lgb

        params: dict[str, Any] = {
            "objective": "quantile",
            "alpha": level,
            "learning_rate": float(self.learning_rate),
            "num_leaves": int(self.num_leaves),
            "min_data_in_leaf": int(self.min_child_samples),
            "bagging_fraction": 0.8,
            "bagging_freq": 1,
            "feature_fraction": 0.8,
            "seed": int(self.random_state),
            "deterministic": True,
            "force_row_wise": True,
            "num_threads": self._threads(),
            "verbose": -1,
        }
        return lgb.train(params, data, num_boost_round=int(self.n_estimators))

    def _raw(self, models: dict[float, Any], x: np.ndarray, ref: np.ndarray) -> np.ndarray:
        threads = self._threads()  # Booster.predict does not take the training's setting
        z = np.column_stack([models[lv].predict(x, num_threads=threads) for lv in self.levels])
        return monotone(ref[:, None] + z)

    # ---------------------------------------------------------------- predict
    def _check_fitted(self) -> None:
        if not self.models_:
            raise ValueError("UsageForecaster is not fitted; call fit first")

    def quantiles(self, design: Design, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """(pairs, levels) conformal peak quantiles (shares of allocatable) at the
        origins, before the online correction (see :func:`corrected`)."""
        self._check_fitted()
        if design.window != self.window_steps:
            raise ValueError(f"design window {design.window} != model's {self.window_steps}")
        x = design.inputs(rows, cols)
        q = self._raw(self.models_, x, design.reference(rows, cols))
        return monotone(q + self.shift_[None, :] * design.scale(rows, cols)[:, None])

    def predict(
        self, history: pl.DataFrame | pl.LazyFrame, *, as_of: datetime | None = None
    ) -> pl.DataFrame:
        """Per series, the peak quantiles over the window after its last sample at or
        before ``as_of`` (default: each series' last). Columns: series_id, issued_at
        (end of that sample's step), window_hours, allocatable, usage_now, one column
        per level (``p50``, ``p95``, ``p99``, ...) in the history's units, scale (the
        conformal unit, same units) and method. Reads the last :data:`LOOKBACK` only."""
        self._check_fitted()
        lf = history_columns(history)
        if as_of is not None:
            lf = lf.filter(pl.col("ts") <= as_of)
        out: list[pl.DataFrame] = []
        for grid in self._chunks(lf, self._span(lf), LOOKBACK):
            out.append(self._predict_grid(grid))
        return pl.concat(out).sort(SERIES)

    def _predict_grid(self, grid: UsageGrid) -> pl.DataFrame:
        d = Design(grid, self.window_steps)
        seen = np.isfinite(grid.usage)
        rows = np.flatnonzero(seen.any(axis=1))
        cols = grid.steps - 1 - np.argmax(seen[rows, ::-1], axis=1)
        q = self.quantiles(d, rows, cols)
        scale = d.scale(rows, cols)
        names = [grid.series[i] for i in rows]
        q = corrected(q, scale, self.online.offsets(names))
        alloc = grid.allocatable[rows]
        issued = pl.Series("issued_at", grid.ts_us(cols) + grid.step_us).cast(
            pl.Datetime("us", "UTC")
        )
        cols_out: dict[str, Any] = {
            SERIES: names,
            "issued_at": issued,
            "window_hours": np.full(rows.size, self.window.total_seconds() / 3600),
            "allocatable": alloc,
            "usage_now": d.current(rows, cols) * alloc,
        }
        for j, lv in enumerate(self.levels):
            cols_out[level_name(lv)] = np.maximum(q[:, j], 0.0) * alloc
        cols_out["scale"] = scale * alloc
        cols_out["method"] = [METHOD] * rows.size
        return pl.DataFrame(cols_out)

    def forecasts(
        self, history: pl.DataFrame | pl.LazyFrame, *, as_of: datetime | None = None
    ) -> list[UsageForecast]:
        """:meth:`predict` as :class:`~core.contracts.UsageForecast` objects."""
        return to_forecasts(self.predict(history, as_of=as_of), self.window)

    def holdout_scores(
        self, history: pl.DataFrame | pl.LazyFrame, start: datetime, every: timedelta
    ) -> dict[str, Any]:
        """Pinball loss (``loss``: mean over the levels) and coverage per level of the
        peak quantiles (before the online correction; shares of allocatable) at the
        origins ``start``, ``start + every``, ... whose window ``history`` covers, read
        chunk by chunk as :meth:`fit` (the :data:`LOOKBACK` before ``start`` only)."""
        self._check_fitted()
        lf = history_columns(history).filter(pl.col("ts") >= start - LOOKBACK)
        s_us = int(start.timestamp() * 1_000_000)
        gap = max(1, self._steps(every))
        loss, hit, n = np.zeros(len(self.levels)), np.zeros(len(self.levels)), 0
        lv = np.array(self.levels)
        for grid in self._chunks(lf, self._span(lf)):
            d = Design(grid, self.window_steps)
            c0 = max(0, -(-(s_us - grid.t0_us) // grid.step_us) - 1)
            cols0 = np.arange(c0, grid.steps - self.window_steps, gap)
            rows = np.tile(np.arange(len(grid.series)), cols0.size)
            cols = np.repeat(cols0, len(grid.series))
            y = d.target(rows, cols)
            ok = np.isfinite(y) & np.isfinite(d.current(rows, cols))
            if not ok.any():
                continue
            q, y = self.quantiles(d, rows[ok], cols[ok]), y[ok, None]
            loss += ((y - q) * (lv[None, :] - (y < q))).sum(axis=0)
            hit += (y <= q).sum(axis=0)
            n += int(y.shape[0])
        if n == 0:
            raise ValueError(f"no origin from {start.isoformat()} whose window the history covers")
        return {
            "loss": float(loss.mean() / n),
            "coverage": {level_name(v): float(hit[j] / n) for j, v in enumerate(self.levels)},
            "origins": n,
        }

    # ---------------------------------------------------------------- online
    def update(self, issued: pl.DataFrame, history: pl.DataFrame | pl.LazyFrame) -> int:
        """Feed the online correction with the forecasts in ``issued`` (a
        :meth:`predict` frame) whose window ``history`` now covers to its end: each
        one's realised peak against every level. Returns how many were scored."""
        self._check_fitted()
        lf = history_columns(history)
        w = issued.select(
            SERIES,
            "issued_at",
            "scale",
            *[level_name(lv) for lv in self.levels],
            (pl.col("issued_at") + self.window).alias("__end__"),
        )
        peaks = (
            lf.join(w.lazy().select(SERIES, "issued_at", "__end__"), on=SERIES)
            .filter((pl.col("ts") >= pl.col("issued_at")) & (pl.col("ts") < pl.col("__end__")))
            .group_by(SERIES, "issued_at")
            .agg(
                pl.col("usage").max().alias("__peak__"),
                pl.col("ts").max().alias("__last__"),
            )
            .collect()
        )
        done = w.join(peaks, on=[SERIES, "issued_at"]).filter(
            pl.col("__last__") >= pl.col("__end__") - self.step
        )
        if done.height == 0:
            return 0
        bounds = done.select([level_name(lv) for lv in self.levels]).to_numpy()
        missed = done["__peak__"].to_numpy()[:, None] > bounds
        for k in range(done.height):  # one forecast per series at a time, in order
            self.online.update([done[SERIES][k]], missed[k : k + 1])
        return done.height


def corrected(q: np.ndarray, scale: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Quantiles ``q`` (pairs, levels) moved by online ``offsets`` (scale units)."""
    return monotone(q + offsets * scale[:, None])


def to_forecasts(
    frame: pl.DataFrame, window: timedelta, memory: pl.DataFrame | None = None
) -> list[UsageForecast]:
    """A :meth:`UsageForecaster.predict` frame (CPU, e.g. in cores) as
    :class:`~core.contracts.UsageForecast` objects (``as_of`` = the frame's
    ``issued_at``); ``memory``, the predict frame of a model fitted on the nodes' memory
    (bytes), fills their ``memory_p*`` where it has the node."""
    mem: dict[str, tuple[float, float, float]] = {}
    if memory is not None:
        mem = {
            r[SERIES]: (float(r["p50"]), float(r["p95"]), float(r["p99"]))
            for r in memory.iter_rows(named=True)
        }
    out = []
    for r in frame.iter_rows(named=True):
        m = mem.get(r[SERIES])
        out.append(
            UsageForecast(
                node_id=r[SERIES],
                as_of=r["issued_at"],
                window=window,
                p50=float(r["p50"]),
                p95=float(r["p95"]),
                p99=float(r["p99"]),
                memory_p50=None if m is None else m[0],
                memory_p95=None if m is None else m[1],
                memory_p99=None if m is None else m[2],
            )
        )
    return out
