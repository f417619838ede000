"""The what-if's node-pool autoscaler: which nodes a resize parks or brings back, and
today's practice (reactive sizing from current usage).

A pool's nodes are in service (``Cluster.active``) or parked: powered down, held in
reserve, never scheduled. A resize to ``target`` nodes

- brings back parked nodes that are not in repair: GPU models with the most pending
  demand first (a priority expander), then the lowest p_fail read this hour (the
  policy's risk; the reactive autoscaler reads none), then the lowest row;
- or parks empty nodes in service (never a busy or disrupted one): models with the
  least pending demand first, then in the engine's ``order`` (its
  ``scale_in_order``: likeliest to fail first), then the highest row.

A node that fails while parked interrupts nothing, so parking the riskiest idle nodes
keeps failures off running work (seed 11, 1,000 nodes x 21 days: failures on busy
nodes 192 -> 139 with the same drains).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime

import numpy as np

from predops.pipelines.whatif.cluster import Cluster
from predops.pipelines.whatif.tally import Tally


def reactive_target(busy: int, out_of_service: int, pending_nodes: int, headroom: float) -> int:
    """Today's practice: the nodes in use, a headroom over them, the nodes out of
    service, and what the pending pods need (a cluster autoscaler's scale-up)."""
    return busy + math.ceil(headroom * busy) + out_of_service + pending_nodes


class PoolScaler:
    """Resizes the pools of one :class:`Cluster` (module docstring) and remembers what
    each pool was last asked to hold and when it was last resized / scaled up."""

    def __init__(self, cluster: Cluster, row_of: Mapping[str, int], tally: Tally) -> None:
        self.cluster = cluster
        self.row_of = row_of
        self.tally = tally
        self.model: list[str | None] = [s.gpu_model for s in cluster.world.specs]
        self.want: dict[str, int] = {}
        self.last_resize: dict[str, datetime] = {}
        self.last_scale_up: dict[str, datetime] = {}

    def resize(
        self,
        pool: str,
        target: int,
        now: datetime,
        *,
        order: Sequence[str] = (),
        p_fail: np.ndarray | None = None,
    ) -> None:
        """Hold ``target`` nodes in ``pool``; ``order``: node ids to park first,
        ``p_fail``: risk per node row this hour (NaN: unknown, read as 0)."""
        c = self.cluster
        rows = c.pool_rows[pool]
        self.want[pool] = target
        cur = rows[c.active[rows]]
        short = self.pending_by_model(pool)
        if target > cur.size:
            self.last_scale_up[pool] = now
            parked = rows[~c.active[rows] & ~c.under_repair[rows]].tolist()
            risk = {
                r: 0.0 if p_fail is None or math.isnan(p_fail[r]) else float(p_fail[r])
                for r in parked
            }
            for _ in range(min(target - cur.size, len(parked))):
                best = min(parked, key=lambda r: (-short.get(self.model[r], 0.0), risk[r], r))
                parked.remove(best)
                c.active[best] = True
                c.joining[best] = True
                m = self.model[best]
                short[m] = short.get(m, 0.0) - float(c.gpus[best] or c.cores[best])
        elif target < cur.size:
            busy = c.busy()
            empty = cur[~busy[cur] & ~c.disrupted()[cur]].tolist()
            rank = {self.row_of[n]: i for i, n in enumerate(order)}
            empty.sort(key=lambda r: (short.get(self.model[r], 0.0), rank.get(r, len(rank)), -r))
            c.active[empty[: cur.size - target]] = False
        self.tally.resizes += 1
        self.last_resize[pool] = now

    def pending_by_model(self, pool: str) -> dict[str | None, float]:
        """Pending demand of ``pool`` per GPU model it may run on (GPUs; CPU pools:
        cores under the key None)."""
        c = self.cluster
        w = c.w
        out: dict[str | None, float] = {}
        models = {self.model[r] for r in c.pool_rows[pool].tolist()}
        for i in c.pending:
            if w.pools[int(w.pool[i])] != pool:
                continue
            allowed = w.model_sets[int(w.models[i])]
            use = float(w.gpus[i]) if w.num_gpu[i] else float(w.cpu_milli[i] / 1000)
            fits = [m for m in models if allowed is None or m in allowed]
            for m in fits:
                out[m] = out.get(m, 0.0) + use / len(fits)
        return out

    def reactive(self, now: datetime, headroom: float) -> None:
        """Size every pool from current usage (:func:`reactive_target`)."""
        c = self.cluster
        busy = c.busy()
        dis = c.disrupted()
        need = pending_nodes(c)
        for pool, rows in sorted(c.pool_rows.items()):
            act = rows[c.active[rows]]
            target = reactive_target(
                int((busy[act] & ~dis[act]).sum()),
                int(dis[act].sum()),
                math.ceil(need.get(pool, 0.0) - 1e-9),
                headroom,
            )
            if target != act.size:
                self.resize(pool, target, now)


def pending_nodes(c: Cluster) -> dict[str, float]:
    """Nodes the queued pods of each pool need, as an autoscaler estimates them: each
    pod's GPUs (CPU pods: cores) over the GPUs (cores) of one node of its pool."""
    w = c.w
    need: dict[str, float] = {}
    for i in c.pending:
        pool = w.pools[int(w.pool[i])]
        rows = c.pool_rows[pool]
        per = float(c.gpus[rows[0]]) if w.num_gpu[i] else float(c.cores[rows[0]])
        use = float(w.gpus[i]) if w.num_gpu[i] else float(w.cpu_milli[i] / 1000)
        need[pool] = need.get(pool, 0.0) + (use / per if per else 0.0)
    return need
