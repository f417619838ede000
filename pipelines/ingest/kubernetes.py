"""Kubernetes API -> inventory, node addresses, telemetry (node Ready), events, pods and pdbs.
Over 500 lines: one adapter reading one snapshot; the node, pod and PDB converters share
the quantity parsing, label and condition helpers and one paged list, and a tenth of the
file is this docstring documenting the mapping.

``predops ingest kubernetes KUBECONFIG|in-cluster [-o KEY=VALUE ...]`` lists nodes, pods and
PodDisruptionBudgets through the official ``kubernetes`` client (its kubeconfig, token
and TLS handling), page by page (``limit`` / ``continue``, ``-o page_size=500``), restarting
a list once if its continue token expires (410). Everything is listed and converted
before the first batch is yielded, so a failed call writes nothing.

Nodes -> ``inventory`` at the snapshot time (the injected clock):

- region / zone from ``topology.kubernetes.io/region|zone`` (the deprecated
  ``failure-domain.beta`` labels as fallback), else ``unknown``;
- rack / spine from ``-o rack_label=`` / ``-o spine_label=`` (defaults
  ``predops.io/rack`` / ``predops.io/spine``: Kubernetes has no standard for them),
  else ``unknown``;
- pool from ``-o pool_label=``, else the first of Karpenter's, EKS's, GKE's and AKS's
  node-group labels present, else ``unknown``; sku from ``node.kubernetes.io/instance-type``;
- GPUs: ``allocatable[nvidia.com/gpu]`` (``-o gpu_resource=``), model from the GPU feature
  discovery label ``nvidia.com/gpu.product``; NVLink domain from ``nvidia.com/gpu.clique``;
- cpu_milli / memory_mib from ``allocatable`` (what pods can use; ``-o resources=capacity``
  for the hardware), quantities such as ``64Gi``, ``32000m``, ``2``, ``1e3`` parsed exactly
  and rounded down;
- NUMA nodes from ``-o numa_label=`` (default ``predops.io/numa-nodes``) when the node has
  it, else 1: the API does not expose NUMA topology, so 1 means "unknown, assume none".
  Install time is not in the API (node creation is only the last registration): null.

Each node's ``status.addresses`` (InternalIP, ExternalIP, Hostname, ...) -> one
``node_addresses`` row each at the snapshot time: the names exporters know the node by
(node-exporter's ``instance`` is usually InternalIP:port), which telemetry ingest uses to
find the inventory's node name (:mod:`.identity`).

The Ready condition gives two things. A ``telemetry`` row at the snapshot time with
``node_ready`` (``Unknown`` - the kubelet stopped reporting - counts as not ready; every
other metric null), so repeated snapshots and Prometheus's kube-state-metrics fill the
same column. And an ``events`` row (``ready`` / ``not_ready``) at the condition's
``lastTransitionTime``, which a snapshot alone cannot give: the events key (node, kind,
time) makes repeated snapshots add nothing.

Pods -> ``pods``: ``pod_id`` is ``namespace/name/uid`` (names are reused, e.g. by
StatefulSets); requests are the effective pod requests the scheduler uses - the larger
of the app containers (plus sidecars) and the peak of the init containers, plus pod
overhead; a missing request falls back to the limit; CPU / memory round up; ``num_gpu``
from ``nvidia.com/gpu`` (``gpu_milli`` 1000 per GPU: no fractional GPU resource is read);
``job_id`` is the controlling owner ``namespace/Kind/name`` (a ReplicaSet, not its
Deployment); ``gang_id`` from the ``scheduling.k8s.io/group-name`` annotation (Volcano)
or the ``scheduling.x-k8s.io/pod-group`` label (coscheduling); ``gpu_spec`` from a node
selector or required node affinity on the GPU product label; ``scheduled_at`` from the
PodScheduled condition; ``deleted_at`` from ``deletionTimestamp``. The pods table keys on
``pod_id`` alone, so a later snapshot does not update phase or deletion of a pod already
stored. predops' own placeholder pods (labelled :data:`PLACEHOLDER_LABEL`, the headroom
the pool actuators reserve) are left out: they are not demand, and read as pods they
would feed the forecast that sizes them.

PodDisruptionBudgets -> ``pdbs`` (selector as JSON text, minAvailable / maxUnavailable as
written - a count or a percentage - and the status the disruption controller computed).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any

import polars as pl

from predops.core.schemas import INVENTORY, NODE_ADDRESSES, UTC_TS
from predops.pipelines.ingest.batch import Batch, IngestError
from predops.pipelines.ingest.options import IngestOptions

SOURCE = "kubernetes"
HELP = "Kubernetes nodes, pods and PodDisruptionBudgets via the official client"
IN_CLUSTER = "in-cluster"
UNKNOWN = "unknown"
MIB = 1 << 20
POOL_LABELS = (
    "karpenter.sh/nodepool",
    "eks.amazonaws.com/nodegroup",
    "cloud.google.com/gke-nodepool",
    "kubernetes.azure.com/agentpool",
)
PLACEHOLDER_LABEL = "predops.io/placeholder"
"""Label of predops' placeholder pods (value: their pool); see
:mod:`predops.pipelines.actuators.placeholders`."""
DEFAULTS = {
    "context": "",
    "page_size": "500",
    "timeout": "60",
    "resources": "allocatable",
    "pool_label": "",
    "rack_label": "predops.io/rack",
    "spine_label": "predops.io/spine",
    "numa_label": "predops.io/numa-nodes",
    "nvlink_label": "nvidia.com/gpu.clique",
    "gpu_model_label": "nvidia.com/gpu.product",
    "gpu_resource": "nvidia.com/gpu",
    "sku_label": "node.kubernetes.io/instance-type",
    "gang_annotation": "scheduling.k8s.io/group-name",
    "gang_label": "scheduling.x-k8s.io/pod-group",
}

# ----------------------------------------------------------------------------- quantities
_QTY = re.compile(
    r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E))?$"
)
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


def parse_quantity(text: str) -> Decimal:
    """A Kubernetes resource quantity (``64Gi``, ``32000m``, ``2``, ``1e3``, ``1.5G``) as an
    exact number of base units (cores, bytes, devices); ValueError when it is not one."""
    m = _QTY.match(str(text).strip())
    if m is None:
        raise ValueError(f"{text!r} is not a Kubernetes quantity")
    number, exponent, suffix = m.groups()
    try:
        value = Decimal(number)
    except InvalidOperation:
        raise ValueError(f"{text!r} is not a Kubernetes quantity") from None
    if exponent:
        return value.scaleb(int(exponent[1:]))
    if suffix in _BINARY:
        return value * Decimal(1024) ** _BINARY[suffix]
    if suffix:
        return value.scaleb(_DECIMAL[suffix])
    return value


def _count(text: Any, scale: Decimal, up: bool) -> str | None:
    """Quantity x ``scale`` rounded up or down, as text; the raw text when it is not a
    quantity, so that validation quarantines the row and names the field."""
    if text is None:
        return None
    try:
        v = parse_quantity(str(text)) * scale
    except ValueError:
        return str(text)
    return str(math.ceil(v) if up else math.floor(v))


def _ts(text: Any) -> datetime | None:
    return datetime.fromisoformat(str(text)) if text else None


# ----------------------------------------------------------------------------- nodes
def _label(labels: Mapping[str, str], *keys: str) -> str | None:
    return next((labels[k] for k in keys if k and labels.get(k)), None)


def _ready(node: Mapping[str, Any]) -> Mapping[str, Any] | None:
    conds = (node.get("status") or {}).get("conditions") or []
    return next((c for c in conds if c.get("type") == "Ready"), None)


_NODE_SCHEMA = {
    **dict.fromkeys(
        (
            "node_id",
            "pool",
            "sku",
            "gpu_model",
            "gpus",
            "cpu_milli",
            "memory_mib",
            "numa_nodes",
            "nvlink_domain",
            "region",
            "zone",
            "spine",
            "rack",
        ),
        pl.String(),
    ),
    "ts": UTC_TS,
    "installed_at": UTC_TS,
    "node_ready": pl.Boolean(),
    "ready_since": UTC_TS,
    "ready_detail": pl.String(),
    "addresses": pl.List(pl.Struct({"kind": pl.String(), "address": pl.String()})),
}


def node_frame(nodes: list[dict[str, Any]], at: datetime, opt: Mapping[str, str]) -> pl.DataFrame:
    """Nodes as inventory columns (quantities as text, for validation to type) plus the
    Ready condition (``node_ready``, ``ready_since``, ``ready_detail``) and the reported
    ``addresses`` (a list of kind / address)."""
    rows = []
    pool_labels = (opt["pool_label"],) if opt["pool_label"] else POOL_LABELS
    for n in nodes:
        md, st = n.get("metadata") or {}, n.get("status") or {}
        labels = md.get("labels") or {}
        res = st.get(opt["resources"]) or {}
        gpus = _count(res.get(opt["gpu_resource"], "0"), Decimal(1), up=False)
        cond = _ready(n)
        detail = (
            ""
            if cond is None
            else ": ".join(str(x) for x in (cond.get("reason"), cond.get("message")) if x)
        )
        rows.append(
            {
                "ts": at,
                "node_id": md.get("name"),
                "pool": _label(labels, *pool_labels) or UNKNOWN,
                "sku": _label(labels, opt["sku_label"], "beta.kubernetes.io/instance-type")
                or UNKNOWN,
                "gpu_model": labels.get(opt["gpu_model_label"]) if gpus != "0" else None,
                "gpus": gpus,
                "cpu_milli": _count(res.get("cpu"), Decimal(1000), up=False),
                "memory_mib": _count(res.get("memory"), Decimal(1) / MIB, up=False),
                "numa_nodes": labels.get(opt["numa_label"]) or "1",
                "nvlink_domain": labels.get(opt["nvlink_label"]),
                "region": _label(
                    labels,
                    "topology.kubernetes.io/region",
                    "failure-domain.beta.kubernetes.io/region",
                )
                or UNKNOWN,
                "zone": _label(
                    labels, "topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone"
                )
                or UNKNOWN,
                "spine": labels.get(opt["spine_label"]) or UNKNOWN,
                "rack": labels.get(opt["rack_label"]) or UNKNOWN,
                "installed_at": None,
                # Unknown (the kubelet stopped reporting) is not ready.
                "node_ready": None if cond is None else cond.get("status") == "True",
                "ready_since": None if cond is None else _ts(cond.get("lastTransitionTime")),
                "ready_detail": detail or None,
                "addresses": [
                    {"kind": a.get("type"), "address": str(a["address"])}
                    for a in st.get("addresses") or []
                    if isinstance(a, dict) and a.get("address")
                ],
            }
        )
    return pl.DataFrame(rows, schema=_NODE_SCHEMA)


def node_addresses(nodes: pl.DataFrame) -> pl.DataFrame:
    """The ``addresses`` of :func:`node_frame` as ``node_addresses`` rows."""
    return (
        nodes.select("ts", "node_id", "addresses")
        .explode("addresses")
        .drop_nulls("addresses")
        .unnest("addresses")
        .select(NODE_ADDRESSES.names)
    )


def node_events(nodes: pl.DataFrame) -> pl.DataFrame:
    """The last Ready transition of each node as a ``ready`` / ``not_ready`` event."""
    return nodes.filter(pl.col("ready_since").is_not_null()).select(
        "node_id",
        pl.when(pl.col("node_ready"))
        .then(pl.lit("ready"))
        .otherwise(pl.lit("not_ready"))
        .alias("kind"),
        pl.col("ready_since").alias("at"),
        pl.lit(None, pl.String).alias("cause"),
        pl.col("ready_detail").alias("detail"),
    )


# ----------------------------------------------------------------------------- pods
def _requests(c: Mapping[str, Any], resource: str) -> Decimal:
    r = c.get("resources") or {}
    q = (r.get("requests") or {}).get(resource)
    if q is None:
        q = (r.get("limits") or {}).get(resource)  # the API server defaults requests so
    return parse_quantity(q) if q is not None else Decimal(0)


def effective_request(spec: Mapping[str, Any], resource: str) -> Decimal:
    """What the scheduler reserves for one resource: max(app containers + sidecars, peak
    of init containers with the sidecars started before them) + pod overhead."""
    app = sum((_requests(c, resource) for c in spec.get("containers") or []), Decimal(0))
    sidecars = Decimal(0)
    init_peak = Decimal(0)
    for c in spec.get("initContainers") or []:
        req = _requests(c, resource)
        if c.get("restartPolicy") == "Always":  # a sidecar keeps running
            sidecars += req
            init_peak = max(init_peak, sidecars)
        else:
            init_peak = max(init_peak, sidecars + req)
    overhead = (spec.get("overhead") or {}).get(resource)
    extra = parse_quantity(overhead) if overhead is not None else Decimal(0)
    return max(app + sidecars, init_peak) + extra


def _gpu_spec(spec: Mapping[str, Any], label: str) -> str | None:
    models: list[str] = []
    if (spec.get("nodeSelector") or {}).get(label):
        models.append(spec["nodeSelector"][label])
    affinity = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    for term in affinity.get("nodeSelectorTerms") or []:
        for e in term.get("matchExpressions") or []:
            if e.get("key") == label and e.get("operator") == "In":
                models.extend(v for v in e.get("values") or [] if v not in models)
    return "|".join(models) or None


def _pod_row(
    p: Mapping[str, Any], opt: Mapping[str, str], pool_labels: tuple[str, ...]
) -> dict[str, Any]:
    md, spec, st = p.get("metadata") or {}, p.get("spec") or {}, p.get("status") or {}
    ns, name = md.get("namespace"), md.get("name")
    owner = next((o for o in md.get("ownerReferences") or [] if o.get("controller")), None)
    labels, notes = md.get("labels") or {}, md.get("annotations") or {}
    sched = next(
        (
            c
            for c in st.get("conditions") or []
            if c.get("type") == "PodScheduled" and c.get("status") == "True"
        ),
        None,
    )

    scheduled = _ts(sched.get("lastTransitionTime")) if sched else None
    if scheduled is None and spec.get("nodeName"):
        scheduled = _ts(st.get("startTime"))  # older pods may lack the condition

    def req(resource: str, scale: Decimal, what: str) -> str:
        try:
            return str(math.ceil(effective_request(spec, resource) * scale))
        except ValueError as exc:
            return f"{what}: {exc}"  # validation quarantines the row, naming the column

    gpus = req(opt["gpu_resource"], Decimal(1), "gpu")
    return {
        "pod_id": f"{ns}/{name}/{md.get('uid', '')}",
        "job_id": f"{ns}/{owner['kind']}/{owner['name']}" if owner else None,
        "gang_id": notes.get(opt["gang_annotation"]) or labels.get(opt["gang_label"]),
        "gang_size": None,
        "pool": _label(spec.get("nodeSelector") or {}, *pool_labels),
        "cpu_milli": req("cpu", Decimal(1000), "cpu"),
        "memory_mib": req("memory", Decimal(1) / MIB, "memory"),
        "num_gpu": gpus,
        "gpu_milli": "1000" if gpus.isdigit() and int(gpus) > 0 else "0",
        "gpu_spec": _gpu_spec(spec, opt["gpu_model_label"]),
        "qos": st.get("qosClass"),
        "priority": spec.get("priority"),
        "phase": st.get("phase"),
        "created_at": _ts(md.get("creationTimestamp")),
        "scheduled_at": scheduled,
        "deleted_at": _ts(md.get("deletionTimestamp")),
        "node_id": spec.get("nodeName"),
    }


def pod_rows(pods: list[dict[str, Any]], opt: Mapping[str, str]) -> pl.DataFrame:
    pool_labels = (opt["pool_label"],) if opt["pool_label"] else POOL_LABELS
    rows = [
        _pod_row(p, opt, pool_labels)
        for p in pods
        if PLACEHOLDER_LABEL not in ((p.get("metadata") or {}).get("labels") or {})
    ]
    text = (
        "pod_id",
        "job_id",
        "gang_id",
        "pool",
        "cpu_milli",
        "memory_mib",
        "num_gpu",
        "gpu_milli",
        "gpu_spec",
        "qos",
        "phase",
        "node_id",
    )
    return pl.DataFrame(
        rows,
        schema={
            **dict.fromkeys(text, pl.String()),
            "gang_size": pl.Int32(),
            "priority": pl.Int64(),
            "created_at": UTC_TS,
            "scheduled_at": UTC_TS,
            "deleted_at": UTC_TS,
        },
    )


def pdb_rows(pdbs: list[dict[str, Any]], at: datetime) -> pl.DataFrame:
    rows = []
    for b in pdbs:
        md, spec, st = b.get("metadata") or {}, b.get("spec") or {}, b.get("status") or {}
        sel = spec.get("selector")
        rows.append(
            {
                "ts": at,
                "namespace": md.get("namespace"),
                "name": md.get("name"),
                "selector": None if sel is None else json.dumps(sel, sort_keys=True),
                "min_available": None
                if spec.get("minAvailable") is None
                else str(spec["minAvailable"]),
                "max_unavailable": None
                if spec.get("maxUnavailable") is None
                else str(spec["maxUnavailable"]),
                "disruptions_allowed": st.get("disruptionsAllowed"),
                "expected_pods": st.get("expectedPods"),
                "current_healthy": st.get("currentHealthy"),
            }
        )
    return pl.DataFrame(
        rows,
        schema={
            "ts": UTC_TS,
            "namespace": pl.String(),
            "name": pl.String(),
            "selector": pl.String(),
            "min_available": pl.String(),
            "max_unavailable": pl.String(),
            "disruptions_allowed": pl.Int64(),
            "expected_pods": pl.Int64(),
            "current_healthy": pl.Int64(),
        },
    )


# ----------------------------------------------------------------------------- API calls
def api_client(path: str, context: str | None) -> Any:
    """An ApiClient for a kubeconfig file or the pod's service account."""
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    try:
        if path == IN_CLUSTER:
            cfg = client.Configuration()
            config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
            return client.ApiClient(cfg)
        return config.new_client_from_config(  # type: ignore[no-untyped-call]
            config_file=path, context=context or None, persist_config=False
        )
    except (ConfigException, OSError, ValueError, TypeError) as exc:
        raise IngestError(f"{path}: cannot load Kubernetes config ({exc})") from exc


def list_all(
    call: Callable[..., Any],
    what: str,
    host: str,
    page_size: int,
    timeout: float,
    convert: Callable[[list[dict[str, Any]]], pl.DataFrame],
) -> pl.DataFrame:
    """Every item of a list call, converted page by page (so a 200k-pod cluster never sits
    in memory as JSON); one restart from scratch if the continue token expires."""
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    for attempt in range(2):
        pages: list[pl.DataFrame] = []
        token: str | None = None
        try:
            while True:
                kw: dict[str, Any] = {
                    "limit": page_size,
                    "_preload_content": False,
                    "_request_timeout": timeout,
                }
                if token:
                    kw["_continue"] = token
                body = json.loads(call(**kw).data)
                pages.append(convert(body.get("items") or []))
                token = (body.get("metadata") or {}).get("continue")
                if not token:
                    return pl.concat(pages)
        except ApiException as exc:
            if exc.status == 410 and token and attempt == 0:
                continue  # the snapshot expired mid-list: list again from the start
            raise IngestError(
                f"kubernetes: listing {what} at {host} failed: HTTP {exc.status} "
                f"{exc.reason}: {_message(exc.body)}"
            ) from exc
        except (HTTPError, OSError, ValueError) as exc:
            raise IngestError(f"kubernetes: listing {what} at {host} failed: {exc}") from exc
    raise AssertionError("unreachable")


def _message(body: Any) -> str:
    try:
        return str(json.loads(body).get("message"))
    except (TypeError, ValueError, AttributeError):
        return str(body)[:300]


def options_of(options: IngestOptions) -> dict[str, str]:
    unknown = sorted(set(options.extra) - set(DEFAULTS))
    if unknown:
        raise IngestError(
            f"kubernetes: unknown option(s) {', '.join(unknown)}; known: "
            f"{', '.join(sorted(DEFAULTS))}"
        )
    opt = {**DEFAULTS, **options.extra}
    if opt["resources"] not in ("allocatable", "capacity"):
        raise IngestError("kubernetes: -o resources= must be allocatable or capacity")
    for key in ("page_size", "timeout"):
        if not opt[key].isdigit() or int(opt[key]) < 1:
            raise IngestError(f"kubernetes: -o {key}={opt[key]!r} must be a positive integer")
    return opt


def read(path: str, options: IngestOptions) -> Iterator[Batch]:
    opt = options_of(options)
    at = options.clock.now()
    api = api_client(path, opt["context"])
    from kubernetes import client

    core, policy = client.CoreV1Api(api), client.PolicyV1Api(api)
    host = api.configuration.host
    page, timeout = int(opt["page_size"]), float(opt["timeout"])
    try:
        nodes = list_all(
            core.list_node, "nodes", host, page, timeout, lambda items: node_frame(items, at, opt)
        )
        pods = list_all(
            core.list_pod_for_all_namespaces,
            "pods",
            host,
            page,
            timeout,
            lambda items: pod_rows(items, opt),
        )
        pdbs = list_all(
            policy.list_pod_disruption_budget_for_all_namespaces,
            "poddisruptionbudgets",
            host,
            page,
            timeout,
            lambda items: pdb_rows(items, at),
        )
    finally:
        api.close()
    frames = (
        ("inventory", nodes.select(INVENTORY.names)),
        ("node_addresses", node_addresses(nodes)),
        ("telemetry", nodes.select("ts", "node_id", "node_ready")),
        ("events", node_events(nodes)),
        ("pods", pods),
        ("pdbs", pdbs),
    )
    return iter([Batch(table, frame) for table, frame in frames if frame.height])
