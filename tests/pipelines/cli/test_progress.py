"""Progress bars on stderr: the helpers in forced mode, and folder ingests and evals run
with stderr on a real terminal (a pty), ``--json`` on, stdout keeping one JSON object."""

from __future__ import annotations

import io
import json
import os
import pty
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

from predops.pipelines.cli.progress import ingest_batches, stages
from predops.pipelines.ingest.batch import Batch

DEADLINE_S = 300.0
"""The longest a command under test may run before the test gives up on it."""


def test_ingest_batches_pass_every_batch_through_and_count_rows_and_files() -> None:
    out = io.StringIO()
    batches = [
        Batch("demand", pl.DataFrame({"x": [1, 2, 3]}), origin="/in/a.csv"),
        Batch("demand", pl.DataFrame({"x": [4, 5]}), origin="/in/b.csv"),
    ]
    seen = list(ingest_batches(iter(batches), "[ingest files] in", enabled=True, file=out))
    assert seen == batches
    text = out.getvalue()
    assert "[ingest files] in" in text
    assert "2batch" in text.replace(" ", "")  # tqdm's counter: 2 batches read
    assert "rows=5" in text and "file=b.csv" in text


def test_ingest_batches_print_nothing_when_off() -> None:
    out = io.StringIO()
    batches = [Batch("demand", pl.DataFrame({"x": [1]}))]
    assert list(ingest_batches(iter(batches), "x", enabled=False, file=out)) == batches
    assert out.getvalue() == ""


def test_stages_bar_counts_each_stage_and_ends_full() -> None:
    out = io.StringIO()
    with stages("[eval spares] lanl", ("read", "validation", "test"), enabled=True, file=out) as s:
        s("read lanl")
        s("validation window")
        s("test window")
    text = out.getvalue()
    assert "[eval spares] lanl" in text
    assert "validation window" in text
    assert "3/3" in text and "done" in text


def _on_a_terminal(args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    """Run ``python -m predops ARGS`` with stderr on a pty; (exit code, stdout, stderr)."""
    master, slave = pty.openpty()
    with tempfile.TemporaryFile() as stdout:
        proc = subprocess.Popen(
            [sys.executable, "-m", "predops", *args],
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=slave,
            env=env,
        )
        os.close(slave)
        chunks: list[bytes] = []
        deadline = time.monotonic() + DEADLINE_S
        try:
            while time.monotonic() < deadline:
                ready, _, _ = select.select([master], [], [], 1.0)
                if not ready:
                    if proc.poll() is not None:
                        break
                    continue
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not data:
                    break
                chunks.append(data)
            code = proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            os.close(master)
        stdout.seek(0)
        return code, stdout.read().decode(), b"".join(chunks).decode(errors="replace")


def _env(ws: Path) -> dict[str, str]:
    return {**os.environ, "PREDOPS_WORKSPACE": str(ws), "COLUMNS": "160"}


def test_trace_folder_ingest_shows_a_bar_on_a_terminal_with_json(
    shared_data: Path, tmp_path: Path
) -> None:
    folder = shared_data / "helios-philly-demand" / "Earth_vcs"
    code, stdout, stderr = _on_a_terminal(
        ["ingest", "helios", str(folder), "--json"], _env(tmp_path / "ws")
    )
    assert code == 0, stderr
    report = json.loads(stdout)  # one JSON object, nothing else on stdout
    written = report["tables"]["demand"]["rows_written"]
    assert written > 0
    assert "[ingest helios] Earth_vcs" in stderr
    assert "batch" in stderr and f"rows={report['tables']['demand']['rows_in']:,}" in stderr


def test_eval_shows_its_stages_on_a_terminal_with_json(shared_data: Path, tmp_path: Path) -> None:
    cloudwatch = shared_data / "numenta-NAB" / "data" / "realAWSCloudwatch"
    series = cloudwatch / "ec2_cpu_utilization_825cc2.csv"
    code, stdout, stderr = _on_a_terminal(
        ["eval", "failure", "--source", "nab", "--path", str(series), "--json"],
        _env(tmp_path / "ws"),
    )
    assert code == 0, stderr
    assert json.loads(stdout)["series"] == 1
    assert "[eval failure] nab" in stderr and "score the detector" in stderr
    assert "1/1" in stderr


def test_no_bar_when_stderr_is_not_a_terminal(shared_data: Path, tmp_path: Path) -> None:
    folder = shared_data / "helios-philly-demand" / "Earth_vcs"
    proc = subprocess.run(
        [sys.executable, "-m", "predops", "ingest", "helios", str(folder), "--json"],
        capture_output=True,
        text=True,
        env=_env(tmp_path / "ws"),
        timeout=DEADLINE_S,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "[ingest helios]" not in proc.stderr
    json.loads(proc.stdout)
