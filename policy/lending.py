"""Which nodes a pool lends, and when lent nodes go back.

**Picking the nodes** (:func:`pick_nodes`): of the lender's nodes in service (not
cordoned, in repair or do-not-disrupt, and in the snapshot), the cheapest drains
first — the restart cost of the jobs their pods belong to (:func:`~policy.costs.jobs_on`:
a gang member interrupts its whole gang; ``restart_overhead`` x the resources held),
then fewer pods, then node id. Each is taken only if the allocator can re-place the
pods of every node taken so far on the rest of the *lender* pool (the borrower's nodes
and the disrupted ones are closed in the what-if, gangs stay whole in their scope,
as :meth:`~allocator.engine.Allocator.fits_after_drain` checks for a drain). Fewer
than asked may fit; none is a ``does_not_fit`` skip.

**Giving them back** (:func:`returns`): a lent node (:class:`Loan`, as the cluster
records it on the node) goes back to its pool when its loan expires, or earlier when
the lender's own p90 demand over the next sizing window needs more nodes than it holds
at home (the shortfall's worth of nodes, the ones running the fewest borrower pods
first). Pure: no I/O, no clock.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from predops.allocator.engine import Allocator
from predops.allocator.policies import make_policy
from predops.allocator.requests import PodRequest
from predops.allocator.snapshot import ClusterSnapshot
from predops.allocator.topology import NodeSpec
from predops.core.actions import LendNodes, ReturnNodes, Skip, SkipReason
from predops.core.contracts import Forecast, _require_utc
from predops.policy.config import CostModel, SizingConfig
from predops.policy.costs import jobs_on, pod_hourly
from predops.policy.disruption import Decisions
from predops.policy.fleet import FleetState
from predops.policy.sizing import pool_demand

HOURS = 3600.0
HOUR = timedelta(hours=1)


@dataclass(frozen=True, slots=True)
class Loan:
    """Node ``node_id`` of pool ``lender`` serves pool ``borrower`` until ``until``."""

    node_id: str
    lender: str
    borrower: str
    until: datetime

    def __post_init__(self) -> None:
        _require_utc("until", self.until)
        if self.lender == self.borrower:
            raise ValueError(f"loan of {self.node_id}: lender and borrower are both {self.lender}")


def drain_cost(
    pods: Sequence[PodRequest], gangs: Mapping[str, Sequence[PodRequest]], costs: CostModel
) -> float:
    """Cost units a drain of a node running ``pods`` costs: each interrupted job's
    resources x ``restart_overhead``."""
    hours = costs.restart_overhead.total_seconds() / HOURS
    return sum(sum(pod_hourly(p, costs) for p in job) * hours for job in jobs_on(pods, gangs))


def pick_nodes(
    lender: Sequence[NodeSpec],
    want: int,
    snapshot: ClusterSnapshot,
    fleet: FleetState,
    costs: CostModel,
    *,
    placement_policy: str = "best_fit",
    seed: int = 0,
) -> tuple[list[str], dict[str, Any]]:
    """Up to ``want`` nodes of ``lender`` to lend (module docstring), and the evidence:
    each candidate's drain cost and pods, and the allocator's verdict."""
    node_rows = {snapshot.node_ids[i]: i for i in range(len(snapshot.node_ids))}
    pods_on: dict[str, list[PodRequest]] = {}
    gangs: dict[str, list[PodRequest]] = {}
    for pod_id in sorted(snapshot.placements):
        pl = snapshot.placements[pod_id]
        pods_on.setdefault(snapshot.node_ids[pl.node], []).append(pl.pod)
        if pl.pod.gang_id:
            gangs.setdefault(pl.pod.gang_id, []).append(pl.pod)
    home = {n.node_id for n in lender}
    candidates = []
    for n in lender:
        st = fleet.nodes.get(n.node_id)
        if n.node_id not in node_rows or (st is not None and (st.disrupted or st.do_not_disrupt)):
            continue
        pods = pods_on.get(n.node_id, [])
        candidates.append((drain_cost(pods, gangs, costs), len(pods), n.node_id))
    candidates.sort()
    closed = sorted(
        x
        for x in node_rows
        if x not in home or ((st := fleet.nodes.get(x)) is not None and st.disrupted)
    )
    rng = np.random.default_rng(seed)
    alloc = Allocator(
        snapshot,
        make_policy(placement_policy, rng=np.random.default_rng(seed + 1)),
        rng,
        explain=False,
    )
    taken: list[str] = []
    considered: list[dict[str, Any]] = []
    for cost, n_pods, node in candidates:
        if len(taken) >= want:
            break
        fits = True
        if n_pods:
            with snapshot.what_if():
                if closed:
                    snapshot.set_schedulable(closed, False)
                fits = alloc.fits_after_drain([*taken, node]).fits
        considered.append(
            {"node": node, "drain_cost": round(cost, 4), "pods": n_pods, "fits": fits}
        )
        if fits:
            taken.append(node)
    return taken, {"candidates": considered, "in_service": len(candidates)}


def returns(
    loans: Sequence[Loan],
    lender_need: Mapping[str, float],
    home_nodes: Mapping[str, int],
    pods_on: Mapping[str, int],
    now: datetime,
) -> dict[tuple[str, str], tuple[list[str], str]]:
    """(lender, borrower) -> (nodes to give back now, why); see the module docstring.
    ``lender_need`` is each lender's p90 demand peak over the next window in nodes,
    ``home_nodes`` the nodes it holds at home, ``pods_on`` borrower pods per lent node."""
    out: dict[tuple[str, str], tuple[list[str], str]] = {}
    by_lender: dict[str, list[Loan]] = {}
    for loan in sorted(loans, key=lambda x: (x.lender, x.node_id)):
        by_lender.setdefault(loan.lender, []).append(loan)
    for lender, ls in sorted(by_lender.items()):
        due = [x for x in ls if x.until <= now]
        for x in due:
            why = f"loan expired at {x.until.isoformat()}"
            nodes, _ = out.setdefault((lender, x.borrower), ([], why))
            nodes.append(x.node_id)
        rest = [x for x in ls if x.until > now]
        need = math.ceil(lender_need.get(lender, 0.0) - 1e-9)
        short = need - home_nodes.get(lender, 0) - len(due)
        if short <= 0 or not rest:
            continue
        rest.sort(key=lambda x: (pods_on.get(x.node_id, 0), x.node_id))
        for x in rest[:short]:
            why = (
                f"{lender}'s p90 needs {lender_need[lender]:g} nodes over the next window; "
                f"it holds {home_nodes.get(lender, 0)} at home"
            )
            nodes, _ = out.setdefault((lender, x.borrower), ([], why))
            nodes.append(x.node_id)
    return out


class TidalLending:
    """``lend_nodes`` per lender with opposite peaks, ``return_nodes`` per loan due back.

    Two pools of the same GPU model whose hourly p50 profiles over ``lend_horizon``
    correlate below ``-lend_min_anticorrelation`` have opposite peaks; when one (the
    borrower) is short of its p90 while the other has spare nodes over that shortfall,
    the lender lends the cheapest drains of them (:func:`pick_nodes`) until the shortfall
    ends. Nodes on loan are not lent on; a lender giving nodes back lends none."""

    def __init__(self, config: SizingConfig) -> None:
        self.config = config

    def decide(
        self,
        forecasts: Sequence[Forecast],
        snapshot: ClusterSnapshot,
        fleet: FleetState,
        loans: Sequence[Loan],
        now: datetime,
    ) -> Decisions:
        out = Decisions()
        pools = fleet.pool_nodes()
        pods_by_node: dict[str, int] = {}
        for pl in snapshot.placements.values():
            node = snapshot.node_ids[pl.node]
            pods_by_node[node] = pods_by_node.get(node, 0) + 1
        profiles, model = self._profiles(pools, forecasts, now)
        giving_back = self._returns(pools, profiles, loans, pods_by_node, now, out)
        lent = {x.node_id for x in loans}
        for lender in sorted(profiles):
            if lender in giving_back:
                out.skips.append(
                    Skip("lend_nodes", lender, SkipReason.NOT_NEEDED, "giving nodes back now")
                )
                continue
            self._lend(
                lender, pools, profiles, model, pods_by_node, lent, snapshot, fleet, now, out
            )
        return out

    def _profiles(
        self, pools: Mapping[str, Sequence[NodeSpec]], forecasts: Sequence[Forecast], now: datetime
    ) -> tuple[dict[str, dict[datetime, tuple[float, float]]], dict[str, str | None]]:
        """Per pool and target time, (p50, p90) demand in nodes of the pool's SKU."""
        demand = pool_demand(forecasts, now, now + self.config.lend_horizon)
        profiles: dict[str, dict[datetime, tuple[float, float]]] = {}
        model: dict[str, str | None] = {}
        for pool in sorted(pools):
            pd = demand.get(pool)
            if pd is None or any(f.provenance is None for f in pd.forecasts):
                continue
            t = pools[pool][0]
            model[pool] = t.gpu_model
            prof: dict[datetime, tuple[float, float]] = {}
            for at in sorted(set(pd.gpus) | set(pd.cpu_cores)):
                g = pd.gpus.get(at, (0.0, 0.0, 0.0))
                c = pd.cpu_cores.get(at, (0.0, 0.0, 0.0))
                # demand in nodes of the pool's SKU: the binding resource of p50 / p90
                p50 = max(g[1] / t.gpus if t.gpus else 0.0, c[1] / (t.cpu_milli / 1000))
                p90 = max(g[2] / t.gpus if t.gpus else 0.0, c[2] / (t.cpu_milli / 1000))
                prof[at] = (p50, p90)
            profiles[pool] = prof
        return profiles, model

    def _returns(
        self,
        pools: Mapping[str, Sequence[NodeSpec]],
        profiles: Mapping[str, Mapping[datetime, tuple[float, float]]],
        loans: Sequence[Loan],
        pods_by_node: Mapping[str, int],
        now: datetime,
        out: Decisions,
    ) -> set[str]:
        cfg = self.config
        soon = now + cfg.scale_up_lead + cfg.hold
        need = {
            pool: max((p90 for at, (_, p90) in prof.items() if at <= soon), default=0.0)
            for pool, prof in profiles.items()
        }
        home = {pool: len(nodes) for pool, nodes in pools.items()}
        back = returns(loans, need, home, pods_by_node, now)
        for (lender, borrower), (nodes, why) in sorted(back.items()):
            out.actions.append(
                ReturnNodes(
                    target=lender,
                    from_pool=borrower,
                    node_ids=tuple(nodes),
                    reason=f"give {len(nodes)} node(s) back from {borrower}: {why}",
                    evidence={
                        "lender_p90_nodes": round(need.get(lender, 0.0), 4),
                        "home_nodes": home.get(lender, 0),
                    },
                    not_before=now,
                    expires=now + cfg.scale_up_lead + HOUR,
                    expected_cost=0.0,
                )
            )
        return {lender for lender, _ in back}

    def _lend(
        self,
        lender: str,
        pools: Mapping[str, Sequence[NodeSpec]],
        profiles: Mapping[str, Mapping[datetime, tuple[float, float]]],
        model: Mapping[str, str | None],
        pods_by_node: Mapping[str, int],
        lent: set[str],
        snapshot: ClusterSnapshot,
        fleet: FleetState,
        now: datetime,
        out: Decisions,
    ) -> None:
        cfg = self.config
        best: tuple[float, str, int, datetime, datetime, float] | None = None
        partners: list[str] = []
        for borrower in sorted(profiles):
            if borrower == lender or model[borrower] != model[lender]:
                continue
            common = sorted(set(profiles[lender]) & set(profiles[borrower]))
            if len(common) < 6:
                continue
            a = np.array([profiles[lender][t][0] for t in common])
            b = np.array([profiles[borrower][t][0] for t in common])
            if a.std() == 0 or b.std() == 0:
                continue
            corr = float(np.corrcoef(a, b)[0, 1])
            if corr > -cfg.lend_min_anticorrelation:
                continue
            partners.append(borrower)
            cap_l, cap_b = len(pools[lender]), len(pools[borrower])
            busy_l = sum(1 for n in pools[lender] if pods_by_node.get(n.node_id))
            short = [t for t in common if profiles[borrower][t][1] > cap_b]
            if not short:
                continue
            spare = min(cap_l - max(busy_l, math.ceil(profiles[lender][t][1])) for t in short)
            need = max(math.ceil(profiles[borrower][t][1]) - cap_b for t in short)
            n = min(spare, need)
            if n <= 0:
                continue
            if best is None or (corr, borrower) < (best[0], best[1]):
                best = (corr, borrower, n, short[0], short[-1], float(need))
        if best is None:
            if partners:
                out.skips.append(
                    Skip(
                        "lend_nodes",
                        lender,
                        SkipReason.NOT_NEEDED,
                        f"opposite peaks with {', '.join(partners)} but no shortfall there "
                        "that spare nodes here could cover",
                    )
                )
            return
        corr, borrower, n, start, end, shortfall = best
        own = [x for x in pools[lender] if x.node_id not in lent]
        nodes, picked = pick_nodes(
            own, n, snapshot, fleet, cfg.costs, placement_policy=cfg.packing_policy, seed=cfg.seed
        )
        if not nodes:
            detail = f"no node of {lender} can be drained with its pods fitting on the rest"
            out.skips.append(Skip("lend_nodes", lender, SkipReason.DOES_NOT_FIT, detail))
            return
        lt = pools[lender][0]
        node_hour = cfg.costs.hourly(lt.gpus, lt.cpu_milli / 1000)
        hours = (end - start + HOUR) / HOUR
        out.actions.append(
            LendNodes(
                target=lender,
                to_pool=borrower,
                nodes=len(nodes),
                node_ids=tuple(nodes),
                reason=(
                    f"daily peaks opposite (p50 correlation {corr:.2f}); {borrower} is "
                    f"{shortfall:g} nodes short of its p90 from {start.isoformat()} to "
                    f"{end.isoformat()} while {lender} has {n} spare; lends "
                    f"{', '.join(nodes)} (cheapest drains)"
                ),
                evidence={
                    "correlation": round(corr, 4),
                    "borrower_shortfall": shortfall,
                    "spare": n,
                    "allocator": picked,
                },
                not_before=max(now, start - cfg.scale_up_lead),
                expires=end + HOUR,
                # value of the borrowed node-hours; the lender keeps its p90 covered
                expected_benefit=round(len(nodes) * node_hour * hours, 4),
                expected_cost=round(
                    sum(c["drain_cost"] for c in picked["candidates"] if c["node"] in nodes), 4
                ),
            )
        )
