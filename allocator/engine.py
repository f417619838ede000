"""``Allocator``: filter, score with a policy, break ties, pick devices, commit.

The policy engine asks three questions through it: do these pods and gangs still fit
if these nodes are drained (and where) — :meth:`Allocator.fits_after_drain`; how
many nodes does demand need — :mod:`allocator.estimator`; how fragmented is the
cluster — :mod:`allocator.metrics`. Every answer is a :class:`Decision` (or a
:class:`GangDecision`) that says which node and devices, the score, and why the
runner-up lost; an unplaced pod says which filter ruled out the last node.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from predops.allocator.devices import feasible, pick_devices, unplaced_reason
from predops.allocator.policies.base import PlacementContext, Policy
from predops.allocator.requests import Gang, PodRequest
from predops.allocator.snapshot import ClusterSnapshot

_NO_CONTEXT = PlacementContext()


@dataclass(frozen=True, slots=True)
class Decision:
    """Where one pod went (or why it did not), with the runner-up for contrast."""

    pod_id: str
    placed: bool
    node_id: str | None = None
    gpus: tuple[int, ...] = ()
    policy: str = ""
    score: float | None = None
    candidates: int = 0
    tied: int = 0
    runner_up: str | None = None
    runner_up_score: float | None = None
    reason: str = ""
    detail: str = ""

    def explain(self) -> str:
        """A short human sentence: node, devices, and why the runner-up lost."""
        if not self.placed:
            return f"{self.pod_id}: not placed ({self.reason})"
        dev = f" GPUs {list(self.gpus)}" if self.gpus else ""
        text = (
            f"{self.pod_id} -> {self.node_id}{dev} by {self.policy} "
            f"(score {self.score:g}, {self.candidates} feasible nodes)"
        )
        if self.tied > 1:
            text += f"; {self.tied} nodes tied at the top, {self.runner_up} lost the tie-break"
        elif self.runner_up is not None:
            text += f"; runner-up {self.runner_up} scored lower ({self.runner_up_score:g})"
        if self.detail:
            text += f"; {self.detail}"
        return text


@dataclass(frozen=True, slots=True)
class GangDecision:
    """All pods of a gang placed (``placed``) or none of them."""

    gang_id: str
    placed: bool
    decisions: tuple[Decision, ...] = ()
    domain: tuple[str, ...] | None = None
    reason: str = ""
    tried_domains: int = 0


@dataclass(frozen=True, slots=True)
class DrainCheck:
    """Whether the pods on drained nodes (plus any extra demand) fit elsewhere."""

    fits: bool
    decisions: tuple[Decision, ...]
    gang_decisions: tuple[GangDecision, ...]
    unplaced: dict[str, int] = field(default_factory=dict)


TIE_BREAKS = ("rank", "random")


class Allocator:
    """Places pods on a :class:`ClusterSnapshot` with one policy.

    Score ties are broken by ``tie_break``:

    - ``"rank"`` (default): every node gets a random priority drawn once from ``rng``
      (nodes added later rank after the existing ones) and the tied node with the best
      priority wins. This is what the FGD paper's artifact does (its scheduler picks the
      lexicographically smallest tied node name, and names carry a random per-seed
      prefix); consistent tie-breaks keep filling the same node, which packs.
    - ``"random"``: a uniform pick among the tied nodes at every decision (upstream
      kube-scheduler's reservoir sampling); it spreads pods over tied nodes.

    All randomness comes from ``rng``. With ``explain`` each decision also carries the
    policy's one-line reading of the chosen node's score.
    """

    def __init__(
        self,
        snapshot: ClusterSnapshot,
        policy: Policy,
        rng: np.random.Generator,
        *,
        tie_break: str = "rank",
        explain: bool = True,
    ) -> None:
        if tie_break not in TIE_BREAKS:
            raise ValueError(f"tie_break must be one of {TIE_BREAKS}, got {tie_break!r}")
        self.snapshot = snapshot
        self.policy = policy
        self.rng = rng
        self.tie_break = tie_break
        self.explain = explain
        self._rank = rng.permutation(snapshot.n_nodes)
        self._gang_scope: dict[str, str | None] = {}

    @property
    def node_rank(self) -> np.ndarray:
        """Tie-break priority per node row (lower wins), extended for added nodes."""
        n, have = self.snapshot.n_nodes, len(self._rank)
        if n > have:
            self._rank = np.concatenate([self._rank, have + self.rng.permutation(n - have)])
        return self._rank[:n]

    def _break_tie(self, cand: np.ndarray, at_top: np.ndarray) -> int:
        if self.tie_break == "random":
            return int(at_top[self.rng.integers(len(at_top))])
        return int(at_top[np.argmin(self.node_rank[cand[at_top]])])

    def place(
        self,
        pod: PodRequest,
        *,
        rows: np.ndarray | None = None,
        ctx: PlacementContext = _NO_CONTEXT,
    ) -> Decision:
        """Place one pod (on ``rows`` only, when given) and commit it to the snapshot."""
        snap = self.snapshot
        cand = feasible(snap, pod, rows)
        if cand.size == 0:
            return Decision(
                pod.pod_id, False, policy=self.policy.name, reason=unplaced_reason(snap, pod, rows)
            )
        ns = self.policy.score(snap, pod, cand, ctx)
        scores = ns.scores
        if cand.size == 1:
            pick, tied = 0, 1
        else:
            top = scores.max()
            at_top = np.flatnonzero(scores == top)
            tied = len(at_top)
            pick = self._break_tie(cand, at_top) if tied > 1 else int(at_top[0])
        row = int(cand[pick])
        pref = None
        if ns.gpu is not None and ns.gpu[pick] >= 0:
            pref = int(ns.gpu[pick])
        placement = pick_devices(snap, row, pod, pref, self.policy.prefers_locality)
        if placement is None:  # only when a policy's preference broke a constraint
            placement = pick_devices(snap, row, pod)
        if placement is None:
            return Decision(pod.pod_id, False, policy=self.policy.name, reason="topology")
        runner, runner_score = self._runner_up(cand, scores, pick, tied)
        detail = self.policy.describe(snap, pod, row) if self.explain else ""
        snap.place(placement)
        return Decision(
            pod.pod_id,
            True,
            snap.node_ids[row],
            placement.gpus,
            self.policy.name,
            float(scores[pick]),
            int(cand.size),
            tied,
            runner,
            runner_score,
            "",
            detail,
        )

    def pin(self, pod: PodRequest, row: int) -> bool:
        """Place ``pod`` on node ``row`` and commit it; False when it does not fit there.

        The same outcome and devices as ``place(pod, rows=np.array([row]))`` (with one
        candidate there is nothing to score and no tie to break), without the scoring
        and the decision record: for pods already bound to a node, e.g. a snapshot of
        the running pods (``tests/allocator/test_engine.py`` checks the two agree). The
        policy is asked only for a GPU share's preferred device, so a policy that draws
        random numbers while scoring (``random_fit``) would draw fewer of them."""
        snap = self.snapshot
        if not snap.schedulable[row]:
            return False
        pref = None
        if pod.is_share:
            ns = self.policy.score(snap, pod, np.array([row], dtype=np.int64), _NO_CONTEXT)
            if ns.gpu is not None and ns.gpu[0] >= 0:
                pref = int(ns.gpu[0])
        placement = pick_devices(snap, row, pod, pref, self.policy.prefers_locality)
        if placement is None and (pref is not None or self.policy.prefers_locality):
            placement = pick_devices(snap, row, pod)
        if placement is None:
            return False
        snap.place(placement)
        return True

    def _runner_up(
        self, cand: np.ndarray, scores: np.ndarray, pick: int, tied: int
    ) -> tuple[str | None, float | None]:
        if cand.size < 2:
            return None, None
        if tied > 1:
            other = np.flatnonzero(scores == scores[pick])
            j = int(other[0] if other[0] != pick else other[1])
        else:
            masked = scores.astype(np.float64)
            masked[pick] = -np.inf
            j = int(np.argmax(masked))
        return self.snapshot.node_ids[int(cand[j])], float(scores[j])

    def place_all(self, pods: Iterable[PodRequest]) -> list[Decision]:
        return [self.place(p) for p in pods]

    def place_gang(self, gang: Gang, *, domain: int | None = None) -> GangDecision:
        """All pods of ``gang`` or none; with a scope, inside one rack / spine. Domains
        are tried tightest first (least free GPU that still covers the gang's request);
        ``domain`` (an index into ``snapshot.domains[scope]``) allows only that one."""
        snap = self.snapshot
        pods = sorted(gang.pods, key=lambda p: (-p.total_gpu_milli, -p.cpu_milli, p.pod_id))
        domains: list[tuple[tuple[str, ...] | None, np.ndarray | None]]
        if gang.scope is None:
            domains = [(None, None)]
        else:
            level = gang.scope
            dom = snap.domain_index(level)
            need = sum(p.total_gpu_milli for p in pods)
            free = snap.gpu_free_total * snap.schedulable
            options: list[tuple[int, int, np.ndarray]] = []
            for d in np.unique(dom).tolist():
                if domain is not None and d != domain:
                    continue
                members = np.flatnonzero(dom == d)
                total = int(free[members].sum())
                if total >= need:
                    options.append((total, d, members))
            options.sort(key=lambda o: (o[0], o[1]))
            domains = [(snap.domains[level][d], m) for _, d, m in options]
        last_reason = "gang_scope" if not domains else ""
        for tried, (key, rows) in enumerate(domains, start=1):
            snap.fork()
            placed: list[Decision] = []
            gang_rows: list[int] = []
            for p in pods:
                d = self.place(p, rows=rows, ctx=PlacementContext(tuple(gang_rows)))
                if not d.placed:
                    last_reason = f"member {p.pod_id}: {d.reason}"
                    break
                placed.append(d)
                gang_rows.append(snap.index_of(d.node_id or ""))
            if len(placed) == len(pods):
                snap.commit()
                self._gang_scope[gang.gang_id] = gang.scope
                return GangDecision(gang.gang_id, True, tuple(placed), key, "", tried)
            snap.revert()
        return GangDecision(
            gang.gang_id, False, (), None, last_reason or "gang_scope", len(domains)
        )

    def _scope_of(self, gang_id: str, members: Sequence[PodRequest]) -> str | None:
        """A gang's scope: as this allocator placed it, else as its members carry it
        (``PodRequest.gang_scope``: gangs already running when the snapshot was built)."""
        if gang_id in self._gang_scope:
            return self._gang_scope[gang_id]
        scopes = {p.gang_scope for p in members if p.gang_scope is not None}
        if len(scopes) > 1:
            raise ValueError(f"gang {gang_id!r}: members disagree on its scope {sorted(scopes)}")
        return scopes.pop() if scopes else None

    def fits_after_drain(
        self, node_ids: Sequence[str], extra: Sequence[PodRequest | Gang] = ()
    ) -> DrainCheck:
        """What-if: drain ``node_ids`` and re-place their pods plus ``extra``. Evicted
        members of a gang are re-placed together, in their gang's original scope (as
        this allocator placed the gang, else as its members carry it) and, when members
        stay behind, in the same rack / spine as those. The snapshot is unchanged
        afterwards."""
        snap = self.snapshot
        with snap.what_if():
            evicted = snap.drain(node_ids)
            singles = [p for p in evicted if p.gang_id is None]
            gangs: dict[str, list[PodRequest]] = {}
            for p in evicted:
                if p.gang_id is not None:
                    gangs.setdefault(p.gang_id, []).append(p)
            singles.sort(key=lambda p: (-p.total_gpu_milli, -p.cpu_milli, p.pod_id))
            work: list[PodRequest | Gang] = [
                Gang(g, tuple(ps), self._scope_of(g, ps)) for g, ps in sorted(gangs.items())
            ]
            stay = {p.pod.gang_id: p.node for p in snap.placements.values() if p.pod.gang_id}
            work += singles
            work += list(extra)
            decisions: list[Decision] = []
            gang_decisions: list[GangDecision] = []
            unplaced: dict[str, int] = {}
            for item in work:
                if isinstance(item, Gang):
                    home = None
                    if item.scope is not None and item.gang_id in stay:
                        home = int(snap.domain_index(item.scope)[stay[item.gang_id]])
                    gd = self.place_gang(item, domain=home)
                    gang_decisions.append(gd)
                    if not gd.placed:
                        unplaced[gd.reason.split(":")[-1].strip()] = unplaced.get(
                            gd.reason.split(":")[-1].strip(), 0
                        ) + len(item.pods)
                else:
                    d = self.place(item)
                    decisions.append(d)
                    if not d.placed:
                        unplaced[d.reason] = unplaced.get(d.reason, 0) + 1
        return DrainCheck(not unplaced, tuple(decisions), tuple(gang_decisions), unplaced)
