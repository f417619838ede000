"""The Kubernetes actuator: cordon, drain (Eviction API, policy/v1) and uncordon through
the official ``kubernetes`` client, and the live cluster state re-validation reads.

- **cordon**: a JSON merge patch setting ``spec.unschedulable`` and three annotations
  (:data:`OWNER_ANNOTATION`, :data:`KEY_ANNOTATION`, :data:`CORDONED_AT_ANNOTATION`), so
  the cluster itself says who cordoned a node, for which action, and when — a drain
  killed after its cordon resumes under the same key, and the engine never uncordons a
  node somebody else cordoned.
- **drain**: cordon (unless already cordoned: ``resumed`` when under this action's key,
  as a run killed after its cordon leaves it), then evict every pod on the node through
  ``POST .../pods/{name}/eviction`` in name order, skipping mirror (static) pods,
  DaemonSet pods (their controller would put them straight back; kubectl's
  ``--ignore-daemonsets``), pods already terminating and finished pods. A 429 (a
  PodDisruptionBudget allows no disruption now) is retried with exponential backoff
  (``backoff_initial`` doubling to ``backoff_max``) until the drain's ``timeout``; a 404
  means the pod is gone already; a transient error (see below) is retried; anything else
  (a 500 when two PDBs select the pod, a 403) fails that pod at once. The per-pod report
  says what happened to each pod, with attempts and seconds waited. If any pod could not
  be evicted the drain fails and, when the cordon is this action's (made now, or
  resumed), the cordon is undone so the node's disruption budget is released (pods
  already evicted stay evicted); a node cordoned by anyone else, or under another key,
  stays cordoned. The drain does not wait for evicted pods to terminate: the eviction
  was accepted, their grace period is the kubelet's business.
- **uncordon**: a merge patch clearing ``spec.unschedulable`` and our annotations and
  stamping :data:`UNCORDONED_AT_ANNOTATION` (the hysteresis clock).

Transient API errors — no answer within ``request_timeout`` (or no connection), 500,
502, 503, 504, and 429 on calls other than an eviction (API priority and fairness
throttling) — are retried ``retries`` times per call with the same doubling backoff,
never past the drain's deadline; then the call fails as above. Every call is safe to
repeat: the cordon and uncordon patches set absolute values, an eviction whose answer was
lost finds its pod terminating (skipped) or gone (404).

Time comes from the injected clock and waits go through the injected ``sleep``, so tests
run the backoff without sleeping. Tested against ``tests/fakes/kube_api.py`` (no real
API server runs on these machines).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

from predops.allocator.topology import Topology
from predops.core.actions import Action, Cordon, Drain, Uncordon
from predops.core.clock import Clock
from predops.core.schemas import INVENTORY
from predops.core.validation import validate
from predops.pipelines.actuators.apply import ActionFailed
from predops.pipelines.ingest.kubernetes import DEFAULTS, node_frame
from predops.policy.fleet import NodeState, PdbState

OWNER_ANNOTATION = "predops.io/cordon-owner"
KEY_ANNOTATION = "predops.io/cordon-key"
CORDONED_AT_ANNOTATION = "predops.io/cordoned-at"
UNCORDONED_AT_ANNOTATION = "predops.io/uncordoned-at"
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
REPAIR_LABEL = "predops.io/under-repair"
SOFT_TAINT_KEY = "predops.io/predicted-failure"  # pipelines/actuators/soft_taint.py
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
MERGE_PATCH = "application/merge-patch+json"
CORDONED, RESUMED, ALREADY_CORDONED = "cordoned", "resumed", "already cordoned"
"""What a cordon found: it made the cordon now; the node was cordoned under this very
action's key (an earlier, interrupted run of it); somebody else's cordon."""
OWN_CORDONS = (CORDONED, RESUMED)
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class KubeOptions:
    """Knobs of the Kubernetes actuator (seconds).

    ``timeout`` 600: a drain gives up (and fails) after this long, like ``kubectl drain
    --timeout``; ``backoff_initial`` 1 / ``backoff_max`` 30: waits between retries of a
    429 or a transient error; ``request_timeout`` 30: one API call; ``retries`` 3:
    retries of a transient error per call; ``disrupted_ttl`` 60: how long the list of
    disrupted nodes (one full node list) is reused before it is read again.
    """

    owner: str = "predops"
    timeout: float = 600.0
    backoff_initial: float = 1.0
    backoff_max: float = 30.0
    request_timeout: float = 30.0
    retries: int = 3
    disrupted_ttl: float = 60.0
    page_size: int = 500
    repair_label: str = REPAIR_LABEL

    def __post_init__(self) -> None:
        for name in ("timeout", "backoff_initial", "backoff_max", "request_timeout"):
            if getattr(self, name) <= 0:
                raise ValueError(f"kubernetes actuator: {name} must be positive")
        if self.retries < 0:
            raise ValueError("kubernetes actuator: retries must be 0 or more")


def api_error(exc: Exception) -> tuple[int | None, str]:
    """HTTP status (None: no answer) and the API's message of a client error."""
    status = getattr(exc, "status", None)
    body = getattr(exc, "body", None)
    try:
        msg = str(json.loads(body).get("message")) if body else ""
    except (TypeError, ValueError, AttributeError):
        msg = str(body)[:300]
    return status, msg or f"{type(exc).__name__}: {exc}"


TRANSIENT_STATUS = frozenset({500, 502, 503, 504})
MULTIPLE_PDBS = "more than one PodDisruptionBudget"


def transient(status: int | None, message: str, *, eviction: bool = False) -> bool:
    """Whether an API error may go away by itself (see the module docstring): no answer,
    a 5xx other than the two-budgets 500, a 429 outside the Eviction API."""
    if status is None:
        return True
    if status == 429:
        return not eviction
    return status in TRANSIENT_STATUS and MULTIPLE_PDBS not in message


def client_errors() -> tuple[type[Exception], ...]:
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    return (ApiException, HTTPError, OSError)


def retrying(call: Callable[[], T], options: KubeOptions, sleep: Callable[[float], None]) -> T:
    """``call()``, retried ``options.retries`` times on transient errors (module
    docstring) with the doubling backoff; other errors, and the last try's, propagate."""
    wait = options.backoff_initial
    for _ in range(options.retries):
        try:
            return call()
        except client_errors() as exc:
            if not transient(*api_error(exc)):
                raise
        sleep(wait)
        wait = min(wait * 2, options.backoff_max)
    return call()


class KubeApi:
    """The few raw calls the actuator makes, JSON in and out (no model deserialisation)."""

    def __init__(self, api_client: Any, options: KubeOptions) -> None:
        from kubernetes import client

        self.client = api_client
        self.core = client.CoreV1Api(api_client)
        self.opt = options

    def _json(self, resp: Any) -> dict[str, Any]:
        data = resp.data
        return dict(json.loads(data)) if data else {}

    def read_node(self, name: str) -> dict[str, Any]:
        t = self.opt.request_timeout
        return self._json(self.core.read_node(name, _preload_content=False, _request_timeout=t))

    def patch_node(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        resp = self.core.patch_node(
            name,
            body,
            _content_type=MERGE_PATCH,
            _preload_content=False,
            _request_timeout=self.opt.request_timeout,
        )
        return self._json(resp)

    def list_all(self, call: Callable[..., Any], **kw: Any) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            extra = {"_continue": token} if token else {}
            body = self._json(
                call(
                    limit=self.opt.page_size,
                    _preload_content=False,
                    _request_timeout=self.opt.request_timeout,
                    **kw,
                    **extra,
                )
            )
            items.extend(body.get("items") or [])
            token = (body.get("metadata") or {}).get("continue")
            if not token:
                return items

    def pods_on(self, node: str) -> list[dict[str, Any]]:
        return self.list_all(
            self.core.list_pod_for_all_namespaces, field_selector=f"spec.nodeName={node}"
        )

    def nodes(self) -> list[dict[str, Any]]:
        return self.list_all(self.core.list_node)

    def evict(self, namespace: str, name: str, grace_period_s: int | None) -> None:
        from kubernetes import client

        body = client.V1Eviction(
            api_version="policy/v1",
            kind="Eviction",
            metadata=client.V1ObjectMeta(name=name, namespace=namespace),
            delete_options=None
            if grace_period_s is None
            else client.V1DeleteOptions(grace_period_seconds=grace_period_s),
        )
        self.core.create_namespaced_pod_eviction(
            name,
            namespace,
            body,
            _preload_content=False,
            _request_timeout=self.opt.request_timeout,
        )


def _annotations(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("annotations") or {})


def _time(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None  # a hand-edited annotation: treat as unknown rather than fail


def node_state(node: Mapping[str, Any], now: datetime, options: KubeOptions) -> NodeState:
    """A :class:`NodeState` from a Node object read at ``now``."""
    md = node.get("metadata") or {}
    labels, notes = md.get("labels") or {}, _annotations(node)
    cordoned = bool((node.get("spec") or {}).get("unschedulable"))
    return NodeState(
        node_id=str(md.get("name")),
        observed_at=now,
        cordoned=cordoned,
        cordon_owner=notes.get(OWNER_ANNOTATION) if cordoned else None,
        cordoned_at=_time(notes.get(CORDONED_AT_ANNOTATION)) if cordoned else None,
        uncordoned_at=_time(notes.get(UNCORDONED_AT_ANNOTATION)),
        under_repair=labels.get(options.repair_label) == "true",
        do_not_disrupt="true" in (labels.get(DO_NOT_DISRUPT), notes.get(DO_NOT_DISRUPT)),
        soft_tainted=any(
            t.get("key") == SOFT_TAINT_KEY for t in (node.get("spec") or {}).get("taints") or []
        ),
    )


def topology_of(nodes: list[dict[str, Any]], now: datetime) -> Topology:
    """Budget domains (pool / rack / spine) from Node objects, labelled as the
    Kubernetes ingest adapter reads them; invalid nodes are an error naming the row."""
    frame = node_frame(nodes, now, DEFAULTS).select(INVENTORY.names)
    result = validate(frame, INVENTORY)
    if result.quarantined.height:
        r = result.quarantined.row(0, named=True)
        raise ValueError(f"kubernetes node list row {r['row']}: field {r['field']}: {r['reason']}")
    return Topology.from_inventory(result.good)


class KubeState:
    """The live cluster as the re-validation sees it: each target node read just before
    its action, the disrupted set from a node list at most ``disrupted_ttl`` old."""

    def __init__(self, api: KubeApi, clock: Clock) -> None:
        self.api = api
        self.clock = clock
        self._topology: Topology | None = None
        self._disrupted: tuple[datetime, frozenset[str]] | None = None

    def _read_all(self, now: datetime) -> list[dict[str, Any]]:
        try:
            nodes = self.api.nodes()
        except client_errors() as exc:
            status, msg = api_error(exc)
            raise ActionFailed(f"listing nodes: HTTP {status}: {msg}") from exc
        states = [node_state(n, now, self.api.opt) for n in nodes]
        self._disrupted = (now, frozenset(s.node_id for s in states if s.disrupted))
        if self._topology is None:
            self._topology = topology_of(nodes, now)
        return nodes

    def topology(self) -> Topology:
        if self._topology is None:
            self._read_all(self.clock.now())
        assert self._topology is not None
        return self._topology

    def node(self, node_id: str, now: datetime) -> tuple[NodeState | None, str | None]:
        try:
            node = self.api.read_node(node_id)
        except client_errors() as exc:
            status, msg = api_error(exc)
            if status == 404:
                return None, None
            raise ActionFailed(f"reading node {node_id}: HTTP {status}: {msg}") from exc
        st = node_state(node, now, self.api.opt)
        key = _annotations(node).get(KEY_ANNOTATION) if st.cordoned else None
        return st, key

    def disrupted(self, now: datetime) -> frozenset[str]:
        ttl = timedelta(seconds=self.api.opt.disrupted_ttl)
        if self._disrupted is None or now - self._disrupted[0] > ttl:
            self._read_all(now)
        assert self._disrupted is not None
        return self._disrupted[1]

    def pdbs(self) -> tuple[Mapping[str, PdbState], Mapping[str, Mapping[str, int]]]:
        # The Eviction API enforces PDBs at the source of truth (429); a copy read here
        # could only be older.
        return {}, {}


def skip_reason(pod: Mapping[str, Any]) -> str | None:
    """Why a pod on a drained node is not evicted, or None to evict it."""
    md = pod.get("metadata") or {}
    if MIRROR_ANNOTATION in (md.get("annotations") or {}):
        return "mirror (static) pod: the kubelet owns it"
    owners = md.get("ownerReferences") or []
    if any(o.get("kind") == "DaemonSet" and o.get("controller") for o in owners):
        return "DaemonSet pod: its controller would recreate it on the node"
    if md.get("deletionTimestamp"):
        return "already terminating"
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return "finished"
    return None


class KubeActuator:
    """Cordon, drain and uncordon against one cluster; see the module docstring."""

    name = "kubernetes"
    kinds = ("cordon", "drain", "uncordon")

    def __init__(
        self,
        api: KubeApi,
        clock: Clock,
        sleep: Callable[[float], None],
    ) -> None:
        self.api = api
        self.clock = clock
        self.sleep = sleep
        self.opt = api.opt

    def run(self, action: Action, plan_id: str) -> dict[str, Any]:
        try:
            if isinstance(action, Drain):
                return self.drain(action)
            if isinstance(action, Cordon):
                return {"cordon": self._cordon(action)}
            if isinstance(action, Uncordon):
                return {"uncordon": self._uncordon(action.target)}
        except client_errors() as exc:
            status, msg = api_error(exc)
            raise ActionFailed(f"{action.kind} {action.target}: HTTP {status}: {msg}") from exc
        raise ActionFailed(f"the kubernetes actuator does not run {action.kind} actions")

    def _retrying(self, call: Callable[[], T]) -> T:
        return retrying(call, self.opt, self.sleep)

    # ------------------------------------------------------------------ node patches
    def _cordon(self, action: Action) -> str:
        """:data:`CORDONED`, :data:`RESUMED` or :data:`ALREADY_CORDONED`."""
        node = self._retrying(lambda: self.api.read_node(action.target))
        if (node.get("spec") or {}).get("unschedulable"):
            notes = _annotations(node)
            ours = notes.get(OWNER_ANNOTATION) == self.opt.owner
            if ours and notes.get(KEY_ANNOTATION) == action.idempotency_key:
                return RESUMED
            return ALREADY_CORDONED
        self._patch(
            action.target,
            {
                "spec": {"unschedulable": True},
                "metadata": {
                    "annotations": {
                        OWNER_ANNOTATION: self.opt.owner,
                        KEY_ANNOTATION: action.idempotency_key,
                        CORDONED_AT_ANNOTATION: self.clock.now().isoformat(),
                    }
                },
            },
        )
        return CORDONED

    def _patch(self, node: str, body: dict[str, Any]) -> None:
        self._retrying(lambda: self.api.patch_node(node, body))

    def _uncordon(self, node: str) -> str:
        self._patch(
            node,
            {
                "spec": {"unschedulable": None},
                "metadata": {
                    "annotations": {
                        OWNER_ANNOTATION: None,
                        KEY_ANNOTATION: None,
                        CORDONED_AT_ANNOTATION: None,
                        UNCORDONED_AT_ANNOTATION: self.clock.now().isoformat(),
                    }
                },
            },
        )
        return "uncordoned"

    # ------------------------------------------------------------------ drain
    def drain(self, action: Drain) -> dict[str, Any]:
        started = self.clock.now()
        deadline = started + timedelta(seconds=self.opt.timeout)
        cordon = self._cordon(action)
        pods: list[dict[str, Any]] = []
        failed = 0
        try:
            listed = self._retrying(lambda: self.api.pods_on(action.target))
        except client_errors() as exc:
            status, msg = api_error(exc)
            listed, failed = [], 1
            pods.append({"pod": "*", "outcome": "failed", "why": f"listing pods: {status} {msg}"})
        for pod in sorted(
            listed, key=lambda p: (p["metadata"].get("namespace", ""), p["metadata"]["name"])
        ):
            row = self._evict_one(pod, action.grace_period_s, deadline)
            failed += row["outcome"] == "failed"
            pods.append(row)
        report: dict[str, Any] = {
            "cordon": cordon,
            "pods": pods,
            "evicted": sum(p["outcome"] == "evicted" for p in pods),
            "skipped": sum(p["outcome"] == "skipped" for p in pods),
            "failed": failed,
            "seconds": round((self.clock.now() - started).total_seconds(), 3),
        }
        if failed:
            if cordon in OWN_CORDONS:  # release the budget: undo this action's cordon
                try:
                    report["rollback"] = self._uncordon(action.target)
                except client_errors() as exc:
                    report["rollback"] = f"failed: {api_error(exc)[1]}"
            raise ActionFailed(
                f"drain {action.target}: {failed} pod(s) not evicted "
                f"({'; '.join(p['why'] for p in pods if p['outcome'] == 'failed')})",
                report,
            )
        return report

    def _evict_one(
        self, pod: Mapping[str, Any], grace_period_s: int, deadline: datetime
    ) -> dict[str, Any]:
        md = pod["metadata"]
        ns, name = md.get("namespace", "default"), md["name"]
        row: dict[str, Any] = {"pod": f"{ns}/{name}", "attempts": 0, "waited_s": 0.0}
        why = skip_reason(pod)
        if why is not None:
            return {**row, "outcome": "skipped", "why": why}
        wait = self.opt.backoff_initial
        retries_left = self.opt.retries
        while True:
            row["attempts"] += 1
            try:
                self.api.evict(ns, name, grace_period_s)
                return {**row, "outcome": "evicted", "why": ""}
            except client_errors() as exc:
                status, msg = api_error(exc)
            if status == 404:
                return {**row, "outcome": "gone", "why": "pod no longer exists"}
            if status != 429:
                if not transient(status, msg, eviction=True) or retries_left == 0:
                    tries = f" after {row['attempts']} attempts" if row["attempts"] > 1 else ""
                    return {**row, "outcome": "failed", "why": f"HTTP {status}: {msg}{tries}"}
                retries_left -= 1
            left = (deadline - self.clock.now()).total_seconds()
            if left <= 0:
                blocked = "its disruption budget" if status == 429 else "API errors"
                return {
                    **row,
                    "outcome": "failed",
                    "why": f"still blocked by {blocked} after "
                    f"{self.opt.timeout:g} s (HTTP {status}: {msg})",
                }
            pause = min(wait, left)
            self.sleep(pause)
            row["waited_s"] = round(row["waited_s"] + pause, 3)
            wait = min(wait * 2, self.opt.backoff_max)


def connect(kubeconfig: str, context: str | None, options: KubeOptions) -> KubeApi:
    """A :class:`KubeApi` for a kubeconfig file or ``in-cluster``."""
    from predops.pipelines.ingest.kubernetes import api_client

    return KubeApi(api_client(kubeconfig, context), options)
