"""Signals in the telemetry: failure precursors, benign look-alikes, terminal errors.

An *episode* is a stretch of time in which one node shows one signal: a counter that
starts ticking faster (SBE ECC, PCIe replays, NIC flaps, reallocated sectors, machine
checks), a GPU temperature drift, power dips, or missed scrapes.

- **precursor**: ends at a failure, starts ``lead`` earlier (hours to days), with a
  random strength; most failures have one, not all (``calibration.PRECURSOR``).
- **benign**: the same signals with the same shapes on nodes that do not fail
  (Backblaze: ~2 healthy drives warn per failed drive that warned).
- **averted**: a precursor interrupted by a maintenance window that fixed the part.
- **terminal**: the reactive error right before a node goes down (DBE, XID 79, ...).
- **hot_aisle**: rack-wide temperature humps on GPU racks.

Counter episodes become sparse :class:`Increments` (node, counter, time, count) that
the telemetry bins onto its grid; gauge and gap episodes stay as windows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from predops.pipelines.synthetic import calibration as cal
from predops.pipelines.synthetic.failures import (
    DAY,
    MODE_INDEX,
    MODES,
    NONGPU_MODE_SHARE,
    Failures,
    NodeRisk,
    Windows,
    time_key,
)
from predops.pipelines.synthetic.topology import Fleet

SIGNALS: tuple[str, ...] = (
    "sbe",
    "dbe",
    "xid",
    "pcie",
    "nic",
    "realloc",
    "mce",
    "temp",
    "power",
    "gap",
    "flap",
)
SIGNAL_INDEX = {s: i for i, s in enumerate(SIGNALS)}
COUNTER_SIGNALS: tuple[str, ...] = SIGNALS[:7]
COUNTER_COLUMN: dict[str, str] = {
    "sbe": "ecc_sbe_total",
    "dbe": "ecc_dbe_total",
    "xid": "xid_errors_total",
    "pcie": "pcie_replay_total",
    "nic": "nic_flaps_total",
    "realloc": "disk_realloc_total",
    "mce": "mce_total",
}
GPU_ONLY_SIGNALS = frozenset({"sbe", "dbe", "xid", "pcie", "temp", "power"})
KINDS: tuple[str, ...] = ("precursor", "benign", "averted", "terminal", "hot_aisle")
KIND_INDEX = {k: i for i, k in enumerate(KINDS)}


@dataclass(frozen=True, slots=True)
class Episodes:
    """One row per episode. ``amplitude``: expected counter increments, degrees C of
    drift, or peak probability (power dip, missed scrape). ``failure`` indexes the
    failure a precursor/terminal belongs to (-1 otherwise)."""

    node: np.ndarray
    signal: np.ndarray
    start: np.ndarray
    end: np.ndarray
    amplitude: np.ndarray
    kind: np.ndarray
    failure: np.ndarray

    def __len__(self) -> int:
        return int(self.node.size)

    @staticmethod
    def concat(parts: list[Episodes]) -> Episodes:
        cols = {
            name: np.concatenate([getattr(p, name) for p in parts]) for name in Episodes.__slots__
        }
        order = np.lexsort((cols["start"], cols["node"]))
        return Episodes(**{k: v[order] for k, v in cols.items()})


@dataclass(frozen=True, slots=True)
class Increments:
    """Sparse counter increments: ``count`` more on ``counter`` of ``node`` at ``at``."""

    node: np.ndarray
    counter: np.ndarray
    at: np.ndarray
    count: np.ndarray


def _episodes(
    node: np.ndarray,
    signal: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    amplitude: np.ndarray,
    kind: str,
    failure: np.ndarray | None = None,
) -> Episodes:
    n = node.size
    return Episodes(
        node.astype(np.int32),
        signal.astype(np.int8),
        start.astype(np.float64),
        end.astype(np.float64),
        amplitude.astype(np.float64),
        np.full(n, KIND_INDEX[kind], np.int8),
        np.full(n, -1, np.int32) if failure is None else failure.astype(np.int32),
    )


def _signal_of(modes: np.ndarray, is_gpu: np.ndarray) -> np.ndarray:
    """The precursor signal index for each (mode index, node is GPU)."""
    out = np.full(modes.size, -1, dtype=np.int8)
    for mode, (gpu_sig, cpu_sig) in cal.PRECURSOR_SIGNAL.items():
        m = modes == MODE_INDEX[mode]
        out[m & is_gpu] = SIGNAL_INDEX[gpu_sig]
        out[m & ~is_gpu] = SIGNAL_INDEX[cpu_sig]
    return out


def _mode_table(column: int) -> np.ndarray:
    """A PRECURSOR column as an array indexed by mode."""
    return np.array([cal.PRECURSOR[m][column] for m in MODES], dtype=np.float64)


def _draw_shape(
    modes: np.ndarray, signal: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """(lead seconds, amplitude) for episodes of the given modes and signals."""
    lead_h = _mode_table(1)[modes] * np.exp(_mode_table(2)[modes] * rng.standard_normal(modes.size))
    lead = np.clip(lead_h, cal.PRECURSOR_LEAD_MIN_H, cal.PRECURSOR_LEAD_MAX_H) * 3600.0
    strength = _mode_table(3)[modes]
    amp = strength * np.exp(cal.PRECURSOR_STRENGTH_LOG_SD * rng.standard_normal(modes.size))
    temp = signal == SIGNAL_INDEX["temp"]
    amp[temp] = strength[temp] * np.exp(
        cal.TEMP_STRENGTH_LOG_SD * rng.standard_normal(int(temp.sum()))
    )
    prob = np.isin(signal, [SIGNAL_INDEX["power"], SIGNAL_INDEX["gap"]])
    amp[prob] = rng.uniform(0.3, 0.8, size=int(prob.sum()))
    return lead, amp


def _companions(base: Episodes, modes: np.ndarray, rng: np.random.Generator) -> Episodes:
    """Companion signals late in an episode (PRECURSOR_COMPANION): missed scrapes, an
    early DBE, sporadic XIDs, kubelet flaps."""
    parts = []
    for mode, companions in cal.PRECURSOR_COMPANION.items():
        of_mode = modes == MODE_INDEX[mode]
        for sig, share, mean in companions:
            pick = of_mode & (rng.random(len(base)) < share) & (base.signal != SIGNAL_INDEX[sig])
            k = int(pick.sum())
            span = (base.end - base.start)[pick] * rng.uniform(0.1, 0.6, size=k)
            amp = rng.uniform(0.2, 0.6, size=k) if mean == 0.0 else np.full(k, mean)
            parts.append(
                Episodes(
                    base.node[pick],
                    np.full(k, SIGNAL_INDEX[sig], np.int8),
                    base.end[pick] - span,
                    base.end[pick],
                    amp,
                    base.kind[pick],
                    base.failure[pick],
                )
            )
    return Episodes.concat(parts)


def precursors(fleet: Fleet, f: Failures, rng: np.random.Generator) -> tuple[Episodes, np.ndarray]:
    """Precursor episodes of failures; returns them and a per-failure 'has one' mask."""
    modes = f.mode.astype(np.int64)
    has = rng.random(len(f)) < _mode_table(0)[modes]
    is_gpu = fleet.is_gpu[f.node]
    signal = _signal_of(f.mode, is_gpu)
    has &= signal >= 0
    idx = np.flatnonzero(has)
    lead, amp = _draw_shape(modes[idx], signal[idx], rng)
    main = _episodes(f.node[idx], signal[idx], f.at[idx] - lead, f.at[idx], amp, "precursor", idx)
    return Episodes.concat([main, _companions(main, modes[idx], rng)]), has


def avert_by_maintenance(
    f: Failures, ep: Episodes, maint: Windows, rng: np.random.Generator
) -> tuple[np.ndarray, Episodes]:
    """Maintenance that starts during a precursor fixes the part with some probability.

    Returns the mask of failures to keep and the episodes with averted precursors cut
    at the window start and marked ``averted``.
    """
    keep = np.ones(len(f), dtype=bool)
    if len(maint) == 0 or len(ep) == 0:
        return keep, ep
    pre = ep.kind == KIND_INDEX["precursor"]
    key_w = time_key(maint.node, maint.start)
    i = np.searchsorted(key_w, time_key(ep.node, ep.start), side="left")
    j = np.minimum(i, len(maint) - 1)
    inside = (i < len(maint)) & (maint.node[j] == ep.node) & (maint.start[j] < ep.end) & pre
    failures_hit = np.unique(ep.failure[inside])
    averted = failures_hit[rng.random(failures_hit.size) < cal.MAINTENANCE_AVERTS_SHARE]
    keep[averted] = False
    cut = np.isin(ep.failure, averted) & pre
    end = np.where(cut, np.minimum(ep.end, maint.start[j]), ep.end)
    kind = np.where(cut, KIND_INDEX["averted"], ep.kind).astype(np.int8)
    out = Episodes(ep.node, ep.signal, ep.start, end, ep.amplitude, kind, ep.failure)
    return keep, out


def terminal(f: Failures, rng: np.random.Generator) -> Episodes:
    """The reactive error minutes before the node goes down (one-sample episodes)."""
    parts = []
    for mode, (sig, mean) in cal.TERMINAL_SIGNAL.items():
        idx = np.flatnonzero(
            (f.mode == MODE_INDEX[mode]) & (rng.random(len(f)) < cal.TERMINAL_SHARE)
        )
        at = f.at[idx] - rng.uniform(0.0, cal.TERMINAL_LEAD_MAX_MIN * 60.0, size=idx.size)
        amp = np.full(idx.size, mean)
        parts.append(
            _episodes(
                f.node[idx],
                np.full(idx.size, SIGNAL_INDEX[sig]),
                at,
                at + 1.0,
                amp,
                "terminal",
                idx,
            )
        )
    return Episodes.concat(parts)


def benign(
    fleet: Fleet, risk: NodeRisk, horizon: float, scale_days: float, rng: np.random.Generator
) -> Episodes:
    """Look-alike episodes on any node, BENIGN_PER_PRECURSOR per expected precursor.

    The expected precursor count uses the node's class and lot rate, not its frailty:
    benign signals do not mark the nodes that will fail.
    """
    share = _mode_table(0)
    modes = [MODE_INDEX[m] for m in NONGPU_MODE_SHARE]
    nongpu_pre = sum(NONGPU_MODE_SHARE[MODES[m]] * share[m] for m in modes)
    gpu_pre = (
        cal.TITAN_DBE_SHARE * share[MODE_INDEX["gpu_ecc"]]
        + (1 - cal.TITAN_DBE_SHARE) * share[MODE_INDEX["gpu_xid"]]
    )
    class_rate = risk.rate / risk.frailty  # per second, at mean frailty
    pre_rate = class_rate * ((1 - risk.gpu_share) * nongpu_pre + risk.gpu_share * gpu_pre)
    sd = cal.BENIGN_PROPENSITY_LOG_SD
    propensity = np.exp(rng.normal(-0.5 * sd * sd, sd, size=fleet.n))
    span = horizon + scale_days * DAY  # episodes may have started before the run
    counts = rng.poisson(cal.BENIGN_PER_PRECURSOR * pre_rate * propensity * span)
    node = np.repeat(np.arange(fleet.n), counts)
    # The mode whose look-alike this is, drawn like a precursor's mode.
    gpu_pick = rng.random(node.size) < risk.gpu_share[node] * gpu_pre / np.maximum(
        (1 - risk.gpu_share[node]) * nongpu_pre + risk.gpu_share[node] * gpu_pre, 1e-12
    )
    p = np.array([NONGPU_MODE_SHARE[MODES[m]] * share[m] for m in modes])
    other = np.array(modes)[rng.choice(len(modes), size=node.size, p=p / p.sum())]
    gpu_mode = np.where(
        rng.random(node.size) < cal.TITAN_DBE_SHARE, MODE_INDEX["gpu_ecc"], MODE_INDEX["gpu_xid"]
    )
    mode = np.where(gpu_pick, gpu_mode, other)
    signal = _signal_of(mode.astype(np.int8), fleet.is_gpu[node])
    lead, amp = _draw_shape(mode, signal, rng)
    counter_or_temp = signal < SIGNAL_INDEX["power"]
    amp = np.where(counter_or_temp, amp * cal.BENIGN_STRENGTH_FACTOR, amp)
    start = rng.uniform(-scale_days * DAY, horizon, size=node.size)
    lead = lead * cal.BENIGN_DURATION_FACTOR
    main = _episodes(node, signal, start, start + lead, amp, "benign")
    return Episodes.concat([main, _companions(main, mode, rng)])


def hot_aisles(fleet: Fleet, horizon: float, rng: np.random.Generator) -> Episodes:
    """Rack-wide GPU temperature humps (a cooling problem that passes)."""
    gpu_racks = np.unique(fleet.rack[fleet.is_gpu])
    counts = rng.poisson(cal.HOT_AISLE_PER_RACK_DAY * horizon / DAY, size=gpu_racks.size)
    racks = np.repeat(gpu_racks, counts)
    start = rng.uniform(0.0, horizon, size=racks.size)
    dur = cal.HOT_AISLE_MEDIAN_H * 3600.0 * np.exp(0.5 * rng.standard_normal(racks.size))
    lo, hi = cal.HOT_AISLE_AMPLITUDE_C
    amp = rng.uniform(lo, hi, size=racks.size)
    parts = []
    for r, s, d, a in zip(racks, start, dur, amp, strict=True):
        members = np.flatnonzero(fleet.rack == r)
        k = members.size
        parts.append(
            _episodes(
                members,
                np.full(k, SIGNAL_INDEX["temp"]),
                np.full(k, s),
                np.full(k, s + d),
                a * rng.uniform(0.7, 1.0, size=k),
                "hot_aisle",
            )
        )
    if not parts:
        z = np.zeros(0)
        return _episodes(z.astype(np.int32), z, z, z, z, "hot_aisle")
    return Episodes.concat(parts)


def counter_increments(ep: Episodes, rng: np.random.Generator) -> Increments:
    """Expand counter episodes into increments.

    A precursor escalates: its rate grows linearly towards the failure. A benign
    look-alike is a burst that fades: its rate falls linearly over its window. Early
    in a window the two look the same; the difference shows as the failure nears.
    Terminals are one burst of ``count``.
    """
    counter_sig = ep.signal < len(COUNTER_SIGNALS)
    idx = np.flatnonzero(counter_sig)
    is_terminal = ep.kind[idx] == KIND_INDEX["terminal"]
    counts = rng.poisson(ep.amplitude[idx])
    counts[is_terminal] = np.maximum(counts[is_terminal], 1)
    # Terminal errors are one event of `count`; other episodes are `count` events of 1.
    n_events = np.where(is_terminal, 1, counts)
    rep = np.repeat(idx, n_events)
    u = np.sqrt(rng.random(rep.size))
    fading = np.repeat(ep.kind[idx] == KIND_INDEX["benign"], n_events)
    u = np.where(fading, 1.0 - u, u)
    at = ep.start[rep] + (ep.end[rep] - ep.start[rep]) * u
    size = np.where(np.repeat(is_terminal, n_events), np.repeat(counts, n_events), 1)
    return Increments(ep.node[rep], ep.signal[rep], at, size.astype(np.int64))


def flap_windows(ep: Episodes, rng: np.random.Generator) -> Windows:
    """Kubelet NotReady flaps of ``flap`` episodes: 1 + Poisson(amplitude - 1) short
    windows each, later in the episode more likely."""
    idx = np.flatnonzero(ep.signal == SIGNAL_INDEX["flap"])
    counts = 1 + rng.poisson(np.maximum(ep.amplitude[idx] - 1.0, 0.0))
    rep = np.repeat(idx, counts)
    start = np.round(ep.start[rep] + (ep.end[rep] - ep.start[rep]) * np.sqrt(rng.random(rep.size)))
    dur = cal.FLAP_MEDIAN_MIN * 60.0 * np.exp(0.6 * rng.standard_normal(rep.size))
    return Windows(ep.node[rep].astype(np.int32), start, start + np.round(dur))
