"""When nodes fail, why, how long repairs take, and when racks are under maintenance.

Each node runs a renewal process whose up-times are Weibull (the LANL / Grid'5000
shape: failures cluster, a node that just failed fails again soon) with a rate set by
its class (LANL node rate, plus Titan's per-GPU rate on GPU nodes), a gamma frailty
(LANL's per-node dispersion) and, for GPU modes, a lognormal install-lot frailty
(Titan's batch effect). Each failure gets a mode (cause) and a lognormal repair time.
Racks lose power now and then (cause ``facilities``: every node of the rack fails).
Maintenance windows are rack-wide; no failure starts inside one, and a node already
down skips its rack's window.

Times are float seconds from the simulation start; ``horizon`` is the end.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import gamma as gamma_fn

from predops.pipelines.synthetic import calibration as cal
from predops.pipelines.synthetic.topology import Fleet

DAY = 86400.0
YEAR = 365.25 * DAY

MODES: tuple[str, ...] = (
    "gpu_ecc",
    "gpu_xid",
    "thermal",
    "psu",
    "disk",
    "nic",
    "kernel",
    "memory",
    "cpu",
    "unknown",
    "facilities",
    "human",
)
MODE_INDEX = {m: i for i, m in enumerate(MODES)}
GPU_MODES = ("gpu_ecc", "gpu_xid")
# Reboot-class modes are fixed by a reset/reboot; the rest need a part.
REBOOT_MODES = frozenset({"gpu_xid", "kernel", "unknown", "human"})

# What the failure event's ``detail`` says (what an operator would read).
MODE_DETAIL: dict[str, str] = {
    "gpu_ecc": "XID 48: double-bit ECC error, GPU needs replacement",
    "gpu_xid": "XID 79: GPU has fallen off the bus",
    "thermal": "thermal shutdown: temperature above slowdown threshold",
    "psu": "power supply failure, node powered off",
    "disk": "local NVMe I/O errors, filesystem remounted read-only",
    "nic": "RDMA NIC link down, node unreachable on the fabric",
    "kernel": "kernel panic",
    "memory": "uncorrectable memory error (DIMM)",
    "cpu": "uncorrectable CPU machine check",
    "unknown": "node unresponsive, cause undetermined",
    "facilities": "rack PDU power loss",
    "human": "operator error (wrong node reimaged)",
}


def _nongpu_mode_share() -> dict[str, float]:
    """Mode mix of non-GPU, non-facilities failures: LANL groups, hardware re-weighted."""
    hw = {m: s * cal.MODE_REWEIGHT.get(m, 1.0) for m, s in cal.LANL_HARDWARE_MODE_SHARE.items()}
    hw_total = sum(hw.values())
    g = cal.LANL_GROUP_SHARE
    share = {m: g["hardware"] * s / hw_total for m, s in hw.items()}
    share["kernel"] = share.get("kernel", 0.0) + g["software"]
    share["unknown"] = share.get("unknown", 0.0) + g["undetermined"]
    share["nic"] = share.get("nic", 0.0) + g["network"]
    share["human"] = g["human"]
    total = sum(share.values())
    return {m: v / total for m, v in share.items()}


NONGPU_MODE_SHARE = _nongpu_mode_share()
FACILITIES_SHARE = cal.LANL_GROUP_SHARE["facilities"]


@dataclass(frozen=True, slots=True)
class Failures:
    """One entry per failure, sorted by (node, at). ``repair_at`` may lie past the horizon."""

    node: np.ndarray
    at: np.ndarray
    repair_at: np.ndarray
    mode: np.ndarray

    def __len__(self) -> int:
        return int(self.node.size)

    def select(self, keep: np.ndarray) -> Failures:
        return Failures(self.node[keep], self.at[keep], self.repair_at[keep], self.mode[keep])


@dataclass(frozen=True, slots=True)
class Windows:
    """Per-node time windows ``[start, end)`` (maintenance, flaps), sorted by (node, start)."""

    node: np.ndarray
    start: np.ndarray
    end: np.ndarray

    def __len__(self) -> int:
        return int(self.node.size)

    def select(self, keep: np.ndarray) -> Windows:
        return Windows(self.node[keep], self.start[keep], self.end[keep])


@dataclass(frozen=True, slots=True)
class NodeRisk:
    """Latent per-node risk: frailty (mean 1) and GPU-mode rate share; rates per second."""

    frailty: np.ndarray
    lot_frailty: np.ndarray
    rate: np.ndarray
    gpu_share: np.ndarray


def node_risk(fleet: Fleet, rng: np.random.Generator, scale: float) -> NodeRisk:
    """Per-node failure rate (per second, facilities excluded) and its GPU share."""
    k = cal.NODE_FRAILTY_GAMMA_SHAPE
    frailty = rng.gamma(k, 1.0 / k, size=fleet.n)
    n_lots = int(fleet.lot.max()) + 1
    sd = cal.LOT_FRAILTY_LOG_SD
    lot = np.exp(rng.normal(-0.5 * sd * sd, sd, size=n_lots))[fleet.lot]
    base = cal.LANL_FAILURES_PER_NODE_YEAR * (1.0 - FACILITIES_SHARE)
    gpu = fleet.attr("gpus") * cal.TITAN_GPU_EVENTS_PER_GPU_YEAR * lot
    rate = scale * (base + gpu) * frailty / YEAR
    return NodeRisk(frailty=frailty, lot_frailty=lot, rate=rate, gpu_share=gpu / (base + gpu))


def repair_seconds(modes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Lognormal repair durations (seconds) by repair class of each mode index."""
    median = np.full(modes.size, cal.REPAIR_PART_MEDIAN_MIN)
    sd = np.full(modes.size, cal.REPAIR_PART_LOG_SD)
    reboot = np.isin(modes, [MODE_INDEX[m] for m in REBOOT_MODES])
    median[reboot], sd[reboot] = cal.REPAIR_REBOOT_MEDIAN_MIN, cal.REPAIR_REBOOT_LOG_SD
    fac = modes == MODE_INDEX["facilities"]
    median[fac], sd[fac] = cal.REPAIR_FACILITIES_MEDIAN_MIN, cal.REPAIR_FACILITIES_LOG_SD
    minutes = median * np.exp(sd * rng.standard_normal(modes.size))
    return np.clip(minutes * 60.0, 300.0, cal.REPAIR_MAX_DAYS * DAY)


def _draw_modes(
    fleet: Fleet, risk: NodeRisk, nodes: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """A failure mode per failing node: a GPU mode with the node's GPU share, else LANL's."""
    names = list(NONGPU_MODE_SHARE)
    p = np.array([NONGPU_MODE_SHARE[m] for m in names])
    other = np.array([MODE_INDEX[m] for m in names])[rng.choice(len(names), size=nodes.size, p=p)]
    gpu_mode = np.where(
        rng.random(nodes.size) < cal.TITAN_DBE_SHARE, MODE_INDEX["gpu_ecc"], MODE_INDEX["gpu_xid"]
    )
    is_gpu_failure = rng.random(nodes.size) < risk.gpu_share[nodes]
    return np.where(is_gpu_failure, gpu_mode, other).astype(np.int8)


def renewal_failures(
    fleet: Fleet,
    risk: NodeRisk,
    horizon: float,
    rng: np.random.Generator,
    *,
    warmup_days: float = 365.0,
) -> Failures:
    """Weibull renewal failures of every node in ``[0, horizon)``.

    The process starts ``warmup_days`` before the simulation so that nodes enter it at
    a random point of their failure cycle (no start-up burst). Up-time is Weibull with
    mean 1 / rate; down-time is the repair time of the drawn mode.
    """
    k = cal.INTERARRIVAL_WEIBULL_SHAPE
    scale = 1.0 / (risk.rate * gamma_fn(1.0 + 1.0 / k))
    t = np.full(fleet.n, -warmup_days * DAY)
    active = np.arange(fleet.n)
    nodes, times, repairs, modes = [], [], [], []
    while active.size:
        t_fail = t[active] + scale[active] * rng.weibull(k, size=active.size)
        mode = _draw_modes(fleet, risk, active, rng)
        t_rep = t_fail + repair_seconds(mode, rng)
        hit = (t_fail >= 0) & (t_fail < horizon)
        nodes.append(active[hit])
        times.append(t_fail[hit])
        repairs.append(t_rep[hit])
        modes.append(mode[hit])
        # A failure before the start whose repair runs past it is forgotten: the node
        # starts up (the events log would not have it either).
        t[active] = np.where(t_fail < 0, np.minimum(t_rep, 0.0), t_rep)
        active = active[t[active] < horizon]
    return _sorted_failures(
        np.concatenate(nodes), np.concatenate(times), np.concatenate(repairs), np.concatenate(modes)
    )


def _sorted_failures(
    node: np.ndarray, at: np.ndarray, repair_at: np.ndarray, mode: np.ndarray
) -> Failures:
    order = np.lexsort((at, node))
    return Failures(
        node[order].astype(np.int32), at[order], repair_at[order], mode[order].astype(np.int8)
    )


def facilities_failures(
    fleet: Fleet, horizon: float, rng: np.random.Generator, scale: float
) -> Failures:
    """Rack power losses: every node of the rack fails within seconds, same repair."""
    rate = scale * cal.LANL_FAILURES_PER_NODE_YEAR * FACILITIES_SHARE / YEAR
    counts = rng.poisson(rate * horizon, size=fleet.n_racks)
    racks = np.repeat(np.arange(fleet.n_racks), counts)
    at = rng.uniform(0.0, horizon, size=racks.size)
    repair = repair_seconds(np.full(racks.size, MODE_INDEX["facilities"]), rng)
    nodes_of_rack = [np.flatnonzero(fleet.rack == r) for r in range(fleet.n_racks)]
    node_l, at_l, rep_l = [], [], []
    for r, t0, rep in zip(racks, at, repair, strict=True):
        members = nodes_of_rack[r]
        jitter = rng.uniform(0.0, 20.0, size=members.size)
        node_l.append(members)
        at_l.append(t0 + jitter)
        rep_l.append(t0 + jitter + rep + rng.uniform(0.0, 600.0, size=members.size))
    if not node_l:
        return _sorted_failures(
            np.zeros(0, np.int32), np.zeros(0), np.zeros(0), np.zeros(0, np.int8)
        )
    node = np.concatenate(node_l)
    return _sorted_failures(
        node,
        np.concatenate(at_l),
        np.concatenate(rep_l),
        np.full(node.size, MODE_INDEX["facilities"], np.int8),
    )


def maintenance_windows(fleet: Fleet, horizon: float, rng: np.random.Generator) -> Windows:
    """Rack-wide rolling maintenance windows, starting at a local night hour."""
    per_rack = rng.poisson(horizon / (cal.MAINTENANCE_EVERY_DAYS * DAY), size=fleet.n_racks)
    racks = np.repeat(np.arange(fleet.n_racks), per_rack)
    day = np.floor(rng.uniform(0.0, horizon / DAY, size=racks.size))
    lo, hi = cal.MAINTENANCE_LOCAL_START_H
    local_h = rng.uniform(lo, hi, size=racks.size)
    start = (day * 24.0 + local_h - cal.LOCAL_UTC_OFFSET_H) * 3600.0
    start = np.round(start / 60.0) * 60.0
    dur = cal.MAINTENANCE_MEDIAN_H * np.exp(
        cal.MAINTENANCE_LOG_SD * rng.standard_normal(racks.size)
    )
    end = start + np.clip(dur, 1.0, 6.0) * 3600.0
    # Cordon/drain happen 30/20 minutes before: keep the whole sequence in the run.
    ok = (start - 1800.0 >= 0.0) & (end + 600.0 <= horizon)
    racks, start, end = racks[ok], start[ok], end[ok]
    node_l, start_l, end_l = [], [], []
    for r, s, e in zip(racks, start, end, strict=True):
        members = np.flatnonzero(fleet.rack == r)
        node_l.append(members)
        start_l.append(np.full(members.size, s))
        end_l.append(np.full(members.size, e))
    if not node_l:
        return Windows(np.zeros(0, np.int32), np.zeros(0), np.zeros(0))
    node = np.concatenate(node_l).astype(np.int32)
    s_all, e_all = np.concatenate(start_l), np.concatenate(end_l)
    order = np.lexsort((s_all, node))
    w = Windows(node[order], s_all[order], e_all[order])
    # Two windows of one rack may overlap: keep the first.
    prev_end = np.concatenate([[-np.inf], w.end[:-1]])
    same = np.concatenate([[False], w.node[1:] == w.node[:-1]])
    return w.select(~(same & (w.start < prev_end + 600.0)))


def flaps(fleet: Fleet, horizon: float, rng: np.random.Generator) -> Windows:
    """Kubelet heartbeat flaps: NotReady for a few minutes, nothing fails."""
    counts = rng.poisson(cal.FLAPS_PER_NODE_DAY * horizon / DAY, size=fleet.n)
    node = np.repeat(np.arange(fleet.n, dtype=np.int32), counts)
    start = np.round(rng.uniform(0.0, horizon, size=node.size))
    dur = cal.FLAP_MEDIAN_MIN * 60.0 * np.exp(0.6 * rng.standard_normal(node.size))
    end = np.minimum(start + np.round(dur), horizon - 1.0)
    order = np.lexsort((start, node))
    return Windows(node[order], start[order], end[order])


def time_key(node: np.ndarray, t: np.ndarray) -> np.ndarray:
    """One sortable float per (node, time): node-major, exact to ~0.1 ms for times
    within +-5e8 s (16 years) of the start."""
    key: np.ndarray = node.astype(np.float64) * 1e9 + t
    return key


def overlaps(
    node_a: np.ndarray, t_a: np.ndarray, w: Windows, *, before: float = 0.0, after: float = 0.0
) -> np.ndarray:
    """For each (node_a, t_a): does it fall in a window of ``w`` on the same node,
    widened by ``before`` / ``after`` seconds? Vectorised over sorted windows."""
    if len(w) == 0 or node_a.size == 0:
        return np.zeros(node_a.size, dtype=bool)
    # Windows of one node do not overlap: the last window starting at or before t is
    # the only candidate.
    key_w = time_key(w.node, w.start - before)
    key_a = time_key(node_a, t_a)
    i = np.searchsorted(key_w, key_a, side="right") - 1
    ok = i >= 0
    j = np.where(ok, i, 0)
    hit: np.ndarray = ok & (w.node[j] == node_a) & (t_a < w.end[j] + after)
    return hit


def drop_failures_in_windows(f: Failures, w: Windows) -> Failures:
    """No failure starts inside a maintenance window (or its cordon lead-in)."""
    return f.select(~overlaps(f.node, f.at, w, before=1800.0, after=600.0))


def drop_windows_of_down_nodes(w: Windows, f: Failures) -> Windows:
    """A node down (failed, not yet repaired) during its rack's window skips the window.

    ``f`` must be merged (down intervals of one node disjoint), so the last failure
    starting before a window ends is the only one that can overlap it.
    """
    if len(f) == 0 or len(w) == 0:
        return w
    key_f = time_key(f.node, f.at)
    key_w = time_key(w.node, w.end + 600.0)
    i = np.searchsorted(key_f, key_w, side="left") - 1
    ok = i >= 0
    j = np.where(ok, i, 0)
    clash = ok & (f.node[j] == w.node) & (f.repair_at[j] > w.start - 1800.0)
    return w.select(~clash)


def merge_failures(a: Failures, b: Failures) -> Failures:
    """Union of two failure sets; a failure starting while the node is down is dropped."""
    f = _sorted_failures(
        np.concatenate([a.node, b.node]),
        np.concatenate([a.at, b.at]),
        np.concatenate([a.repair_at, b.repair_at]),
        np.concatenate([a.mode, b.mode]),
    )
    keep = np.ones(len(f), dtype=bool)
    last_node, last_repair = -1, -np.inf
    # Python loop over failures (a few per node), never over samples.
    for i in range(len(f)):
        n = int(f.node[i])
        if n == last_node and f.at[i] < last_repair:
            keep[i] = False
            continue
        last_node, last_repair = n, float(f.repair_at[i])
    return f.select(keep)


def union_windows(parts: list[Windows], horizon: float, avoid: Windows) -> Windows:
    """Merge window sets: clip to ``[0, horizon)``, drop windows that start inside one of
    ``avoid`` (the node is down then), join overlapping windows of a node."""
    node = np.concatenate([w.node for w in parts]).astype(np.int32)
    start = np.clip(np.concatenate([w.start for w in parts]), 0.0, horizon - 1.0)
    end = np.clip(np.concatenate([w.end for w in parts]), 0.0, horizon - 1.0)
    order = np.lexsort((start, node))
    w = Windows(node[order], start[order], end[order])
    w = w.select((w.end > w.start) & ~overlaps(w.node, w.start, avoid))
    keep = np.ones(len(w), dtype=bool)
    ends = w.end.copy()
    last = -1
    # Python loop over flap windows (a few per node), never over samples.
    for i in range(len(w)):
        if last >= 0 and w.node[i] == w.node[last] and w.start[i] <= ends[last]:
            ends[last] = max(ends[last], w.end[i])
            keep[i] = False
        else:
            last = i
    return Windows(w.node[keep], w.start[keep], ends[keep])
