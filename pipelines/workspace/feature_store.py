"""The feature store in the workspace: offline frames (training) and online latest values.

Layout under ``<workspace>/features``::

    offline/<name>/as_of=<YYYYMMDDTHHMMSSZ>/part.parquet   a full frame built as of a cutoff
    online/<name>.arrow + online/<name>.json               latest row per entity + metadata

Both are written to a temporary file and renamed into place (atomic on one file
system): a reader sees the old version or the new one, never half of either. The online
frame's metadata also travels inside its Arrow file (schema metadata ``predops``), and
reads take it from there: a process that died (or a disk that filled up) between the
data file and its ``.json`` cannot pair new rows with old metadata. A failed write
(disk full) raises :class:`OSError` and leaves the previous version in place. Online
rows carry the time of their entity's last sample; a read flags rows older than
``max_age`` as ``stale`` instead of serving them as fresh.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.feather as feather

from predops.pipelines.workspace.atomic import atomic_write
from predops.pipelines.workspace.errors import FeatureStoreError

STALE = "stale"
META_KEY = b"predops"


@dataclass(frozen=True, slots=True)
class OnlineFrame:
    """Latest features per entity, with staleness flagged at read time."""

    frame: pl.DataFrame
    as_of: datetime
    feature_set_hash: str
    key: str
    rows_id: str | None = None
    """Names these rows: every write gives a new one, a restamp (same rows, a later
    ``as_of``) keeps it, so answers computed from the rows can be re-used while it holds
    (files from before it have none: never re-used)."""


def _atomic_write(path: Path, write: Any) -> None:
    def polars_errors_as_os_errors(tmp: Path) -> None:
        try:
            write(tmp)
        except pl.exceptions.ComputeError as exc:  # polars' form of an I/O error
            raise OSError(f"cannot write {path}: {exc}") from exc

    atomic_write(path, polars_errors_as_os_errors)


def _embedded_meta(path: Path) -> dict[str, Any] | None:
    """The metadata written inside an online Arrow file (None for older files)."""
    with pa.memory_map(str(path)) as source:
        found = (pa.ipc.open_file(source).schema.metadata or {}).get(META_KEY)
    return dict(json.loads(found)) if found else None


def _stamp(t: datetime) -> str:
    return t.strftime("%Y%m%dT%H%M%SZ")


class FeatureStore:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    # ------------------------------------------------------------------ offline
    def offline_path(self, name: str, as_of: datetime) -> Path:
        return self.root / "offline" / name / f"as_of={_stamp(as_of)}" / "part.parquet"

    def write_offline(
        self, name: str, frame: pl.DataFrame, *, as_of: datetime, feature_set_hash: str
    ) -> Path:
        path = self.offline_path(name, as_of)
        _atomic_write(path, lambda p: frame.write_parquet(p, compression="zstd"))
        meta = {
            "as_of": as_of.isoformat(),
            "feature_set_hash": feature_set_hash,
            "rows": frame.height,
            "columns": frame.width,
        }
        _atomic_write(
            path.with_name("meta.json"), lambda p: p.write_text(json.dumps(meta, sort_keys=True))
        )
        return path

    def write_offline_lazy(
        self,
        name: str,
        frame: pl.LazyFrame,
        *,
        as_of: datetime,
        feature_set_hash: str,
        extra_meta: dict[str, Any] | None = None,
    ) -> Path:
        """:meth:`write_offline` of a lazy frame, streamed to the file (never collected
        whole: e.g. a scan of partition files). ``extra_meta`` goes into ``meta.json``."""
        path = self.offline_path(name, as_of)
        _atomic_write(path, lambda p: frame.sink_parquet(p, compression="zstd"))
        written = pl.scan_parquet(path)
        meta = {
            "as_of": as_of.isoformat(),
            "feature_set_hash": feature_set_hash,
            "rows": int(written.select(pl.len()).collect().item()),
            "columns": len(written.collect_schema()),
            **(extra_meta or {}),
        }
        _atomic_write(
            path.with_name("meta.json"), lambda p: p.write_text(json.dumps(meta, sort_keys=True))
        )
        return path

    def _offline_file(self, name: str, as_of: datetime | None) -> Path:
        base = self.root / "offline" / name
        if as_of is not None:
            path = self.offline_path(name, as_of)
        else:
            parts = sorted(base.glob("as_of=*/part.parquet"))
            if not parts:
                raise FeatureStoreError(f"no offline frame {name!r}; run `predops features build`")
            path = parts[-1]
        if not path.exists():
            raise FeatureStoreError(f"no offline frame {name!r} as of {as_of}")
        return path

    def read_offline(self, name: str, as_of: datetime | None = None) -> pl.DataFrame:
        return pl.read_parquet(self._offline_file(name, as_of))

    def scan_offline(self, name: str, as_of: datetime | None = None) -> pl.LazyFrame:
        """The offline frame as a lazy scan (filters and column choices read less)."""
        return pl.scan_parquet(self._offline_file(name, as_of))

    def offline_meta(self, name: str, as_of: datetime | None = None) -> dict[str, Any]:
        """The ``meta.json`` beside the offline frame (``{}`` when it has none)."""
        meta = self._offline_file(name, as_of).with_name("meta.json")
        return dict(json.loads(meta.read_text())) if meta.exists() else {}

    # ------------------------------------------------------------------ online
    def materialise_online(
        self, name: str, frame: pl.DataFrame, *, as_of: datetime, feature_set_hash: str, key: str
    ) -> None:
        """Replace the online frame ``name`` (one row per ``key``)."""
        if frame[key].is_duplicated().any():
            raise FeatureStoreError(f"online frame {name}: duplicate {key} values")
        data = self.root / "online" / f"{name}.arrow"
        meta = {
            "as_of": as_of.isoformat(),
            "feature_set_hash": feature_set_hash,
            "key": key,
            "rows": frame.height,
            "rows_id": uuid.uuid4().hex,  # new rows, new id; a restamp keeps it
        }
        table = frame.sort(key).to_arrow()
        table = table.replace_schema_metadata({META_KEY: json.dumps(meta, sort_keys=True)})
        _atomic_write(data, lambda p: feather.write_feather(table, p, compression="uncompressed"))
        _atomic_write(
            data.with_suffix(".json"), lambda p: p.write_text(json.dumps(meta, sort_keys=True))
        )

    def has_online(self, name: str, feature_set_hash: str) -> bool:
        """Whether the online frame ``name`` exists with ``feature_set_hash``."""
        data = self.root / "online" / f"{name}.arrow"
        if not data.exists():
            return False
        meta = _embedded_meta(data)
        return meta is not None and meta.get("feature_set_hash") == feature_set_hash

    def restamp_online(self, name: str, *, as_of: datetime) -> int:
        """Keep the online frame ``name``'s rows, move its ``as_of`` (its inputs did not
        change since it was computed); returns its row count. Atomic like a rewrite."""
        data = self.root / "online" / f"{name}.arrow"
        meta = _embedded_meta(data)
        if meta is None:
            raise FeatureStoreError(f"no online frame {name!r} to restamp")
        with pa.memory_map(str(data)) as source:
            table = pa.ipc.open_file(source).read_all()
        meta["as_of"] = as_of.isoformat()
        table = table.replace_schema_metadata({META_KEY: json.dumps(meta, sort_keys=True)})
        _atomic_write(data, lambda p: feather.write_feather(table, p, compression="uncompressed"))
        _atomic_write(
            data.with_suffix(".json"), lambda p: p.write_text(json.dumps(meta, sort_keys=True))
        )
        return int(table.num_rows)

    def read_online(
        self,
        name: str,
        *,
        now: datetime,
        max_age: timedelta,
        ids: list[str] | None = None,
        ts_col: str = "last_sample_ts",
    ) -> OnlineFrame:
        """Latest features for ``ids`` (all when None), with a ``stale`` flag for rows
        whose last sample is older than ``max_age`` at ``now``; ids the store does not
        know come back as stale rows with null features."""
        data = self.root / "online" / f"{name}.arrow"
        meta_path = data.with_suffix(".json")
        meta = _embedded_meta(data) if data.exists() else None
        if meta is None and data.exists() and meta_path.exists():
            meta = json.loads(meta_path.read_text())  # written before the metadata moved in
        if meta is None:
            raise FeatureStoreError(f"no online frame {name!r}; run `predops features build`")
        frame = pl.read_ipc(data)
        key = meta["key"]
        if ids is not None:
            wanted = pl.DataFrame({key: ids}, schema={key: frame.schema[key]})
            frame = wanted.join(frame, on=key, how="left", maintain_order="left")
        limit = pl.lit(now - max_age, dtype=frame.schema[ts_col])
        frame = frame.with_columns(
            (pl.col(ts_col).is_null() | (pl.col(ts_col) < limit)).alias(STALE)
        )
        return OnlineFrame(
            frame,
            datetime.fromisoformat(meta["as_of"]),
            meta["feature_set_hash"],
            key,
            meta.get("rows_id"),
        )
