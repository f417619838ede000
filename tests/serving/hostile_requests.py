"""Hypothesis strategies for requests whose every string is hostile text: any Unicode,
lone surrogates included (hypothesis leaves them out unless asked), in every path and
query parameter, header, cookie and body field of an operation.

Each string is put on the wire the way a client can send it, so what the test sends is
what can reach a server: in a URL as percent-encoded UTF-8 (a lone surrogate as the
bytes a careless encoder writes, ``%ED%A0%80``); in a header or cookie as raw bytes,
without the control characters an HTTP/1.1 parser refuses; in a JSON body as the
``"\\ud800"`` escape JSON allows; in a form body percent-encoded like a URL.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from hypothesis import strategies as st

TRICKY = (
    "\ud800",
    "\udfff",
    "a\ud800b",
    "\udc80\ud800",
    "a.1.é",
    "a.1.\ud800",
    "é",
    "\x00",
    "\u202e",
    "\ufeff",
    "💥",
    "%",
    "%ED%A0%80",
    "../..",
    "[",
    "<a href=x>",
    "",
    " ",
)
"""Strings that trouble servers (lone surrogates, a cookie MAC that is not ASCII, a NUL,
bidi and byte-order marks, escapes that look decoded, a bare ``[`` for URL parsers, HTML),
drawn often so that every run tries them."""

_TEXT = st.text(st.one_of(st.characters(), st.characters(categories=["Cs"])), max_size=8)
ANY_TEXT: st.SearchStrategy[str] = st.one_of(
    st.sampled_from(TRICKY),
    _TEXT,
    st.builds("{}\ud800{}".format, _TEXT, _TEXT),
)
"""Any Unicode string, lone surrogates included (and often: one in three has one)."""


def wire(text: str) -> bytes:
    """The bytes a client may send for ``text`` (a lone surrogate as would-be UTF-8)."""
    return text.encode("utf-8", "surrogatepass")


def in_url(text: str) -> str:
    return quote(wire(text), safe="")


def in_header(text: str) -> bytes:
    """``text`` as a header value an HTTP/1.1 parser accepts: no control characters
    but tab, no surrounding whitespace."""
    return bytes(b for b in wire(text) if b == 0x09 or (b >= 0x20 and b != 0x7F)).strip()


def json_values() -> st.SearchStrategy[Any]:
    """Any JSON value, its strings and keys hostile."""
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**63), 2**63),
        st.floats(allow_nan=False, allow_infinity=False),
        ANY_TEXT,
    )
    return st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3), st.dictionaries(ANY_TEXT, inner, max_size=3)
        ),
        max_leaves=6,
    )


def mostly(shaped: st.SearchStrategy[Any], wild: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``shaped`` nine times in ten, else ``wild``."""
    return st.integers(0, 9).flatmap(lambda k: wild if k == 0 else shaped)


def from_schema(
    schema: Mapping[str, Any], defs: Mapping[str, Any], strings: st.SearchStrategy[str]
) -> st.SearchStrategy[Any]:
    """Values of the JSON schema ``schema`` (``$ref`` into ``defs``): numbers, lists and
    objects mostly as the schema says, so that a request gets past them, every string
    from ``strings`` whatever its pattern or enum, and now and then any JSON value."""
    if "$ref" in schema:
        return from_schema(defs[schema["$ref"].rsplit("/", 1)[-1]], defs, strings)
    options = schema.get("anyOf") or schema.get("oneOf")
    if options:
        return st.one_of([from_schema(s, defs, strings) for s in options])
    kind = schema.get("type")
    shaped: st.SearchStrategy[Any]
    if "enum" in schema:
        shaped = st.sampled_from(schema["enum"]) | strings
    elif kind == "object":
        props = {k: from_schema(v, defs, strings) for k, v in schema.get("properties", {}).items()}
        need = set(schema.get("required", ()))
        known = st.fixed_dictionaries(
            {k: v for k, v in props.items() if k in need},
            optional={k: v for k, v in props.items() if k not in need},
        )
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            more = st.dictionaries(strings, from_schema(extra, defs, strings), max_size=3)
            shaped = st.builds(lambda a, b: {**b, **a}, known, more)
        else:
            shaped = known
    elif kind == "array":
        items = from_schema(schema.get("items") or {}, defs, strings)
        shaped = st.lists(items, min_size=schema.get("minItems", 0), max_size=3)
    elif kind == "string":
        shaped = strings
    elif kind == "integer":
        lo, hi = schema.get("minimum"), schema.get("maximum")
        shaped = st.integers(None if lo is None else int(lo), None if hi is None else int(hi))
    elif kind == "number":
        lo = schema.get("minimum", schema.get("exclusiveMinimum"))
        shaped = st.floats(
            lo,
            schema.get("maximum"),
            exclude_min="exclusiveMinimum" in schema,
            allow_nan=False,
            allow_infinity=False,
        )
    elif kind == "boolean":
        shaped = st.booleans()
    elif kind == "null":
        shaped = st.none()
    else:
        return json_values()
    return mostly(shaped, json_values())


def with_hostile_strings(value: Any) -> st.SearchStrategy[Any]:
    """``value`` (a JSON value) with any of its strings and keys hostile text instead:
    a request that passes validation but for the strings."""
    if isinstance(value, str):
        return st.just(value) | ANY_TEXT
    if isinstance(value, list):
        return st.tuples(*map(with_hostile_strings, value)).map(list)
    if isinstance(value, dict):  # keys less often: most name the schema's fields
        items = [
            st.tuples(mostly(st.just(k), ANY_TEXT), with_hostile_strings(v))
            for k, v in value.items()
        ]
        return st.tuples(*items).map(dict)
    return st.just(value)


def query_text(value: Any) -> str | None:
    """A query parameter's text for a JSON value (None: leave the parameter out)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else json.dumps(value)


@dataclass(frozen=True)
class Operation:
    """One method and path template (``/v1/plans/{plan_id}``), its query parameters
    (name and JSON schema) and body: ``json_schema``, ``form`` (field names) or none."""

    method: str
    path: str
    query: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    json_schema: Mapping[str, Any] | None = None
    form: tuple[str, ...] = ()

    @classmethod
    def page(
        cls, method: str, path: str, *, query: Sequence[str] = (), form: Sequence[str] = ()
    ) -> Operation:
        """An operation outside the OpenAPI document: its query parameters are strings."""
        text = {"type": "string"}
        return cls(method, path, tuple((q, text) for q in query), None, tuple(form))


def api_operations(openapi: Mapping[str, Any]) -> list[Operation]:
    """Every operation of an OpenAPI document (JSON bodies only)."""
    out = []
    for path, methods in openapi["paths"].items():
        for method, op in methods.items():
            params = op.get("parameters") or []
            body = (op.get("requestBody") or {}).get("content", {}).get("application/json")
            out.append(
                Operation(
                    method.upper(),
                    path,
                    tuple((p["name"], p["schema"]) for p in params if p["in"] == "query"),
                    body["schema"] if body else None,
                )
            )
    return out


PATH_PARAM = re.compile(r"\{([^}:]+)(?::[^}]*)?\}")


@st.composite
def hostile_request(
    draw: st.DrawFn,
    op: Operation,
    *,
    known: Mapping[str, Sequence[str]],
    defs: Mapping[str, Any],
    authorizations: Sequence[str],
    cookie: str,
    bodies: Sequence[Any] = (),
) -> dict[str, Any]:
    """Keyword arguments for ``TestClient.request``: ``op`` with every string hostile.
    Some values are good, so that a request gets past the first check to the next:
    path parameters and strings are sometimes ``known`` ids, ``Authorization`` mostly one
    of ``authorizations``, and the JSON body mostly one of ``bodies`` (valid ones) with
    hostile strings, else one shaped by the schema."""

    every_id = sorted({v for vs in known.values() for v in vs})
    strings = ANY_TEXT | st.sampled_from(every_id) if every_id else ANY_TEXT

    def value(name: str) -> str:
        good = known.get(name) or ()
        return draw(st.sampled_from(good) | ANY_TEXT if good else ANY_TEXT)

    path = PATH_PARAM.sub(lambda m: in_url(value(m.group(1))), op.path)
    query = []
    for name, schema in op.query:
        text = query_text(draw(from_schema(schema, defs, strings)))
        if text is not None and draw(st.booleans()):
            query.append((name, text))
    if draw(st.booleans()):
        query.append((draw(ANY_TEXT), draw(ANY_TEXT)))
    if query:
        path += "?" + "&".join(f"{in_url(k)}={in_url(v)}" for k, v in query)
    hostile_auth = ANY_TEXT.map(lambda t: f"Bearer {t}") | ANY_TEXT
    auth = draw(mostly(st.sampled_from(authorizations), hostile_auth))
    shaped_session = st.builds("{}.{}.{}".format, ANY_TEXT, ANY_TEXT, ANY_TEXT)  # name.expiry.mac
    session = draw(mostly(shaped_session, ANY_TEXT))
    other, other_value = draw(ANY_TEXT), draw(ANY_TEXT)
    headers: dict[str, bytes] = {
        "Authorization": in_header(auth),
        "Cookie": in_header(f"{cookie}={session}; {other}={other_value}"),
    }
    for name in ("Host", "Accept", "Accept-Language", "X-Forwarded-For", "User-Agent"):
        if draw(st.booleans()):
            headers[name] = in_header(draw(ANY_TEXT))
    content: bytes | None = None
    if op.json_schema is not None:
        headers["Content-Type"] = b"application/json"
        shaped = from_schema(op.json_schema, defs, strings)
        if bodies:
            shaped = mostly(st.sampled_from(bodies).flatmap(with_hostile_strings), shaped)
        content = json.dumps(draw(shaped)).encode()
    elif op.form:
        headers["Content-Type"] = b"application/x-www-form-urlencoded"
        fields = [(n, value(n)) for n in op.form] + [(draw(ANY_TEXT), draw(ANY_TEXT))]
        content = "&".join(f"{in_url(k)}={in_url(v)}" for k, v in fields).encode()
    return {"method": op.method, "url": path, "headers": headers, "content": content}
