"""A small local HTTP server that answers like the Kubernetes API, for tests that cannot
run a real kube-apiserver (none can run on these machines).

It holds nodes, pods and PodDisruptionBudgets as the API returns them (JSON dicts, see
``tests.fakes.kube_objects``) and serves, on 127.0.0.1 (free port, threaded):

- ``GET /api/v1/nodes``, ``/api/v1/pods``, ``/api/v1/namespaces/{ns}/pods``,
  ``/apis/policy/v1/poddisruptionbudgets`` (and per namespace): list objects (``kind``,
  ``apiVersion``, ``metadata.resourceVersion``, ``items``) with ``limit`` / ``continue``
  pagination over a consistent snapshot (as etcd serves it), ``labelSelector``
  (``a=b``, ``a!=b``, ``a``, ``!a``) and ``fieldSelector`` (``spec.nodeName=x``, any
  dotted path with ``=``, ``==`` or ``!=``);
- ``GET /api/v1/nodes/{name}``, ``GET /api/v1/namespaces/{ns}/pods/{name}``;
- ``PATCH /api/v1/nodes/{name}`` with a merge or strategic-merge patch (cordon is
  ``{"spec": {"unschedulable": true}}``); JSON patches get 415; a patch naming a
  ``metadata.resourceVersion`` other than the node's gets 409 Conflict;
- ``PATCH /api/v1/nodes/{name}/status``: a strategic-merge patch merges
  ``status.conditions`` by ``type`` (their patch merge key, as node-problem-detector
  relies on), a merge patch replaces the list (as the real API does); only ``status``
  changes;
- Events (``v1``, ``/api/v1/namespaces/{ns}/events``, and ``/api/v1/events``): create,
  list, get (``tests.fakes.kube_store``);
- ``POST /api/v1/namespaces/{ns}/pods/{name}/eviction``: 201 and a deletion timestamp on
  the pod when its PodDisruptionBudget allows a disruption (which it then uses up), 429
  ``TooManyRequests`` with a ``DisruptionBudget`` cause when it does not, 500 when more
  than one budget selects the pod (as the real API does), 404 for unknown pods;
- Cluster API (``cluster.x-k8s.io/v1beta1``, as a CRD serves it): ``GET`` lists of
  ``machinedeployments`` and ``machines`` (all namespaces or one; label selectors as
  above), ``PATCH`` of one with a merge patch (a strategic-merge patch gets 415, as
  custom resources do), and ``PATCH .../machinedeployments/{name}/scale`` (an
  ``autoscaling/v1`` Scale; sets ``spec.replicas``). No controller runs: replicas
  change, machines do not come or go;
- Deployments, PriorityClasses and Karpenter NodePools as stored objects (list, get,
  create, patch; ``tests.fakes.kube_store``).

Errors are ``Status`` objects. A bearer token is required when ``token`` is set (401
otherwise). Every request is recorded in ``requests``; ``fail_next`` scripts an error
answer; ``stall_next`` holds the next matching request for some seconds (or until
``release_held``) before serving it (a client with a shorter timeout gives up, the effect
still happens: an answer lost on the way); ``expire_continue_tokens`` makes outstanding
``continue`` tokens answer 410.
To add a route, add a ``(method, path regex, handler)`` to ``_routes``.
"""

from __future__ import annotations

import base64
import copy
import json
import re
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from tests.fakes.kube_objects import Obj, rfc3339
from tests.fakes.kube_store import routes as stored_kind_routes

Answer = tuple[int, Obj]
CAPI = "/apis/cluster.x-k8s.io/v1beta1"
CAPI_KINDS = {"machinedeployments": "MachineDeployment", "machines": "Machine"}


@dataclass(frozen=True, slots=True)
class Request:
    """One request the fake received."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    """Header names in lower case."""
    body: Any


def status(code: int, reason: str, message: str, details: Obj | None = None) -> Answer:
    body: Obj = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success" if code < 400 else "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    return code, body


def _get(obj: Obj, dotted: str) -> Any:
    cur: Any = obj
    for part in dotted.split("."):
        cur = cur.get(part) if isinstance(cur, dict) else None
    return cur


def labels_match(selector: Obj | None, labels: dict[str, str]) -> bool:
    """A LabelSelector (matchLabels + matchExpressions); None selects nothing."""
    if selector is None:
        return False
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for e in selector.get("matchExpressions") or []:
        key, op, values = e["key"], e["operator"], e.get("values") or []
        ok = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[op]
        if not ok:
            return False
    return True


def _label_query(text: str) -> Callable[[Obj], bool]:
    terms = [t.strip() for t in text.split(",") if t.strip()]

    def ok(obj: Obj) -> bool:
        labels = obj["metadata"].get("labels") or {}
        for t in terms:
            if "!=" in t:
                k, v = t.split("!=", 1)
                if labels.get(k) == v:
                    return False
            elif "=" in t:
                k, v = t.split("=", 1)
                if labels.get(k) != v.lstrip("="):
                    return False
            elif t.startswith("!"):
                if t[1:] in labels:
                    return False
            elif t not in labels:
                return False
        return True

    return ok


def _field_query(text: str) -> Callable[[Obj], bool]:
    terms = []
    for t in (t.strip() for t in text.split(",") if t.strip()):
        m = re.fullmatch(r"([\w.]+)(!=|==|=)(.*)", t)
        if m is None:
            raise ValueError(f"bad field selector {t!r}")
        terms.append(m.groups())

    def ok(obj: Obj) -> bool:
        for path, op, value in terms:
            got = _get(obj, path)
            got = "" if got is None else str(got)
            if (got == value) != (op != "!="):
                return False
        return True

    return ok


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (strategic merge is the same for scalar fields)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients closing kept-alive connections is normal; anything else is a bug here.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@dataclass
class FakeKubeAPI:
    """Serve ``nodes``, ``pods`` and ``pdbs`` (lists of API objects) on 127.0.0.1."""

    nodes: list[Obj] = field(default_factory=list)
    pods: list[Obj] = field(default_factory=list)
    pdbs: list[Obj] = field(default_factory=list)
    machine_deployments: list[Obj] = field(default_factory=list)
    machines: list[Obj] = field(default_factory=list)
    deployments: list[Obj] = field(default_factory=list)
    priority_classes: list[Obj] = field(default_factory=list)
    nodepools: list[Obj] = field(default_factory=list)
    events: list[Obj] = field(default_factory=list)
    token: str | None = "test-token"
    requests: list[Request] = field(default_factory=list)
    resource_version: int = 1000
    _snapshots: dict[str, list[Obj]] = field(default_factory=dict)
    _faults: list[tuple[str, str, str | None, Answer]] = field(default_factory=list)
    held: list[tuple[str, str]] = field(default_factory=list)
    """(method, path) of requests ``stall_next`` held, as they arrived."""
    _stalls: list[tuple[str, str, float]] = field(default_factory=list)
    _released: threading.Event = field(default_factory=threading.Event)
    _lock: threading.RLock = field(default_factory=threading.RLock)
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> FakeKubeAPI:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _any(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n) if n else b""
                headers = {k.lower(): v for k, v in self.headers.items()}
                fake._released.wait(fake._stall_for(self.command, urlsplit(self.path).path))
                code, body = fake._dispatch(self.command, self.path, headers, raw)
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _any

        self._server = _QuietServer(("127.0.0.1", 0), Handler)
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        ).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()

    # ------------------------------------------------------------------ scripting
    def fail_next(
        self,
        method: str,
        path_regex: str,
        code: int,
        reason: str,
        message: str = "scripted failure",
        *,
        if_query: str | None = None,
    ) -> None:
        """Answer the next matching request (with query parameter ``if_query``, when
        given) with an error Status."""
        self._faults.append((method, path_regex, if_query, status(code, reason, message)))

    def stall_next(self, method: str, path_regex: str, seconds: float) -> None:
        """Hold the next matching request ``seconds`` (or until :meth:`release_held`)
        before serving it."""
        with self._lock:
            self._released.clear()
            self._stalls.append((method, path_regex, seconds))

    def release_held(self) -> None:
        """Serve the requests held now at once."""
        self._released.set()

    def _stall_for(self, method: str, path: str) -> float:
        with self._lock:
            for i, (m, rx, seconds) in enumerate(self._stalls):
                if m == method and re.fullmatch(rx, unquote(path)):
                    del self._stalls[i]
                    self.held.append((method, unquote(path)))
                    return seconds
        return 0.0

    def expire_continue_tokens(self) -> None:
        with self._lock:
            self._snapshots.clear()

    def seen(self, method: str = "GET", prefix: str = "/") -> list[Request]:
        return [r for r in self.requests if r.method == method and r.path.startswith(prefix)]

    def node(self, name: str) -> Obj:
        return next(n for n in self.nodes if n["metadata"]["name"] == name)

    def pod(self, namespace: str, name: str) -> Obj:
        return next(
            p
            for p in self.pods
            if (p["metadata"]["namespace"], p["metadata"]["name"]) == (namespace, name)
        )

    # ------------------------------------------------------------------ dispatch
    def _routes(self) -> list[tuple[str, str, Callable[..., Answer]]]:
        ns, name = r"(?P<ns>[^/]+)", r"(?P<name>[^/]+)"
        return [
            ("GET", r"/api/v1/nodes", self._list_nodes),
            ("GET", rf"/api/v1/nodes/{name}", self._get_node),
            ("PATCH", rf"/api/v1/nodes/{name}", self._patch_node),
            ("PATCH", rf"/api/v1/nodes/{name}/status", self._patch_node_status),
            ("GET", r"/api/v1/pods", self._list_pods),
            ("GET", rf"/api/v1/namespaces/{ns}/pods", self._list_pods),
            ("GET", rf"/api/v1/namespaces/{ns}/pods/{name}", self._get_pod),
            ("POST", rf"/api/v1/namespaces/{ns}/pods/{name}/eviction", self._evict),
            ("GET", r"/apis/policy/v1/poddisruptionbudgets", self._list_pdbs),
            ("GET", rf"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets", self._list_pdbs),
            ("GET", rf"{CAPI}/(?P<plural>machinedeployments|machines)", self._list_capi),
            (
                "GET",
                rf"{CAPI}/namespaces/{ns}/(?P<plural>machinedeployments|machines)",
                self._list_capi,
            ),
            (
                "PATCH",
                rf"{CAPI}/namespaces/{ns}/(?P<plural>machinedeployments|machines)/{name}",
                self._patch_capi,
            ),
            ("PATCH", rf"{CAPI}/namespaces/{ns}/machinedeployments/{name}/scale", self._scale),
            *stored_kind_routes(self),
        ]

    def _dispatch(self, method: str, raw_path: str, headers: dict[str, str], raw: bytes) -> Answer:
        parts = urlsplit(raw_path)
        path = unquote(parts.path)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw
        with self._lock:
            self.requests.append(Request(method, path, query, headers, body))
            if self.token is not None and headers.get("authorization") != f"Bearer {self.token}":
                return status(401, "Unauthorized", "Unauthorized")
            for i, (m, rx, needs, answer) in enumerate(self._faults):
                if m == method and re.fullmatch(rx, path) and (needs is None or needs in query):
                    del self._faults[i]
                    return answer
            for m, rx, handler in self._routes():
                match = re.fullmatch(rx, path)
                if m == method and match:
                    try:
                        return handler(query=query, body=body, headers=headers, **match.groupdict())
                    except ValueError as exc:
                        return status(400, "BadRequest", str(exc))
            return status(
                404,
                "NotFound",
                f"the server could not find the requested resource ({method} {path})",
            )

    # ------------------------------------------------------------------ lists
    def _list(self, kind: str, api_version: str, items: list[Obj], query: dict[str, str]) -> Answer:
        token = query.get("continue")
        if token:
            try:
                snap_id, offset_s = base64.urlsafe_b64decode(token.encode()).decode().split(":")
                offset = int(offset_s)
            except (ValueError, UnicodeDecodeError):
                return status(400, "BadRequest", f"invalid continue token {token!r}")
            if snap_id not in self._snapshots:
                return status(
                    410,
                    "Expired",
                    "The provided continue parameter is too old to "
                    "display a consistent list result.",
                )
            snapshot = self._snapshots[snap_id]
            rv = snap_id.split("-")[0]
        else:
            if "labelSelector" in query:
                items = [o for o in items if _label_query(query["labelSelector"])(o)]
            if "fieldSelector" in query:
                items = [o for o in items if _field_query(query["fieldSelector"])(o)]
            snapshot = sorted(
                copy.deepcopy(items),
                key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]),
            )
            rv = str(self.resource_version)
            snap_id = f"{rv}-{len(self._snapshots)}"
            offset = 0
        limit = int(query.get("limit") or 0) or len(snapshot) or 1
        page = snapshot[offset : offset + limit]
        meta: Obj = {"resourceVersion": rv}
        if offset + limit < len(snapshot):
            self._snapshots[snap_id] = snapshot
            meta["continue"] = base64.urlsafe_b64encode(
                f"{snap_id}:{offset + limit}".encode()
            ).decode()
            meta["remainingItemCount"] = len(snapshot) - offset - limit
        return 200, {"kind": kind, "apiVersion": api_version, "metadata": meta, "items": page}

    def _list_nodes(self, query: dict[str, str], **_: Any) -> Answer:
        return self._list("NodeList", "v1", self.nodes, query)

    def _list_pods(self, query: dict[str, str], ns: str | None = None, **_: Any) -> Answer:
        pods = [p for p in self.pods if ns is None or p["metadata"]["namespace"] == ns]
        return self._list("PodList", "v1", pods, query)

    def _list_pdbs(self, query: dict[str, str], ns: str | None = None, **_: Any) -> Answer:
        pdbs = [p for p in self.pdbs if ns is None or p["metadata"]["namespace"] == ns]
        return self._list("PodDisruptionBudgetList", "policy/v1", pdbs, query)

    # ------------------------------------------------------------------ objects
    def _find_node(self, name: str) -> Obj | None:
        return next((n for n in self.nodes if n["metadata"]["name"] == name), None)

    def _get_node(self, name: str, **_: Any) -> Answer:
        node = self._find_node(name)
        if node is None:
            return status(404, "NotFound", f'nodes "{name}" not found')
        return 200, {"kind": "Node", "apiVersion": "v1", **node}

    def _patchable(self, name: str, headers: dict[str, str]) -> Obj | Answer:
        """The node a merge or strategic-merge patch may change, or the error answer."""
        node = self._find_node(name)
        if node is None:
            return status(404, "NotFound", f'nodes "{name}" not found')
        ctype = headers.get("content-type", "")
        if "merge-patch+json" not in ctype:
            return status(
                415,
                "UnsupportedMediaType",
                f"the fake accepts merge and strategic-merge patches, not {ctype}",
            )
        return node

    def _patch_node(self, name: str, body: Any, headers: dict[str, str], **_: Any) -> Answer:
        node = self._patchable(name, headers)
        if isinstance(node, tuple):
            return node
        wanted = ((body or {}).get("metadata") or {}).get("resourceVersion")
        if wanted and wanted != node["metadata"].get("resourceVersion"):
            return status(409, "Conflict", f'Operation cannot be fulfilled on nodes "{name}"')
        patched = merge_patch(node, body)
        self.resource_version += 1
        patched["metadata"]["resourceVersion"] = str(self.resource_version)
        self.nodes[self.nodes.index(node)] = patched
        return 200, {"kind": "Node", "apiVersion": "v1", **patched}

    def _patch_node_status(self, name: str, body: Any, headers: dict[str, str], **_: Any) -> Answer:
        node = self._patchable(name, headers)
        if isinstance(node, tuple):
            return node
        ctype = headers["content-type"]
        new = copy.deepcopy((body or {}).get("status") or {})
        old = node.get("status") or {}
        conditions = new.pop("conditions", None)
        patched_status = merge_patch(old, new)
        if conditions is not None and "strategic-merge-patch" in ctype:
            by_type = {c["type"]: c for c in old.get("conditions") or []}
            for c in conditions:
                by_type[c["type"]] = merge_patch(by_type.get(c["type"]), c)
            patched_status["conditions"] = list(by_type.values())
        elif conditions is not None:
            patched_status["conditions"] = conditions
        patched = {**node, "status": patched_status}
        self.resource_version += 1
        patched["metadata"] = {**node["metadata"], "resourceVersion": str(self.resource_version)}
        self.nodes[self.nodes.index(node)] = patched
        return 200, {"kind": "Node", "apiVersion": "v1", **patched}

    def _get_pod(self, ns: str, name: str, **_: Any) -> Answer:
        try:
            return 200, {"kind": "Pod", "apiVersion": "v1", **self.pod(ns, name)}
        except StopIteration:
            return status(404, "NotFound", f'pods "{name}" not found')

    def _evict(self, ns: str, name: str, **_: Any) -> Answer:
        try:
            pod = self.pod(ns, name)
        except StopIteration:
            return status(404, "NotFound", f'pods "{name}" not found')
        labels = pod["metadata"].get("labels") or {}
        budgets = [
            b
            for b in self.pdbs
            if b["metadata"]["namespace"] == ns and labels_match(b["spec"].get("selector"), labels)
        ]
        terminal = pod["status"].get("phase") in ("Succeeded", "Failed")
        if len(budgets) > 1 and not terminal:
            return status(
                500,
                "InternalError",
                "This pod has more than one "
                "PodDisruptionBudget, which the eviction subresource does not support.",
            )
        if budgets and not terminal:
            b = budgets[0]["status"]
            if b.get("disruptionsAllowed", 0) <= 0:
                name_b = budgets[0]["metadata"]["name"]
                return status(
                    429,
                    "TooManyRequests",
                    "Cannot evict pod as it would violate the pod's disruption budget.",
                    {
                        "causes": [
                            {
                                "reason": "DisruptionBudget",
                                "message": f"The disruption budget {name_b} needs "
                                f"{b.get('desiredHealthy', 0)} healthy pods and has "
                                f"{b.get('currentHealthy', 0)} currently",
                            }
                        ]
                    },
                )
            b["disruptionsAllowed"] -= 1
            b["currentHealthy"] = b.get("currentHealthy", 1) - 1
        pod["metadata"]["deletionTimestamp"] = rfc3339(datetime.now(UTC))
        self.resource_version += 1
        return status(201, "", "")

    # ------------------------------------------------------------------ Cluster API
    def _capi(self, plural: str) -> list[Obj]:
        return self.machine_deployments if plural == "machinedeployments" else self.machines

    def _list_capi(
        self, query: dict[str, str], plural: str, ns: str | None = None, **_: Any
    ) -> Answer:
        items = [o for o in self._capi(plural) if ns is None or o["metadata"]["namespace"] == ns]
        return self._list(f"{CAPI_KINDS[plural]}List", "cluster.x-k8s.io/v1beta1", items, query)

    def _find_capi(self, plural: str, ns: str, name: str) -> Obj | None:
        return next(
            (
                o
                for o in self._capi(plural)
                if (o["metadata"]["namespace"], o["metadata"]["name"]) == (ns, name)
            ),
            None,
        )

    def _merge_only(self, headers: dict[str, str]) -> Answer | None:
        ctype = headers.get("content-type", "")
        if ctype.startswith("application/merge-patch+json"):
            return None
        return status(
            415,
            "UnsupportedMediaType",
            f"the body of the request was in an unknown format: {ctype}",
        )

    def _patch_capi(
        self, plural: str, ns: str, name: str, body: Any, headers: dict[str, str], **_: Any
    ) -> Answer:
        obj = self._find_capi(plural, ns, name)
        if obj is None:
            return status(404, "NotFound", f'{plural}.cluster.x-k8s.io "{name}" not found')
        refused = self._merge_only(headers)
        if refused is not None:
            return refused
        patched = merge_patch(obj, body)
        self.resource_version += 1
        patched["metadata"]["resourceVersion"] = str(self.resource_version)
        items = self._capi(plural)
        items[items.index(obj)] = patched
        return 200, patched

    def _scale(self, ns: str, name: str, body: Any, headers: dict[str, str], **_: Any) -> Answer:
        obj = self._find_capi("machinedeployments", ns, name)
        if obj is None:
            return status(
                404, "NotFound", f'machinedeployments.cluster.x-k8s.io "{name}" not found'
            )
        refused = self._merge_only(headers)
        if refused is not None:
            return refused
        replicas = ((body or {}).get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or replicas < 0:
            return status(422, "Invalid", f"Scale.spec.replicas: Invalid value: {replicas!r}")
        obj["spec"]["replicas"] = replicas
        self.resource_version += 1
        obj["metadata"]["resourceVersion"] = str(self.resource_version)
        return 200, {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"replicas": replicas},
            "status": {"replicas": obj.get("status", {}).get("replicas", 0)},
        }
