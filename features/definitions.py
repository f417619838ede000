"""Feature definitions, declared once.

A :class:`NodeFeatureSpec` (which metrics, which windows, which peers) expands into the
list of :class:`FeatureDef` (name, source columns, window, aggregation, dtype, version)
that both the offline training frame and the online latest values are computed from.
The feature-set hash covers every definition and the spec's parameters, so a model's
provenance pins exactly the features it was trained on.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from datetime import timedelta

FEATURE_CODE_VERSION = 1
"""Bump when a computation changes meaning without its definition changing."""

GAUGES: tuple[str, ...] = (
    "cpu_util_pct",
    "mem_used_bytes",
    "gpu_util_pct",
    "gpu_temp_c",
    "gpu_power_w",
)
COUNTERS: tuple[str, ...] = (
    "ecc_sbe_total",
    "ecc_dbe_total",
    "xid_errors_total",
    "pcie_replay_total",
    "nic_flaps_total",
    "disk_realloc_total",
    "mce_total",
)
GAUGE_STATS: tuple[str, ...] = ("mean", "max", "std", "slope")


def window_label(w: timedelta) -> str:
    """15 min -> '15m', 1 h -> '1h', 24 h -> '24h', 7 days -> '7d'."""
    s = int(w.total_seconds())
    if s % 86400 == 0 and s >= 7 * 86400:
        return f"{s // 86400}d"
    if s % 3600 == 0:
        return f"{s // 3600}h"
    if s % 60 == 0:
        return f"{s // 60}m"
    return f"{s}s"


@dataclass(frozen=True, slots=True)
class FeatureDef:
    """One feature column: what it is computed from and how."""

    name: str
    source: tuple[str, ...]
    aggregation: str
    window: timedelta | None
    dtype: str
    version: int = 1
    doc: str = ""

    def to_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["window"] = None if self.window is None else self.window.total_seconds()
        d["source"] = list(self.source)
        return d


@dataclass(frozen=True, slots=True)
class NodeFeatureSpec:
    """Parameters of the node feature set.

    ``bucket`` is the resolution at which telemetry is pre-aggregated: every window
    must be a multiple of it, and features exist at bucket ends. ``sample_interval``
    is the expected telemetry interval (for missing-data fractions). ``ingestion_delay``
    is how long after ``ts`` a sample is assumed visible: a feature row stamped ``t``
    uses only samples with ``ts <= t - ingestion_delay``.
    """

    gauges: tuple[str, ...] = GAUGES
    counters: tuple[str, ...] = COUNTERS
    windows: tuple[timedelta, ...] = (
        timedelta(minutes=15),
        timedelta(hours=1),
        timedelta(hours=6),
        timedelta(hours=24),
    )
    bucket: timedelta = timedelta(minutes=15)
    sample_interval: timedelta = timedelta(minutes=1)
    ingestion_delay: timedelta = timedelta(0)
    baseline_window: timedelta = timedelta(hours=24)
    short_window: timedelta = timedelta(hours=1)
    peer_gauges: tuple[str, ...] = ("gpu_temp_c", "gpu_power_w", "gpu_util_pct", "cpu_util_pct")
    peer_groups: tuple[str, ...] = ("rack", "pool")
    missing_windows: tuple[timedelta, ...] = (
        timedelta(hours=1),
        timedelta(hours=6),
        timedelta(hours=24),
    )
    event_windows: tuple[timedelta, ...] = (timedelta(days=7), timedelta(days=30))

    def __post_init__(self) -> None:
        b = self.bucket.total_seconds()
        if b <= 0:
            raise ValueError("bucket must be positive")
        for w in (*self.windows, *self.missing_windows, self.baseline_window, self.short_window):
            if w.total_seconds() % b:
                raise ValueError(f"window {w} is not a multiple of the bucket {self.bucket}")
        if self.short_window not in self.windows or self.baseline_window not in self.windows:
            raise ValueError("short_window and baseline_window must be among windows")
        if self.ingestion_delay < timedelta(0):
            raise ValueError("ingestion_delay must be >= 0")

    def buckets_in(self, w: timedelta) -> int:
        return int(w.total_seconds() // self.bucket.total_seconds())

    def params(self) -> dict[str, object]:
        return {
            "bucket_s": self.bucket.total_seconds(),
            "sample_interval_s": self.sample_interval.total_seconds(),
            "ingestion_delay_s": self.ingestion_delay.total_seconds(),
        }


def gauge_name(col: str, stat: str, w: timedelta) -> str:
    return f"{col}__{stat}_{window_label(w)}"


def counter_name(col: str, w: timedelta | None) -> str:
    base = col.removesuffix("_total")
    return f"{base}__increase_{window_label(w)}" if w else f"{base}__since_install"


def node_feature_defs(spec: NodeFeatureSpec) -> list[FeatureDef]:
    """Every node feature column the spec produces, in output order."""
    defs: list[FeatureDef] = []
    for col in spec.gauges:
        for w in spec.windows:
            for stat in GAUGE_STATS:
                unit = "per hour" if stat == "slope" else ""
                defs.append(
                    FeatureDef(
                        gauge_name(col, stat, w),
                        (col,),
                        stat,
                        w,
                        "float32",
                        doc=f"{stat} of {col} over the last {w} {unit}".strip(),
                    )
                )
        short, base = spec.short_window, spec.baseline_window
        defs.append(
            FeatureDef(
                f"{col}__dev_own_{window_label(base)}",
                (col,),
                "mean_short_minus_mean_baseline",
                base,
                "float32",
                doc=f"mean over {short} minus the node's own mean over {base}",
            )
        )
        defs.append(
            FeatureDef(
                f"{col}__z_own_{window_label(base)}",
                (col,),
                "zscore_short_vs_baseline",
                base,
                "float32",
                doc=f"(mean {short} - mean {base}) / std {base}",
            )
        )
    for col in spec.counters:
        for w in spec.windows:
            defs.append(
                FeatureDef(
                    counter_name(col, w),
                    (col,),
                    "increase",
                    w,
                    "float32",
                    doc=f"increase of {col} over the last {w} (resets handled)",
                )
            )
        defs.append(
            FeatureDef(
                counter_name(col, None),
                (col,),
                "last",
                None,
                "float32",
                doc=f"latest value of {col} (cumulative since install/boot)",
            )
        )
        defs.append(
            FeatureDef(
                f"{col.removesuffix('_total')}__hours_since_increase",
                (col,),
                "hours_since_last_increase",
                None,
                "float32",
            )
        )
    for w in spec.missing_windows:
        lbl = window_label(w)
        defs.append(FeatureDef(f"samples__count_{lbl}", ("ts",), "count", w, "float32"))
        defs.append(
            FeatureDef(
                f"samples__missing_frac_{lbl}",
                ("ts",),
                "missing_fraction",
                w,
                "float32",
                doc="share of expected samples that never arrived",
            )
        )
        defs.append(
            FeatureDef(f"not_ready__frac_{lbl}", ("node_ready",), "false_fraction", w, "float32")
        )
    defs.append(
        FeatureDef(
            "samples__minutes_since_last",
            ("ts",),
            "minutes_since_last",
            None,
            "float32",
            doc="a node that stops reporting is a signal",
        )
    )
    defs.append(
        FeatureDef("not_ready__hours_since", ("node_ready",), "hours_since_false", None, "float32")
    )
    for col in spec.peer_gauges:
        src = gauge_name(col, "mean", spec.short_window)
        for g in spec.peer_groups:
            defs.append(
                FeatureDef(
                    f"{src}__{g}_dev",
                    (col, g),
                    "minus_peer_median",
                    spec.short_window,
                    "float32",
                    doc=f"{src} minus the median of its {g} peers at the same time",
                )
            )
    for kind in ("failure", "repair", "maintenance_start"):
        defs.append(
            FeatureDef(
                f"events__hours_since_{kind}", ("events",), "hours_since_event", None, "float32"
            )
        )
    for w in spec.event_windows:
        defs.append(
            FeatureDef(f"events__failures_{window_label(w)}", ("events",), "count", w, "float32")
        )
    defs.append(FeatureDef("node__age_days", ("installed_at",), "age", None, "float32"))
    for cat in ("pool", "sku", "gpu_model", "rack"):
        defs.append(FeatureDef(f"node__{cat}", (cat,), "category", None, "category"))
    return defs


@dataclass(frozen=True, slots=True)
class FeatureSet:
    """A named, versioned list of feature definitions with a stable hash."""

    name: str
    defs: tuple[FeatureDef, ...]
    params: dict[str, object] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        return [d.name for d in self.defs]

    @property
    def categorical(self) -> list[str]:
        return [d.name for d in self.defs if d.dtype == "category"]

    @property
    def hash(self) -> str:
        body = json.dumps(
            {
                "name": self.name,
                "code": FEATURE_CODE_VERSION,
                "params": self.params,
                "defs": [d.to_dict() for d in self.defs],
            },
            sort_keys=True,
            default=str,
        )
        return hashlib.sha256(body.encode()).hexdigest()[:16]


def node_feature_set(spec: NodeFeatureSpec | None = None) -> FeatureSet:
    spec = spec or NodeFeatureSpec()
    return FeatureSet("node", tuple(node_feature_defs(spec)), spec.params())
