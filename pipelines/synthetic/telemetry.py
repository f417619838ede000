"""Per-interval node telemetry, generated in blocks of nodes with numpy.

For a block of nodes x samples the generator builds every TELEMETRY column as a 2-D
array: utilisation follows the node's pool load (running / capacity of its demand
series) plus a per-node bias and AR(1) noise; GPU temperature and power follow GPU
utilisation; counters are cumulative sums of sparse increments (background noise and
the failure / benign episodes), so they never decrease. Then:

- a node that is down (failed and not yet repaired, or in maintenance) reports
  ``node_ready = false`` and nothing else (its exporter is down);
- a kubelet flap makes ``node_ready`` false while metrics still arrive;
- gaps (random scrape misses, gap episodes before some failures) remove rows;
- GPU columns are null on CPU nodes.

Randomness comes from one generator per fixed block of ``BLOCK_NODES`` nodes, so the
output does not depend on how blocks are grouped into chunks for writing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import polars as pl

from predops.core.schemas import TELEMETRY
from predops.pipelines.synthetic import calibration as cal
from predops.pipelines.synthetic.episodes import (
    COUNTER_COLUMN,
    COUNTER_SIGNALS,
    KIND_INDEX,
    SIGNAL_INDEX,
    Episodes,
    Increments,
)
from predops.pipelines.synthetic.failures import DAY, Windows
from predops.pipelines.synthetic.noise import ar1, stream
from predops.pipelines.synthetic.topology import SKUS, Fleet

BLOCK_NODES = 256
GPU_COLUMNS = (
    "gpu_util_pct",
    "gpu_temp_c",
    "gpu_power_w",
    "ecc_sbe_total",
    "ecc_dbe_total",
    "xid_errors_total",
    "pcie_replay_total",
)
GPU_COUNTERS = frozenset({"sbe", "dbe", "xid", "pcie"})


@dataclass(frozen=True, slots=True)
class NodeParams:
    """Static per-node behaviour: error-prone-ness, load bias, temperature offset (C),
    counter totals at the start (counters x nodes)."""

    noisiness: np.ndarray
    util_bias: np.ndarray
    temp_offset: np.ndarray
    initial: np.ndarray


def node_params(fleet: Fleet, frailty: np.ndarray, rng: np.random.Generator) -> NodeParams:
    """Draw node behaviour. Noisy nodes lean (weakly) towards frail ones: a flaky node
    shows more corrected errors over its life, a faint long-run signal."""
    sd = cal.NOISINESS_LOG_SD
    noisy = np.exp(rng.normal(-0.5 * sd * sd, sd, size=fleet.n)) * frailty**0.3
    noisy /= max(float(noisy.mean()), 1e-9)
    is_gpu = fleet.is_gpu
    initial = np.zeros((len(COUNTER_SIGNALS), fleet.n), dtype=np.int64)
    for c, sig in enumerate(COUNTER_SIGNALS):
        lam = cal.BACKGROUND_PER_NODE_DAY[sig] * noisy * fleet.age_days
        if sig in GPU_COUNTERS:
            lam = np.where(is_gpu, lam, 0.0)
        initial[c] = rng.poisson(lam)
    # Backblaze: 17 % of healthy drives carry some reallocated sectors.
    realloc = COUNTER_SIGNALS.index("realloc")
    warned = rng.random(fleet.n) < cal.BACKBLAZE_WARN_SHARE_HEALTHY
    initial[realloc] += np.where(warned, 1 + rng.poisson(8.0, size=fleet.n), 0)
    return NodeParams(
        noisiness=noisy,
        util_bias=rng.normal(0.0, 0.08, size=fleet.n),
        temp_offset=rng.normal(0.0, 2.5, size=fleet.n),
        initial=initial,
    )


@dataclass(frozen=True, slots=True)
class TelemetryInputs:
    """Everything the telemetry of any block depends on (all sorted by node)."""

    fleet: Fleet
    params: NodeParams
    start: datetime
    step_s: float
    n_samples: int
    load: np.ndarray  # series x samples, running / capacity
    node_series: np.ndarray
    down: Windows  # failures and maintenance, disjoint per node
    drained: Windows  # cordon/drain lead-in and lead-out around maintenance
    flaps: Windows
    episodes: Episodes  # gauge and gap episodes
    increments: Increments
    seed: int


def _block_slice(node: np.ndarray, lo: int, hi: int) -> slice:
    return slice(int(np.searchsorted(node, lo, "left")), int(np.searchsorted(node, hi, "left")))


def _window_mask(w: Windows, lo: int, hi: int, step: float, n_t: int) -> np.ndarray:
    """Samples (block nodes x samples) whose time lies in a window of ``w``."""
    mask = np.zeros((hi - lo, n_t), dtype=bool)
    sl = _block_slice(w.node, lo, hi)
    for node, a, b in zip(w.node[sl], w.start[sl], w.end[sl], strict=True):
        ia, ib = max(math.ceil(a / step), 0), min(math.ceil(b / step), n_t)
        if ia < ib:
            mask[node - lo, ia:ib] = True
    return mask


def _counters(inp: TelemetryInputs, lo: int, hi: int, rng: np.random.Generator) -> np.ndarray:
    """Cumulative counters (counters x block nodes x samples), int64."""
    nb, n_t, step = hi - lo, inp.n_samples, inp.step_s
    horizon = n_t * step
    is_gpu = inp.fleet.is_gpu[lo:hi]
    flat_idx, weights = [], []
    for c, sig in enumerate(COUNTER_SIGNALS):
        lam = cal.BACKGROUND_PER_NODE_DAY[sig] * inp.params.noisiness[lo:hi] * horizon / DAY
        if sig in GPU_COUNTERS:
            lam = np.where(is_gpu, lam, 0.0)
        burst = cal.XID_BURST_MEAN if sig == "xid" else 1.0
        counts = rng.poisson(lam / burst)
        node = np.repeat(np.arange(nb), counts)
        idx = np.minimum(np.ceil(rng.uniform(0.0, horizon, size=node.size) / step), n_t - 1)
        size = 1 + rng.poisson(burst - 1.0, size=node.size) if burst > 1 else 1
        flat_idx.append((c * nb + node) * n_t + idx.astype(np.int64))
        weights.append(np.broadcast_to(np.asarray(size, dtype=np.float64), node.shape))
    sl = _block_slice(inp.increments.node, lo, hi)
    inc = inp.increments
    at = inc.at[sl]
    ok = at < horizon
    idx = np.clip(np.ceil(at[ok] / step), 0, n_t - 1).astype(np.int64)
    flat_idx.append(
        (inc.counter[sl][ok].astype(np.int64) * nb + (inc.node[sl][ok] - lo)) * n_t + idx
    )
    weights.append(inc.count[sl][ok].astype(np.float64))
    total = np.bincount(
        np.concatenate(flat_idx),
        weights=np.concatenate(weights),
        minlength=len(COUNTER_SIGNALS) * nb * n_t,
    )
    cum = np.cumsum(total.reshape(len(COUNTER_SIGNALS), nb, n_t), axis=2).astype(np.int64)
    cum += inp.params.initial[:, lo:hi, None]
    return cum


def _apply_episodes(
    inp: TelemetryInputs,
    lo: int,
    hi: int,
    temp: np.ndarray,
    power: np.ndarray,
    keep: np.ndarray,
    rng: np.random.Generator,
) -> None:
    """Add temperature drifts, power dips and gap episodes of the block's nodes in place."""
    ep, step, n_t = inp.episodes, inp.step_s, inp.n_samples
    sl = _block_slice(ep.node, lo, hi)
    temp_sig, power_sig, gap_sig = SIGNAL_INDEX["temp"], SIGNAL_INDEX["power"], SIGNAL_INDEX["gap"]
    rising = (KIND_INDEX["precursor"], KIND_INDEX["averted"])
    for node, sig, a, b, amp, kind in zip(
        ep.node[sl],
        ep.signal[sl],
        ep.start[sl],
        ep.end[sl],
        ep.amplitude[sl],
        ep.kind[sl],
        strict=True,
    ):
        ia, ib = max(math.ceil(a / step), 0), min(math.ceil(b / step), n_t)
        if ia >= ib:
            continue
        x = (np.arange(ia, ib) * step - a) / max(b - a, 1.0)
        # Precursors build up to the failure; look-alikes rise and fall back.
        shape = x if kind in rising else np.sin(np.pi * np.clip(x, 0.0, 1.0))
        r = node - lo
        if sig == temp_sig:
            temp[r, ia:ib] += (amp * shape).astype(np.float32)
        elif sig == power_sig:
            dip = rng.random(ib - ia) < amp * shape
            power[r, ia:ib] *= np.where(dip, rng.uniform(0.3, 0.7, ib - ia), 1.0).astype(np.float32)
        elif sig == gap_sig:
            keep[r, ia:ib] &= rng.random(ib - ia) >= amp * shape


def _scrape_misses(shape: tuple[int, int], rng: np.random.Generator) -> np.ndarray:
    """Random missed scrapes in runs of 1-3 samples (True = missed)."""
    starts = rng.random(shape) < cal.SCRAPE_MISS_SHARE / 2.0
    two = starts & (rng.random(shape) < 2.0 / 3.0)
    three = two & (rng.random(shape) < 0.5)
    miss = starts.copy()
    miss[:, 1:] |= two[:, :-1]
    miss[:, 2:] |= three[:, :-2]
    return miss


def block_frame(inp: TelemetryInputs, block: int) -> pl.DataFrame:
    """TELEMETRY rows of nodes ``[block * BLOCK_NODES, ...)``, sorted by node then time."""
    fleet, p = inp.fleet, inp.params
    lo, hi = block * BLOCK_NODES, min((block + 1) * BLOCK_NODES, fleet.n)
    nb, n_t, step = hi - lo, inp.n_samples, inp.step_s
    rng = stream(inp.seed, "telemetry", block)
    skus = [SKUS[s] for s in fleet.sku[lo:hi]]
    is_gpu = np.array([s.gpus > 0 for s in skus])
    t = np.arange(n_t, dtype=np.float64) * step

    series = inp.node_series[lo:hi]
    load = inp.load[series].astype(np.float32)
    util = load + p.util_bias[lo:hi, None].astype(np.float32)
    util += ar1(rng, (nb, n_t), step_s=step, tau_s=1800.0, sd=0.08)
    drained = _window_mask(inp.drained, lo, hi, step, n_t)
    util = np.where(drained, 0.02, np.clip(util, 0.0, 1.0)).astype(np.float32)

    cpu = np.where(is_gpu[:, None], 0.04 + 0.25 * util, util)
    cpu = np.clip(cpu + ar1(rng, (nb, n_t), step_s=step, tau_s=600.0, sd=0.03), 0, 1) * 100
    mem_frac = np.clip(
        0.12 + 0.6 * util + ar1(rng, (nb, n_t), step_s=step, tau_s=3600.0, sd=0.03), 0.02, 0.98
    )
    mem_bytes = np.array([s.memory_mib for s in skus], dtype=np.float64)[:, None] * 2**20
    mem = (np.round(mem_frac * mem_bytes / 2**20) * 2**20).astype(np.int64)

    local_h = ((inp.start.timestamp() + t) / 3600.0 + cal.LOCAL_UTC_OFFSET_H) % 24.0
    ambient = 1.5 * np.cos(2 * np.pi * (local_h - 15.0) / 24.0).astype(np.float32)
    base_t = np.array([30.0 + s.gpu_temp_offset_c for s in skus], dtype=np.float32)
    temp = (
        base_t[:, None]
        + 42.0 * util
        + p.temp_offset[lo:hi, None].astype(np.float32)
        + ambient[None, :]
        + ar1(rng, (nb, n_t), step_s=step, tau_s=1200.0, sd=1.0)
    )
    idle = np.array([s.gpus * s.gpu_idle_w for s in skus], dtype=np.float32)[:, None]
    tdp = np.array([s.gpus * s.gpu_tdp_w for s in skus], dtype=np.float32)[:, None]
    power = (idle + (tdp - idle) * util) * (
        1.0 + 0.03 * rng.standard_normal((nb, n_t), dtype=np.float32)
    )
    keep = ~_scrape_misses((nb, n_t), rng)
    _apply_episodes(inp, lo, hi, temp, power, keep, rng)
    temp = np.clip(temp, 15.0, 120.0)
    power = np.clip(power, 0.0, None)
    counters = _counters(inp, lo, hi, rng)
    down = _window_mask(inp.down, lo, hi, step, n_t)
    ready = ~down & ~_window_mask(inp.flaps, lo, hi, step, n_t)

    keep_flat = keep.ravel()
    node_local = np.repeat(np.arange(nb), n_t)[keep_flat]
    t0_us = round(inp.start.timestamp() * 1e6)
    ts_us = t0_us + np.tile((t * 1e6).astype(np.int64), nb)[keep_flat]
    up = ~down.ravel()[keep_flat]
    gpu_up = up & is_gpu[node_local]
    cols: dict[str, pl.Series] = {
        "ts": pl.Series("ts", ts_us).cast(pl.Datetime("us", "UTC")),
        "node_id": pl.Series("node_id", fleet.node_id[lo:hi]).gather(node_local),
        # Rounded as exporters report them: DCGM gives whole % and degrees.
        "cpu_util_pct": _masked(np.round(cpu, 1), keep_flat, up, pl.Float32),
        "mem_used_bytes": _masked(mem, keep_flat, up, pl.Int64),
        "gpu_util_pct": _masked(np.round(util * 100.0), keep_flat, gpu_up, pl.Float32),
        "gpu_temp_c": _masked(np.round(temp), keep_flat, gpu_up, pl.Float32),
        "gpu_power_w": _masked(np.round(power, 1), keep_flat, gpu_up, pl.Float32),
    }
    for c, sig in enumerate(COUNTER_SIGNALS):
        valid = gpu_up if sig in GPU_COUNTERS else up
        cols[COUNTER_COLUMN[sig]] = _masked(counters[c], keep_flat, valid, pl.Int64)
    cols["node_ready"] = pl.Series("node_ready", ready.ravel()[keep_flat])
    return pl.DataFrame([s.alias(name) for name, s in cols.items()]).select(TELEMETRY.names)


def _masked(
    values: np.ndarray, keep: np.ndarray, valid: np.ndarray, dtype: type[pl.DataType]
) -> pl.Series:
    """Flatten, drop removed rows, null where not ``valid``, cast to ``dtype``."""
    flat = values.ravel()[keep]
    if dtype is pl.Float32:
        out = np.where(valid, flat.astype(np.float32), np.float32(np.nan))
        return pl.Series(out).fill_nan(None)
    s = pl.Series(flat.astype(np.int64))
    return pl.select(pl.when(pl.lit(pl.Series(valid))).then(s)).to_series()


def n_blocks(n_nodes: int) -> int:
    return (n_nodes + BLOCK_NODES - 1) // BLOCK_NODES
