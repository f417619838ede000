"""Move named nodes between pools: ``lend_nodes`` (lender -> borrower) and
``return_nodes`` (back), through the Kubernetes API.

Per node, in the action's order:

1. **cordon and drain** through the Eviction API, exactly as a ``drain`` action
   (:meth:`~pipelines.actuators.kube.KubeActuator.drain`: PDB 429s backed off, DaemonSet
   and mirror pods left, the cordon undone if a pod cannot be evicted — the node then
   stays in its pool and the action fails);
2. **move**: one JSON merge patch sets the pool label to the new pool, the pool taint's
   value likewise when ``pool_taint_key`` is set (every other taint as it was; the
   patch carries the read ``resourceVersion``, so a taint list changed in between is a
   409 and the action fails rather than losing a taint), and the loan annotations
   :data:`LENT_FROM`, :data:`LENT_TO`, :data:`LENT_UNTIL` (the action's ``expires``) and
   :data:`LEND_KEY` — cleared again by the return;
3. **uncordon**: the borrower's scheduler may now place pods there.

The pool label is ``pool_label`` when set, else the first of the labels the Kubernetes
ingest reads pools from (Karpenter's, EKS's, GKE's, AKS's) the node carries. Use it for
static pools that workloads select by label (``nodeSelector`` / affinity on the pool
label): a node a Karpenter NodePool or a managed node group provisioned stays theirs
whatever its label says, so lending is for pools predops may relabel.

Idempotent and resumable: a node already in the target pool and schedulable is
``already moved`` (nothing written); one cordoned under this action's drain key (a run
killed midway) resumes. :meth:`LendActuator.check` re-validates before a dry-run as
before a real run: every node exists, is in the pool it leaves (or already moved), is not
cordoned by anybody else and carries no do-not-disrupt label; a return only takes nodes
whose loan annotation names the pool they go back to. :func:`loans_of` reads the loans
back from a node list for the next plan. Needs ``get`` / ``patch`` on nodes, ``list``
on pods, ``create`` on ``pods/eviction`` — the drain's calls.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

from predops.core.actions import Action, Drain, LendNodes, ReturnNodes, SkipReason, Uncordon
from predops.core.clock import Clock
from predops.pipelines.actuators.apply import ActionFailed
from predops.pipelines.actuators.kube import (
    DO_NOT_DISRUPT,
    KEY_ANNOTATION,
    OWNER_ANNOTATION,
    KubeActuator,
    KubeApi,
    _annotations,
    api_error,
    client_errors,
    retrying,
)
from predops.pipelines.ingest.kubernetes import POOL_LABELS
from predops.policy.guards import Verdict
from predops.policy.lending import Loan

LENT_FROM = "predops.io/lent-from"
LENT_TO = "predops.io/lent-to"
LENT_UNTIL = "predops.io/lent-until"
LEND_KEY = "predops.io/lend-key"
MOVED, ALREADY = "moved", "already moved"


def _labels(node: Mapping[str, Any]) -> dict[str, str]:
    return dict((node.get("metadata") or {}).get("labels") or {})


def loans_of(nodes: Iterable[Mapping[str, Any]]) -> list[Loan]:
    """The loans the nodes of a node list record (unreadable annotations are skipped:
    such a node is treated as its pool's own)."""
    out = []
    for n in nodes:
        notes = _annotations(n)
        try:
            out.append(
                Loan(
                    str((n.get("metadata") or {}).get("name")),
                    notes[LENT_FROM],
                    notes[LENT_TO],
                    datetime.fromisoformat(notes[LENT_UNTIL]),
                )
            )
        except (KeyError, ValueError, TypeError):
            continue
    return out


def _route(action: Action) -> tuple[str, str, tuple[str, ...]]:
    """(pool the nodes leave, pool they join, the nodes)."""
    if isinstance(action, LendNodes):
        if not action.node_ids:
            raise ActionFailed(
                f"lend_nodes {action.target}: the plan names no nodes (a count-only plan "
                "written before nodes were named); plan again"
            )
        return action.target, action.to_pool, action.node_ids
    if isinstance(action, ReturnNodes):
        return action.from_pool, action.target, action.node_ids
    raise ActionFailed(f"the lending actuator does not run {action.kind} actions")


class LendActuator:
    """Moves the nodes of ``lend_nodes`` / ``return_nodes``; see the module docstring."""

    name = "kubernetes"
    kinds = ("lend_nodes", "return_nodes")

    def __init__(
        self,
        api: KubeApi,
        clock: Clock,
        sleep: Callable[[float], None],
        *,
        pool_label: str | None = None,
        pool_taint_key: str | None = None,
        grace_period_s: int = 300,
    ) -> None:
        self.kube = api
        self.clock = clock
        self.sleep = sleep
        self.pool_label = pool_label
        self.pool_taint_key = pool_taint_key
        self.grace_period_s = grace_period_s
        self.drainer = KubeActuator(api, clock, sleep)

    # ------------------------------------------------------------------ helpers
    def _read(self, node: str) -> dict[str, Any]:
        return retrying(lambda: self.kube.read_node(node), self.kube.opt, self.sleep)

    def _label_key(self, node: Mapping[str, Any]) -> str | None:
        if self.pool_label:
            return self.pool_label
        labels = _labels(node)
        return next((k for k in POOL_LABELS if k in labels), None)

    def _drain_of(self, action: Action, node: str, to: str) -> Drain:
        return Drain(
            target=node,
            reason=f"{action.kind} {action.target}: move {node} to pool {to}",
            not_before=action.not_before,
            expires=action.expires,
            grace_period_s=self.grace_period_s,
        )

    # ------------------------------------------------------------------ re-validation
    def check(self, action: Action, now: datetime) -> Verdict | None:
        try:
            src, dst, nodes = _route(action)
        except ActionFailed as exc:
            return Verdict(SkipReason.REVALIDATION_FAILED, exc.reason)
        for name in nodes:
            try:
                node = self._read(name)
            except client_errors() as exc:
                code, msg = api_error(exc)
                if code == 404:
                    return Verdict(SkipReason.UNKNOWN_NODE, f"node {name} is gone")
                return Verdict(SkipReason.REVALIDATION_FAILED, f"reading {name}: {code} {msg}")
            v = self._objection(action, node, name, src, dst)
            if v is not None:
                return v
        return None

    def _objection(
        self, action: Action, node: Mapping[str, Any], name: str, src: str, dst: str
    ) -> Verdict | None:
        key = self._label_key(node)
        labels, notes = _labels(node), _annotations(node)
        if key is None:
            return Verdict(SkipReason.POOL_CHANGED, f"node {name} carries no pool label")
        pool = labels.get(key)
        if pool not in (src, dst):
            return Verdict(
                SkipReason.POOL_CHANGED, f"node {name} is in pool {pool}, not {src} or {dst}"
            )
        if isinstance(action, ReturnNodes) and pool == src and notes.get(LENT_FROM) != dst:
            return Verdict(
                SkipReason.NOT_OWNED, f"node {name} is not on loan from {dst}: not returned"
            )
        if (
            isinstance(action, LendNodes)
            and pool == dst
            and notes.get(LEND_KEY) != (action.idempotency_key)
        ):
            return Verdict(
                SkipReason.POOL_CHANGED, f"node {name} is in pool {dst} already, not by this loan"
            )
        if "true" in (labels.get(DO_NOT_DISRUPT), notes.get(DO_NOT_DISRUPT)) and pool == src:
            return Verdict(SkipReason.DO_NOT_DISRUPT, f"node {name} is do-not-disrupt")
        if (node.get("spec") or {}).get("unschedulable"):
            ours = (
                notes.get(OWNER_ANNOTATION) == self.kube.opt.owner
                and notes.get(KEY_ANNOTATION) == self._drain_of(action, name, dst).idempotency_key
            )
            if not ours:
                return Verdict(SkipReason.ALREADY_CORDONED, f"node {name} is cordoned")
        return None

    # ------------------------------------------------------------------ run
    def run(self, action: Action, plan_id: str) -> dict[str, Any]:
        src, dst, nodes = _route(action)
        done: list[dict[str, Any]] = []
        for name in nodes:
            try:
                done.append(self._move(action, name, src, dst))
            except ActionFailed as exc:
                raise ActionFailed(
                    f"{action.kind} {action.target}: node {name}: {exc.reason}",
                    {"nodes": done, "failed": {"node": name, **exc.report}},
                ) from exc
            except client_errors() as exc:
                code, msg = api_error(exc)
                raise ActionFailed(
                    f"{action.kind} {action.target}: node {name}: HTTP {code}: {msg}",
                    {"nodes": done, "failed": {"node": name}},
                ) from exc
        return {"from_pool": src, "to_pool": dst, "nodes": done}

    def _move(self, action: Action, name: str, src: str, dst: str) -> dict[str, Any]:
        node = self._read(name)
        v = self._objection(action, node, name, src, dst)
        if v is not None:
            raise ActionFailed(f"{v.reason.value}: {v.detail}")
        key = self._label_key(node)
        assert key is not None
        cordoned = bool((node.get("spec") or {}).get("unschedulable"))
        if _labels(node).get(key) == dst and not cordoned:
            return {"node": name, "outcome": ALREADY}
        row: dict[str, Any] = {"node": name, "outcome": MOVED}
        drain = self._drain_of(action, name, dst)
        if _labels(node).get(key) == src:
            report = self.drainer.drain(drain)
            row["evicted"], row["skipped"] = report["evicted"], report["skipped"]
            node = self._read(name)
            body = self._move_patch(action, node, key, src, dst)
            retrying(lambda: self.kube.patch_node(name, body), self.kube.opt, self.sleep)
        self.drainer.run(_uncordon_of(drain), action.idempotency_key)
        return row

    def _move_patch(
        self, action: Action, node: Mapping[str, Any], key: str, src: str, dst: str
    ) -> dict[str, Any]:
        lending = isinstance(action, LendNodes)
        md: dict[str, Any] = {
            "labels": {key: dst},
            "annotations": {
                LENT_FROM: src if lending else None,
                LENT_TO: dst if lending else None,
                LENT_UNTIL: action.expires.isoformat() if lending and action.expires else None,
                LEND_KEY: action.idempotency_key if lending else None,
            },
        }
        body: dict[str, Any] = {"metadata": md}
        if self.pool_taint_key:
            taints = list((node.get("spec") or {}).get("taints") or [])
            new = [
                {**t, "value": dst} if t.get("key") == self.pool_taint_key else t for t in taints
            ]
            if new != taints:
                body["spec"] = {"taints": new}
                version = (node.get("metadata") or {}).get("resourceVersion")
                if version:
                    md["resourceVersion"] = version
        return body


def _uncordon_of(drain: Drain) -> Action:
    return Uncordon(target=drain.target, reason=drain.reason)
