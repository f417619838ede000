"""Slow-start pacing of drains per failure domain, with its state between planning rounds.

A node's drain touches one domain at each scope of :data:`PACED_SCOPES`: its pool, rack
and spine (named as :func:`policy.budgets.domains_of` names them), its SKU (the GPU
model when the inventory has no SKU), its GPU driver version (``NodeState.driver_version``,
when known) and the *detecting signal*: the telemetry source of the risk's top reason
(``xid_errors__increase_24h`` -> ``xid_errors``; :func:`signal_of`). A domain is
*open* (only the disruption budgets bind) until a burst: ``burst_nodes`` or more
candidates of one domain cross the drain threshold in one round. Bursts are explained
from the most specific cause up (:meth:`SlowStart.admit`):

1. *confined* bursts: one signal or one driver version (the one that explains the
   most candidates first; a driver version only when the fleet runs several), whose
   candidates span ``burst_spread_racks`` racks or more (a physical fault does not jump racks; an
   XID code after one job crash or a stopped exporter does). The domain is *paused*
   and the plan alerts: at most ``slow_start_width`` probe drains are in flight in it.
   The burst's nodes are remembered (a later burst of the domain joins them); once the
   burst has ebbed (fewer than ``burst_nodes`` candidates of the domain), a candidate
   that was not part of it gets the first step of slow start (at most
   ``slow_start_width`` drains in flight in the domain), so a real fault reading the
   same signal after a flood is not held back with the flood's stragglers.
   An inspection of a probe that finds a fault resumes the domain in slow start (a
   real, driver-confined fault is handled), and so does a node of the burst that fails
   on its own (in repair, not drained by us); one that finds none stops the probes until
   the domain has had no candidate for ``pacing_hold``. Other domains go on.
2. *physical* bursts, among the candidates no confined burst explained: a rack, then
   a spine, a pool, a SKU (smallest first, so a rack's burst does not also slow its
   pool). The domain's width collapses to ``slow_start_width``.

A paced domain lets at most ``width`` drains be in flight in it; the width grows by
one per disruption that completes (its inspection outcome is known, or the node is
back in service) without a confirmed false alarm — doubling per round of completions,
as TCP's slow start — and halves (not below ``slow_start_width``) on a confirmed false
alarm; a signal or driver domain already at ``slow_start_width`` stops instead, as a
paused one. Only drains accepted since the domain's last change count for it. At
``slow_start_open_width`` the domain is open again, and so is a paced domain with no
candidate for ``pacing_hold``. Pacing only ever removes drains: the budgets,
PDBs and allocator check still judge every drain it lets through.

:class:`PacingState` is what persists between rounds: the paced / paused domains (at
most ``pacing_max_domains``; beyond, the least recently seen are forgotten, i.e. open)
and the drains in flight (one per node, so never more than the fleet). A drain the
plan accepted that never ran (the plan was not applied, re-validation dropped it) is
forgotten once its action expired without the node being disrupted. Pure: the caller
passes the state in and keeps the state out (the workspace in a file, the what-if loop
in memory).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from predops.allocator.topology import NodeSpec
from predops.core.actions import Plan, SkipReason
from predops.core.contracts import FailureRisk
from predops.policy.budgets import domains_of
from predops.policy.config import DisruptionConfig
from predops.policy.fleet import FleetState, NodeState

PACED_SCOPES = ("pool", "rack", "spine", "sku", "driver", "signal")
CONFINED_SCOPES = ("signal", "driver")
"""Scopes whose burst, spread over racks, is confined to a cause (paused); ties in this
order."""
PHYSICAL_SCOPES = ("rack", "spine", "pool", "sku")
"""Scopes whose burst is a physical correlated event (slow start), smallest first."""

OPEN, SLOW_START, PAUSED, STOPPED = "open", "slow_start", "paused", "stopped"
"""Modes of a domain: budgets only / paced / paused, probing / paused, no probes."""


def signal_of(risk: FailureRisk) -> str | None:
    """The detecting signal: the source of the reason that raised the risk most (the
    feature name before ``__``); None when no reason raised it."""
    best = max(
        (r for r in risk.reasons if r.contribution > 0),
        key=lambda r: (r.contribution, r.feature),
        default=None,
    )
    return None if best is None else best.feature.split("__", 1)[0]


def pacing_domains(
    spec: NodeSpec, state: NodeState | None, risk: FailureRisk | None
) -> dict[str, str]:
    """The node's domain name per paced scope (scopes without a known name left out)."""
    out = domains_of(spec)
    sku = spec.sku or spec.gpu_model
    if sku:
        out["sku"] = sku
    if state is not None and state.driver_version:
        out["driver"] = state.driver_version
    sig = signal_of(risk) if risk is not None else None
    if sig:
        out["signal"] = sig
    return out


def _key(scope: str, name: str) -> str:
    return f"{scope}:{name}"


@dataclass(frozen=True, slots=True)
class DomainPace:
    """A domain that is not open: its mode, width, when it changed and was last seen
    with a candidate, and why (for the plan's evidence and alerts)."""

    mode: str
    width: int
    since: datetime
    last_seen: datetime
    why: str = ""
    members: frozenset[str] = frozenset()
    """A paused domain's burst: the nodes it holds back (others get the first step)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "width": self.width,
            "since": self.since.isoformat(),
            "last_seen": self.last_seen.isoformat(),
            "why": self.why,
            "members": sorted(self.members),
        }


@dataclass(frozen=True, slots=True)
class InFlight:
    """A drain the pacer let through: the node's domain keys, when it was accepted,
    when its action expires, and whether the node was seen disrupted since."""

    domains: tuple[str, ...]
    accepted_at: datetime
    expires: datetime
    started: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "domains": list(self.domains),
            "accepted_at": self.accepted_at.isoformat(),
            "expires": self.expires.isoformat(),
            "started": self.started,
        }


@dataclass(frozen=True)
class PacingState:
    """What slow-start pacing keeps between planning rounds (module docstring)."""

    domains: Mapping[str, DomainPace] = field(default_factory=dict)
    in_flight: Mapping[str, InFlight] = field(default_factory=dict)
    as_of: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "as_of": None if self.as_of is None else self.as_of.isoformat(),
            "domains": {k: self.domains[k].to_dict() for k in sorted(self.domains)},
            "in_flight": {n: self.in_flight[n].to_dict() for n in sorted(self.in_flight)},
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "pacing state") -> PacingState:
        """The state behind one :meth:`to_dict`; ValueError naming ``where`` and the
        field of bad input."""

        def when(obj: Mapping[str, Any], name: str, at: str) -> datetime:
            v = obj.get(name)
            try:
                t = datetime.fromisoformat(str(v))
            except ValueError:
                raise ValueError(f"{at}: field {name} is not a timestamp: {v!r}") from None
            if t.tzinfo is None:
                raise ValueError(f"{at}: field {name} must carry a UTC offset: {v!r}")
            return t

        if not isinstance(d, Mapping):
            raise ValueError(f"{where}: expected an object, got {type(d).__name__}")
        domains: dict[str, DomainPace] = {}
        for k, v in dict(d.get("domains") or {}).items():
            at = f"{where} domains[{k!r}]"
            if not isinstance(v, Mapping):
                raise ValueError(f"{at}: expected an object")
            mode, width = v.get("mode"), v.get("width")
            if mode not in (SLOW_START, PAUSED, STOPPED):
                raise ValueError(f"{at}: field mode must be slow_start, paused or stopped")
            if not isinstance(width, int) or isinstance(width, bool) or width < 0:
                raise ValueError(f"{at}: field width must be an integer >= 0, got {width!r}")
            members = v.get("members") or []
            if not isinstance(members, list):
                raise ValueError(f"{at}: field members must be a list of node ids")
            domains[str(k)] = DomainPace(
                str(mode),
                width,
                when(v, "since", at),
                when(v, "last_seen", at),
                str(v.get("why") or ""),
                frozenset(str(m) for m in members),
            )
        flights: dict[str, InFlight] = {}
        for n, v in dict(d.get("in_flight") or {}).items():
            at = f"{where} in_flight[{n!r}]"
            if not isinstance(v, Mapping) or not isinstance(v.get("domains"), list):
                raise ValueError(f"{at}: expected an object with a domains list")
            flights[str(n)] = InFlight(
                tuple(str(x) for x in v["domains"]),
                when(v, "accepted_at", at),
                when(v, "expires", at),
                bool(v.get("started", False)),
            )
        as_of = None if d.get("as_of") is None else when(d, "as_of", where)
        return cls(domains, flights, as_of)


def _disrupted_by(st: NodeState | None, owner: str) -> bool:
    return st is not None and (st.under_repair or (st.cordoned and st.cordon_owner == owner))


class SlowStart:
    """One round of pacing: :meth:`observe` the fleet, :meth:`admit` the round's
    candidates (bursts, pauses, alerts), then :meth:`blocked` / :meth:`take` per drain
    in the engine's order, and :meth:`state` for the next round."""

    def __init__(self, cfg: DisruptionConfig, state: PacingState | None, now: datetime) -> None:
        self.cfg = cfg
        self.now = now
        prior = state or PacingState()
        self.domains: dict[str, DomainPace] = dict(prior.domains)
        self.in_flight: dict[str, InFlight] = dict(prior.in_flight)
        self._of: dict[str, tuple[str, ...]] = {}
        self._live: dict[str, int] = {}
        self.notes: list[str] = []
        self.completed: list[tuple[str, bool | None]] = []
        """Disruptions this round saw complete, with the inspection outcome."""

    # ------------------------------------------------------------ completions
    def observe(self, fleet: FleetState) -> None:
        """Completions of the drains in flight, read from the fleet's node states."""
        for node_id in sorted(self.in_flight):
            f = self.in_flight[node_id]
            st = fleet.nodes.get(node_id)
            busy = _disrupted_by(st, self.cfg.owner)
            outcome = st.inspection_fault if st is not None else None
            if not f.started:
                ran = st is not None and any(
                    t is not None and t >= f.accepted_at for t in (st.cordoned_at, st.repaired_at)
                )
                if busy or ran:
                    f = replace(f, started=True)
                    self.in_flight[node_id] = f
                elif self.now > f.expires:
                    del self.in_flight[node_id]  # the drain never ran
                    continue
                else:
                    continue
            if outcome is not None or not busy:
                del self.in_flight[node_id]
                self.completed.append((node_id, outcome))
                self._complete(f, outcome)
        self._failed_members(fleet)

    def _failed_members(self, fleet: FleetState) -> None:
        """A node of a paused burst that failed on its own (in repair, not drained by
        us) confirms the burst is real: the domain resumes in slow start."""
        for key in sorted(self.domains):
            d = self.domains[key]
            if d.mode not in (PAUSED, STOPPED):
                continue
            failed = sorted(
                n
                for n in d.members
                if n not in self.in_flight
                and (st := fleet.nodes.get(n)) is not None
                and st.under_repair
                and st.cordon_owner != self.cfg.owner
            )
            if failed:
                self.domains[key] = replace(
                    d,
                    mode=SLOW_START,
                    width=self.cfg.slow_start_width + 1,
                    since=self.now,
                    why=d.why + f"; {failed[0]} of the burst failed: resumed in slow start",
                )
                self.notes.append(f"slow start: {key} resumed ({failed[0]} of its burst failed)")

    def _complete(self, f: InFlight, fault: bool | None) -> None:
        cfg = self.cfg
        for key in f.domains:
            d = self.domains.get(key)
            if d is None or f.accepted_at < d.since:
                continue  # a drain from before the domain's burst says nothing of it
            confined = key.split(":", 1)[0] in CONFINED_SCOPES
            if fault is False:  # a confirmed false alarm
                if d.mode == PAUSED or (
                    confined and d.mode == SLOW_START and d.width <= cfg.slow_start_width
                ):
                    self.domains[key] = replace(
                        d, mode=STOPPED, width=0, since=self.now, why=d.why + "; probe: no fault"
                    )
                elif d.mode == SLOW_START:
                    w = max(cfg.slow_start_width, d.width // 2)
                    self.domains[key] = replace(d, width=w)
            elif d.mode == PAUSED and fault:
                self.domains[key] = replace(
                    d,
                    mode=SLOW_START,
                    width=cfg.slow_start_width + 1,
                    since=self.now,
                    why=d.why + "; probe: fault found, resumed in slow start",
                )
                self.notes.append(f"slow start: {key} resumed (its probe drain found a fault)")
            elif d.mode == SLOW_START:
                w = d.width + 1
                if w >= cfg.slow_start_open_width:
                    del self.domains[key]
                else:
                    self.domains[key] = replace(d, width=w)

    # ------------------------------------------------------------ bursts
    def admit(
        self, candidates: Mapping[str, Mapping[str, str]], *, several_drivers: bool = True
    ) -> list[str]:
        """Read the round's candidates (node id -> domain per scope): expire idle
        domains, find bursts, pause / collapse; the alerts to raise. ``several_drivers``
        False: the fleet runs one driver version, which then explains no burst."""
        cfg = self.cfg
        self._of = {
            n: tuple(_key(s, d[s]) for s in PACED_SCOPES if s in d) for n, d in candidates.items()
        }
        for key in sorted(self.domains):
            d = self.domains[key]
            holds = any(key in f.domains for f in self.in_flight.values())
            if self.now - d.last_seen >= cfg.pacing_hold and not holds:
                del self.domains[key]
        new = sorted(n for n in candidates if n not in self.in_flight)
        seen: set[str] = {k for n in candidates for k in self._of[n]}
        self._live = {}
        for n in candidates:
            for k in self._of[n]:
                self._live[k] = self._live.get(k, 0) + 1
        for key in sorted(seen & self.domains.keys()):
            self.domains[key] = replace(self.domains[key], last_seen=self.now)
        alerts: list[str] = []
        left = set(new)
        for scopes, spread in ((CONFINED_SCOPES, cfg.burst_spread_racks), (PHYSICAL_SCOPES, 0)):
            groups: dict[str, list[str]] = {}
            for n in sorted(left):
                for s in scopes:
                    if s in candidates[n]:
                        groups.setdefault(_key(s, candidates[n][s]), []).append(n)
            rank = {s: i for i, s in enumerate(scopes)}
            if spread:  # the cause that explains the most candidates first
                order = sorted(groups, key=lambda k: (-len(groups[k]), rank[k.split(":")[0]], k))
            else:  # the smallest physical domain first
                order = sorted(groups, key=lambda k: (rank[k.split(":")[0]], len(groups[k]), k))
            for key in order:
                if key.startswith("driver:") and not several_drivers:
                    continue  # one driver fleet-wide explains nothing
                members = [n for n in groups[key] if n in left]
                if len(members) < cfg.burst_nodes:
                    continue
                racks = {candidates[n]["rack"] for n in members}
                if spread and len(racks) < spread:
                    continue
                left -= set(members)
                if key in self.domains:
                    continue  # already paced: the same event goes on
                what = f"{len(members)} candidates of {key.replace(':', ' ', 1)} across "
                what += f"{len(racks)} rack(s) at once"
                if spread:
                    self.domains[key] = DomainPace(
                        PAUSED, cfg.slow_start_width, self.now, self.now, what, frozenset(members)
                    )
                    alerts.append(
                        f"slow start: {what} — a burst confined to one "
                        f"{key.split(':')[0]}; that domain is paused (at most "
                        f"{cfg.slow_start_width} probe drain(s) until an inspection finds a "
                        "fault), the other domains go on — check the exporter, the job or "
                        "the rollout behind it"
                    )
                else:
                    self.domains[key] = DomainPace(
                        SLOW_START, cfg.slow_start_width, self.now, self.now, what
                    )
                    alerts.append(
                        f"slow start: {what}; drains there are paced from "
                        f"{cfg.slow_start_width} at a time, growing as they complete"
                    )
        for key in sorted(seen & self.domains.keys()):
            d = self.domains[key]
            joined = {n for n in new if key in self._of[n] and n not in d.members}
            if d.mode in (PAUSED, STOPPED) and len(joined) >= cfg.burst_nodes:
                self.domains[key] = d = replace(d, members=d.members | joined)  # it spread
            if d.mode in (PAUSED, STOPPED) and d.since < self.now:
                alerts.append(
                    f"slow start: {key.replace(':', ' ', 1)} still paused since "
                    f"{d.since.isoformat()} ({d.why})"
                )
        self._bound()
        return alerts + self.notes

    def _bound(self) -> None:
        cap = self.cfg.pacing_max_domains
        if len(self.domains) <= cap:
            return
        order = sorted(self.domains, key=lambda k: (self.domains[k].last_seen, k))
        for key in order[: len(self.domains) - cap]:
            del self.domains[key]

    # ------------------------------------------------------------ admission
    def _count(self, key: str) -> int:
        return sum(1 for f in self.in_flight.values() if key in f.domains)

    def blocked(self, node_id: str) -> tuple[SkipReason, str] | None:
        """Why pacing holds this drain back (None: it may go on)."""
        for key in self._of.get(node_id, ()):
            d = self.domains.get(key)
            if d is None:
                continue
            used = self._count(key)
            label = key.replace(":", " ", 1)
            if d.mode in (PAUSED, STOPPED) and node_id not in d.members:
                live = self._live.get(key, 0)
                if live >= self.cfg.burst_nodes:
                    return SkipReason.DOMAIN_PAUSED, (
                        f"{label} paused ({d.why}); {live} of its candidates now: the burst "
                        "has not ebbed"
                    )
                if used >= self.cfg.slow_start_width:  # after the burst: the first step
                    return SkipReason.PACED, (
                        f"{label} paused ({d.why}); the burst ebbed, this node was not part "
                        f"of it: {used} drain(s) in flight, {self.cfg.slow_start_width} allowed"
                    )
                continue
            if d.mode == STOPPED:
                return SkipReason.DOMAIN_PAUSED, (
                    f"{label} paused since {d.since.isoformat()}: its probe drain found no "
                    f"fault ({d.why})"
                )
            if used >= d.width:
                if d.mode == PAUSED:
                    return SkipReason.DOMAIN_PAUSED, (
                        f"{label} paused ({d.why}); {used} probe drain(s) in flight"
                    )
                return SkipReason.PACED, (
                    f"{label} in slow start: {used} of {d.width} drains in flight ({d.why})"
                )
        return None

    def take(self, node_id: str, expires: datetime) -> None:
        """Count the drain of ``node_id`` as in flight (accepted by this round's plan)."""
        self.in_flight[node_id] = InFlight(self._of.get(node_id, ()), self.now, expires)

    def widths(self, node_id: str) -> dict[str, dict[str, Any]]:
        """The paced domains of a node with their mode and width (drain evidence)."""
        out: dict[str, dict[str, Any]] = {}
        for key in self._of.get(node_id, ()):
            d = self.domains.get(key)
            out[key] = (
                {"mode": OPEN}
                if d is None
                else {"mode": d.mode, "width": d.width, "in_flight": self._count(key)}
            )
        return out

    def state(self) -> PacingState:
        return PacingState(dict(self.domains), dict(self.in_flight), self.now)


def pacing_after(plan: Plan) -> PacingState | None:
    """The pacing state a plan left for the next round (None: ``pacing`` 'breaker')."""
    return None if plan.pacing is None else PacingState.from_dict(plan.pacing, plan.plan_id)


def in_flight_per_domain(state: PacingState) -> dict[str, int]:
    """Drains in flight per domain key (for tests and reports)."""
    out: dict[str, int] = {}
    for f in state.in_flight.values():
        for k in f.domains:
            out[k] = out.get(k, 0) + 1
    return out


def paused_domains(state: PacingState) -> list[str]:
    return sorted(k for k, d in state.domains.items() if d.mode in (PAUSED, STOPPED))
