"""The online node features and the fleet's risk, cached for the server.

:class:`OnlineNodes` reads the online store (``FeatureStore.read_online("node", ...)``)
once per materialisation — the metadata file's modification time says when it changed —
and keeps it indexed by node id. Freshness is judged per request at the server's clock
(a node whose last sample is older than ``max_data_age`` is ``stale``, one after the
clock is ``future``; neither is scored).

:class:`FleetRisk` scores every node of one snapshot with one model version:
the design matrix and P(failure) per horizon, computed once per (model version, online
``as_of``) and reused by ``/v1/failure/score`` (by node id) and ``/v1/failure/risk``.
Reasons (TreeSHAP, ~2 ms per node and horizon) are computed on demand and cached.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl

from predops.core.contracts import Reason
from predops.models.failure.scorer import Design, FailureScorer
from predops.pipelines.jobs.failure import LAST_SAMPLE
from predops.pipelines.workspace.errors import FeatureStoreError
from predops.pipelines.workspace.feature_store import FeatureStore

NODE_FRAME = "node"
POOL = "node__pool"
RACK = "node__rack"
FRESH, STALE, FUTURE = "scored", "stale", "future"


@dataclass(frozen=True, slots=True)
class OnlineSnapshot:
    """One materialisation of the online node frame, indexed by node id."""

    frame: pl.DataFrame
    as_of: datetime
    feature_set_hash: str
    node_ids: list[str]
    index: dict[str, int]
    last_sample_s: np.ndarray
    """Last sample per node, seconds since the epoch (NaN when unknown)."""
    pools: list[str | None]
    racks: list[str | None]
    version: tuple[int, int]

    def status(self, rows: np.ndarray, now: datetime, max_age: timedelta) -> np.ndarray:
        """``scored`` / ``stale`` / ``future`` for each row index at ``now``."""
        t = self.last_sample_s[rows]
        limit, now_s = (now - max_age).timestamp(), now.timestamp()
        out = np.full(rows.shape, FRESH, dtype=object)
        with np.errstate(invalid="ignore"):
            out[np.isnan(t) | (t < limit)] = STALE
            out[t > now_s] = FUTURE
        return out

    def last_sample_at(self, row: int) -> datetime | None:
        t = self.last_sample_s[row]
        return None if math.isnan(t) else datetime.fromtimestamp(float(t), UTC)


class OnlineNodes:
    """The online node frame of a feature store, re-read when it is re-materialised."""

    def __init__(self, features_dir: Path) -> None:
        self.store = FeatureStore(features_dir)
        self._meta = features_dir / "online" / f"{NODE_FRAME}.json"
        self._snapshot: OnlineSnapshot | None = None
        self._lock = threading.Lock()

    def _version(self) -> tuple[int, int]:
        try:
            st = self._meta.stat()
        except FileNotFoundError:
            raise FeatureStoreError(
                "no online node features; run `predops features build`"
            ) from None
        return st.st_mtime_ns, st.st_size

    def snapshot(self, now: datetime, max_age: timedelta) -> OnlineSnapshot:
        """The current snapshot (re-read when the store changed since the last one).
        Raises :class:`FeatureStoreError` when there is no online node frame."""
        version = self._version()
        snap = self._snapshot
        if snap is not None and snap.version == version:
            return snap
        with self._lock:
            snap = self._snapshot
            if snap is not None and snap.version == version:
                return snap
            online = self.store.read_online(NODE_FRAME, now=now, max_age=max_age)
            frame = online.frame
            ids = [str(v) for v in frame[online.key].to_list()]
            ts = frame[LAST_SAMPLE].dt.epoch("us").cast(pl.Float64) / 1e6
            snap = OnlineSnapshot(
                frame=frame,
                as_of=online.as_of,
                feature_set_hash=online.feature_set_hash,
                node_ids=ids,
                index={n: i for i, n in enumerate(ids)},
                last_sample_s=ts.fill_null(math.nan).to_numpy(),
                pools=_text(frame, POOL),
                racks=_text(frame, RACK),
                version=version,
            )
            self._snapshot = snap
            return snap

    def age_seconds(self, now: datetime) -> float | None:
        """Seconds since the newest online snapshot's ``as_of`` (None without one)."""
        snap = self._snapshot
        return None if snap is None else (now - snap.as_of).total_seconds()


def _text(frame: pl.DataFrame, column: str) -> list[str | None]:
    if column not in frame.columns:
        return [None] * frame.height
    return [None if v is None else str(v) for v in frame[column].cast(pl.String).to_list()]


@dataclass
class FleetRisk:
    """Every node of ``snapshot`` scored by one model version (see module doc)."""

    model_version: str
    snapshot: OnlineSnapshot
    scorer: FailureScorer
    design: Design
    p_fail: np.ndarray
    """Shape (nodes, horizons)."""
    _reasons: dict[tuple[int, int], tuple[Reason, ...]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def build(cls, version: str, snapshot: OnlineSnapshot, scorer: FailureScorer) -> FleetRisk:
        design = scorer.design_frame(snapshot.frame)
        return cls(version, snapshot, scorer, design, scorer.proba(design))

    def reasons(self, rows: Sequence[int], horizon: int) -> list[tuple[Reason, ...]]:
        """Reasons of ``rows`` for horizon index ``horizon`` (computed once each)."""
        todo = [r for r in dict.fromkeys(rows) if (r, horizon) not in self._reasons]
        if todo:
            idx = np.asarray(todo, dtype=np.int64)
            found = self.scorer.reasons(self.design.take(idx), horizon)
            with self._lock:
                for r, why in zip(todo, found, strict=True):
                    self._reasons[(r, horizon)] = why
        return [self._reasons[(r, horizon)] for r in rows]


class FleetCache:
    """The :class:`FleetRisk` of the latest (model version, online snapshot); one build
    at a time, requests for the same key wait for it instead of repeating it."""

    def __init__(self) -> None:
        self._current: FleetRisk | None = None
        self._lock = threading.Lock()
        self.builds = 0

    def get(self, version: str, snapshot: OnlineSnapshot, scorer: FailureScorer) -> FleetRisk:
        cur = self._current
        if cur is not None and cur.model_version == version and cur.snapshot is snapshot:
            return cur
        with self._lock:
            cur = self._current
            if cur is not None and cur.model_version == version and cur.snapshot is snapshot:
                return cur
            cur = FleetRisk.build(version, snapshot, scorer)
            self._current = cur
            self.builds += 1
            return cur
