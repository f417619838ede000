"""LANL node failure records 1996-2005 (LA-UR-05-7318; Schroeder & Gibson, DSN 2006) ->
one row per failure / interrupt of one node.

Columns kept (input name in brackets):

- ``system`` [System], ``nodes`` [nodes] (the system's node count: its installed base),
  ``node`` [nodenumz] (node number from 0), ``procs_per_node`` [procsinnode], ``mem``
  [mem], ``machine_type`` [machine type], ``purpose`` [purpose];
- ``start`` / ``fixed`` [Prob Started / Prob Fixed] (``m/d/yyyy h:mm``, local time read
  as UTC: only differences and order matter here), ``down_min`` [Down Time];
- ``cause``: which root-cause column is filled (``facilities``, ``hardware``, ``human``,
  ``network``, ``undetermined``, ``software``; none filled: ``undetermined``) and
  ``sub_cause`` its text (e.g. ``CPU``, ``Memory Dimm``, ``Maintenance``);
- ``installed`` / ``decommissioned`` [node install / node decom]: month dates, written
  by the publisher both as ``Nov-96`` and, after a spreadsheet round-trip, as ``3-Aug``
  (August 2003); ``before tracking`` and ``current`` become null (``current`` sets
  ``in_service``).

Required: system, nodes, node, start. Rows whose start is unreadable are quarantined.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from predops.pipelines.ingest.traces.failure_records import (
    Field,
    Quarantine,
    files_named,
    integer,
    number,
    read_records,
    text,
    timestamp,
)

FILE = "LA-UR-05-7318-failure-data-1996-2005.csv.gz"
CAUSES = {
    "Facilities": "facilities",
    "Hardware": "hardware",
    "Human Error": "human",
    "Network": "network",
    "Undetermined": "undetermined",
    "Software": "software",
}
_WHEN = "%m/%d/%Y %H:%M"
FIELDS = (
    Field("System", "system", integer, "a system id"),
    Field("nodes", "nodes", integer, "a node count"),
    Field("nodenumz", "node", integer, "a node number"),
    Field("procsinnode", "procs_per_node", number, "a number", required=False),
    Field("mem", "mem", number, "a number", required=False),
    Field("machine type", "machine_type", text, "text", required=False),
    Field("purpose", "purpose", text, "text", required=False),
    Field("Prob Started", "start", timestamp(_WHEN), "a time m/d/yyyy h:mm"),
    Field("Prob Fixed", "fixed", timestamp(_WHEN), "a time m/d/yyyy h:mm", required=False),
    Field("Down Time", "down_min", number, "minutes", required=False),
    Field("node install", "installed_text", text, "text", required=False),
    Field("node decom", "decom_text", text, "text", required=False),
    *(Field(c, f"__c_{n}", text, "text", required=False) for c, n in CAUSES.items()),
)
_MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]


def month_date(e: pl.Expr) -> pl.Expr:
    """``Nov-96`` / ``3-Aug`` (year 2003) -> the first of that month (UTC); else null."""
    low = e.str.to_lowercase()
    mon_first = low.str.extract_groups(r"^([a-z]{3})-(\d{2})$")
    year_first = low.str.extract_groups(r"^(\d{1,2})-([a-z]{3})$")

    def build(mon: pl.Expr, year: pl.Expr) -> pl.Expr:
        m = mon.replace_strict(_MONTHS, list(range(1, 13)), default=None, return_dtype=pl.Int32)
        return pl.datetime(year, m, 1, time_zone="UTC")

    y2 = mon_first.struct.field("2").cast(pl.Int32)
    a = build(mon_first.struct.field("1"), pl.when(y2 >= 90).then(1900 + y2).otherwise(2000 + y2))
    b = build(year_first.struct.field("2"), 2000 + year_first.struct.field("1").cast(pl.Int32))
    return pl.coalesce(a, b)


@dataclass(frozen=True)
class NodeFailureRecords:
    frame: pl.DataFrame
    quarantine: Quarantine
    file: str


def read_lanl(path: str | Path) -> NodeFailureRecords:
    """LANL records at ``path`` (the CSV[.gz] or its folder), sorted by start."""
    p = Path(path)
    f = files_named(p, FILE)
    if p.is_dir() and not f.is_file():
        f = p / FILE.removesuffix(".gz")
    df, q = read_records(f, FIELDS)
    cause = pl.coalesce(
        [pl.when(pl.col(f"__c_{n}").is_not_null()).then(pl.lit(n)) for n in CAUSES.values()]
    ).fill_null("undetermined")
    sub = pl.coalesce([pl.col(f"__c_{n}") for n in CAUSES.values()])
    out = df.with_columns(
        cause.alias("cause"),
        sub.alias("sub_cause"),
        month_date(pl.col("installed_text")).alias("installed"),
        month_date(pl.col("decom_text")).alias("decommissioned"),
        (pl.col("decom_text").str.to_lowercase() == "current").fill_null(False).alias("in_service"),
    ).drop([f"__c_{n}" for n in CAUSES.values()], "installed_text", "decom_text")
    return NodeFailureRecords(out.sort("start"), q, f.name)


def is_hardware_replacement(frame: pl.DataFrame) -> pl.Series:
    """Records that consume a spare part: hardware root cause, planned maintenance not."""
    return (frame["cause"] == "hardware") & (frame["sub_cause"].fill_null("") != "Maintenance")
