"""The structural pass over a CSV agrees with the fast reader on where rows are, and finds
exactly the rows that do not fit the header."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from predops.core.validation import ROW_DEFECT
from predops.pipelines.ingest.batch import IngestError
from predops.pipelines.ingest.csv_rows import scan_rows
from predops.pipelines.ingest.files import read_csv_text

HEADER = ["a", "b", "c"]
values = st.text(alphabet='ab,"\n ', max_size=4)


def csv_bytes(rows: list[list[str]]) -> bytes:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(HEADER)
    writer.writerows(rows)
    return buf.getvalue().encode()


@settings(max_examples=80, deadline=None)
@given(st.lists(st.lists(values, min_size=1, max_size=5), max_size=12))
def test_rows_and_lines_match_the_csv_writer(
    tmp_path_factory: pytest.TempPathFactory, rows: list[list[str]]
) -> None:
    expected_widths = [len(r) for r in rows]
    path = tmp_path_factory.mktemp("csv") / "x.csv"
    path.write_bytes(csv_bytes(rows))
    found = scan_rows(path, path.read_bytes())
    assert found.header == tuple(HEADER) and found.rows == len(rows)
    ragged = [i for i, w in enumerate(expected_widths) if w != len(HEADER)]
    assert [r.index for r in found.ragged] == ragged
    lines = [2]
    for r in rows:
        lines.append(lines[-1] + sum(v.count("\n") for v in r) + 1)
    assert [r.line for r in found.ragged] == [lines[i] for i in ragged]
    # The fast reader sees the same rows, and the marks sit on the ragged ones.
    frame = read_csv_text(path)
    assert frame.height == len(rows)
    if ragged:
        marks = frame[ROW_DEFECT].struct.field("reason")
        assert marks.is_not_null().arg_true().to_list() == ragged
        for i in ragged:
            record = json.loads(frame[ROW_DEFECT].struct.field("record")[i])
            kept = [v for k, v in record.items() if k != "_extra" and v is not None]
            assert kept + record.get("_extra", []) == rows[i]
    else:
        assert ROW_DEFECT not in frame.columns
        assert frame.rows() == [tuple(v or None for v in r) for r in rows]


def test_a_bare_carriage_return_that_splits_rows_differently_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "cr.csv"
    path.write_bytes(b"a,b\n1,2\r3,4\n")
    with pytest.raises(IngestError, match=r"cr\.csv: rows split two ways \(2 by CSV .*, 1 by"):
        read_csv_text(path)


def test_a_blank_first_line_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "blank.csv"
    path.write_bytes(b"\na,b\n1,2\n")
    with pytest.raises(IngestError, match=r"blank\.csv: line 1 is blank"):
        read_csv_text(path)


def test_a_frame_without_ragged_rows_is_returned_as_read(tmp_path: Path) -> None:
    path = tmp_path / "ok.csv"
    path.write_bytes(b'a,b\n1,"x\ny"\n')
    assert read_csv_text(path).equals(pl.DataFrame({"a": ["1"], "b": ["x\ny"]}))
