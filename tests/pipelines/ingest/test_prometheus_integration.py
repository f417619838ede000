"""Round trip through a real Prometheus: the synthetic fleet's telemetry -> the exporters'
raw series (OpenMetrics, ``tests.fakes.exporters``) -> ``promtool tsdb create-blocks-from
openmetrics`` -> ``prometheus`` on 127.0.0.1 with no scrape targets and a 100-year
retention -> ``predops ingest prometheus`` -> lake, compared row by row with the source.

Prometheus runs with a 1-minute lookback: a backfill cannot carry the staleness markers a
live Prometheus writes when a scrape fails, so with the default 5 minutes the fleet's
missed scrapes would come back as copies of the previous sample.

Needs Debian's ``prometheus`` package (it brings ``promtool``); CI installs it. Without it
the tests fail, they do not skip.

Tolerances: gauges read one series (memory, hottest GPU, counters, Ready) come back
exactly; gauges that Prometheus averages or sums over GPUs (utilisation, power) within
1e-6 relative (float order of summation); ``cpu_util_pct`` comes from ``rate()`` of the
idle-seconds counters and is compared within 1e-3 percentage points. The XID total is
rebuilt from changes of the last-XID gauge, so it counts from the start of the range:
the comparison is with the source total minus its value at the first row.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
import requests
from click.testing import CliRunner

from predops.core.schemas import TELEMETRY
from predops.pipelines.cli.main import main
from predops.pipelines.synthetic.run import SimConfig, simulate_frames
from predops.pipelines.workspace.lake import Lake
from tests.fakes.exporters import write_openmetrics

pytestmark = pytest.mark.integration

STEP = timedelta(minutes=5)
START = datetime(2026, 1, 5, tzinfo=UTC)
MIB = 1 << 20
GPU_COLUMNS = (
    "gpu_util_pct",
    "gpu_temp_c",
    "gpu_power_w",
    "ecc_sbe_total",
    "ecc_dbe_total",
    "xid_errors_total",
    "pcie_replay_total",
)
INSTALL_HINT = (
    "Debian's prometheus package is not installed (it provides prometheus and "
    "promtool); install it with: apt-get update && apt-get install -y "
    "--no-install-recommends prometheus"
)


def source_fleet() -> tuple[pl.DataFrame, pl.DataFrame]:
    """Telemetry and inventory of a small synthetic fleet: CPU and 8-GPU nodes, half a day at
    5-minute steps, with missed scrapes (missing rows), a node down for an hour (null
    metrics, not ready) and XIDs."""
    frames = simulate_frames(SimConfig(nodes=16, days=0.5, interval=STEP, seed=7, start=START))
    tel, inv = frames["telemetry"], frames["inventory"].unique("node_id", keep="last")
    # The round trip must cover these; if the simulator changes, pick another seed.
    assert tel["cpu_util_pct"].null_count() > 0, "no down node in the simulated fleet"
    assert tel.height < inv.height * SimConfig(1, 1, STEP, 7, START).n_samples, "no gap"
    xids = tel.group_by("node_id").agg(
        pl.col("xid_errors_total").max() - pl.col("xid_errors_total").min()
    )
    assert (xids["xid_errors_total"] > 0).any(), "no XID in the simulated fleet"
    assert (inv["gpus"] == 0).any() and (inv["gpus"] > 0).any()
    return tel, inv


@dataclass(frozen=True)
class Backfilled:
    url: str
    source: pl.DataFrame
    inventory: pl.DataFrame
    timings: dict[str, float]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path, limit_s: float) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"prometheus exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if requests.get(f"{url}/-/ready", timeout=1).status_code == 200:
                return
        except requests.ConnectionError:
            pass
        time.sleep(0.1)
    pytest.fail(f"prometheus not ready after {limit_s}s:\n{log.read_text()[-3000:]}")


@contextmanager
def serve_backfilled(
    openmetrics: Path, root: Path, timings: dict[str, float] | None = None
) -> Iterator[str]:
    """Backfill an OpenMetrics file into a TSDB under ``root`` with ``promtool`` and serve
    it with ``prometheus`` on 127.0.0.1 (no scrape targets, 100-year retention, 1-minute
    lookback); yields the URL, stops the server after."""
    prometheus, promtool = shutil.which("prometheus"), shutil.which("promtool")
    if prometheus is None or promtool is None:
        pytest.fail(INSTALL_HINT)
    timings = {} if timings is None else timings
    t = time.perf_counter()
    subprocess.run(
        [
            promtool,
            "tsdb",
            "create-blocks-from",
            "openmetrics",
            "--quiet",
            str(openmetrics),
            str(root / "data"),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    timings["promtool_s"] = time.perf_counter() - t
    (root / "prometheus.yml").write_text("global:\n  scrape_interval: 1m\nscrape_configs: []\n")
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log = root / "prometheus.log"
    t = time.perf_counter()
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                prometheus,
                f"--config.file={root / 'prometheus.yml'}",
                f"--storage.tsdb.path={root / 'data'}",
                "--storage.tsdb.retention.time=100y",
                f"--web.listen-address=127.0.0.1:{port}",
                # A live Prometheus marks a down target's series stale at once; a backfill
                # carries no staleness markers, so without this a node that missed a
                # scrape would repeat its last sample for the default 5m lookback.
                "--query.lookback-delta=1m",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        _wait_ready(url, proc, log, limit_s=60)
        timings["prometheus_ready_s"] = time.perf_counter() - t
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def backfilled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backfilled]:
    root = tmp_path_factory.mktemp("prometheus")
    timings: dict[str, float] = {}
    t = time.perf_counter()
    source, inventory = source_fleet()
    gpus = dict(zip(inventory["node_id"], inventory["gpus"], strict=True))
    memory = {
        n: m * MIB for n, m in zip(inventory["node_id"], inventory["memory_mib"], strict=True)
    }
    exported = write_openmetrics(source, gpus, root / "fleet.om", step=STEP, memory_bytes=memory)
    timings["export_s"] = time.perf_counter() - t
    with serve_backfilled(exported.path, root, timings) as url:
        yield Backfilled(url, source, inventory, timings)


def _ingest_cli(b: Backfilled, workspace: Path, *extra: str) -> dict[str, object]:
    end = b.source["ts"].max()
    assert isinstance(end, datetime)
    args = [
        "--workspace",
        str(workspace),
        "ingest",
        "prometheus",
        b.url,
        "--start",
        START.isoformat(),
        "--end",
        end.isoformat(),
        "--step",
        "5m",
        "--json",
    ]
    for kv in extra:
        args += ["-o", kv]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert isinstance(out, dict)
    return out


def expected_from(source: pl.DataFrame) -> pl.DataFrame:
    """What Prometheus can give back: XID totals count from the first row of the range."""
    first = pl.col("xid_errors_total").first().over("node_id")
    return source.sort("node_id", "ts").with_columns(
        (pl.col("xid_errors_total") - first).alias("xid_errors_total")
    )


def assert_round_trip(got: pl.DataFrame, source: pl.DataFrame) -> None:
    exp = expected_from(source)
    got = got.select(TELEMETRY.names).sort("node_id", "ts")
    assert got.height == exp.height
    joined = exp.join(got, on=["node_id", "ts"], how="full", suffix="_got", coalesce=True)
    assert joined.height == exp.height, "rows at other times or for other nodes came back"
    exact = [
        "mem_used_bytes",
        "gpu_temp_c",
        "ecc_sbe_total",
        "ecc_dbe_total",
        "xid_errors_total",
        "pcie_replay_total",
        "nic_flaps_total",
        "disk_realloc_total",
        "mce_total",
        "node_ready",
    ]
    for c in exact:
        a, b = joined[c], joined[f"{c}_got"]
        same = (a == b) | (a.is_null() & b.is_null())
        assert same.all(), f"{c}: {joined.filter(~same).select('node_id', 'ts', c, c + '_got')}"
    for c, rel, absolute in (
        ("gpu_util_pct", 1e-6, 1e-4),
        ("gpu_power_w", 1e-6, 1e-3),
        ("cpu_util_pct", 0.0, 1e-3),
    ):
        a, b = joined[c].cast(pl.Float64), joined[f"{c}_got"].cast(pl.Float64)
        assert (a.is_null() == b.is_null()).all(), c
        err = (a - b).abs() - (absolute + rel * a.abs())
        worst = (a - b).abs().max()
        assert (err.drop_nulls() <= 0).all(), f"{c}: worst error {worst!r}"


def test_round_trip_through_a_real_prometheus(backfilled: Backfilled, tmp_path: Path) -> None:
    t = time.perf_counter()
    out = _ingest_cli(backfilled, tmp_path / "ws")
    ingest_s = time.perf_counter() - t
    tel = out["tables"]["telemetry"]  # type: ignore[index]
    assert tel["rows_quarantined"] == 0 and tel["rows_written"] == backfilled.source.height
    got = Lake(tmp_path / "ws" / "lake").scan("telemetry").collect()
    assert_round_trip(got, backfilled.source)
    # GPU metrics are null on CPU-only nodes (no DCGM exporter there), as in the source.
    cpu_nodes = backfilled.inventory.filter(pl.col("gpus") == 0)["node_id"]
    cpu_rows = got.filter(pl.col("node_id").is_in(cpu_nodes.to_list()))
    assert cpu_rows.height and all(cpu_rows[c].is_null().all() for c in GPU_COLUMNS)
    print(json.dumps({**backfilled.timings, "ingest_s": round(ingest_s, 2)}))

    # Re-ingesting the same range adds nothing.
    again = _ingest_cli(backfilled, tmp_path / "ws")
    assert again["tables"]["telemetry"]["rows_written"] == 0  # type: ignore[index]


def test_small_chunks_give_the_same_rows(backfilled: Backfilled, tmp_path: Path) -> None:
    # 3 nodes per request and 50 steps per window: 6 node batches x 3 windows per column.
    _ingest_cli(backfilled, tmp_path / "ws", "node_batch=3", "max_points=50")
    got = Lake(tmp_path / "ws" / "lake").scan("telemetry").collect()
    assert_round_trip(got, backfilled.source)


def test_plain_changes_over_a_step_would_miss_xids(backfilled: Backfilled, tmp_path: Path) -> None:
    """Why the default XID query subtracts two changes() windows: the plain one loses
    code changes that straddle a step boundary (the exporter places some there)."""
    naive = "sum by ($node) (changes(DCGM_FI_DEV_XID_ERRORS{$sel}[$step]))"
    _ingest_cli(backfilled, tmp_path / "ws", f"query.xid_errors_total={naive}")
    got = Lake(tmp_path / "ws" / "lake").scan("telemetry").collect()
    exp = expected_from(backfilled.source)

    def final(f: pl.DataFrame) -> pl.DataFrame:
        return f.sort("ts").group_by("node_id").agg(pl.col("xid_errors_total").last())

    cmp = final(exp).join(final(got), on="node_id", suffix="_got").drop_nulls()
    assert (cmp["xid_errors_total_got"] <= cmp["xid_errors_total"]).all()
    assert (cmp["xid_errors_total_got"] < cmp["xid_errors_total"]).any()
