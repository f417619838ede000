"""What node-exporter, the DCGM exporter, smartctl_exporter and kube-state-metrics would
have exposed for a telemetry frame, as one OpenMetrics file for
``promtool tsdb create-blocks-from openmetrics``.

The series are the raw ones the default Prometheus mapping
(``pipelines.ingest.prometheus.DEFAULT_QUERIES``) aggregates, so a backfill + ingest is a
real round trip:

- ``node_cpu_seconds_total`` is a counter per CPU and mode, sampled every
  ``step / counter_substeps`` (like a 1-minute scrape) and growing at the source
  utilisation over each step; a baseline sample one step before the first row lets the
  rate at the first row exist.
- DCGM gauges are per GPU: utilisations whose mean, temperatures whose maximum and powers
  whose sum give the node value; ECC / PCIe counters are split over GPUs so that their
  sum is the node total. ``DCGM_FI_DEV_XID_ERRORS`` holds the last XID code per GPU and is
  scraped off the step grid: each XID the source counts in a step changes the code of one
  GPU at the step's first scrape (so at most one per GPU per step).
- carrier changes, reallocated sectors and EDAC errors are split over two devices; decoy
  series (a veth interface, the normalised SMART value, a MemoryPressure condition, the
  ``user`` CPU mode) sit beside them so that a mapping that forgot a filter fails.
- node-level series carry ``instance="<node>:9100"`` (DCGM ``:9400``, with ``Hostname``);
  kube-state-metrics labels the node with ``node`` and its own ``instance``.

Families are written contiguously, samples in time order per series, ``# EOF`` last.
DCGM's upper-case ``*_TOTAL`` names cannot be OpenMetrics counters (those need a
lower-case ``_total`` sample suffix), so they are typed ``unknown``; the TSDB stores no
type either way, so the stored series are the ones a scrape would store.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import pairwise
from pathlib import Path

import polars as pl

XID_CODES = (79, 48, 63, 31, 94, 13)
"""XID codes the exporter cycles through (fallen off the bus, DBE, row remap, MMU, ...)."""
MIB = 1 << 20


@dataclass(frozen=True, slots=True)
class Exported:
    """What was written: the file, the first and last row time, and the sample count."""

    path: Path
    start: datetime
    end: datetime
    samples: int


def _labels(**kv: str) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in kv.items()) + "}"


def _num(v: float) -> str:
    return repr(float(v))  # shortest text that parses back to the same float64


def _split(total: int, parts: int) -> list[int]:
    """``total`` over ``parts`` so each share never decreases as ``total`` grows."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


class _Families:
    """Lines per metric family and series, written family by family."""

    def __init__(self) -> None:
        self.types: dict[str, str] = {}
        self.series: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
        self.samples = 0

    def add(self, family: str, kind: str, name: str, labels: str, t: float, v: float) -> None:
        self.types[family] = kind
        self.series[family][name + labels].append(f"{name}{labels} {_num(v)} {t:.3f}")
        self.samples += 1

    def write(self, path: Path) -> None:
        with open(path, "w", encoding="utf-8") as fh:
            for family, kind in self.types.items():
                fh.write(f"# TYPE {family} {kind}\n")
                for lines in self.series[family].values():
                    fh.write("\n".join(lines))
                    fh.write("\n")
            fh.write("# EOF\n")


def write_openmetrics(
    telemetry: pl.DataFrame,
    gpus_by_node: Mapping[str, int],
    path: Path,
    *,
    step: timedelta,
    cpus: int = 2,
    counter_substeps: int = 5,
    memory_bytes: Mapping[str, int] | None = None,
) -> Exported:
    """Write the exporters' view of ``telemetry`` (contract columns) to ``path``.

    A node's rows must sit on one step grid. A missing row (a missed scrape) or a null
    value writes no sample; counters carry on from their last value after the gap.
    """
    fam = _Families()
    step_s = step.total_seconds()
    tel = telemetry.sort("node_id", "ts")
    for (node,), rows in tel.group_by(["node_id"], maintain_order=True):
        assert isinstance(node, str)
        ts = [t.timestamp() for t in rows["ts"]]
        if any(
            b <= a or abs((b - a) / step_s - round((b - a) / step_s)) > 1e-9
            for a, b in pairwise(ts)
        ):
            raise ValueError(f"node {node}: rows are not on one step grid; cannot export")
        g = int(gpus_by_node.get(node, 0))
        _node_exporter(fam, node, ts, rows, step_s, cpus, counter_substeps, memory_bytes)
        if g > 0:
            _dcgm(fam, node, ts, rows, g, step_s, counter_substeps)
        _ksm(fam, node, ts, rows)
    fam.write(path)
    times = tel["ts"]
    return Exported(path, times.min(), times.max(), fam.samples)  # type: ignore[arg-type]


def _node_exporter(
    fam: _Families,
    node: str,
    ts: list[float],
    rows: pl.DataFrame,
    step_s: float,
    cpus: int,
    substeps: int,
    memory_bytes: Mapping[str, int] | None,
) -> None:
    inst = f"{node}:9100"
    job = "node-exporter"
    util = rows["cpu_util_pct"].to_list()
    idle = [1000.0 + 3.0 * c for c in range(cpus)]
    user = [200.0 + c for c in range(cpus)]
    sub = step_s / substeps
    base_t = ts[0] - step_s
    for c in range(cpus):
        lab_i = _labels(cpu=str(c), instance=inst, job=job, mode="idle")
        lab_u = _labels(cpu=str(c), instance=inst, job=job, mode="user")
        fam.add("node_cpu_seconds", "counter", "node_cpu_seconds_total", lab_i, base_t, idle[c])
        fam.add("node_cpu_seconds", "counter", "node_cpu_seconds_total", lab_u, base_t, user[c])
    for t, u in zip(ts, util, strict=True):
        if u is None:
            continue
        busy = float(u) / 100.0
        for k in range(1, substeps + 1):
            tk = t - step_s + k * sub
            for c in range(cpus):
                idle[c] += (1.0 - busy) * sub
                user[c] += busy * sub
                lab_i = _labels(cpu=str(c), instance=inst, job=job, mode="idle")
                lab_u = _labels(cpu=str(c), instance=inst, job=job, mode="user")
                fam.add("node_cpu_seconds", "counter", "node_cpu_seconds_total", lab_i, tk, idle[c])
                fam.add("node_cpu_seconds", "counter", "node_cpu_seconds_total", lab_u, tk, user[c])

    used = rows["mem_used_bytes"].to_list()
    most = max((u for u in used if u is not None), default=0)
    total = max((memory_bytes or {}).get(node, 0), most + 4096 * MIB)
    lab = _labels(instance=inst, job=job)
    for t, u in zip(ts, used, strict=True):
        if u is None:
            continue
        fam.add("node_memory_MemTotal_bytes", "gauge", "node_memory_MemTotal_bytes", lab, t, total)
        fam.add(
            "node_memory_MemAvailable_bytes",
            "gauge",
            "node_memory_MemAvailable_bytes",
            lab,
            t,
            total - int(u),
        )

    def split_counter(
        column: str,
        family: str,
        name: str,
        parts: list[dict[str, str]],
        decoy: dict[str, str] | None,
        decoy_name: str | None = None,
    ) -> None:
        for i, (t, v) in enumerate(zip(ts, rows[column].to_list(), strict=True)):
            if v is None:
                continue
            for share, extra in zip(_split(int(v), len(parts)), parts, strict=True):
                fam.add(family, "counter", name, _labels(**extra, instance=inst, job=job), t, share)
            if decoy is not None:
                fam.add(
                    family,
                    "counter",
                    decoy_name or name,
                    _labels(**decoy, instance=inst, job=job),
                    t,
                    7 * i + 3,
                )

    split_counter(
        "nic_flaps_total",
        "node_network_carrier_changes",
        "node_network_carrier_changes_total",
        [{"device": "eth0"}, {"device": "ib0"}],
        {"device": "veth3f2a9c1"},
    )
    # EDAC: correctable and uncorrectable are separate families; split the node total.
    for i, (t, v) in enumerate(zip(ts, rows["mce_total"].to_list(), strict=True)):
        if v is None:
            continue
        ce, ue = int(v) - int(v) // 3, int(v) // 3
        lab = _labels(controller="0", instance=inst, job=job)
        fam.add(
            "node_edac_correctable_errors",
            "counter",
            "node_edac_correctable_errors_total",
            lab,
            t,
            ce,
        )
        fam.add(
            "node_edac_uncorrectable_errors",
            "counter",
            "node_edac_uncorrectable_errors_total",
            lab,
            t,
            ue,
        )
        # A per-csrow family that must not be added in (it repeats the controller count).
        fam.add(
            "node_edac_csrow_correctable_errors",
            "counter",
            "node_edac_csrow_correctable_errors_total",
            _labels(controller="0", csrow="0", instance=inst, job=job),
            t,
            ce + i,
        )
    for t, v in zip(ts, rows["disk_realloc_total"].to_list(), strict=True):
        if v is None:
            continue
        for share, dev in zip(_split(int(v), 2), ("sda", "sdb"), strict=True):
            for vtype, value in (("raw", share), ("value", 100)):
                lab = _labels(
                    attribute_id="5",
                    attribute_name="Reallocated_Sector_Ct",
                    attribute_value_type=vtype,
                    device=dev,
                    instance=inst,
                    job="smartctl",
                )
                fam.add(
                    "smartctl_device_attribute", "gauge", "smartctl_device_attribute", lab, t, value
                )


def _dcgm(
    fam: _Families,
    node: str,
    ts: list[float],
    rows: pl.DataFrame,
    g: int,
    step_s: float,
    substeps: int,
) -> None:
    def lab(i: int) -> str:
        return _labels(
            Hostname=node,
            UUID=f"GPU-{node}-{i}",
            gpu=str(i),
            instance=f"{node}:9400",
            job="dcgm-exporter",
            modelName="H100",
        )

    def gauge(name: str, t: float, values: list[float]) -> None:
        for i, v in enumerate(values):
            fam.add(name, "gauge", name, lab(i), t, v)

    for t, u, temp, power in zip(
        ts,
        rows["gpu_util_pct"].to_list(),
        rows["gpu_temp_c"].to_list(),
        rows["gpu_power_w"].to_list(),
        strict=True,
    ):
        if u is not None:
            u = float(u)
            d = min(u, 100.0 - u, 3.0)
            spread = [d if i % 2 == 0 else -d for i in range(g)] if g % 2 == 0 else [0.0] * g
            gauge("DCGM_FI_DEV_GPU_UTIL", t, [u + s for s in spread])
        if temp is not None:
            gauge("DCGM_FI_DEV_GPU_TEMP", t, [float(temp) - (i % 4) for i in range(g)])
        if power is not None:
            share = float(power) / g
            last = float(power) - share * (g - 1)
            gauge("DCGM_FI_DEV_POWER_USAGE", t, [share] * (g - 1) + [last])
    for column, name in (
        ("ecc_sbe_total", "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL"),
        ("ecc_dbe_total", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"),
        ("pcie_replay_total", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER"),
    ):
        for t, v in zip(ts, rows[column].to_list(), strict=True):
            if v is not None:
                for i, share in enumerate(_split(int(v), g)):
                    fam.add(name, "unknown", name, lab(i), t, share)
    # XID: the last code per GPU, scraped every step / substeps with a half-interval offset
    # (like a live scrape, not on the step grid). The XIDs a row counts change codes at
    # the first scrape of its step, so every change straddles a step boundary (the case a
    # plain changes() over one step misses). The baseline scrape before the first row
    # holds the first row's state.
    sub = step_s / substeps
    codes = [0] * g
    cursor = 0
    prev: int | None = None
    for t, v in zip(ts, rows["xid_errors_total"].to_list(), strict=True):
        if v is None:
            continue
        new = 0 if prev is None else int(v) - prev
        if new < 0 or new > g:
            raise ValueError(f"node {node}: {new} XIDs in one step cannot be encoded on {g} GPUs")
        if prev is None:
            gauge("DCGM_FI_DEV_XID_ERRORS", t - step_s - sub / 2, [float(c) for c in codes])
        for _ in range(new):
            i = cursor % g
            cycle = XID_CODES[(cursor // g) % len(XID_CODES) :] + XID_CODES
            codes[i] = next(c for c in cycle if c != codes[i])
            cursor += 1
        for k in range(substeps):
            gauge("DCGM_FI_DEV_XID_ERRORS", t - step_s + (k + 0.5) * sub, [float(c) for c in codes])
        prev = int(v)


def _ksm(fam: _Families, node: str, ts: list[float], rows: pl.DataFrame) -> None:
    inst, job = "10.0.0.2:8080", "kube-state-metrics"
    for t, ready in zip(ts, rows["node_ready"].to_list(), strict=True):
        if ready is None:
            continue
        for status, v in (("true", ready), ("false", not ready), ("unknown", False)):
            fam.add(
                "kube_node_status_condition",
                "gauge",
                "kube_node_status_condition",
                _labels(condition="Ready", instance=inst, job=job, node=node, status=status),
                t,
                float(v),
            )
        fam.add(
            "kube_node_status_condition",
            "gauge",
            "kube_node_status_condition",
            _labels(condition="MemoryPressure", instance=inst, job=job, node=node, status="true"),
            t,
            1.0,
        )
