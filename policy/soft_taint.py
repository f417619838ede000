"""Soft taints: steer new pods away from risky nodes that do not justify a drain.

Off unless ``DisruptionConfig.soft_taint_p`` is set. Per scored node (latest risk), with
a current score carrying provenance, in service (not cordoned, not in repair) and not
drained by this plan:

- not tainted, ``p_fail >= soft_taint_p``: a ``soft_taint`` candidate. Candidates are
  taken highest p_fail first (node id breaks ties) under the soft-taint budget — at most
  ``soft_taint_max_percent`` of each pool tainted at once, at least one node — and a
  candidate over it is skipped ``budget_exhausted``;
- tainted, ``p_fail < soft_taint_clear_p`` (0: half of ``soft_taint_p``; the gap keeps a
  node near the threshold from flapping): ``remove_soft_taint``.

A soft taint (``PreferNoSchedule``) evicts nothing and is no disruption: it does not
count against the disruption budgets. Its budget's use is reported as
``soft_taint:pool:<name>``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime

from predops.core.actions import RemoveSoftTaint, Skip, SkipReason, SoftTaint
from predops.core.contracts import FailureRisk
from predops.policy.config import DisruptionConfig
from predops.policy.disruption import Decisions
from predops.policy.fleet import FleetState


def clear_level(cfg: DisruptionConfig) -> float:
    """The p_fail below which a soft taint comes off."""
    return cfg.soft_taint_clear_p or cfg.soft_taint_p / 2


def pool_limit(size: int, cfg: DisruptionConfig) -> int:
    """Nodes of a pool of ``size`` that may carry a soft taint at once."""
    return min(size, max(1, math.floor(size * cfg.soft_taint_max_percent / 100)))


class SoftTaintPolicy:
    """Decides soft taints and their removal; see the module docstring."""

    def __init__(self, config: DisruptionConfig) -> None:
        self.config = config

    def decide(
        self,
        by_node: Mapping[str, FailureRisk],
        fleet: FleetState,
        drained: frozenset[str],
        now: datetime,
    ) -> Decisions:
        cfg = self.config
        out = Decisions()
        if not cfg.soft_taint_p:
            return out
        pools = fleet.pool_nodes()
        pool_of = {n.node_id: pool for pool, nodes in pools.items() for n in nodes}
        tainted: dict[str, int] = {}
        for node_id, held in fleet.nodes.items():
            if held.soft_tainted and node_id in pool_of:
                tainted[pool_of[node_id]] = tainted.get(pool_of[node_id], 0) + 1
        expires = now + cfg.expires_after
        wanted: list[FailureRisk] = []
        for node_id in sorted(by_node):
            r, st = by_node[node_id], fleet.nodes.get(node_id)
            if st is None or node_id not in pool_of or r.provenance is None:
                continue
            if now - r.as_of > cfg.max_risk_age or r.as_of > now + cfg.max_clock_skew:
                continue  # a stale score changes nothing either way
            if st.soft_tainted and r.p_fail < clear_level(cfg):
                tainted[pool_of[node_id]] -= 1
                out.actions.append(
                    RemoveSoftTaint(
                        target=node_id,
                        reason=f"p_fail {r.p_fail:.3f} < {clear_level(cfg):g}: risk fell",
                        evidence={"p_fail": r.p_fail, "as_of": r.as_of},
                        not_before=now,
                        expires=expires,
                    )
                )
            elif (
                not st.soft_tainted
                and not st.disrupted
                and node_id not in drained
                and r.p_fail >= cfg.soft_taint_p
            ):
                wanted.append(r)
        used: dict[str, int] = {}
        for r in sorted(wanted, key=lambda x: (-x.p_fail, x.node_id)):
            pool = pool_of[r.node_id]
            limit = pool_limit(len(pools[pool]), cfg)
            if tainted.get(pool, 0) + 1 > limit:
                detail = f"soft-taint budget of pool {pool}: {limit} of {len(pools[pool])} nodes"
                out.skips.append(Skip("soft_taint", r.node_id, SkipReason.BUDGET_EXHAUSTED, detail))
                continue
            tainted[pool] = tainted.get(pool, 0) + 1
            used[pool] = used.get(pool, 0) + 1
            out.actions.append(
                SoftTaint(
                    target=r.node_id,
                    reason=f"p_fail {r.p_fail:.3f} >= {cfg.soft_taint_p:g} without a drain: "
                    "new pods prefer other nodes",
                    evidence={"p_fail": r.p_fail, "as_of": r.as_of},
                    not_before=now,
                    expires=expires,
                )
            )
        out.budgets_used.update({f"soft_taint:pool:{p}": k for p, k in sorted(used.items())})
        return out
