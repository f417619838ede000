"""Which adapter reads which source: ``predops ingest <name> <path>``.

Each adapter module exposes ``SOURCE`` (the lake source name it writes under by
default), ``HELP`` (one line) and ``read(path, options) -> Iterator[Batch]``. Modules are
imported only when used, so a slow import (kubernetes) costs nothing elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import cast

from predops.pipelines.ingest.options import AdapterModule, IngestOptions

__all__ = ["ADAPTERS", "AdapterModule", "IngestOptions", "adapter"]


def _files() -> ModuleType:
    from predops.pipelines.ingest import files

    return files


def _prometheus() -> ModuleType:
    from predops.pipelines.ingest import prometheus

    return prometheus


def _kubernetes() -> ModuleType:
    from predops.pipelines.ingest import kubernetes

    return kubernetes


def _openb() -> ModuleType:
    from predops.pipelines.ingest.traces import openb

    return openb


def _backblaze_daily() -> ModuleType:
    from predops.pipelines.ingest.traces import backblaze_daily

    return backblaze_daily


def _backblaze_hds() -> ModuleType:
    from predops.pipelines.ingest.traces import backblaze_hds

    return backblaze_hds


def _nab() -> ModuleType:
    from predops.pipelines.ingest.traces import nab

    return nab


def _helios() -> ModuleType:
    from predops.pipelines.ingest.traces import helios

    return helios


def _philly() -> ModuleType:
    from predops.pipelines.ingest.traces import philly

    return philly


def _datacenter() -> ModuleType:
    from predops.pipelines.ingest.traces import datacenter

    return datacenter


def _azure_vm() -> ModuleType:
    from predops.pipelines.ingest.traces import azure_vm

    return azure_vm


ADAPTERS: dict[str, Callable[[], ModuleType]] = {
    "files": _files,
    "prometheus": _prometheus,
    "kubernetes": _kubernetes,
    "openb": _openb,
    "backblaze-daily": _backblaze_daily,
    "backblaze-hds": _backblaze_hds,
    "nab": _nab,
    "helios": _helios,
    "philly": _philly,
    "datacenter": _datacenter,
    "azure-vm": _azure_vm,
}
"""Source name -> the function that imports its adapter module (imported when used)."""


USAGE: dict[str, tuple[str, str]] = {
    "files": (
        "a Parquet or CSV file, or a folder of them, in one table's contract columns",
        "predops ingest files ./telemetry.parquet --table telemetry",
    ),
    "prometheus": (
        "the server's base URL (query_range over --start/--end/--step)",
        "predops ingest prometheus http://prometheus:9090 --start 2026-11-30T00:00Z "
        "--end 2026-12-01T00:00Z --step 5m",
    ),
    "kubernetes": (
        "a kubeconfig file, or 'in-cluster' inside a pod",
        "predops ingest kubernetes ~/.kube/config -o pool_label=node-pool",
    ),
    "openb": (
        "an openb_node_list_*.csv, an openb_pod_list_*.csv or a folder holding them",
        "predops ingest openb ./cluster-trace-gpu-v2023/csv -o epoch=2023-01-01",
    ),
    "backblaze-daily": (
        "a daily drive-stats CSV (YYYY-MM-DD.csv) or a folder of them",
        "predops ingest backblaze-daily ./data_Q1_2024/",
    ),
    "backblaze-hds": (
        "the dynamichazard start-stop table (hds.csv)",
        "predops ingest backblaze-hds ./hds.csv",
    ),
    "nab": (
        "the NAB root, its data/ folder, a category folder or one series CSV; "
        "-o labels=combined_windows.json",
        "predops ingest nab ./NAB/data/realKnownCause",
    ),
    "helios": (
        "one cluster_sequence_vc.csv[.gz], a VC folder, or a folder of them (Earth_vcs/)",
        "predops ingest helios ./Earth_vcs/",
    ),
    "philly": (
        "philly_node_sequence.csv[.gz] (time, active, total) or a folder holding it",
        "predops ingest philly ./philly_node_sequence.csv.gz",
    ),
    "datacenter": (
        "one of the publisher's CSV files or a folder of them (searched recursively); "
        "-o epoch= or -o <trace>_epoch=",
        "predops ingest datacenter ./datacenter-traces/",
    ),
    "azure-vm": (
        "one wide CSV (microsoft_avg_100.csv.gz, ...) or a folder of them; -o epoch=",
        "predops ingest azure-vm ./microsoft_avg_100.csv.gz",
    ),
}
"""Per source: what PATH it expects, and an example (``predops ingest --help``)."""


def option_keys(name: str) -> list[str]:
    """The ``-o`` keys an adapter knows, where it declares them (``OPTION_KEYS``, or the
    keys of its ``DEFAULTS``); empty when it takes none beyond its USAGE line."""
    module = ADAPTERS[name]()
    keys = getattr(module, "OPTION_KEYS", None) or getattr(module, "DEFAULTS", None) or ()
    return sorted(keys)


def adapter(name: str) -> AdapterModule:
    try:
        load = ADAPTERS[name]
    except KeyError:
        raise KeyError(f"unknown source {name!r}; known: {', '.join(sorted(ADAPTERS))}") from None
    return cast(AdapterModule, load())
