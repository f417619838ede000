"""The simulated cluster the loop drives: node lifecycle and pods on a live allocator
snapshot.

:class:`Cluster` holds one :class:`~allocator.snapshot.ClusterSnapshot` of every
physical node and places the workload through the real
:class:`~allocator.engine.Allocator` (best fit; CPU pods only on their pool's nodes,
GPU pods by their GPU model, gangs all-or-nothing). A node is schedulable when its
pool holds it (not parked by a scale-in, and not joining: a node a scale-up brings
back serves from the next tick, past the lead time), it is up, not cordoned and not in
maintenance. Jobs checkpoint every ``checkpoint_s`` from their last (re)start; an
interruption costs a job its GPUs x the time since its last checkpoint, the whole gang
restarts, and its pods queue again with their original departure time.

Node state is kept in numpy arrays indexed by node row (times in seconds from the
simulation start, NaN = never / not set).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from predops.allocator.engine import Allocator
from predops.allocator.policies import make_policy
from predops.allocator.requests import Gang, PodRequest
from predops.allocator.snapshot import ClusterSnapshot
from predops.pipelines.whatif.world import World

OWNER_REPAIR = "node-lifecycle"
OWNER_MAINTENANCE = "maintenance"

PENDING, RUNNING, GONE = 1, 2, 3


@dataclass
class Interruption:
    """What one failure or drain did to the jobs on a node."""

    jobs: int = 0
    pods: int = 0
    lost_gpu_hours: float = 0.0


class Cluster:
    """Live cluster state of one policy's run (module docstring)."""

    def __init__(self, world: World, checkpoint_s: float, seed: int) -> None:
        self.world = world
        self.w = world.workload
        self.checkpoint_s = checkpoint_s
        specs = world.specs
        n = len(specs)
        self.snapshot = ClusterSnapshot(world.topology)
        self.alloc = Allocator(
            self.snapshot,
            make_policy("best_fit", rng=np.random.default_rng(seed + 1)),
            np.random.default_rng(seed),
            explain=False,
        )
        self.active = np.ones(n, dtype=bool)
        self.joining = np.zeros(n, dtype=bool)
        """Brought back by a scale-up this hour: in service from the next tick (the
        scale-up lead time), so not schedulable yet."""
        self.down_until = np.full(n, np.nan)
        self.maint_until = np.full(n, np.nan)
        self.cordon_owner: list[str | None] = [None] * n
        self._cordoned = np.zeros(n, dtype=bool)
        """``cordon_owner[row] is not None``, kept beside it by :meth:`cordon` /
        :meth:`uncordon` (read several times a tick)."""
        self.cordoned_at = np.full(n, np.nan)
        self.uncordoned_at = np.full(n, np.nan)
        self.repaired_at = np.full(n, np.nan)
        self.drained_at = np.full(n, np.nan)
        self.needless = np.zeros(n, dtype=bool)
        self.soft_taint = np.zeros(n, dtype=bool)
        """Nodes with a soft taint (``PreferNoSchedule``): placement uses them only for
        pods that fit nowhere else (:meth:`place_pending`)."""
        self.placeholder = np.zeros(n, dtype=bool)
        """Empty nodes a placeholder pod holds (:mod:`~pipelines.whatif.autoscaler`):
        placement uses them, like soft-tainted ones, only for pods that fit nowhere
        else (the scheduler preempts a placeholder only then), and at once."""
        self.pool_of = np.array([s.pool for s in specs])
        self.pool_rows = {p: np.flatnonzero(self.pool_of == p) for p in np.unique(self.pool_of)}
        self.gpus = np.array([s.gpus for s in specs], dtype=np.float64)
        self.cores = np.array([s.cpu_milli / 1000 for s in specs])
        w = self.w
        self.status = np.zeros(len(w), dtype=np.int8)
        self.origin = np.full(int(w.job.max()) + 1 if len(w) else 0, np.nan)
        order = np.argsort(w.job, kind="stable")
        bounds = np.searchsorted(w.job[order], np.arange(self.origin.size + 1))
        self._job_order, self._job_bounds = order, bounds
        self.index = {pid: i for i, pid in enumerate(w.pod_ids)}
        self.pending: list[int] = []
        self._requests: dict[int, PodRequest] = {}
        self._sched_dirty = True

    # ------------------------------------------------------------------ nodes
    @property
    def cordoned(self) -> np.ndarray:
        return self._cordoned.copy()

    @property
    def under_repair(self) -> np.ndarray:
        out: np.ndarray = ~np.isnan(self.down_until)
        return out

    @property
    def in_maintenance(self) -> np.ndarray:
        out: np.ndarray = ~np.isnan(self.maint_until)
        return out

    def disrupted(self) -> np.ndarray:
        """Cordoned, draining, in repair or in maintenance (counts against budgets)."""
        out: np.ndarray = self.cordoned | self.under_repair | self.in_maintenance
        return out

    def schedulable(self) -> np.ndarray:
        out: np.ndarray = self.active & ~self.joining & ~self.disrupted()
        return out

    def sync_schedulable(self, avoid: np.ndarray | None = None) -> None:
        """Set the snapshot's schedulable flags to :meth:`schedulable`, less the rows
        ``avoid`` marks."""
        ok = self.schedulable()
        if avoid is not None:
            ok &= ~avoid
        ids = self.snapshot.node_ids
        cur = self.snapshot.schedulable[: len(ids)]
        on = [ids[i] for i in np.flatnonzero(ok & ~cur)]
        off = [ids[i] for i in np.flatnonzero(~ok & cur)]
        if on:
            self.snapshot.set_schedulable(on, True)
        if off:
            self.snapshot.set_schedulable(off, False)

    def busy(self) -> np.ndarray:
        n = len(self.gpus)
        out: np.ndarray = np.fromiter(map(len, self.snapshot.pods_on[:n]), np.intp, n) > 0
        return out

    def cordon(self, row: int, owner: str, t: float) -> None:
        self.cordon_owner[row] = owner
        self._cordoned[row] = True
        self.cordoned_at[row] = t

    def uncordon(self, row: int, t: float) -> None:
        self.cordon_owner[row] = None
        self._cordoned[row] = False
        self.uncordoned_at[row] = t

    # ------------------------------------------------------------------ pods
    def request(self, i: int) -> PodRequest:
        r = self._requests.get(i)
        if r is None:
            w = self.w
            g = int(w.gang[i])
            r = PodRequest(
                pod_id=w.pod_ids[i],
                cpu_milli=int(w.cpu_milli[i]),
                memory_mib=int(w.memory_mib[i]),
                num_gpu=int(w.num_gpu[i]),
                gpu_milli=int(w.gpu_milli[i]),
                gpu_models=w.model_sets[int(w.models[i])],
                gang_id=w.gang_ids[g] if g >= 0 else None,
            )
            self._requests[i] = r
        return r

    def job_pods(self, job: int) -> np.ndarray:
        out: np.ndarray = self._job_order[self._job_bounds[job] : self._job_bounds[job + 1]]
        return out

    def pods_on(self, row: int) -> list[int]:
        return sorted(self.index[p] for p in self.snapshot.pods_on[row])

    def node_of(self, i: int) -> int:
        return int(self.snapshot.placements[self.w.pod_ids[i]].node)

    def arrive(self, pods: np.ndarray) -> None:
        self.status[pods] = PENDING
        self.pending.extend(int(i) for i in pods)

    def leave(self, pods: np.ndarray) -> int:
        """Pods whose time is up leave; returns how many left without ever running."""
        gave_up = 0
        for i in pods.tolist():
            if self.status[i] == RUNNING:
                self.snapshot.remove(self.w.pod_ids[i])
            elif self.status[i] == PENDING:
                gave_up += int(self.w.members[i])
            self.status[i] = GONE
            self._requests.pop(i, None)
        if gave_up or len(pods):
            self.pending = [i for i in self.pending if self.status[i] == PENDING]
        return gave_up

    def place_pending(self, t: float) -> None:
        """Place the queue: with soft-tainted or placeholder nodes schedulable, a first
        pass leaves them out and a second places what is left on every schedulable node
        (those nodes last); without, one pass (:meth:`_place_pass`)."""
        tainted = (self.soft_taint | self.placeholder) & self.schedulable()
        if tainted.any():
            self.sync_schedulable(avoid=tainted)
            self._place_pass(t)
        self.sync_schedulable()
        self._place_pass(t)

    def _place_pass(self, t: float) -> None:
        """One pass over the queue in order on the snapshot's schedulable nodes; a
        request shape that did not fit is not tried again in the same pass (capacity
        only shrinks within a pass)."""
        w = self.w
        failed: set[tuple[object, ...]] = set()
        left: list[int] = []
        done_gangs: set[int] = set()
        for i in self.pending:
            if self.status[i] != PENDING:
                continue
            g = int(w.gang[i])
            if g >= 0:
                if g in done_gangs:
                    continue
                done_gangs.add(g)
                job = self.job_pods(int(w.job[i]))
                members = [int(k) for k in job if self.status[k] == PENDING]
                key: tuple[object, ...] = ("gang", len(members), self._shape(i))
                if key in failed:
                    left.extend(members)
                    continue
                gang = Gang(w.gang_ids[g], tuple(self.request(k) for k in members))
                gd = self.alloc.place_gang(gang)
                if gd.placed:
                    self.status[members] = RUNNING
                    self.origin[int(w.job[i])] = t
                else:
                    failed.add(key)
                    left.extend(members)
                continue
            key = self._shape(i)
            if key in failed:
                left.append(i)
                continue
            pool = w.pools[int(w.pool[i])]
            rows = self.pool_rows.get(pool) if w.num_gpu[i] == 0 else None
            d = self.alloc.place(self.request(i), rows=rows)
            if d.placed:
                self.status[i] = RUNNING
                self.origin[int(w.job[i])] = t
            else:
                failed.add(key)
                left.append(i)
        self.pending = left

    def _shape(self, i: int) -> tuple[object, ...]:
        w = self.w
        return (
            int(w.pool[i]),
            int(w.cpu_milli[i]),
            int(w.memory_mib[i]),
            int(w.num_gpu[i]),
            int(w.gpu_milli[i]),
            int(w.models[i]),
        )

    def since_checkpoint(self, job: int, t: float) -> float:
        """Seconds of work since job ``job``'s last checkpoint at ``t``."""
        o = self.origin[job]
        if np.isnan(o) or t <= o:
            return 0.0
        return float((t - o) % self.checkpoint_s)

    def evict(self, row: int, t: float, *, timed_job: int | None = None) -> Interruption:
        """Take every job with a pod on ``row`` off the cluster (gangs whole) and queue
        its pods again; each job loses its work since its last checkpoint (none for
        ``timed_job``, the job a drain waited for)."""
        out = Interruption()
        w = self.w
        jobs = sorted({int(w.job[i]) for i in self.pods_on(row)})
        requeue: list[int] = []
        for j in jobs:
            members = [int(k) for k in self.job_pods(j) if self.status[k] == RUNNING]
            gpus = float(w.gpus[members].sum())
            lost = 0.0 if j == timed_job else self.since_checkpoint(j, t)
            out.jobs += 1
            out.pods += int(w.members[members].sum())
            out.lost_gpu_hours += gpus * lost / 3600.0
            for k in members:
                self.snapshot.remove(w.pod_ids[k])
                self.status[k] = PENDING
            requeue.extend(members)
            self.origin[j] = np.nan
        self.pending = requeue + self.pending
        return out

    def biggest_job(self, row: int) -> int | None:
        """The job on ``row`` holding the most GPUs (then CPU), lowest id on ties."""
        w = self.w
        best: tuple[float, float, int] | None = None
        for i in self.pods_on(row):
            j = int(w.job[i])
            k = (-float(w.gpus[i]), -float(w.cpu_milli[i]), j)
            if best is None or k < best:
                best = k
        return None if best is None else best[2]

    def pending_pods(self) -> int:
        return int(self.w.members[self.pending].sum()) if self.pending else 0

    def pending_by_pool(self) -> dict[str, int]:
        """Pods queued now, per pool."""
        if not self.pending:
            return {}
        w = self.w
        idx = np.asarray(self.pending)
        counts = np.bincount(w.pool[idx], weights=w.members[idx], minlength=len(w.pools))
        return {p: int(n) for p, n in zip(w.pools, counts.tolist(), strict=True) if n}

    def used(self) -> tuple[float, float]:
        """GPUs and CPU cores held by running pods."""
        run = self.status == RUNNING
        w = self.w
        return float(w.gpus[run].sum()), float(w.cpu_milli[run].sum() / 1000)
