"""The unit adapters hand to the ingest writer: contract columns for one table."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl


class IngestError(ValueError):
    """An input that cannot be ingested at all; the message names the file and the cause."""


@dataclass(frozen=True, slots=True)
class Batch:
    """Rows for ``table`` in (or castable to) the contract's columns.

    ``first_row`` numbers the first row as the input counts it (1-based data row) and
    ``origin`` names the file (or query) the rows came from when the input has several,
    so errors and quarantine entries point back at the exact file and row. ``notes`` are
    what the adapter adds to the ingest report (e.g. Prometheus's ``identity``).
    """

    table: str
    frame: pl.DataFrame
    first_row: int = 1
    origin: str | None = None
    notes: Mapping[str, Any] | None = None
