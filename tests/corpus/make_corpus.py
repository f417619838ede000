"""Writes the bad-input corpus in this folder (run it to regenerate; output is committed).

Each file is one way real inputs break. ``tests/pipelines/test_bad_inputs.py`` feeds each
to ``predops ingest files`` and checks the clear error or the right quarantine, and that
nothing already in the lake was lost or changed.
"""

from __future__ import annotations

import csv
import gzip
import io
from pathlib import Path

import polars as pl

HERE = Path(__file__).resolve().parent
BAD = HERE / "bad_inputs"
GOOD = HERE / "good"

TELEMETRY_COLUMNS = [
    "ts",
    "node_id",
    "cpu_util_pct",
    "mem_used_bytes",
    "gpu_util_pct",
    "gpu_temp_c",
    "gpu_power_w",
    "ecc_sbe_total",
    "ecc_dbe_total",
    "xid_errors_total",
    "pcie_replay_total",
    "nic_flaps_total",
    "disk_realloc_total",
    "mce_total",
    "node_ready",
]


def row(at: str, node: str = "gpu-0001", **over: str) -> dict[str, str]:
    base = {
        "ts": at,
        "node_id": node,
        "cpu_util_pct": "41.5",
        "mem_used_bytes": "68719476736",
        "gpu_util_pct": "87.0",
        "gpu_temp_c": "66.0",
        "gpu_power_w": "2450.0",
        "ecc_sbe_total": "3",
        "ecc_dbe_total": "0",
        "xid_errors_total": "0",
        "pcie_replay_total": "12",
        "nic_flaps_total": "1",
        "disk_realloc_total": "0",
        "mce_total": "0",
        "node_ready": "true",
    }
    base.update(over)
    return base


def write_csv(path: Path, rows: list[dict[str, str]], columns: list[str]) -> None:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n", extrasaction="ignore")
    w.writeheader()
    w.writerows(rows)
    path.write_text(buf.getvalue(), encoding="utf-8")


def telemetry(path: Path, rows: list[dict[str, str]]) -> None:
    write_csv(path, rows, TELEMETRY_COLUMNS)


def main() -> None:
    BAD.mkdir(exist_ok=True)
    GOOD.mkdir(exist_ok=True)
    inventory_cols = [
        "ts",
        "node_id",
        "pool",
        "sku",
        "gpu_model",
        "gpus",
        "cpu_milli",
        "memory_mib",
        "numa_nodes",
        "nvlink_domain",
        "region",
        "zone",
        "spine",
        "rack",
        "installed_at",
    ]
    inv = [
        {
            "ts": "2026-03-01T00:00:00Z",
            "node_id": n,
            "pool": "gpu-train",
            "sku": "h100x8",
            "gpu_model": "H100",
            "gpus": "8",
            "cpu_milli": "192000",
            "memory_mib": "2097152",
            "numa_nodes": "2",
            "nvlink_domain": f"{n}/nvl",
            "region": "eu-1",
            "zone": "eu-1a",
            "spine": "sp1",
            "rack": r,
            "installed_at": "2025-06-01T00:00:00Z",
        }
        for n, r in (("gpu-0001", "r01"), ("gpu-0002", "r02"))
    ]
    write_csv(GOOD / "inventory.csv", inv, inventory_cols)
    telemetry(
        GOOD / "telemetry.csv",
        [
            row(f"2026-03-01T00:{m:02d}:00Z", n)
            for m in range(0, 30, 5)
            for n in ("gpu-0001", "gpu-0002")
        ],
    )

    telemetry(
        BAD / "wrong_types.csv",
        [
            row("2026-03-01T01:00:00Z", cpu_util_pct="forty"),
            row("2026-03-01T01:05:00Z", mem_used_bytes="64GiB"),
            row("2026-03-01T01:10:00Z", node_ready="maybe"),
            row("2026-03-01T01:15:00Z", ts="yesterday"),
            row("2026-03-01T01:20:00Z", ecc_sbe_total="3.5"),
            row("2026-03-01T01:25:00Z"),
        ],
    )
    telemetry(
        BAD / "nan_inf.csv",
        [
            row("2026-03-01T02:00:00Z", gpu_temp_c="NaN"),
            row("2026-03-01T02:05:00Z", gpu_power_w="inf"),
            row("2026-03-01T02:10:00Z", cpu_util_pct="-inf"),
            row("2026-03-01T02:15:00Z"),
        ],
    )
    telemetry(
        BAD / "negative_counters.csv",
        [
            row("2026-03-01T03:00:00Z", ecc_dbe_total="-3"),
            row("2026-03-01T03:05:00Z", xid_errors_total="-1"),
            row("2026-03-01T03:10:00Z"),
        ],
    )
    telemetry(
        BAD / "duplicate_keys.csv",
        [
            row("2026-03-01T04:00:00Z", cpu_util_pct="10"),
            row("2026-03-01T04:00:00Z", cpu_util_pct="99"),
            row("2026-03-01T04:05:00Z"),
        ],
    )
    telemetry(
        BAD / "out_of_order.csv",
        [row(f"2026-03-01T05:{m:02d}:00Z") for m in (25, 5, 20, 0, 15, 10)],
    )
    telemetry(
        BAD / "far_future.csv",
        [
            row("2099-01-01T00:00:00Z"),
            row("2026-03-01T06:00:00Z"),
        ],
    )
    telemetry(
        BAD / "unknown_node.csv",
        [
            row("2026-03-01T07:00:00Z", node="gpu-9999"),
            row("2026-03-01T07:00:00Z", node="gpu-0002"),
        ],
    )
    write_csv(
        BAD / "missing_column.csv",
        [row("2026-03-01T08:00:00Z")],
        [c for c in TELEMETRY_COLUMNS if c != "node_id"],
    )
    write_csv(
        BAD / "extra_column.csv",
        [{**row("2026-03-01T09:00:00Z"), "gpu_serial": "1324"}],
        [*TELEMETRY_COLUMNS, "gpu_serial"],
    )
    (BAD / "empty.csv").write_bytes(b"")
    (BAD / "header_only.csv").write_text(",".join(TELEMETRY_COLUMNS) + "\n")
    (BAD / "empty.parquet").write_bytes(b"")
    # Non-UTF-8: a Latin-1 byte in a node id on the third line.
    good_text = (GOOD / "telemetry.csv").read_bytes().split(b"\n")
    good_text[2] = good_text[2].replace(b"gpu-", b"gpu-\xe9")
    (BAD / "non_utf8.csv").write_bytes(b"\n".join(good_text))
    # A header line of 2 MiB (compresses to a few KB): what a binary or a runaway
    # export looks like to a CSV reader.
    (BAD / "huge_header.csv.gz").write_bytes(
        gzip.compress(b"ts," + b"x" * (2 << 20) + b"\n1,2\n", mtime=0)
    )
    frame = pl.read_csv(GOOD / "telemetry.csv", infer_schema=False)
    buf = io.BytesIO()
    frame.write_parquet(buf)
    data = buf.getvalue()
    # Truncated: the last third of the file (with the footer) is gone.
    (BAD / "truncated.parquet").write_bytes(data[: len(data) * 2 // 3])
    # A footer that claims ~4 GiB of metadata (the largest its 4-byte length can say).
    (BAD / "huge_footer.parquet").write_bytes(
        data[:-8] + (0xFFFFFFF0).to_bytes(4, "little") + b"PAR1"
    )
    # Not Parquet at all, named .parquet.
    (BAD / "not_parquet.parquet").write_bytes(b"ts,node_id\n2026-01-01,n1\n")


if __name__ == "__main__":
    main()
