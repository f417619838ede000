"""Progress bars on stderr for the commands that run longer than a few seconds.

Bars are tqdm's, on stderr, shown when :func:`predops.pipelines.cli.support.show_progress`
says so (stderr is a terminal), with ``--json`` or not: stdout keeps its one JSON object.

- :func:`ingest_batches`: a folder ingest (``predops ingest files DIR``, trace folders)
  counts the batches it has read (one per file, or per million rows of a large Parquet
  file), the rows and the file it is on;
- :func:`stages`: an evaluation's stages (read the source, backtest or fit, score) as
  one bar, redrawn every :data:`REDRAW_S` seconds so the elapsed time moves during a
  long stage.
"""

from __future__ import annotations

import io
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from tqdm import tqdm

from predops.pipelines.cli.support import show_progress
from predops.pipelines.ingest.batch import Batch

FALLBACK_COLUMNS, FALLBACK_ROWS = 100, 24
"""The size assumed for a terminal that reports none."""
REDRAW_S = 1.0
"""How often a stage bar is redrawn while a stage runs (seconds)."""


def _bar(
    desc: str, *, total: int | None, unit: str, enabled: bool | None, file: IO[str] | None
) -> tqdm:
    import sys

    on = show_progress() if enabled is None else enabled
    out = file or sys.stderr
    return tqdm(
        total=total,
        desc=desc,
        unit=unit,
        file=out,
        disable=not on,
        leave=True,
        # a pty nobody sized says 0 x 0: tqdm would then draw nothing at all
        **({} if _width(out) else {"ncols": FALLBACK_COLUMNS, "nrows": FALLBACK_ROWS}),
    )


def _width(out: IO[str]) -> int:
    """The terminal's width (0 when unknown)."""
    try:
        return os.get_terminal_size(out.fileno()).columns
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return 0


def ingest_batches(
    batches: Iterable[Batch],
    desc: str,
    *,
    enabled: bool | None = None,
    file: IO[str] | None = None,
) -> Iterator[Batch]:
    """``batches`` unchanged, counted on a bar as the ingest reads them (rows and the
    current file as the bar's postfix)."""
    bar = _bar(desc, total=None, unit="batch", enabled=enabled, file=file)
    rows = 0
    try:
        for batch in batches:
            rows += batch.frame.height
            post: dict[str, Any] = {"rows": f"{rows:,}", "table": batch.table}
            if batch.origin:
                post["file"] = Path(batch.origin).name
            bar.set_postfix(post, refresh=False)
            bar.update(1)
            yield batch
    finally:
        bar.close()


@contextmanager
def stages(
    desc: str,
    names: Sequence[str],
    *,
    enabled: bool | None = None,
    file: IO[str] | None = None,
) -> Iterator[Callable[[str], None]]:
    """A bar over ``names``; the body calls the yielded ``start(name)`` as each stage
    begins (the previous one is then counted done; all are done when the body ends)."""
    bar = _bar(desc, total=len(names), unit="stage", enabled=enabled, file=file)
    started = [0]
    stop = threading.Event()

    def start(name: str) -> None:
        if started[0]:
            bar.update(1)
        started[0] += 1
        bar.set_postfix_str(name, refresh=True)

    def redraw() -> None:
        while not stop.wait(REDRAW_S):
            bar.refresh()

    ticker = None if bar.disable else threading.Thread(target=redraw, daemon=True)
    if ticker is not None:
        ticker.start()
    try:
        yield start
        bar.update(bar.total - bar.n)
        bar.set_postfix_str("done", refresh=False)
    finally:
        stop.set()
        if ticker is not None:
            ticker.join(timeout=2 * REDRAW_S)
        bar.close()
