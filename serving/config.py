"""The server's configuration: typed, frozen, validated once at start.

Tokens are bearer tokens with a role; only their SHA-256 digest is kept, so a config file
or a log line never holds a usable secret. Roles, weakest first: ``viewer`` (read
endpoints when reads are protected), ``approver`` (approve plans), ``operator`` (approve and
apply plans).

:func:`load_serve_config` reads one TOML file plus the environment, validated at start
with errors that name the key (never a secret)::

    [server]
    host = "0.0.0.0"
    port = 8080
    protect_reads = false       # true: read endpoints and dashboards need a viewer token
    max_body_bytes = 8388608    # larger request bodies get 413
    max_batch = 10000           # most nodes / series per request (more: 413)
    reload_every_s = 15         # registry poll for a moved champion alias
    max_data_age = "30m"        # online features older than this are stale
    apply_execute = false       # true: /apply acts (else a dry-run)
    kubeconfig = "in-cluster"   # optional: re-validate against (and act on) this cluster
    kube_context = "prod"       # optional
    session_key_file = "/etc/predops/secrets/session-key"  # optional: replicas share sign-ins
    mlflow_ui_url = "https://mlflow.example.org"  # optional: the models page links runs there

    [[tokens]]
    name = "alice"
    role = "approver"           # viewer | approver | operator
    sha256 = "<hex SHA-256 of the secret>"   # `predops serve --hash-token` prints it
    expires_at = 2026-12-31T00:00:00Z        # optional, UTC
    subject = "alice@example.org"            # optional: the person (default: name);
                                             # four eyes compares subjects

    [[policy.budgets]]          # optional: budgets and knobs /apply re-validates with
    scope = "rack"
    max_nodes = 1

The file may be the scheduler's too: its ``[scheduler]``, ``[jobs.*]``, ``[ingest]``,
``[features]`` and ``[retrain]`` are left to the scheduler, which validates them; a
section no reader knows is an error here as well.

Environment: ``PREDOPS_API_TOKEN=<secret>`` adds an operator token named ``env`` (a quick
start; only its digest is kept), ``PREDOPS_SERVER__<KEY>=value`` overrides a
``[server]`` key (e.g. ``PREDOPS_SERVER__PROTECT_READS=true``) and
``PREDOPS_POLICY__<TABLE>__<KEY>`` a ``[policy]`` one.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from predops.pipelines.workspace.config import (
    ConfigError,
    ConfigTable,
    check_sections,
    merge_env,
    read_toml,
)
from predops.pipelines.workspace.policy_config import (
    POLICY_ENV_PREFIX,
    PolicySettings,
    parse_policy,
)
from predops.serving.sessions import read_session_key

ROLES = ("viewer", "approver", "operator")
ENV_TOKEN = "PREDOPS_API_TOKEN"
"""Environment variable whose value is an operator bearer token (named ``env``)."""
ENV_SERVER_PREFIX = "PREDOPS_SERVER__"
HEX64 = re.compile(r"^[0-9a-f]{64}$")


def token_digest(secret: str) -> str:
    """The stored form of a bearer token (hex SHA-256 of its UTF-8 bytes)."""
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class ApiToken:
    """One bearer token: who holds it, what it may do, until when (UTC; None = no expiry)."""

    name: str
    role: str
    sha256: str
    expires_at: datetime | None = None
    subject: str = ""
    """The identity behind the token (a person's tokens of several roles share one);
    ``[policy.approval] four_eyes`` compares it. Empty: the token's name."""

    @property
    def identity(self) -> str:
        """Who holds the token, as approvals and four eyes compare it."""
        return self.subject or self.name

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"token {self.name!r}: role {self.role!r} is not one of {ROLES}")
        if not HEX64.match(self.sha256):
            raise ValueError(f"token {self.name!r}: sha256 must be 64 lower-case hex characters")
        if self.expires_at is not None and self.expires_at.tzinfo is None:
            raise ValueError(f"token {self.name!r}: expires_at must carry a time zone")

    def expired(self, now: datetime) -> bool:
        """Whether the token is past its ``expires_at`` at ``now``."""
        return self.expires_at is not None and now >= self.expires_at

    def may(self, role: str) -> bool:
        """Whether this token's role includes ``role``."""
        return ROLES.index(self.role) >= ROLES.index(role)


@dataclass(frozen=True, slots=True)
class ServeConfig:
    """What the server enforces. Units are in the names."""

    tokens: tuple[ApiToken, ...] = ()
    protect_reads: bool = False
    """True: read endpoints and dashboards need a ``viewer`` token too."""
    max_body_bytes: int = 8 << 20
    max_batch: int = 10_000
    """Most nodes or series one request may ask for."""
    reload_every_s: float = 15.0
    """How often the registry is polled for a moved ``champion`` alias."""
    max_data_age: timedelta = field(default=timedelta(minutes=30))
    """Online features older than this are stale: such nodes are not scored and /readyz
    reports the data as not fresh."""
    apply_execute: bool = False
    """True: ``POST /v1/plans/{id}/apply`` acts through the actuators; False: dry-run."""
    kubeconfig: str | None = None
    """A kubeconfig file or ``in-cluster``: apply re-validates against (and, with
    ``apply_execute``, acts on) that cluster; None: re-validates against the lake."""
    kube_context: str | None = None
    mlflow_ui_url: str | None = None
    """The MLflow tracking UI (``http(s)://...``): the models page links each version's
    run there; None: it shows the run id and artifact URI as text."""
    session_key: bytes | None = field(default=None, repr=False)
    """The dashboard session-signing key, read from ``session_key_file`` at start, so
    every replica given the same file accepts the others' sign-ins; None: a random key
    per process (:mod:`predops.serving.sessions`)."""
    host: str = "127.0.0.1"
    port: int = 8080
    policy: PolicySettings = field(default_factory=PolicySettings)
    """The budgets and policy knobs ``/apply`` re-validates with (``[policy]``)."""
    origin: str = "defaults"
    """Where it came from (file and environment keys used; never a secret)."""


def load_serve_config(path: Path | None, environ: Mapping[str, str]) -> ServeConfig:
    """The server's configuration from ``path`` (TOML; None: defaults) and ``environ``
    (see the module docstring). Raises :class:`ConfigError` naming the file and key."""
    where, raw = read_toml(path)
    ours = (ENV_SERVER_PREFIX, POLICY_ENV_PREFIX)
    server_env = {k: v for k, v in environ.items() if k.startswith(ours)}
    applied = merge_env(raw, server_env, where)
    check_sections(raw, where)
    policy = parse_policy(raw, where, env_keys=applied)
    t = ConfigTable(raw.get("server", {}), where, "server")
    defaults = ServeConfig()
    max_age = t.duration("max_data_age", defaults.max_data_age)
    assert max_age is not None
    reload_every = t.integer("reload_every_s", int(defaults.reload_every_s), 1)
    port = t.integer("port", defaults.port, 0)
    if port > 65535:
        raise t.fail("port", f"{port} must be at most 65535")
    kw: dict[str, Any] = {
        "host": t.text("host", defaults.host),
        "port": port,
        "protect_reads": t.boolean("protect_reads", defaults.protect_reads),
        "max_body_bytes": t.integer("max_body_bytes", defaults.max_body_bytes, 1024),
        "max_batch": t.integer("max_batch", defaults.max_batch, 1),
        "reload_every_s": float(reload_every),
        "max_data_age": max_age,
        "apply_execute": t.boolean("apply_execute", defaults.apply_execute),
        "kubeconfig": t.text("kubeconfig"),
        "kube_context": t.text("kube_context"),
        "mlflow_ui_url": t.text("mlflow_ui_url"),
    }
    ui = kw["mlflow_ui_url"]
    if ui is not None and not ui.startswith(("http://", "https://")):
        raise t.fail("mlflow_ui_url", f"{ui!r} must start with http:// or https://")
    key_file = t.text("session_key_file")
    if key_file is not None:
        try:
            kw["session_key"] = read_session_key(Path(key_file))
        except ValueError as exc:
            raise t.fail("session_key_file", str(exc)) from None
    t.done()
    tokens = _tokens(raw.get("tokens", []), where)
    secret = environ.get(ENV_TOKEN)
    used = list(applied)
    if secret is not None:
        if len(secret) < 16:
            raise ConfigError(f"environment: {ENV_TOKEN} must be at least 16 characters")
        if any(tok.name == "env" for tok in tokens):
            raise ConfigError(f"{where}: [[tokens]] name 'env' is reserved for {ENV_TOKEN}")
        tokens.append(ApiToken("env", "operator", token_digest(secret)))
        used.append(ENV_TOKEN)
    origin = where + (f" + environment ({', '.join(used)})" if used else "")
    return ServeConfig(tokens=tuple(tokens), policy=policy, origin=origin, **kw)


def _tokens(raw: Any, where: str) -> list[ApiToken]:
    if not isinstance(raw, list):
        raise ConfigError(f"{where}: tokens must be an array of tables ([[tokens]])")
    out: list[ApiToken] = []
    for i, item in enumerate(raw):
        t = ConfigTable(item, where, f"tokens[{i}]")
        name = t.required_text("name")
        role = t.choice("role", "viewer", ROLES)
        digest = t.required_text("sha256").lower()
        if not HEX64.match(digest):
            raise t.fail("sha256", "must be 64 hex characters (the SHA-256 of the secret)")
        expires = t.get("expires_at")
        if expires is not None:
            if isinstance(expires, str):
                try:
                    expires = datetime.fromisoformat(expires)
                except ValueError:
                    raise t.fail("expires_at", "is not an ISO-8601 time") from None
            if not isinstance(expires, datetime) or expires.tzinfo is None:
                raise t.fail("expires_at", "must be a time with a zone, e.g. 2026-12-31T00:00:00Z")
            expires = expires.astimezone(UTC)
        subject = t.text("subject", "") or ""
        t.done()
        if any(tok.name == name for tok in out):
            raise t.fail("name", f"{name!r} is used by another token")
        out.append(ApiToken(name, role, digest, expires, subject))
    return out
