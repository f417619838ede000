"""Proactive cordon / drain and uncordon, decided under guards and budgets.
Over 500 lines: one policy class whose steps (guards, economics, pacing, acceptance,
uncordons) read and extend the same candidates and ledgers of one round; split, they
would pass that round state between modules.

Per scored node (latest risk per node): the node guards (:mod:`policy.guards`), then
the cost threshold (:mod:`policy.costs`), with the inspection window's capacity priced
by the pool's headroom (:mod:`policy.headroom`: idle or parked nodes of the same kind
beyond the demand forecast replace the node). Nodes that pass are paced per failure
domain (``pacing`` 'slow_start', :mod:`policy.pacing`: a burst of candidates in one
domain collapses its width, a burst confined to one signal or driver version pauses
that domain and alerts, the others go on; the state comes in and goes out with the
decisions) or, with ``pacing`` 'breaker', counted per pool for the storm breaker: if
more than ``storm_fraction`` of a pool crosses at once, none of them is drained and the
plan raises an alert. They are taken best net benefit first (node id breaks ties) and
each must pass the PDB headroom, the disruption budgets, its domains' widths and the
allocator check that the
pods of every accepted drain — gangs whole, in their rack / spine — still fit on the
schedulable rest of the cluster; a drain priced on spare capacity that earlier drains of
the plan took is priced again and may fall below the threshold. A drain waits for the
node's next checkpoint when it is known and near.

Per cordoned node: uncordon when a repair or inspection finished after the cordon, or
when its current risk is low and a clean window has passed since the cordon (not
within ``min_hold`` of the cordon: hysteresis), never a node someone else cordoned. A
node back from a repair or inspection is not drained again for ``repair_hold`` (off by
default).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from predops.allocator.engine import Allocator, DrainCheck
from predops.allocator.policies import make_policy
from predops.allocator.requests import PodRequest
from predops.allocator.snapshot import ClusterSnapshot
from predops.core.actions import Action, Drain, Skip, SkipReason, Uncordon
from predops.core.contracts import FailureRisk, Forecast, Provenance
from predops.policy.budgets import BudgetLedger
from predops.policy.config import Budgets, DisruptionConfig
from predops.policy.costs import NodeEconomics, break_even_floor, node_economics
from predops.policy.fleet import FleetState, NodeState
from predops.policy.guards import NodeCandidate, PdbLedger, Verdict, first_objection
from predops.policy.headroom import FLAT_PRICE, Kind, PoolHeadroom, size_of
from predops.policy.pacing import PacingState, SlowStart, pacing_domains

TOP_REASONS = 3


@dataclass
class Decisions:
    """What one policy decided: actions, skips, budget use, alerts, provenance used."""

    actions: list[Action] = field(default_factory=list)
    skips: list[Skip] = field(default_factory=list)
    budgets_used: dict[str, int] = field(default_factory=dict)
    alerts: list[str] = field(default_factory=list)
    provenance: list[Provenance] = field(default_factory=list)
    pacing: PacingState | None = None
    """Slow-start pacing's state after this round (None: ``pacing`` 'breaker')."""


def latest_risk(risks: Iterable[FailureRisk]) -> dict[str, FailureRisk]:
    """One risk per node: the latest ``as_of``; among equal times the highest p_fail
    (the cautious reading), so the answer does not depend on input order."""
    out: dict[str, FailureRisk] = {}
    for r in risks:
        old = out.get(r.node_id)
        if old is None or (r.as_of, r.p_fail) > (old.as_of, old.p_fail):
            out[r.node_id] = r
    return out


def earlier_scores(
    risks: Iterable[FailureRisk], latest: Mapping[str, FailureRisk]
) -> dict[str, list[FailureRisk]]:
    """Per node, its scores older than the latest one, newest first (one per ``as_of``:
    the highest p_fail, as :func:`latest_risk` reads ties)."""
    by_time: dict[str, dict[datetime, FailureRisk]] = {}
    for r in risks:
        top = latest.get(r.node_id)
        if top is None or r.as_of >= top.as_of:
            continue
        slot = by_time.setdefault(r.node_id, {})
        old = slot.get(r.as_of)
        if old is None or r.p_fail > old.p_fail:
            slot[r.as_of] = r
    return {n: [s[t] for t in sorted(s, reverse=True)] for n, s in by_time.items()}


def _in_snapshot(snapshot: ClusterSnapshot, node_id: str) -> bool:
    try:
        snapshot.index_of(node_id)
    except KeyError:
        return False
    return True


def _risk_evidence(r: FailureRisk) -> dict[str, Any]:
    top = sorted(r.reasons, key=lambda x: (-abs(x.contribution), x.feature))[:TOP_REASONS]
    return {
        "p_fail": r.p_fail,
        "horizon_h": r.horizon.total_seconds() / 3600,
        "as_of": r.as_of,
        "top_reasons": [
            {"feature": x.feature, "contribution": x.contribution, "text": x.text} for x in top
        ],
        "provenance": r.provenance.to_dict() if r.provenance else None,
    }


def _fit_evidence(check: DrainCheck) -> dict[str, Any]:
    moves = [{"pod": d.pod_id, "to": d.node_id} for d in check.decisions if d.placed and d.node_id]
    gangs = [
        {"gang": g.gang_id, "placed": g.placed, "domain": list(g.domain or ()), "reason": g.reason}
        for g in check.gang_decisions
    ]
    return {"fits": check.fits, "moves": moves, "gangs": gangs, "unplaced": dict(check.unplaced)}


def _below(econ: NodeEconomics) -> str:
    return (
        f"p_fail {econ.p_fail:.3f} x failure cost {econ.failure_cost:.2f} = "
        f"{econ.expected_benefit:.2f} <= drain cost {econ.drain_cost:.2f} (capacity priced "
        f"at {econ.capacity.share:.0%}: {econ.capacity.basis})"
    )


class CordonDrainPolicy:
    """Decides drains and uncordons; see the module docstring."""

    def __init__(self, config: DisruptionConfig, budgets: Budgets) -> None:
        self.config = config
        self.budgets = budgets

    def decide(
        self,
        risks: Sequence[FailureRisk],
        snapshot: ClusterSnapshot,
        fleet: FleetState,
        now: datetime,
        forecasts: Sequence[Forecast] = (),
        pacing: PacingState | None = None,
    ) -> Decisions:
        """Drains and uncordons at ``now``; ``forecasts`` (demand) price a drain's
        capacity by its pool's headroom (none: every pool is taken as full);
        ``pacing``: the slow-start state the previous round left (None: none yet)."""
        cfg = self.config
        out = Decisions()
        by_node = latest_risk(risks)
        history = earlier_scores(risks, by_node)
        pods_on, gangs = self._pods(snapshot)
        headroom: PoolHeadroom | None = None  # assessed for the first node that needs it
        passed: list[tuple[NodeCandidate, NodeEconomics]] = []
        for node_id in sorted(by_node):
            risk = by_node[node_id]
            spec = fleet.spec(node_id)
            if spec is not None and not _in_snapshot(snapshot, node_id):
                spec = None
            cand = NodeCandidate(
                node_id, risk, spec, fleet.nodes.get(node_id), pods_on.get(node_id, ()), now
            )
            v = first_objection(cand, cfg)
            if v is not None:
                out.skips.append(Skip("drain", node_id, v.reason, v.detail))
                continue
            assert cand.spec is not None and cand.state is not None
            floor = break_even_floor(cand.state, now, cfg.costs, cfg.benefit_margin)
            if not cand.pods or risk.p_fail <= floor:
                detail = (
                    "no pods: a failure interrupts nothing"
                    if not cand.pods
                    else f"p_fail {risk.p_fail:.3f} <= {floor:.3f}, below what any drain of "
                    "this node needs (margin x restart / (lost work + detection + restart))"
                )
                out.skips.append(Skip("drain", node_id, SkipReason.BELOW_THRESHOLD, detail))
                continue
            if headroom is None and cfg.costs.price_by_headroom:
                headroom = PoolHeadroom.assess(snapshot, fleet, forecasts, now, cfg.costs)
            econ = self._economics(cand, gangs, risk.p_fail, headroom, {})
            if econ.expected_benefit <= cfg.benefit_margin * econ.drain_cost:
                out.skips.append(Skip("drain", node_id, SkipReason.BELOW_THRESHOLD, _below(econ)))
                continue
            unconfirmed = self._unconfirmed(cand, gangs, history.get(node_id, ()), headroom)
            if unconfirmed is not None:
                out.skips.append(Skip("drain", node_id, SkipReason.HYSTERESIS, unconfirmed))
                continue
            passed.append((cand, econ))

        pacer: SlowStart | None = None
        if cfg.pacing == "breaker":
            passed = self._storm_breaker(passed, fleet, out)
        else:
            pacer = SlowStart(cfg, pacing, now)
            pacer.observe(fleet)
            doms = {}
            for cand, _ in passed:
                assert cand.spec is not None
                doms[cand.node_id] = pacing_domains(cand.spec, cand.state, cand.risk)
            drivers = {st.driver_version for st in fleet.nodes.values() if st.driver_version}
            out.alerts += pacer.admit(doms, several_drivers=len(drivers) > 1)
        self._accept(passed, snapshot, fleet, gangs, headroom, now, out, pacer)
        if pacer is not None:
            out.pacing = pacer.state()
        self._uncordons(by_node, fleet, now, out)
        seen: set[tuple[str, str, str]] = set()
        for r in by_node.values():
            p = r.provenance
            if p is not None and (p.model_name, p.model_version, p.feature_set_hash) not in seen:
                seen.add((p.model_name, p.model_version, p.feature_set_hash))
                out.provenance.append(p)
        return out

    # ------------------------------------------------------------------ pieces
    def _economics(
        self,
        cand: NodeCandidate,
        gangs: Mapping[str, Sequence[PodRequest]],
        p_fail: float,
        headroom: PoolHeadroom | None,
        taken: Mapping[Kind, float],
    ) -> NodeEconomics:
        cfg = self.config
        assert cand.spec is not None and cand.state is not None
        return node_economics(
            cand.spec,
            cand.pods,
            gangs,
            cand.state,
            p_fail,
            cand.now,
            cfg.costs,
            cfg.max_checkpoint_wait,
            FLAT_PRICE if headroom is None else headroom.price(cand.spec, taken),
        )

    def _unconfirmed(
        self,
        cand: NodeCandidate,
        gangs: Mapping[str, Sequence[PodRequest]],
        earlier: Sequence[FailureRisk],
        headroom: PoolHeadroom | None,
    ) -> str | None:
        """Why the risk is not yet confirmed (None: it is): with ``confirm_scores`` N > 1
        the N - 1 scores before the latest, each within ``confirm_gap`` of the next,
        must also cross the threshold (on the node's current pods)."""
        cfg = self.config
        need = cfg.confirm_scores - 1
        if need <= 0:
            return None
        assert cand.spec is not None and cand.state is not None
        at = cand.risk.as_of
        for k, r in enumerate(earlier[:need]):
            if at - r.as_of > cfg.confirm_gap:
                break
            e = self._economics(cand, gangs, r.p_fail, headroom, {})
            if e.expected_benefit <= cfg.benefit_margin * e.drain_cost:
                return (
                    f"not confirmed: the score at {r.as_of.isoformat()} (p_fail "
                    f"{r.p_fail:.3f}) was below the threshold"
                )
            at = r.as_of
            if k + 1 == need:
                return None
        return f"not confirmed: {cfg.confirm_scores} consecutive scores over the threshold needed"

    @staticmethod
    def _pods(
        snapshot: ClusterSnapshot,
    ) -> tuple[dict[str, tuple[PodRequest, ...]], dict[str, tuple[PodRequest, ...]]]:
        """Pods per node id and members per gang id, from the snapshot's placements."""
        per_node: dict[str, list[PodRequest]] = {}
        gangs: dict[str, list[PodRequest]] = {}
        for pod_id in sorted(snapshot.placements):
            pl = snapshot.placements[pod_id]
            per_node.setdefault(snapshot.node_ids[pl.node], []).append(pl.pod)
            if pl.pod.gang_id is not None:
                gangs.setdefault(pl.pod.gang_id, []).append(pl.pod)
        return (
            {k: tuple(v) for k, v in per_node.items()},
            {k: tuple(v) for k, v in gangs.items()},
        )

    def _storm_breaker(
        self,
        passed: list[tuple[NodeCandidate, NodeEconomics]],
        fleet: FleetState,
        out: Decisions,
    ) -> list[tuple[NodeCandidate, NodeEconomics]]:
        cfg = self.config
        sizes = {pool: len(nodes) for pool, nodes in fleet.pool_nodes().items()}
        bad: dict[str, int] = {}
        for cand, _ in passed:
            assert cand.spec is not None
            bad[cand.spec.pool] = bad.get(cand.spec.pool, 0) + 1
        tripped = {
            pool
            for pool, k in bad.items()
            if k >= cfg.storm_min_nodes and k > cfg.storm_fraction * sizes.get(pool, k)
        }
        for pool in sorted(tripped):
            out.alerts.append(
                f"storm breaker: {bad[pool]} of {sizes[pool]} nodes of pool {pool} crossed "
                f"the drain threshold at once (limit {cfg.storm_fraction:.0%}); no drains in "
                "this pool — check the data and look for a shared cause"
            )
        keep = []
        for cand, econ in passed:
            assert cand.spec is not None
            pool = cand.spec.pool
            if pool in tripped:
                detail = f"{bad[pool]} of {sizes[pool]} nodes of pool {pool} look bad at once"
                out.skips.append(Skip("drain", cand.node_id, SkipReason.STORM_BREAKER, detail))
            else:
                keep.append((cand, econ))
        return keep

    def _accept(
        self,
        passed: list[tuple[NodeCandidate, NodeEconomics]],
        snapshot: ClusterSnapshot,
        fleet: FleetState,
        gangs: Mapping[str, Sequence[PodRequest]],
        headroom: PoolHeadroom | None,
        now: datetime,
        out: Decisions,
        pacer: SlowStart | None = None,
    ) -> None:
        cfg = self.config
        taken: dict[Kind, float] = {}
        disrupted = [n for n, st in fleet.nodes.items() if st.disrupted]
        ledger = BudgetLedger(self.budgets, fleet.topology.nodes, disrupted)
        pdbs = PdbLedger(fleet.pdbs, fleet.pdb_pods)
        rng = np.random.default_rng(cfg.seed)
        alloc = Allocator(
            snapshot,
            make_policy(cfg.placement_policy, rng=np.random.default_rng(cfg.seed + 1)),
            rng,
            explain=False,
        )
        unavailable = sorted(n for n in disrupted if _in_snapshot(snapshot, n))
        accepted: list[str] = []
        order = sorted(
            passed, key=lambda ce: (-(ce[1].expected_benefit - ce[1].drain_cost), ce[0].node_id)
        )
        for cand, econ in order:
            node_id = cand.node_id
            assert cand.spec is not None
            kind = headroom.kind(cand.spec) if headroom is not None else (cand.spec.pool, None)
            if headroom is not None and taken.get(kind) and econ.capacity.share < 1.0:
                econ = self._economics(cand, gangs, econ.p_fail, headroom, taken)
                if econ.expected_benefit <= cfg.benefit_margin * econ.drain_cost:
                    detail = _below(econ) + "; the pool's spare went to earlier drains of this plan"
                    out.skips.append(Skip("drain", node_id, SkipReason.BELOW_THRESHOLD, detail))
                    continue
            v: Verdict | None = pdbs.blocked(node_id)
            if v is None:
                why = ledger.blocked(node_id)
                if why is not None:
                    v = Verdict(SkipReason.BUDGET_EXHAUSTED, why)
            if v is None and pacer is not None:
                held = pacer.blocked(node_id)
                if held is not None:
                    v = Verdict(*held)
            check: DrainCheck | None = None
            if v is None:
                with snapshot.what_if():
                    if unavailable:
                        snapshot.set_schedulable(unavailable, False)
                    check = alloc.fits_after_drain([*accepted, node_id])
                if not check.fits:
                    stranded = [g.gang_id for g in check.gang_decisions if not g.placed]
                    if stranded:
                        v = Verdict(
                            SkipReason.WOULD_STRAND_GANG,
                            f"gang(s) {', '.join(stranded)} would not fit elsewhere "
                            f"({dict(check.unplaced)})",
                        )
                    else:
                        v = Verdict(
                            SkipReason.DOES_NOT_FIT,
                            f"displaced pods would not fit: {dict(check.unplaced)}",
                        )
            if v is not None:
                out.skips.append(Skip("drain", node_id, v.reason, v.detail))
                continue
            assert check is not None
            ledger.take(node_id)
            pdbs.take(node_id)
            taken[kind] = taken.get(kind, 0.0) + size_of(cand.spec)
            accepted.append(node_id)
            paced = pacer.widths(node_id) if pacer is not None else None
            drain = self._drain(cand, econ, check, ledger, pdbs, gangs, now, paced)
            if pacer is not None:
                pacer.take(node_id, drain.expires or now + cfg.expires_after)
            out.actions.append(drain)
        out.budgets_used.update(ledger.used())

    def _drain(
        self,
        cand: NodeCandidate,
        econ: NodeEconomics,
        check: DrainCheck,
        ledger: BudgetLedger,
        pdbs: PdbLedger,
        gangs: Mapping[str, Sequence[PodRequest]],
        now: datetime,
        paced: dict[str, dict[str, Any]] | None = None,
    ) -> Drain:
        r = cand.risk
        timed = econ.not_before > now
        reason = (
            f"p_fail {r.p_fail:.3f} within {r.horizon.total_seconds() / 3600:g} h x failure "
            f"cost {econ.failure_cost:.2f} = {econ.expected_benefit:.2f} > drain cost "
            f"{econ.drain_cost:.2f}"
        )
        if timed:
            reason += f"; timed to the next checkpoint at {econ.not_before.isoformat()}"
        reason += f"; capacity priced at {econ.capacity.share:.0%} ({econ.capacity.basis})"
        evidence: dict[str, Any] = {
            "risk": _risk_evidence(r),
            "economics": econ.to_dict(),
            "allocator": _fit_evidence(check),
            "budgets": ledger.usage(cand.node_id),
            "pdbs": pdbs.covering(cand.node_id),
            "pods": [p.pod_id for p in cand.pods],
            "gangs": sorted({p.gang_id for p in cand.pods if p.gang_id}),
        }
        if paced is not None:
            evidence["pacing"] = paced
        return Drain(
            target=cand.node_id,
            reason=reason,
            evidence=evidence,
            not_before=econ.not_before,
            expires=econ.not_before + self.config.expires_after,
            expected_benefit=round(econ.expected_benefit, 6),
            expected_cost=round(econ.drain_cost, 6),
        )

    def _uncordons(
        self, by_node: Mapping[str, FailureRisk], fleet: FleetState, now: datetime, out: Decisions
    ) -> None:
        for node_id in sorted(fleet.nodes):
            st = fleet.nodes[node_id]
            if not st.cordoned:
                continue
            act, v = self._uncordon_one(st, by_node.get(node_id), now)
            if act is not None:
                out.actions.append(act)
            elif v is not None:
                out.skips.append(Skip("uncordon", node_id, v.reason, v.detail))

    def _uncordon_one(
        self, st: NodeState, risk: FailureRisk | None, now: datetime
    ) -> tuple[Uncordon | None, Verdict | None]:
        cfg = self.config
        if st.cordon_owner != cfg.owner:
            return None, Verdict(
                SkipReason.NOT_OWNED, f"cordoned by {st.cordon_owner or 'unknown'}, not by us"
            )
        if st.under_repair:
            return None, Verdict(SkipReason.UNDER_REPAIR, "repair not finished")
        if now - st.observed_at > cfg.max_data_age:
            return None, Verdict(SkipReason.STALE_DATA, "node state too old")
        expires = now + cfg.expires_after
        repaired = st.repaired_at
        # A finished repair or inspection is a fact, not a flap: the node goes back at
        # once (the drain side then holds it for ``repair_hold``).
        if repaired is not None and (st.cordoned_at is None or repaired >= st.cordoned_at):
            return (
                Uncordon(
                    target=st.node_id,
                    reason=f"repair finished at {repaired.isoformat()}",
                    evidence={"repaired_at": st.repaired_at, "cordoned_at": st.cordoned_at},
                    not_before=now,
                    expires=expires,
                ),
                None,
            )
        if st.cordoned_at is not None and now - st.cordoned_at < cfg.min_hold:
            return None, Verdict(
                SkipReason.HYSTERESIS,
                f"cordoned at {st.cordoned_at.isoformat()}, less than {cfg.min_hold} ago",
            )
        if risk is None:
            return None, Verdict(SkipReason.STALE_DATA, "no current risk score for this node")
        if risk.provenance is None:
            return None, Verdict(SkipReason.NO_PROVENANCE, "risk carries no model provenance")
        if now - risk.as_of > cfg.max_risk_age or risk.as_of > now + cfg.max_clock_skew:
            return None, Verdict(SkipReason.STALE_DATA, "risk score not current")
        if risk.p_fail > cfg.uncordon_p_fail:
            return None, Verdict(
                SkipReason.STILL_AT_RISK,
                f"p_fail {risk.p_fail:.3f} > uncordon level {cfg.uncordon_p_fail}",
            )
        since = st.cordoned_at
        if since is not None and now - since < cfg.clean_window:
            return None, Verdict(
                SkipReason.HYSTERESIS,
                f"clean window of {cfg.clean_window} since {since.isoformat()} not over",
            )
        return (
            Uncordon(
                target=st.node_id,
                reason=f"clean window: p_fail {risk.p_fail:.3f} <= {cfg.uncordon_p_fail} "
                f"for {cfg.clean_window} since the cordon",
                evidence={"risk": _risk_evidence(risk), "cordoned_at": st.cordoned_at},
                not_before=now,
                expires=expires,
            ),
            None,
        )
