"""``predops ingest prometheus http://user:pass@host/?token=...``: the credentials are
used for the requests and appear nowhere the command prints or stores anything (the
report, the error JSON, the ingest log, quarantine rows, logs), on success and failure.
"""

from __future__ import annotations

import base64
import json
import logging
from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner, Result

from predops.core.clock import FixedClock
from predops.pipelines.cli.main import main
from tests.fakes.misbehaving_http import MisbehavingServer, redirect
from tests.fakes.prometheus_api import FakePrometheus, always
from tests.pipelines.ingest.test_prometheus import INSTANCES, STEP, T0
from tests.pipelines.ingest.test_prometheus import options as prom_options

SECRET = "s3cret"
PASSWORD = SECRET + "pw"
TOKEN = SECRET + "tok"


def with_credentials(url: str) -> str:
    """``http://127.0.0.1:PORT`` -> the same with a password and a token."""
    return url.replace("http://", f"http://ops:{PASSWORD}@") + f"/?token={TOKEN}"


def hot_node(query: str, instance: str, t: float) -> float:
    """40 °C, but 999 °C on the last node: quarantined rows."""
    return 999.0 if instance == INSTANCES[-1] else 40.0


def secrets_in(root: Path, *texts: str) -> list[str]:
    """Where ``SECRET`` occurs: files under ``root`` (Parquet files by their values, since
    compression hides text) and the given texts."""
    found = [f"text {i}" for i, t in enumerate(texts) if SECRET in t]
    for f in sorted(p for p in root.rglob("*") if p.is_file()):
        if SECRET.encode() in f.read_bytes():
            found.append(str(f.relative_to(root)))
        elif f.suffix == ".parquet":
            frame = pl.read_parquet(f)
            text = frame.select(pl.all().cast(pl.String)).write_csv()
            if SECRET in text:
                found.append(str(f.relative_to(root)))
    return found


def ingest(ws: Path, url: str, **extra: str) -> Result:
    end = T0 + timedelta(seconds=STEP * 3)
    args = ["--workspace", str(ws), "ingest", "prometheus", url, "--json"]
    args += ["--start", T0.isoformat(), "--end", end.isoformat(), "--step", "5m"]
    for k, v in prom_options(4, FixedClock(T0), retries="1", **extra).extra.items():
        args += ["-o", f"{k}={v}"]
    return CliRunner().invoke(main, args)


def test_credentials_are_used_and_never_printed_or_stored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    ws = tmp_path / "ws"
    outputs: list[str] = []
    with FakePrometheus(INSTANCES, value_fn=hot_node) as fake:
        url = with_credentials(fake.url)
        ok = ingest(ws, url)
        outputs += [ok.stdout, ok.stderr]
        assert ok.exit_code == 0, ok.output
        report = json.loads(ok.stdout)
        assert report["tables"]["telemetry"]["rows_quarantined"] > 0
        assert report["tables"]["telemetry"]["rows_written"] > 0
        seen = list(fake.seen)

        fake.script = always("500")
        failed = ingest(ws, url)
        outputs += [failed.stdout, failed.stderr]
        assert failed.exit_code == 1
        error = json.loads(failed.stdout.splitlines()[0])["error"]
        assert "HTTP 500" in error and "***" in error and fake.url.split("//")[1] in error

    basic = "Basic " + base64.b64encode(f"ops:{PASSWORD}".encode()).decode()
    assert seen and {s.headers.get("Authorization") for s in seen} == {basic}
    assert all(s.params.get("token") == [TOKEN] for s in seen)
    assert all(s.path.startswith("/api/v1/") for s in seen)
    assert secrets_in(ws, *outputs, caplog.text) == []


def test_a_refused_redirect_does_not_print_the_credentials(tmp_path: Path) -> None:
    with (
        MisbehavingServer(redirect(f"http://ops:{PASSWORD}@127.0.0.1:9/?key={TOKEN}")) as bad,
    ):
        res = ingest(tmp_path / "ws", with_credentials(bad.url), nodes="gpu-01.dc1")
    assert res.exit_code == 1
    assert "redirect" in json.loads(res.stdout.splitlines()[0])["error"]
    assert secrets_in(tmp_path, res.stdout, res.stderr) == []
