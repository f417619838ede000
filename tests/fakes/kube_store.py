"""Stored objects of more kinds for the fake API server (``tests.fakes.kube_api``):
Deployments (``apps/v1``), PriorityClasses (``scheduling.k8s.io/v1``), Karpenter
NodePools (``karpenter.sh/v1``) and Events (``v1``), as an API server stores them and no
controller acts on them (a Deployment's replicas change, no pod comes or goes).

Each kind is a :class:`Kind` naming the ``FakeKubeAPI`` list that holds its objects;
:func:`routes` gives the fake's routes for all of them:

- ``GET`` a list (cluster-wide, or per namespace for namespaced kinds; label and field
  selectors and pagination as for every list of the fake) and ``GET`` one object;
- ``POST`` a new object: 201 with ``uid``, ``resourceVersion``, ``generation`` and
  ``creationTimestamp`` set, 409 ``AlreadyExists`` when the name is taken, 400 when the
  body names another kind or namespace;
- ``PATCH`` with a merge patch; built-in kinds also take a strategic-merge patch (the
  fake applies it as a merge patch: the same for the fields predops sends), custom
  resources answer 415 to it as a CRD does; a JSON patch gets 415 everywhere. A patch
  that changes ``spec`` bumps ``metadata.generation``.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from tests.fakes.kube_objects import Obj, rfc3339

if TYPE_CHECKING:
    from tests.fakes.kube_api import Answer, FakeKubeAPI


@dataclass(frozen=True, slots=True)
class Kind:
    """One stored kind: where it is served and which list of the fake holds it."""

    prefix: str
    """API path of its group version, e.g. ``/apis/apps/v1``."""
    plural: str
    kind: str
    namespaced: bool
    builtin: bool
    """Built-in kinds take strategic-merge patches; custom resources do not."""
    attr: str
    """The ``FakeKubeAPI`` field holding the objects."""

    @property
    def api_version(self) -> str:
        return self.prefix.removeprefix("/apis/").removeprefix("/api/")


STORED_KINDS = (
    Kind("/apis/apps/v1", "deployments", "Deployment", True, True, "deployments"),
    Kind(
        "/apis/scheduling.k8s.io/v1",
        "priorityclasses",
        "PriorityClass",
        False,
        True,
        "priority_classes",
    ),
    Kind("/apis/karpenter.sh/v1", "nodepools", "NodePool", False, False, "nodepools"),
    Kind("/api/v1", "events", "Event", True, True, "events"),
)


def _key(obj: Obj) -> tuple[str, str]:
    md = obj["metadata"]
    return md.get("namespace", ""), md["name"]


class StoredKindRoutes:
    """The routes of one :class:`Kind` over ``fake``'s list of its objects."""

    def __init__(self, fake: FakeKubeAPI, kind: Kind) -> None:
        self.fake = fake
        self.k = kind

    @property
    def items(self) -> list[Obj]:
        items: list[Obj] = getattr(self.fake, self.k.attr)
        return items

    def routes(self) -> list[tuple[str, str, Callable[..., Answer]]]:
        k = self.k
        ns, name = r"(?P<ns>[^/]+)", r"(?P<name>[^/]+)"
        base = (
            rf"{k.prefix}/namespaces/{ns}/{k.plural}" if k.namespaced else rf"{k.prefix}/{k.plural}"
        )
        out: list[tuple[str, str, Callable[..., Answer]]] = [
            ("GET", base, self.list),
            ("POST", base, self.create),
            ("GET", rf"{base}/{name}", self.get),
            ("PATCH", rf"{base}/{name}", self.patch),
        ]
        if k.namespaced:
            out.append(("GET", rf"{k.prefix}/{k.plural}", self.list))
        return out

    def _find(self, name: str, ns: str | None) -> Obj | None:
        return next((o for o in self.items if _key(o) == (ns or "", name)), None)

    def _missing(self, name: str) -> Answer:
        from tests.fakes.kube_api import status

        group = self.k.api_version.split("/")[0]
        return status(404, "NotFound", f'{self.k.plural}.{group} "{name}" not found')

    def list(self, query: dict[str, str], ns: str | None = None, **_: Any) -> Answer:
        items = [o for o in self.items if ns is None or o["metadata"].get("namespace") == ns]
        return self.fake._list(f"{self.k.kind}List", self.k.api_version, items, query)

    def get(self, name: str, ns: str | None = None, **_: Any) -> Answer:
        obj = self._find(name, ns)
        if obj is None:
            return self._missing(name)
        return 200, self._typed(obj)

    def _typed(self, obj: Obj) -> Obj:
        return {"apiVersion": self.k.api_version, "kind": self.k.kind, **copy.deepcopy(obj)}

    def create(self, body: Any, ns: str | None = None, **_: Any) -> Answer:
        from tests.fakes.kube_api import status

        if not isinstance(body, dict) or not (body.get("metadata") or {}).get("name"):
            return status(400, "BadRequest", f"a {self.k.kind} needs metadata.name")
        if body.get("kind", self.k.kind) != self.k.kind:
            return status(400, "BadRequest", f"body is a {body.get('kind')}, not a {self.k.kind}")
        obj = copy.deepcopy(body)
        md = obj["metadata"]
        if self.k.namespaced and md.setdefault("namespace", ns) != ns:
            return status(400, "BadRequest", "the namespace of the object does not match")
        if self._find(md["name"], ns) is not None:
            return status(
                409,
                "AlreadyExists",
                f'{self.k.plural} "{md["name"]}" already exists',
            )
        self.fake.resource_version += 1
        md.update(
            uid=str(uuid.uuid4()),
            resourceVersion=str(self.fake.resource_version),
            generation=1,
            creationTimestamp=rfc3339(datetime.now(UTC)),
        )
        obj.pop("apiVersion", None)
        obj.pop("kind", None)
        self.items.append(obj)
        return 201, self._typed(obj)

    def patch(
        self, name: str, body: Any, headers: dict[str, str], ns: str | None = None, **_: Any
    ) -> Answer:
        from tests.fakes.kube_api import merge_patch, status

        obj = self._find(name, ns)
        if obj is None:
            return self._missing(name)
        ctype = headers.get("content-type", "")
        ok = ctype.startswith("application/merge-patch+json") or (
            self.k.builtin and ctype.startswith("application/strategic-merge-patch+json")
        )
        if not ok:
            return status(
                415,
                "UnsupportedMediaType",
                f"the body of the request was in an unknown format: {ctype}",
            )
        patched = merge_patch(obj, body)
        self.fake.resource_version += 1
        patched["metadata"]["resourceVersion"] = str(self.fake.resource_version)
        if patched.get("spec") != obj.get("spec"):
            patched["metadata"]["generation"] = int(obj["metadata"].get("generation", 1)) + 1
        self.items[self.items.index(obj)] = patched
        return 200, self._typed(patched)


def routes(fake: FakeKubeAPI) -> list[tuple[str, str, Callable[..., Answer]]]:
    """The fake's routes for every kind of :data:`STORED_KINDS`."""
    return [r for kind in STORED_KINDS for r in StoredKindRoutes(fake, kind).routes()]
