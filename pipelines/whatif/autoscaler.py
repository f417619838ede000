"""The what-if's node autoscaler and placeholder pods: pools sized the way
cluster-autoscaler or Karpenter size them, for the loop's ``placeholders`` and
``autoscaler`` pool actuations (:class:`~pipelines.whatif.loop.LoopConfig`).

With ``placeholders`` the engine's resize sets each pool's placeholders as the
placeholder actuator does (:func:`~pipelines.actuators.placeholder_objects.replicas_for`,
one per node): ``max(0, to_nodes - taken)``, ``taken`` the pool's nodes in service that
run work or are disrupted. With ``autoscaler`` predops resizes nothing: no placeholder,
the autoscaler alone. Each tick, after the hour's placements, :meth:`NodeAutoscaler.step`

1. **holds** the placeholders: each runs on an empty schedulable node of its pool
   (:attr:`Cluster.placeholder`), the one it held last hour when that node is still
   empty. Placement uses held nodes like any other, only after the rest (the scheduler
   preempts a placeholder only when a pod fits nowhere else), so an arriving pod that
   needs the node takes it at once and the placeholder goes pending (a preemption);
2. **provisions** nodes for what is pending: per pool, the nodes its queued pods need
   (:func:`~pipelines.whatif.scaler.pending_nodes`, the reactive autoscaler's estimate)
   plus one per pending placeholder, less the nodes already on their way and the empty
   ones no placeholder holds (the queue did not fit there, or will use them), brought back
   from the pool's parked healthy nodes (GPU models with pending demand first, then the
   lowest row; the autoscaler reads no risk). A node is ready ``lead`` after it is asked
   for. Under an hour, that is within the hour: the queue is placed again on the new
   nodes and each pod placed so counts ``r x lead`` of pending time instead of the
   hour (``r``: the round; up to :data:`ROUNDS` rounds an hour while ``r x lead`` is
   under an hour, as an autoscaler's loop repeats). With a lead of an hour or more a
   node serves from the tick ``ceil(lead / 1 h)`` later;
3. **consolidates**: the empty nodes in service that hold no placeholder, are not
   disrupted and not on their way are parked (cluster-autoscaler's
   ``scale-down-unneeded-time``, 10 min by default, and Karpenter's ``consolidateAfter``
   are under the hour).

Between two engine rounds the replicas stay: a preempted placeholder gets a node of its
own again after the lead, so the headroom stays whole while the pool grows with the
work (as the real placeholders do). The engine sees what the real apply's cluster
state would show: placeholders are not pods to it (the ingest leaves them out) and the
nodes they hold are idle nodes of the pool. Idle node-hours count the held nodes:
headroom is idle capacity paid for.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

import numpy as np

from predops.pipelines.actuators.placeholder_objects import replicas_for
from predops.pipelines.whatif.cluster import Cluster
from predops.pipelines.whatif.scaler import PoolScaler, pending_nodes
from predops.pipelines.whatif.tally import Tally

HOUR = timedelta(hours=1)
ROUNDS = 3
"""Provisioning rounds within one hour when the lead is under an hour."""


class NodeAutoscaler:
    """Sizes the pools of one :class:`Cluster` from pending pods and placeholders
    (module docstring)."""

    def __init__(self, cluster: Cluster, scaler: PoolScaler, tally: Tally, lead: timedelta) -> None:
        if lead < timedelta(0):
            raise ValueError(f"autoscaler lead must be >= 0, got {lead}")
        self.c = cluster
        self.scaler = scaler
        self.tally = tally
        self.lead_h = lead / HOUR
        self.lead_ticks = math.ceil(self.lead_h) if self.lead_h >= 1 else 0
        self.replicas: dict[str, int] = {}
        self.ready_tick = np.full(len(cluster.gpus), -1, dtype=np.int64)
        """Tick from which a node asked for serves (lead of an hour or more)."""
        self.placeholder_node_hours = 0
        self.preemptions = 0
        self.nodes_added = 0
        self.nodes_removed = 0
        self.pods_placed_within_hour = 0

    # ------------------------------------------------------------------ the engine's resize
    def hold(self, pool: str, to_nodes: int, now: datetime) -> None:
        """The placeholder actuator's resize of ``pool`` to ``to_nodes`` nodes."""
        c = self.c
        rows = c.pool_rows[pool]
        act = rows[c.active[rows]]
        taken = int((c.busy()[act] | c.disrupted()[act]).sum())
        self.replicas[pool] = replicas_for(to_nodes, taken, 1)
        self.scaler.want[pool] = to_nodes  # the engine's target (stock-outs count it)
        if to_nodes > act.size:
            self.scaler.last_scale_up[pool] = now
        self.scaler.last_resize[pool] = now
        self.tally.resizes += 1

    # ------------------------------------------------------------------ each tick
    def begin(self, k: int) -> None:
        """Nodes still on their way at tick ``k`` are not schedulable yet (the loop's
        lifecycle clears last hour's joining nodes)."""
        self.c.joining |= self.ready_tick > k

    def step(self, k: int, t: float) -> None:
        """Hold, provision, consolidate (module docstring), after the hour's placements."""
        c = self.c
        self._hold(count=True)
        for r in range(1, ROUNDS + 1):
            ready_now = self.lead_ticks == 0 and r * self.lead_h < 1.0
            if not self._provision(k, ready_now):
                break
            if not ready_now:
                break
            before = c.pending_by_pool()
            c.place_pending(t)
            after = c.pending_by_pool()
            for pool, n in before.items():
                placed = n - after.get(pool, 0)
                self.pods_placed_within_hour += placed
                self.tally.pending_pod_hours += placed * r * self.lead_h
                by_pool = self.tally.pending_within_hour_by_pool
                by_pool[pool] = by_pool.get(pool, 0.0) + placed * r * self.lead_h
            self._hold(count=True)
        self._consolidate()
        self.placeholder_node_hours += int(c.placeholder.sum())

    def _hold(self, *, count: bool) -> None:
        """Placeholders onto empty schedulable nodes of their pool, keeping the nodes
        they held; a held node a real pod took is a preemption."""
        c = self.c
        busy = c.busy()
        free = c.schedulable() & ~busy
        if count:
            self.preemptions += int((c.placeholder & busy).sum())
        keep = c.placeholder & free
        c.placeholder[:] = False
        for pool, want in self.replicas.items():
            rows = c.pool_rows[pool]
            held = rows[keep[rows]][:want]
            more = rows[free[rows] & ~keep[rows]][: max(0, want - held.size)]
            c.placeholder[held] = True
            c.placeholder[more] = True

    def _pending_placeholders(self, pool: str) -> int:
        rows = self.c.pool_rows[pool]
        return max(0, self.replicas.get(pool, 0) - int(self.c.placeholder[rows].sum()))

    def _provision(self, k: int, ready_now: bool) -> int:
        """Bring back the nodes each pool's pending pods and placeholders need; how many."""
        c = self.c
        need = pending_nodes(c)
        spare = (c.active & c.joining) | (c.schedulable() & ~c.busy() & ~c.placeholder)
        added = 0
        for pool, rows in sorted(c.pool_rows.items()):
            # nodes on their way, or empty and unheld, serve the queue before new ones
            want = math.ceil(need.get(pool, 0.0) - 1e-9) + self._pending_placeholders(pool)
            want -= int(spare[rows].sum())
            if want <= 0:
                continue
            short = self.scaler.pending_by_model(pool)
            parked = rows[~c.active[rows] & ~c.under_repair[rows]].tolist()
            parked.sort(key=lambda r: (-short.get(self.scaler.model[r], 0.0), r))
            back = parked[:want]
            c.active[back] = True
            if not ready_now:
                c.joining[back] = True
                self.ready_tick[back] = k + max(1, self.lead_ticks)
            added += len(back)
        self.nodes_added += added
        if ready_now and added:
            self._hold(count=False)  # pending placeholders take the new nodes first
        return added

    def _consolidate(self) -> None:
        c = self.c
        idle = c.active & ~c.joining & ~c.busy() & ~c.disrupted() & ~c.placeholder
        self.nodes_removed += int(idle.sum())
        c.active[idle] = False

    def figures(self) -> dict[str, float]:
        return {
            "placeholder_node_hours": self.placeholder_node_hours,
            "placeholder_preemptions": self.preemptions,
            "autoscaler_nodes_added": self.nodes_added,
            "autoscaler_nodes_removed": self.nodes_removed,
            "pods_placed_within_the_hour": self.pods_placed_within_hour,
            "autoscaler_lead_h": round(self.lead_h, 4),
        }
