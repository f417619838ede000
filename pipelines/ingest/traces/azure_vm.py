"""Azure Public Dataset V1 per-VM CPU samples (DataCenterSim packaging) -> ``demand`` series.

``predops ingest azure-vm PATH``: PATH is one wide CSV (``microsoft_avg_100.csv.gz``,
``periodic_max_78.csv.gz``, ...) or a folder of them. A row is one 5-minute step
(``step_5min``, 0-based); every other column is one VM, holding its average or maximum
CPU utilisation (%) in that step.

Mapping (choices):

- One series per file and VM column: ``series_id`` = ``azure-vm/<file stem>/<vm id>``
  (e.g. ``azure-vm/microsoft_avg_100/1633748``). The file stem is the family *and*
  the statistic (avg or max), so both statistics of one VM stay distinct. In the
  ``periodic_*`` files a column is named ``"<vm id> <period in hours>"``; the id is the
  first word. A VM listed twice in one file (``periodic_*_78`` lists 83972 under
  periods 1 and 24, with identical values) is kept once, with a message; two
  columns of one id with different values are both handed over, and validation
  quarantines the second as duplicate keys.
- ``value`` = CPU %, ``capacity`` = 100, ``resource`` = ``cpu_pct``, ``pool`` = file
  stem. A value outside 0..100 is quarantined (the contract's ``value`` has no upper
  bound; see :mod:`pipelines.ingest.traces.derived`).
- **Time.** ``ts`` = epoch + 5 min x ``step_5min``. The publisher gives no calendar
  date (the two families are not even aligned with each other); the default epoch
  is 2017-01-01T00:00Z, arbitrary, overridable with ``-o epoch=ISO-8601``.
- **Quarantine rows.** A file becomes one batch in reading order (step by step, VM by
  VM): quarantine row *r* is file data row ``ceil(r / n_vms)``, VM column
  ``(r - 1) mod n_vms + 1`` (after collapsing repeated VMs); the record's
  ``series_id`` and ``ts`` name the VM and the step directly. (One batch per VM would
  number rows by file row but write one lake file per VM and day.)
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from predops.core.schemas import UTC_TS
from predops.pipelines.ingest.batch import Batch, IngestError
from predops.pipelines.ingest.options import IngestOptions
from predops.pipelines.ingest.traces.derived import explained, iso_text, within
from predops.pipelines.ingest.traces.epochs import epoch_option
from predops.pipelines.ingest.traces.publisher_files import (
    csv_files,
    csv_stem,
    header,
    read_table,
    require_columns,
)

SOURCE = "azure-vm"
HELP = "Azure V1 per-VM CPU % (wide, one column per VM, step_5min) -> demand series"
STEP = "step_5min"
STEP_S = 300
WHAT = "an Azure VM CPU table (step_5min, then one column per VM)"
DEFAULT_EPOCH = datetime(2017, 1, 1, tzinfo=UTC)

log = logging.getLogger(__name__)


def vm_id(column: str) -> str:
    """``"1023330 24"`` (id, period in hours) -> ``"1023330"``; plain ids unchanged."""
    return column.strip().split()[0] if column.strip() else column


def vm_columns(raw: pl.DataFrame, path: Path) -> dict[str, str]:
    """Column -> VM id, in file order; identical repeats of a VM are dropped (logged).

    Differing repeats stay, under the same id: validation then quarantines their rows
    as duplicate keys instead of this adapter choosing a winner.
    """
    kept: dict[str, str] = {}
    first_of: dict[str, str] = {}
    for col in raw.columns:
        if col == STEP:
            continue
        vid = vm_id(col)
        if not vid:
            raise IngestError(f"{path}: a VM column has an empty name; expected {WHAT}")
        if vid in first_of and raw[col].equals(raw[first_of[vid]]):
            log.warning(
                "%s: VM %s appears as %r and %r with identical values; kept once",
                path,
                vid,
                first_of[vid],
                col,
            )
            continue
        first_of.setdefault(vid, col)
        kept[col] = vid
    if not kept:
        raise IngestError(f"{path}: no VM columns besides {STEP}; expected {WHAT}")
    return kept


def demand_frame(raw: pl.DataFrame, family: str, epoch: datetime, path: Path) -> pl.DataFrame:
    """A wide table (text columns) as long ``demand`` columns in reading order."""
    vms = vm_columns(raw, path)
    steps = pl.col(STEP).str.strip_chars().cast(pl.Int64, strict=False)
    t = pl.lit(epoch, dtype=UTC_TS) + pl.duration(seconds=steps * STEP_S)
    ts = explained(iso_text(pl.when(steps >= 0).then(t)), STEP)
    order = {c: i for i, c in enumerate(vms)}
    long = (
        raw.select(ts.alias("ts"), *(within(c, 0.0, 100.0, "%").alias(c) for c in vms))
        .with_row_index("__step_row__")
        .unpivot(
            index=["__step_row__", "ts"], on=list(vms), variable_name="__col__", value_name="value"
        )
        .with_columns(
            pl.col("__col__").replace_strict(order, return_dtype=pl.Int32).alias("__col_i__")
        )
        .sort("__step_row__", "__col_i__")
    )
    return long.select(
        pl.format(
            "azure-vm/{}/{}",
            pl.lit(family),
            pl.col("__col__").replace_strict(vms, return_dtype=pl.String),
        ).alias("series_id"),
        "ts",
        "value",
        pl.lit(None, pl.Float64).alias("running"),
        pl.lit(None, pl.Float64).alias("pending"),
        pl.lit(100.0).alias("capacity"),
        pl.lit(family).alias("pool"),
        pl.lit("cpu_pct").alias("resource"),
        pl.lit(None, pl.String).alias("gpu_model"),
    )


def read(path: str, options: IngestOptions) -> Iterator[Batch]:
    epoch = epoch_option(options, DEFAULT_EPOCH, "epoch")
    files = csv_files(Path(path), WHAT)
    for f in files:
        require_columns(header(f), (STEP,), f, WHAT)
    families = [csv_stem(f) for f in files]
    dup = sorted({n for n in families if families.count(n) > 1})
    if dup:
        raise IngestError(
            f"{path}: several files named {', '.join(dup)}; their series ids "
            "would collide, ingest them separately"
        )
    for f, family in zip(files, families, strict=True):
        raw = read_table(f, (STEP,), WHAT)
        yield Batch("demand", demand_frame(raw, family, epoch, f))
