"""The closed loop: one policy driven hour by hour over one :class:`World`.
Over 500 lines: one class, the hourly tick, whose steps read and write the same live
state (cluster, tally, pending failures, drains) in the fixed order below; split, that
state would be passed between modules.

Each tick ``T`` (one hour):

1. node lifecycle: repairs and inspections that ended come back (a repair the
   platform started uncordons itself; a node *we* cordoned waits for the engine's
   uncordon), rack maintenance starts (pods evicted, planned) and ends;
2. pods whose time is up leave, new pods arrive, the queue is placed by the allocator;
3. the policy acts:

   - ``reactive``: no drains; every ``reactive_sizing_every`` ticks each pool is
     sized from current usage (:func:`~pipelines.whatif.scaler.reactive_target`);
   - ``predictive`` / ``oracle``: :func:`policy.engine.plan` with the failure risk
     (model / truth), the live snapshot, the fleet state and, every ``sizing_every``
     ticks, the demand forecasts (model / truth). Drains and uncordons are
     re-validated by :func:`policy.revalidate.revalidate` just before they run (a drain
     timed to a checkpoint runs at its ``not_before``), resizes apply at once
     (:class:`~pipelines.whatif.scaler.PoolScaler`: which nodes are parked or back) —
     or, with ``pool_actuation`` ``placeholders``, set the pools' placeholder pods and a
     node autoscaler sizes the pools after the hour's placements
     (:class:`~pipelines.whatif.autoscaler.NodeAutoscaler`; ``autoscaler``: the
     autoscaler alone, the engine's resizes unused; ``static``: no resizing at all);

4. the figures of the hour are counted (:class:`~pipelines.whatif.tally.Tally`);
5. hardware failures of ``(T, T + 1 h]`` strike in time order, between the drains
   scheduled in that hour: a failure on a node still running jobs interrupts them
   (each job loses its GPUs x the time since its last checkpoint; gangs whole); a
   node drained earlier is empty and the failure costs nothing. A drained node is
   inspected: when it would have failed within the risk horizon the fault is found
   and repaired from the drain on (that failure never happens); otherwise the drain
   was needless and the node is back after the inspection window, once the engine
   uncordons it. Each drain leaves inspection records (:meth:`Loop.label_source`):
   ``unknown`` at the drain, as ``predops apply`` records it; then, unless the
   inspection closes without a verdict (``inspection_unknown_rate``), ``fault_found``
   (an averted failure whose fault the inspection finds, ``inspection_find_rate``) or
   ``no_fault_found`` when the node is back. What the next retrain learns from them is
   the ``labels`` mode (:data:`LABEL_MODES`).

Only risks that could pass the engine's cost threshold are handed to it
(:func:`drain_floor`: below it a node is *always* skipped as below threshold, so the
plan's actions are the same; only those skips are not listed).
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

import numpy as np
import polars as pl

from predops.allocator.topology import Topology
from predops.core.actions import Action, Buy, Drain, LendNodes, ResizePool, Uncordon
from predops.core.clock import FixedClock
from predops.core.contracts import FailureRisk, Forecast, Provenance, Reason
from predops.pipelines.whatif.autoscaler import NodeAutoscaler
from predops.pipelines.whatif.cluster import OWNER_MAINTENANCE, OWNER_REPAIR, Cluster
from predops.pipelines.whatif.labels import LABEL_MODES, LabelBook
from predops.pipelines.whatif.risk import NodeFrame, Retrainer, RiskConfig, RiskTable
from predops.pipelines.whatif.scaler import PoolScaler
from predops.pipelines.whatif.tally import BudgetAuditor, Tally, unreplaced
from predops.pipelines.whatif.world import HOUR_S, World
from predops.policy.config import Budgets, DisruptionConfig, PolicyConfig
from predops.policy.engine import plan as make_plan
from predops.policy.fleet import FleetState, NodeState, PoolState
from predops.policy.pacing import PacingState, pacing_after
from predops.policy.revalidate import CurrentView, revalidate
from predops.policy.soft_taint import SoftTaintPolicy, clear_level

log = logging.getLogger(__name__)

POLICIES = ("reactive", "predictive", "oracle")
POOL_ACTUATIONS = ("ideal", "placeholders", "autoscaler", "static")
HOUR = timedelta(hours=1)
FEATURE_HASH = "whatif-hourly"


@dataclass(frozen=True)
class LoopConfig:
    """Knobs of one run. ``reactive_headroom``: the buffer today's practice keeps over
    current usage (10 %); ``sizing_every``: ticks between the engine's pool-sizing
    rounds (1: the engine sizes for lead + a 1 h hold, ``SizingConfig.hold``);
    ``reactive_sizing_every``: ticks between the reactive autoscaler's rounds (1: it
    reacts to pending pods); ``soft_taint_p``: with a risk (``predictive`` /
    ``oracle``), the engine's soft taint at this level (:mod:`policy.soft_taint`: nodes
    in service at or above it, within its per-pool budget, untainted below the clear
    level) and tainted nodes are placed last (:meth:`Cluster.place_pending`); None (the
    default): off.
    ``pool_actuation``: how the engine's resizes act (module docstring; ``ideal``, the
    default: at once, on the nodes); ``autoscaler_lead``: the node autoscaler's
    provisioning delay (``placeholders`` / ``autoscaler``). ``record``: keep every drain
    and failure (time, node row, outcome) in :attr:`Loop.drain_log` /
    :attr:`Loop.failure_log` for per-event figures (the flood scenarios); one entry
    per event, off by default."""

    policy: str
    policy_config: PolicyConfig = field(default_factory=PolicyConfig)
    budgets: Budgets = field(default_factory=Budgets)
    horizon: timedelta = timedelta(hours=24)
    sizing_every: int = 1
    reactive_sizing_every: int = 1
    reactive_headroom: float = 0.10
    soft_taint_p: float | None = None
    seed: int = 0
    pool_actuation: str = "ideal"
    autoscaler_lead: timedelta = timedelta(minutes=10)
    labels: str = "oracle"
    """What the retrains learn from (:data:`LABEL_MODES`)."""
    inspection_find_rate: float = 0.7
    """Chance that the inspection of a drain that averted a failure finds the fault.
    An assumption, not a measurement: a fault that made a node fail within a day is
    usually reproducible (a GPU off the bus, a DBE, a failed disk), but some are
    intermittent and pass a burn-in; 0.7 says about one in three is not confirmed."""
    inspection_unknown_rate: float = 0.2
    """Chance that an inspection closes with no verdict recorded (a ticket closed
    without an outcome, a node reimaged and returned): its drain stays ``unknown``. An
    assumption too: one ticket in five."""
    record: bool = False

    def __post_init__(self) -> None:
        if self.labels not in LABEL_MODES:
            raise ValueError(f"labels must be one of {LABEL_MODES}, got {self.labels!r}")
        for name in ("inspection_find_rate", "inspection_unknown_rate"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {v}")
        if self.policy not in POLICIES:
            raise ValueError(f"policy must be one of {POLICIES}, got {self.policy!r}")
        if self.pool_actuation not in POOL_ACTUATIONS or (
            self.pool_actuation != "ideal" and self.policy == "reactive"
        ):
            raise ValueError(
                f"pool_actuation must be one of {POOL_ACTUATIONS} (not ideal only with the "
                f"engine's policies), got {self.pool_actuation!r} for {self.policy}"
            )
        if self.sizing_every < 1 or self.reactive_sizing_every < 1:
            raise ValueError("sizing_every and reactive_sizing_every must be >= 1")
        if self.soft_taint_p is not None and not 0.0 < self.soft_taint_p <= 1.0:
            raise ValueError(f"soft_taint_p must be in (0, 1], got {self.soft_taint_p}")


def drain_floor(cfg: DisruptionConfig, checkpoint: timedelta) -> float:
    """A p_fail at or below which the engine always skips a drain.

    With the node's checkpoint interval ``C`` known, a failure costs each job rate
    ``r x (C/2 + detection + restart)`` and a drain at least ``r x restart`` (plus a
    non-negative inspection cost), so ``p x failure > margin x drain`` needs
    ``p > margin x restart / (C/2 + detection + restart)``."""
    c = cfg.costs
    lost = checkpoint / 2 + c.detection_delay + c.restart_overhead
    return cfg.benefit_margin * (c.restart_overhead / lost) if lost > timedelta(0) else 0.0


class Loop:
    """One policy over one world (module docstring)."""

    def __init__(
        self,
        world: World,
        cfg: LoopConfig,
        risk: RiskTable | None = None,
        forecasts: Callable[[datetime], list[Forecast]] | None = None,
        drivers: Sequence[str | None] | None = None,
    ) -> None:
        """``drivers``: each node row's GPU driver version (None: unknown), a pacing
        domain (:mod:`policy.pacing`)."""
        if cfg.policy != "reactive" and (risk is None or forecasts is None):
            raise ValueError(f"policy {cfg.policy} needs a risk table and forecasts")
        self.world = world
        self.cfg = cfg
        self.risk = risk
        self.forecasts = forecasts
        self.pcfg = cfg.policy_config
        dcfg = self.pcfg.disruption
        self.checkpoint = dcfg.costs.checkpoint_interval
        self.cluster = Cluster(world, self.checkpoint.total_seconds(), cfg.seed)
        self.tally = Tally(capacity_value=dcfg.costs.capacity_value)
        self.auditor = BudgetAuditor(cfg.budgets, world.specs)
        self.floor = drain_floor(dcfg, self.checkpoint)
        self._inspection_s = dcfg.costs.inspection_window.total_seconds()
        f = world.failures
        self.averted = np.zeros(len(f), dtype=bool)
        self.scheduled: list[tuple[float, int, Drain]] = []
        self._seq = itertools.count()
        self.last_skip: dict[int, str] = {}
        self.candidates: set[int] = set()
        self._last_p: np.ndarray | None = None
        self._topo_key: bytes = b""
        self._topo: Topology | None = None
        self._risk_tick: tuple[int, datetime, Provenance] | None = None
        self.row_of = {n: i for i, n in enumerate(world.node_ids)}
        self.scaler = PoolScaler(self.cluster, self.row_of, self.tally)
        self.autoscaler: NodeAutoscaler | None = None
        if cfg.pool_actuation in ("placeholders", "autoscaler"):
            self.autoscaler = NodeAutoscaler(
                self.cluster, self.scaler, self.tally, cfg.autoscaler_lead
            )
        n = len(world.specs)
        self.charged_until = np.full(n, np.nan)
        """Needless drains: the time up to which the unreplaced count assessed the node."""
        self.unreplaced_h = np.zeros(n)
        """Needless drains: value-hours the node's pool could not replace so far."""
        self._kind = [(s.pool, s.gpu_model) for s in world.specs]
        self.value = np.array([dcfg.costs.hourly(s.gpus, s.cpu_milli / 1000) for s in world.specs])
        w = world.workload
        self._arrive = _by_tick(w.arrive)
        self._leave = _by_tick(w.leave)
        m_node, m_start, m_end = world.maintenance
        self._m_start = _by_tick(np.ceil((m_start - 1800.0) / HOUR_S).astype(np.int64))
        self._m_end = np.ceil((m_end + 600.0) / HOUR_S)
        self._m_node = m_node
        self._fail_tick = np.ceil(f.at / HOUR_S).astype(np.int64) - 1
        self.soft_tainted_node_hours = 0
        """Node-hours in service with a soft taint (``LoopConfig.soft_taint_p``)."""
        self.inspections: list[tuple[int, float, str, str | None, float]] = []
        """(node row, drained s, outcome, cause, recorded s) records of the drains."""
        self._inspect_rng = np.random.default_rng([cfg.seed, 24])
        self.labels = LabelBook(world, cfg.labels)
        self.drivers = list(drivers) if drivers is not None else [None] * n
        self.pacing: PacingState | None = None
        first: dict[str, int] = {}
        for r, v in enumerate(self.drivers):
            if v is not None:
                first.setdefault(v, r)
        self._driver_rows = sorted(first.values()) if len(first) > 1 else []
        """Slow-start pacing's state, carried from one planning round to the next."""
        self.drain_found = np.full(n, -1, dtype=np.int8)
        """Per node, what the inspection after our last drain finds (1 a fault, 0 none)."""
        self.drain_log: list[tuple[float, int, bool, float, float]] = []
        """With ``record``: (time, row, caught a failure, time of the score it acted on,
        time of the failure it averted or NaN) per drain."""
        self.failure_log: list[tuple[float, int, bool, float]] = []
        """With ``record``: (time, row, averted, lost GPU-hours) per failure."""

    # ------------------------------------------------------------------ run
    def run(self, on_tick: Callable[[int], object] | None = None) -> Tally:
        """Every evaluated tick in order; ``on_tick(1)`` after each (a progress count)."""
        wc = self.world.cfg
        for k in range(wc.first_tick, wc.last_tick):
            self.tick(k)
            if on_tick is not None:
                on_tick(1)
            if (k - wc.first_tick) % 24 == 23:
                t = self.tally
                log.info(
                    "%s day %d: lost %.0f GPU-h, %d drains (%d needless), %d pending pod-h",
                    self.cfg.policy,
                    (k - wc.first_tick) // 24 + 1,
                    t.lost_gpu_hours,
                    t.drains,
                    t.drains_needless,
                    t.pending_pod_hours,
                )
        return self.tally

    def tick(self, k: int) -> None:
        t = k * HOUR_S
        now = self.world.cfg.at(k)
        c = self.cluster
        self._lifecycle(k, t)
        if self.autoscaler is not None:
            self.autoscaler.begin(k)
        self.tally.pods_gave_up += c.leave(self._leave.get(k, np.zeros(0, np.int64)))
        c.arrive(self._arrive.get(k, np.zeros(0, np.int64)))
        reactive = self.cfg.policy == "reactive"
        if not reactive and self.cfg.soft_taint_p is not None:
            self._soft_taint(k)
        c.place_pending(t)
        every = self.cfg.reactive_sizing_every if reactive else self.cfg.sizing_every
        sizing = (k - self.world.cfg.first_tick) % every == 0
        if reactive:
            if sizing:
                self.scaler.reactive(now, self.cfg.reactive_headroom)
        else:
            self._plan(k, now, sizing)
        c.place_pending(t)
        if self.autoscaler is not None:
            self.autoscaler.step(k, t)
        self._account(t)
        self._strike(k, t)

    # ------------------------------------------------------------------ lifecycle
    def _lifecycle(self, k: int, t: float) -> None:
        c = self.cluster
        c.joining[:] = False  # last hour's scale-ups are in service now
        done = np.flatnonzero(c.down_until <= t)
        for row in done.tolist():
            c.repaired_at[row] = c.down_until[row]
            c.down_until[row] = np.nan
            if c.cordon_owner[row] == OWNER_REPAIR:
                c.uncordon(row, t)
        ended = np.flatnonzero(c.maint_until <= t)
        for row in ended.tolist():
            c.maint_until[row] = np.nan
            if c.cordon_owner[row] == OWNER_MAINTENANCE:
                c.uncordon(row, t)
        for i in self._m_start.get(k, np.zeros(0, np.int64)).tolist():
            row = int(self._m_node[i])
            c.evict(row, t)  # planned: drained at a checkpoint, no loss counted
            c.maint_until[row] = self._m_end[i] * HOUR_S
            if c.cordon_owner[row] is None:
                c.cordon(row, OWNER_MAINTENANCE, t)

    def _soft_taint(self, k: int) -> None:
        """Soft taints as the engine's :class:`SoftTaintPolicy` decides them on the
        p_fail of tick ``k`` (what the engine reads this hour), ``soft_taint_p`` its
        level: nodes at or above it that are in service, within the soft-taint budget
        of their pool, untainted below the clear level; NaN (no score) changes nothing."""
        assert self.cfg.soft_taint_p is not None
        c = self.cluster
        cfg = replace(self.pcfg.disruption, soft_taint_p=self.cfg.soft_taint_p)
        p = self._p(k)
        now = self.world.cfg.at(k)
        ids = self.world.node_ids
        look = c.active & ~np.isnan(p) & ((np.nan_to_num(p) >= clear_level(cfg)) | c.soft_taint)
        rows = np.flatnonzero(look).tolist()
        risks = {ids[r]: self._risk(r, float(p[r]), k) for r in rows}
        states = {
            ids[r]: replace(self._state(r, now, jobs=False), soft_tainted=bool(c.soft_taint[r]))
            for r in rows
        }
        fleet = FleetState(topology=self._topology(), observed_at=now, nodes=states)
        for a in SoftTaintPolicy(cfg).decide(risks, fleet, frozenset(), now).actions:
            c.soft_taint[self.row_of[a.target]] = a.kind == "soft_taint"
        self.soft_tainted_node_hours += int((c.soft_taint & c.active).sum())

    # ------------------------------------------------------------------ failures
    def _strike(self, k: int, t: float) -> None:
        f = self.world.failures
        fails = np.flatnonzero(self._fail_tick == k)
        events: list[tuple[float, int, int]] = [(float(f.at[i]), 1, int(i)) for i in fails]
        later = []
        for te, seq, action in self.scheduled:
            if te < t + HOUR_S:
                events.append((te, 0, seq))
            else:
                later.append((te, seq, action))
        by_seq = {seq: a for _, seq, a in self.scheduled}
        self.scheduled = later
        for at, kind, ref in sorted(events):
            if kind == 0:
                self._try_drain(by_seq[ref], at)
            else:
                self._fail(ref, at)

    def _fail(self, i: int, at: float) -> None:
        f = self.world.failures
        c = self.cluster
        row = int(f.node[i])
        if self.averted[i]:
            self.tally.failures_averted += 1
            if self.cfg.record:
                self.failure_log.append((at, row, True, 0.0))
            return
        self.tally.failures += 1
        lost = 0.0
        if c.pods_on(row):
            hit = c.evict(row, at)
            lost = hit.lost_gpu_hours
            self.tally.failures_on_busy_nodes += 1
            self.tally.interrupted_jobs += hit.jobs
            self.tally.interrupted_pods += hit.pods
            self.tally.lost_gpu_hours += hit.lost_gpu_hours
            self.tally.missed[self._why_missed(row)] += 1
        if self.cfg.record:
            self.failure_log.append((at, row, False, lost))
        c.down_until[row] = np.fmax(c.down_until[row], at + f.repair_s[i])
        if c.cordon_owner[row] is None:
            c.cordon(row, OWNER_REPAIR, at)

    def _why_missed(self, row: int) -> str:
        if self.cfg.policy == "reactive":
            return "reactive"
        if row in self.last_skip:
            return self.last_skip[row]
        if row in self.candidates:
            return "drain_scheduled_after_failure"
        if self._last_p is not None and self._last_p[row] > self.floor:
            return "idle_or_parked_at_plan"  # pods arrived after the plan
        return "risk_below_drain_floor"

    # ------------------------------------------------------------------ drains
    def _view(self, row: int, t: float, risk: FailureRisk | None) -> CurrentView:
        c = self.cluster
        now = self._time(t)
        dis = c.disrupted() & c.active
        ids = self.world.node_ids
        return CurrentView(
            now=now,
            topology=self._topology(),
            state=self._state(row, now),
            disrupted=frozenset(ids[i] for i in np.flatnonzero(dis)),
            risk=risk,
        )

    def _try_drain(self, a: Drain, at: float) -> None:
        c = self.cluster
        row = self.row_of[a.target]
        risk = self._risk_now(row, at)
        v = revalidate(a, self._view(row, at, risk), self.cfg.budgets, self.pcfg.disruption)
        if v is not None:
            self.tally.revalidation_drops[v.reason.value] += 1
            return
        why = self.auditor.violates(row, c.disrupted() & c.active, c.active)
        if why is not None:
            self.tally.budget_violations += 1
        hit = c.evict(row, at)
        self.tally.drains += 1
        self.tally.drain_evicted_jobs += hit.jobs
        self.tally.drain_lost_gpu_hours += hit.lost_gpu_hours
        c.cordon(row, self.pcfg.disruption.owner, at)
        c.drained_at[row] = at
        f = self.world.failures
        ahead = np.flatnonzero(
            (f.node == row) & (f.at >= at) & (f.at <= at + self.cfg.horizon.total_seconds())
        )
        ahead = ahead[~self.averted[ahead]]
        self.drain_found[row] = 1 if ahead.size else 0
        if self.cfg.record:
            scored = a.evidence.get("risk", {}).get("as_of")
            t_scored = (scored - self.world.cfg.start).total_seconds() if scored else at
            averted_at = float(f.at[ahead[0]]) if ahead.size else math.nan
            self.drain_log.append((at, row, bool(ahead.size), t_scored, averted_at))
        if ahead.size:
            i = int(ahead[0])
            self.averted[i] = True
            self.tally.drains_caught += 1
            c.down_until[row] = at + f.repair_s[i]
        else:
            self.tally.drains_needless += 1
            c.needless[row] = True
            self.charged_until[row] = at
            self.unreplaced_h[row] = 0.0
            c.down_until[row] = at + self.pcfg.disruption.costs.inspection_window.total_seconds()
        self._inspect(row, at, int(ahead[0]) if ahead.size else None)

    def _inspect(self, row: int, at: float, averted: int | None) -> None:
        """The inspection records of a drain at ``at`` (module docstring, step 5)."""
        self.inspections.append((row, at, "unknown", None, at))
        unknown, found = self._inspect_rng.random(2)
        back = float(self.cluster.down_until[row])
        if unknown < self.cfg.inspection_unknown_rate:
            self.tally.inspections["unknown"] += 1
        elif averted is not None and found < self.cfg.inspection_find_rate:
            self.inspections.append(
                (row, at, "fault_found", self.world.failures.cause[averted], back)
            )
            self.tally.inspections["fault_found"] += 1
        else:
            self.inspections.append((row, at, "no_fault_found", None, back))
            self.tally.inspections["no_fault_found"] += 1

    # ------------------------------------------------------------------ labels
    def label_source(self, cutoff: datetime) -> tuple[pl.DataFrame, pl.DataFrame | None]:
        """The events and inspections a retrain at ``cutoff`` learns from, by the
        ``labels`` mode (:class:`~pipelines.whatif.labels.LabelBook`)."""
        return self.labels.at(cutoff, self.averted, self.inspections)

    def _p(self, k: int) -> np.ndarray:
        """p_fail per node row at tick ``k``: the model's, or for the oracle the truth
        (1 when a failure that has not been averted falls within the horizon)."""
        assert self.risk is not None
        if self.cfg.policy != "oracle":
            return self.risk.at(k)
        f = self.world.failures
        lo = k * HOUR_S
        hit = (f.at > lo) & (f.at <= lo + self.cfg.horizon.total_seconds()) & ~self.averted
        p = np.zeros(len(self.world.specs))
        p[f.node[hit]] = 1.0
        return p

    def _risk_now(self, row: int, at: float) -> FailureRisk | None:
        assert self.risk is not None
        k = int(at // HOUR_S)
        k = min(max(k, self.risk.first_tick), self.risk.first_tick + len(self.risk.p) - 1)
        p = float(self._p(k)[row])
        if math.isnan(p):
            return None
        return self._risk(row, p, k)

    def _risk(self, row: int, p: float, k: int) -> FailureRisk:
        assert self.risk is not None
        if self._risk_tick is None or self._risk_tick[0] != k:
            now = self.world.cfg.at(k)
            v = int(self.risk.version[k - self.risk.first_tick])
            prov = Provenance("node_failure", f"whatif-{self.cfg.policy}-{v}", FEATURE_HASH, now)
            self._risk_tick = (k, now, prov)  # one provenance per tick, shared
        _, now, prov = self._risk_tick
        signal = self.risk.signal_at(k, row)
        reasons = () if signal is None else (Reason(f"{signal}__scenario", p, signal),)
        return FailureRisk(
            self.world.node_ids[row], now, self.cfg.horizon, min(max(p, 0.0), 1.0), reasons, prov
        )

    # ------------------------------------------------------------------ engine
    def _time(self, t: float) -> datetime:
        return self.world.cfg.start + timedelta(seconds=t)

    def _topology(self) -> Topology:
        key = np.packbits(self.cluster.active).tobytes()
        if key != self._topo_key or self._topo is None:
            specs = [s for s, a in zip(self.world.specs, self.cluster.active, strict=True) if a]
            self._topo = Topology.of(specs)
            self._topo_key = key
        return self._topo

    def _state(self, row: int, now: datetime, *, jobs: bool = True) -> NodeState:
        """The engine's view of node ``row``; ``jobs=False`` leaves the checkpoint of
        its jobs unknown (for nodes the engine only counts)."""
        c = self.cluster
        t = (now - self.world.cfg.start).total_seconds()
        job = c.biggest_job(row) if jobs else None
        drained = float(c.drained_at[row])
        inspected = not math.isnan(drained) and t >= drained + self._inspection_s
        found = int(self.drain_found[row])
        last = None
        if job is not None and not math.isnan(c.origin[job]):
            o = float(c.origin[job])
            last = self._time(t - c.since_checkpoint(job, t)) if t >= o else None
        return NodeState(
            node_id=self.world.node_ids[row],
            observed_at=now,
            cordoned=c.cordon_owner[row] is not None,
            cordon_owner=c.cordon_owner[row],
            cordoned_at=_opt(self, c.cordoned_at[row]),
            uncordoned_at=_opt(self, c.uncordoned_at[row]),
            under_repair=bool(c.under_repair[row]),
            repaired_at=_opt(self, c.repaired_at[row]),
            last_checkpoint_at=last,
            checkpoint_interval=self.checkpoint if last is not None else None,
            driver_version=self.drivers[row],
            inspection_fault=bool(found) if inspected and found >= 0 else None,
        )

    def _earlier(self, rows: list[int], k: int) -> list[FailureRisk]:
        """The candidates' scores of the hours before ``k`` that the engine's
        confirmation reads (``DisruptionConfig.confirm_scores`` - 1 of them)."""
        assert self.risk is not None
        out = []
        for back in range(1, self.pcfg.disruption.confirm_scores):
            j = k - back
            if j < self.risk.first_tick:
                break
            p = self._p(j)
            out += [self._risk(r, float(p[r]), j) for r in rows if not math.isnan(p[r])]
        return out

    def _plan(self, k: int, now: datetime, sizing: bool) -> None:
        assert self.risk is not None and self.forecasts is not None
        c = self.cluster
        p = self._p(k)
        self._last_p = p
        busy = c.busy()
        ok = c.active & busy & ~np.isnan(p) & (np.nan_to_num(p) > self.floor)
        rows = set(np.flatnonzero(ok).tolist())
        self.candidates = rows
        risks = [self._risk(r, float(p[r]), k) for r in sorted(rows)]
        if self.pcfg.disruption.confirm_scores > 1:
            risks += self._earlier(sorted(rows), k)
        if sizing:
            # the sizing buffer reads every node's risk, not only the drain candidates
            extra = np.flatnonzero(c.active & ~np.isnan(p) & ~ok)
            risks += [self._risk(int(r), float(p[r]), k) for r in extra]
        stateful = set(rows) | set(np.flatnonzero(c.disrupted() & c.active).tolist())
        if self.pacing is not None:  # pacing reads how its drains in flight went
            stateful |= {self.row_of[n] for n in self.pacing.in_flight}
        states = {self.world.node_ids[r]: self._state(r, now) for r in sorted(stateful)}
        for d in self._driver_rows:  # one node per driver version: which ones the fleet runs
            states.setdefault(self.world.node_ids[d], self._state(d, now, jobs=False))
        for r in risks:  # the rest only feed the sizing buffer: no checkpoint lookup
            if r.node_id not in states:
                states[r.node_id] = self._state(self.row_of[r.node_id], now, jobs=False)
        fleet = FleetState(
            topology=self._topology(),
            observed_at=now,
            nodes=states,
            pools={
                p_: PoolState(
                    p_,
                    self.scaler.last_resize.get(p_),
                    self.scaler.last_scale_up.get(p_),
                    max_nodes=int((c.active[rows] | ~c.under_repair[rows]).sum()),
                )
                for p_, rows in sorted(c.pool_rows.items())
            },
        )
        forecasts = self.forecasts(now) if sizing else []
        c.sync_schedulable()
        result = make_plan(
            risks,
            forecasts,
            c.snapshot,
            fleet,
            self.cfg.budgets,
            FixedClock(now),
            self.pcfg,
            pacing=self.pacing,
        )
        self.pacing = pacing_after(result)
        self.tally.alerts += len(result.alerts)
        self.last_skip = {}
        for s in result.skips:
            if s.kind == "drain":
                self.tally.skips[s.reason.value] += 1
                self.last_skip[self.row_of[s.target]] = s.reason.value
        t = (now - self.world.cfg.start).total_seconds()
        for a in result.actions:
            self._act(a, now, t)

    def _act(self, a: Action, now: datetime, t: float) -> None:
        c = self.cluster
        if isinstance(a, Drain):
            te = (a.not_before - self.world.cfg.start).total_seconds() if a.not_before else t
            if te <= t:
                self._try_drain(a, t)
            else:
                self.scheduled.append((te, next(self._seq), a))
        elif isinstance(a, Uncordon):
            row = self.row_of[a.target]
            view = self._view(row, t, None)
            v = revalidate(a, view, self.cfg.budgets, self.pcfg.disruption)
            if v is not None:
                self.tally.revalidation_drops[v.reason.value] += 1
                return
            if c.needless[row]:
                self.tally.needless_out_gpu_hours += (
                    self.value[row] * (t - c.drained_at[row]) / HOUR_S
                )
                self.tally.needless_out_unreplaced_gpu_hours += self.unreplaced_h[row]
                c.needless[row] = False
            c.uncordon(row, t)
            self.tally.uncordons += 1
        elif isinstance(a, ResizePool):
            if self.cfg.pool_actuation == "ideal":
                order = a.evidence.get("scale_in_order", ())
                self.scaler.resize(a.target, a.to_nodes, now, order=order, p_fail=self._last_p)
            elif self.autoscaler is not None and self.cfg.pool_actuation == "placeholders":
                self.autoscaler.hold(a.target, a.to_nodes, now)
            # autoscaler / static: predops resizes nothing
        elif isinstance(a, Buy):
            self.tally.purchases.append({"sku": a.target, "region": a.region, "n": a.quantity})
        elif isinstance(a, LendNodes):
            pass  # lending between pools is not simulated (the pools' GPU models differ)

    # ------------------------------------------------------------------ figures
    def _account(self, t: float) -> None:
        c = self.cluster
        tl = self.tally
        self._charge_unreplaced(t)
        act = c.active
        busy = c.busy()
        tl.provisioned_node_hours += float(act.sum())
        idle = act & c.schedulable() & ~busy
        tl.idle_node_hours += float(idle.sum())
        for pool, rows in c.pool_rows.items():
            tl.idle_node_hours_by_pool[pool] += int(idle[rows].sum())
        tl.pending_pod_hours_by_pool.update(c.pending_by_pool())
        tl.provisioned_gpu_hours += float(c.gpus[act].sum())
        tl.provisioned_core_hours += float(c.cores[act].sum())
        g, cores = c.used()
        tl.used_gpu_hours += g
        tl.used_core_hours += cores
        tl.pending_pod_hours += c.pending_pods()
        for pool, want in self.scaler.want.items():
            tl.stockout_node_hours += max(0, want - c.pool_rows[pool].size)

    def _charge_unreplaced(self, t: float) -> None:
        """The hour ``[t, t + 1 h)`` of each needlessly drained node still out (from the
        drain on, for the first), when its pool cannot replace it
        (:func:`~pipelines.whatif.tally.unreplaced`)."""
        c = self.cluster
        out = np.flatnonzero(c.needless)
        if out.size == 0:
            return
        kinds = self._kind
        wanted = {
            (pool, m)
            for pool in sorted({kinds[r][0] for r in out.tolist()})
            for m, v in self.scaler.pending_by_model(pool).items()
            if v > 0
        }
        spare = (c.schedulable() & ~c.busy()) | (~c.active & ~c.under_repair)
        bit = unreplaced(out, kinds, spare, wanted)
        span = (t + HOUR_S - self.charged_until[out]) / HOUR_S
        self.unreplaced_h[out] += np.where(bit, self.value[out] * span, 0.0)
        self.charged_until[out] = t + HOUR_S


def retrained_loop(
    world: World,
    cfg: LoopConfig,
    risk: RiskConfig,
    forecasts: Callable[[datetime], list[Forecast]],
    frame: pl.DataFrame | NodeFrame | None = None,
) -> Loop:
    """A loop whose failure model is retrained as it goes (:class:`Retrainer`), each
    fit on the labels of ``cfg.labels`` as the loop's drains left them before its
    cutoff; ``frame``: the world's node features, when already computed."""
    retrainer = Retrainer(world, risk, frame=frame)
    loop = Loop(world, cfg, retrainer.table, forecasts)
    retrainer.labels = loop.label_source
    return loop


def _opt(loop: Loop, seconds: float) -> datetime | None:
    return None if math.isnan(seconds) else loop._time(float(seconds))


def _by_tick(ticks: np.ndarray) -> dict[int, np.ndarray]:
    if ticks.size == 0:
        return {}
    order = np.argsort(ticks, kind="stable")
    keys, starts = np.unique(ticks[order], return_index=True)
    ends = np.append(starts[1:], order.size)
    return {int(k): order[a:b] for k, a, b in zip(keys, starts, ends, strict=True)}
