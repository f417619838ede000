"""What ``predops apply --kubeconfig`` tells Kubernetes about each node, so that
``kubectl describe node`` shows the risk and what predops did, the way
node-problem-detector, medik8s NHC and the GPU operator surface node health:

- the annotation :data:`RISK_ANNOTATION` on every node scored now: compact JSON with
  ``p_fail`` per horizon (``{"24h": 0.12}``), the score's ``as_of``, the ``model``
  (``name@version``), its top ``reasons`` (the reason texts, largest contribution first)
  and ``at`` (when it was written) — a JSON merge patch of ``metadata.annotations``;
- the node condition :data:`CONDITION_TYPE` (``PredictedFailure``): ``True`` with reason
  ``RiskAboveThreshold`` when the node's highest p_fail is at or above
  ``PublishOptions.condition_p_fail``, else ``False`` / ``RiskBelowThreshold``; the
  message gives p_fail, horizon and the top reason. Written to ``nodes/status`` as
  node-problem-detector writes its own: a strategic-merge patch of
  ``status.conditions``, which the API server merges by ``type``, so every other
  condition (a person's, the kubelet's, NPD's) is left as it is.
  ``lastTransitionTime`` changes only when the status does; ``lastHeartbeatTime`` is
  the write;
- a core/v1 Event (involvedObject the Node, source component ``predops``) for every
  cordon, drain, uncordon and soft taint of the plan that is done (``PredopsCordon`` /
  ``PredopsDrain`` / ``PredopsUncordon`` / ``PredopsSoftTaint`` /
  ``PredopsRemoveSoftTaint``; ``Predops<Kind>Failed`` as a Warning when it failed), and a
  ``PredopsSkip`` for every node action the apply dropped or deferred at re-validation
  and every node candidate the plan skipped for a reason other than ``below_threshold``
  (a candidate the engine wanted and a guard refused: budget, PDB, storm breaker...;
  ``below_threshold`` is every quiet node, every hour, which is not news).

Nothing is written in a dry-run: the report says what would be sent (counts, and the
first ``max_preview`` rows). A node whose
annotation (all but ``at``) and condition (status, reason, message) already read as
they would be written is not patched, so a re-apply of the same scores costs one node
list. Event names are derived from the action's idempotency key (or the plan id, the
skip and its reason), so a re-apply creates none twice: the API's 409 ``AlreadyExists``
counts as already sent. At most ``max_events`` Events per apply (the rest are counted,
not sent). Failures of these writes are reported, never fatal: the actions are done.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from predops.core.actions import Plan, SkipReason
from predops.core.contracts import FailureRisk
from predops.pipelines.actuators.apply import ApplyReport
from predops.pipelines.actuators.kube import KubeApi, api_error, client_errors, retrying

RISK_ANNOTATION = "predops.io/failure-risk"
CONDITION_TYPE = "PredictedFailure"
ABOVE, BELOW = "RiskAboveThreshold", "RiskBelowThreshold"
STRATEGIC_MERGE = "application/strategic-merge-patch+json"
NODE_KINDS = ("cordon", "drain", "uncordon", "soft_taint", "remove_soft_taint")
EVENT_REASONS = {
    "cordon": "PredopsCordon",
    "drain": "PredopsDrain",
    "uncordon": "PredopsUncordon",
    "soft_taint": "PredopsSoftTaint",
    "remove_soft_taint": "PredopsRemoveSoftTaint",
}
SKIP_EVENT = "PredopsSkip"
SENT_WHEN = ("done", "already_done", "would_run")
"""Outcomes whose action gets its Event: ``already_done`` too (a run killed after the
action and before its Events sends them on the re-run; a 409 when they went out), and
``would_run`` in a dry-run's preview."""
QUIET_SKIPS = frozenset({SkipReason.BELOW_THRESHOLD})
"""Plan skips that get no Event (see the module docstring)."""


@dataclass(frozen=True, slots=True)
class PublishOptions:
    """``condition_p_fail`` 0.1: the condition turns True at or above this p_fail (1 %
    of node-hours of the simulated fleet, holding a fifth of its failures, docs/whatif.md);
    ``top_reasons`` 3; ``max_events`` 500 per apply; ``max_preview`` 200 rows of a
    dry-run's ``would_send`` (Events first; the counts cover all); ``event_namespace``
    ``default`` (where the kubelet records node Events); ``component`` ``predops`` (the
    Events' source)."""

    condition_p_fail: float = 0.1
    top_reasons: int = 3
    max_events: int = 500
    max_preview: int = 200
    event_namespace: str = "default"
    component: str = "predops"

    def __post_init__(self) -> None:
        if not 0.0 < self.condition_p_fail <= 1.0:
            raise ValueError(f"condition_p_fail must be in (0, 1], got {self.condition_p_fail}")
        if min(self.max_events, self.top_reasons, self.max_preview) < 0:
            raise ValueError("max_events, max_preview and top_reasons must be 0 or more")


def _horizon(r: FailureRisk) -> str:
    return f"{r.horizon.total_seconds() / 3600:g}h"


def _by_node(risks: Iterable[FailureRisk]) -> dict[str, dict[str, FailureRisk]]:
    """Per node, per horizon, the latest score (the higher p_fail on a tie)."""
    out: dict[str, dict[str, FailureRisk]] = {}
    for r in risks:
        slot = out.setdefault(r.node_id, {})
        old = slot.get(_horizon(r))
        if old is None or (r.as_of, r.p_fail) > (old.as_of, old.p_fail):
            slot[_horizon(r)] = r
    return out


def _top(r: FailureRisk, n: int) -> list[str]:
    ranked = sorted(r.reasons, key=lambda x: (-abs(x.contribution), x.feature))
    return [x.text or x.feature for x in ranked[:n]]


def _worst(scores: Mapping[str, FailureRisk]) -> FailureRisk:
    return max(scores.values(), key=lambda r: (r.p_fail, -r.horizon.total_seconds()))


def risk_annotation(scores: Mapping[str, FailureRisk], now: datetime, top: int) -> dict[str, Any]:
    """The annotation's content for one node's scores (horizon -> risk)."""
    worst = _worst(scores)
    p = worst.provenance
    return {
        "p_fail": {h: round(scores[h].p_fail, 4) for h in sorted(scores)},
        "as_of": max(r.as_of for r in scores.values()).isoformat(),
        "model": f"{p.model_name}@{p.model_version}" if p else None,
        "reasons": _top(worst, top),
        "at": now.isoformat(),
    }


def _same_annotation(old: str | None, new: Mapping[str, Any]) -> bool:
    try:
        body = json.loads(old) if old else None
    except ValueError:
        return False
    if not isinstance(body, dict):
        return False
    return {k: v for k, v in body.items() if k != "at"} == {
        k: v for k, v in new.items() if k != "at"
    }


def predicted_condition(
    scores: Mapping[str, FailureRisk],
    old: Mapping[str, Any] | None,
    now: datetime,
    options: PublishOptions,
) -> dict[str, Any]:
    """The ``PredictedFailure`` condition for one node's scores; ``old`` is the node's
    current one (its ``lastTransitionTime`` is kept when the status does not change)."""
    worst = _worst(scores)
    above = worst.p_fail >= options.condition_p_fail
    status = "True" if above else "False"
    reasons = _top(worst, 1)
    message = (
        f"predops: p_fail {worst.p_fail:.3f} within {_horizon(worst)} "
        f"({'at or above' if above else 'below'} {options.condition_p_fail:g})"
        + (f"; top reason: {reasons[0]}" if reasons else "")
    )
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    kept = old.get("lastTransitionTime") if old and old.get("status") == status else None
    return {
        "type": CONDITION_TYPE,
        "status": status,
        "reason": ABOVE if above else BELOW,
        "message": message,
        "lastHeartbeatTime": stamp,
        "lastTransitionTime": kept or stamp,
    }


def _same_condition(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    return old is not None and all(old.get(k) == new[k] for k in ("status", "reason", "message"))


@dataclass(frozen=True, slots=True)
class NodeEvent:
    """One Event to send about a node; ``key`` names it (same key, same Event)."""

    node: str
    reason: str
    message: str
    type: str
    key: str

    def name(self) -> str:
        return f"{self.node}.predops-{hashlib.sha256(self.key.encode()).hexdigest()[:16]}"

    def to_dict(self) -> dict[str, str]:
        return {
            "node": self.node,
            "reason": self.reason,
            "type": self.type,
            "message": self.message,
        }


def node_events(plan: Plan, report: ApplyReport) -> list[NodeEvent]:
    """The Events an executed apply of ``plan`` sends (see the module docstring)."""
    out: list[NodeEvent] = []
    for o in report.outcomes:
        if o.kind not in NODE_KINDS:
            continue
        if o.outcome in SENT_WHEN:
            what = EVENT_REASONS[o.kind]
            msg = f"predops {o.kind} of {o.target} (plan {plan.plan_id}): " + _why(plan, o.key)
            out.append(NodeEvent(o.target, what, msg, "Normal", f"{o.key}:done"))
        elif o.outcome == "failed":
            what = EVENT_REASONS[o.kind] + "Failed"
            msg = f"predops {o.kind} of {o.target} failed (plan {plan.plan_id}): {o.detail}"
            out.append(NodeEvent(o.target, what, msg[:1000], "Warning", f"{o.key}:failed"))
        elif o.outcome in ("dropped", "deferred"):
            msg = (
                f"predops {o.kind} of {o.target} {o.outcome} at re-validation "
                f"(plan {plan.plan_id}): {o.reason}" + (f": {o.detail}" if o.detail else "")
            )
            key = f"{o.key}:{o.outcome}:{o.reason}"
            out.append(NodeEvent(o.target, SKIP_EVENT, msg[:1000], "Normal", key))
    for s in plan.skips:
        if s.kind not in NODE_KINDS or s.reason in QUIET_SKIPS:
            continue
        msg = f"predops skipped {s.kind} of {s.target} (plan {plan.plan_id}): {s.reason.value}"
        msg += f": {s.detail}" if s.detail else ""
        key = f"{plan.plan_id}:skip:{s.kind}:{s.target}:{s.reason.value}"
        out.append(NodeEvent(s.target, SKIP_EVENT, msg[:1000], "Normal", key))
    return out


def _why(plan: Plan, key: str) -> str:
    for a in plan.actions:
        if a.idempotency_key == key:
            return a.reason
    return ""


class NodeSignals:
    """Publishes the annotation, the condition and the Events (module docstring)."""

    def __init__(
        self,
        api: KubeApi,
        sleep: Callable[[float], None],
        options: PublishOptions | None = None,
    ) -> None:
        self.kube = api
        self.sleep = sleep
        self.opt = options or PublishOptions()

    def publish(
        self,
        plan: Plan,
        report: ApplyReport,
        risks: Sequence[FailureRisk],
        now: datetime,
        *,
        execute: bool,
    ) -> dict[str, Any]:
        """Write (``execute``) or preview the signals; returns what was (would be) sent."""
        out: dict[str, Any] = {
            "mode": "execute" if execute else "dry_run",
            "annotations": 0,
            "conditions": 0,
            "unchanged": 0,
            "events": 0,
            "events_already_sent": 0,
            "events_left_out": 0,
            "errors": [],
        }
        try:
            nodes = {
                str(n["metadata"]["name"]): n
                for n in self._retrying(lambda: self.kube.nodes())  # one paged list
            }
        except client_errors() as exc:
            out["errors"].append(f"listing nodes: HTTP {api_error(exc)[0]}: {api_error(exc)[1]}")
            return out
        preview: list[dict[str, Any]] = []
        for node_id, scores in sorted(_by_node(risks).items()):
            node = nodes.get(node_id)
            if node is None:
                continue  # scored but not in this cluster
            self._node(node, scores, now, execute, out, preview)
        events = node_events(plan, report)
        if not execute:
            # events first: fewer, and what a person looks for; the counts cover all
            rows = [{"event": e.to_dict()} for e in events] + preview
            out["would_send"] = rows[: self.opt.max_preview]
            out["would_send_left_out"] = max(0, len(rows) - self.opt.max_preview)
            out["events"] = len(events)
            return out
        for i, e in enumerate(events):
            if i >= self.opt.max_events:
                out["events_left_out"] = len(events) - i
                break
            self._event(e, nodes.get(e.node), now, out)
        return out

    def _retrying(self, call: Callable[[], Any]) -> Any:
        return retrying(call, self.kube.opt, self.sleep)

    def _node(
        self,
        node: Mapping[str, Any],
        scores: Mapping[str, FailureRisk],
        now: datetime,
        execute: bool,
        out: dict[str, Any],
        preview: list[dict[str, Any]],
    ) -> None:
        name = str(node["metadata"]["name"])
        notes = (node.get("metadata") or {}).get("annotations") or {}
        conds = (node.get("status") or {}).get("conditions") or []
        old = next((c for c in conds if c.get("type") == CONDITION_TYPE), None)
        note = risk_annotation(scores, now, self.opt.top_reasons)
        cond = predicted_condition(scores, old, now, self.opt)
        write_note = not _same_annotation(notes.get(RISK_ANNOTATION), note)
        write_cond = not _same_condition(old, cond)
        if not (write_note or write_cond):
            out["unchanged"] += 1
            return
        text = json.dumps(note, sort_keys=True, separators=(",", ":"))
        if not execute:
            row: dict[str, Any] = {"node": name}
            if write_note:
                row["annotation"] = {RISK_ANNOTATION: text}
            if write_cond:
                row["condition"] = cond
            preview.append(row)
            out["annotations"] += write_note
            out["conditions"] += write_cond
            return
        try:
            if write_note:
                body = {"metadata": {"annotations": {RISK_ANNOTATION: text}}}
                self._retrying(lambda: self.kube.patch_node(name, body))
                out["annotations"] += 1
            if write_cond:
                self._retrying(lambda: self._patch_status(name, cond))
                out["conditions"] += 1
        except client_errors() as exc:
            status, msg = api_error(exc)
            out["errors"].append(f"node {name}: HTTP {status}: {msg}")

    def _patch_status(self, name: str, condition: Mapping[str, Any]) -> None:
        self.kube.core.patch_node_status(
            name,
            {"status": {"conditions": [dict(condition)]}},
            _content_type=STRATEGIC_MERGE,
            _preload_content=False,
            _request_timeout=self.kube.opt.request_timeout,
        )

    def _event(
        self, e: NodeEvent, node: Mapping[str, Any] | None, now: datetime, out: dict[str, Any]
    ) -> None:
        stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
        md = (node or {}).get("metadata") or {}
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": e.name(), "namespace": self.opt.event_namespace},
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "Node",
                "name": e.node,
                "uid": md.get("uid") or e.node,
            },
            "reason": e.reason,
            "message": e.message,
            "type": e.type,
            "source": {"component": self.opt.component},
            "reportingComponent": self.opt.component,
            "reportingInstance": self.opt.component,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        try:
            self._retrying(lambda: self._create_event(body))
            out["events"] += 1
        except client_errors() as exc:
            status, msg = api_error(exc)
            if status == 409:  # this very Event was sent by an earlier run
                out["events_already_sent"] += 1
            else:
                out["errors"].append(f"event {e.reason} on {e.node}: HTTP {status}: {msg}")

    def _create_event(self, body: Any) -> None:  # a plain dict: the client sends it as is
        self.kube.core.create_namespaced_event(
            self.opt.event_namespace,
            body,
            _preload_content=False,
            _request_timeout=self.kube.opt.request_timeout,
        )
