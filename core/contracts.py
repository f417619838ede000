"""Model outputs every layer shares: provenance, failure risk and demand forecasts."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

_ZERO = timedelta(0)


def _require_utc(name: str, value: datetime) -> None:
    if value.tzinfo is UTC:  # the common case, without computing an offset
        return
    if value.tzinfo is None or value.utcoffset() != _ZERO:
        raise ValueError(f"{name} must be a UTC-aware datetime, got {value!r}")


def _iso(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: _iso(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_iso(v) for v in value]
    return value


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where a prediction came from: which model version, which features, which data."""

    model_name: str
    model_version: str
    feature_set_hash: str
    data_cutoff: datetime
    run_id: str | None = None

    def __post_init__(self) -> None:
        if not self.model_name or not self.model_version:
            raise ValueError("provenance needs a model name and version")
        if not self.feature_set_hash:
            raise ValueError("provenance needs a feature-set hash")
        _require_utc("data_cutoff", self.data_cutoff)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model_name": self.model_name,
            "model_version": self.model_version,
            "feature_set_hash": self.feature_set_hash,
            "data_cutoff": self.data_cutoff.isoformat(),
            "run_id": self.run_id,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Provenance:
        """The provenance behind one :meth:`to_dict`."""
        return cls(
            d["model_name"],
            d["model_version"],
            d["feature_set_hash"],
            datetime.fromisoformat(d["data_cutoff"]),
            d.get("run_id"),
        )


@dataclass(frozen=True, slots=True)
class Reason:
    """One feature's signed contribution to a prediction, in words an SRE reads."""

    feature: str
    contribution: float
    text: str


@dataclass(frozen=True, slots=True)
class FailureRisk:
    """Calibrated probability that ``node_id`` fails within ``horizon`` of ``as_of``."""

    node_id: str
    as_of: datetime
    horizon: timedelta
    p_fail: float
    reasons: tuple[Reason, ...] = ()
    provenance: Provenance | None = None

    def __post_init__(self) -> None:
        _require_utc("as_of", self.as_of)
        if not (0.0 <= self.p_fail <= 1.0) or math.isnan(self.p_fail):
            raise ValueError(f"p_fail of {self.node_id} must be in [0, 1], got {self.p_fail}")
        if self.horizon <= timedelta(0):
            raise ValueError(f"horizon must be positive, got {self.horizon}")

    def to_dict(self) -> dict[str, Any]:
        """Field by field (``asdict`` deep-copies every reason: 10,000 risks took
        seconds)."""
        return {
            "node_id": self.node_id,
            "as_of": self.as_of.isoformat(),
            "p_fail": self.p_fail,
            "reasons": [
                {"feature": r.feature, "contribution": r.contribution, "text": r.text}
                for r in self.reasons
            ],
            "provenance": None if self.provenance is None else self.provenance.to_dict(),
            "horizon_hours": self.horizon.total_seconds() / 3600,
        }


@dataclass(frozen=True, slots=True)
class Forecast:
    """Demand quantiles of one series for one target time (p10 <= p50 <= p90)."""

    series_id: str
    issued_at: datetime
    valid_at: datetime
    p10: float
    p50: float
    p90: float
    method: str = "model"
    provenance: Provenance | None = None
    extra: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _require_utc("issued_at", self.issued_at)
        _require_utc("valid_at", self.valid_at)
        if self.valid_at < self.issued_at:
            raise ValueError(f"{self.series_id}: valid_at {self.valid_at} before issued_at")
        for q in ("p10", "p50", "p90"):
            v = getattr(self, q)
            if not math.isfinite(v):
                raise ValueError(f"{self.series_id}: {q} is not finite ({v})")
        if not (self.p10 <= self.p50 <= self.p90):
            raise ValueError(
                f"{self.series_id}: quantiles cross: p10={self.p10} p50={self.p50} p90={self.p90}"
            )

    @property
    def horizon(self) -> timedelta:
        return self.valid_at - self.issued_at

    def to_dict(self) -> dict[str, Any]:
        return dict(_iso(asdict(self)))

    @classmethod
    def from_dict(cls, d: dict[str, Any], provenance: Provenance | None = None) -> Forecast:
        """The forecast behind one :meth:`to_dict`. ``provenance``, when given, is used
        instead of the dict's own (many forecasts of one model share one object)."""
        prov = d.get("provenance")
        return cls(
            series_id=d["series_id"],
            issued_at=datetime.fromisoformat(d["issued_at"]),
            valid_at=datetime.fromisoformat(d["valid_at"]),
            p10=float(d["p10"]),
            p50=float(d["p50"]),
            p90=float(d["p90"]),
            method=d.get("method") or "model",
            provenance=provenance or (Provenance.from_dict(prov) if prov else None),
            extra={str(k): float(v) for k, v in (d.get("extra") or {}).items()},
        )


@dataclass(frozen=True, slots=True)
class UsageForecast:
    """Quantiles of one node's peak high-priority (online) CPU usage, in cores, over
    ``window`` after ``as_of`` (p50 <= p95 <= p99); optionally the same of its memory, in
    bytes. The input of the reclaimable-capacity decision (:mod:`policy.reclaim`)."""

    node_id: str
    as_of: datetime
    window: timedelta
    p50: float
    p95: float
    p99: float
    memory_p50: float | None = None
    memory_p95: float | None = None
    memory_p99: float | None = None
    provenance: Provenance | None = None

    def __post_init__(self) -> None:
        _require_utc("as_of", self.as_of)
        if not self.node_id:
            raise ValueError("usage forecast: node_id is empty")
        if self.window <= timedelta(0):
            raise ValueError(f"usage forecast {self.node_id}: window must be positive")
        for prefix in ("", "memory_"):
            qs = [getattr(self, f"{prefix}p{q}") for q in (50, 95, 99)]
            if prefix and all(v is None for v in qs):
                continue
            if any(v is None or not math.isfinite(v) or v < 0 for v in qs):
                raise ValueError(
                    f"usage forecast {self.node_id}: {prefix}p50/p95/p99 must be finite "
                    f"and >= 0, got {qs}"
                )
            if not qs[0] <= qs[1] <= qs[2]:
                raise ValueError(f"usage forecast {self.node_id}: {prefix}quantiles cross: {qs}")

    def cpu_at(self, risk: float) -> float:
        """The CPU quantile exceeded with probability ``risk`` (0.5, 0.05 or 0.01)."""
        return float(getattr(self, _QUANTILE_OF_RISK[risk]))

    def memory_at(self, risk: float) -> float | None:
        v = getattr(self, "memory_" + _QUANTILE_OF_RISK[risk])
        return None if v is None else float(v)


_QUANTILE_OF_RISK = {0.5: "p50", 0.05: "p95", 0.01: "p99"}
RISKS = tuple(sorted(_QUANTILE_OF_RISK))
"""The violation risks a :class:`UsageForecast` answers (its quantiles' tails)."""
