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


def adapter(name: str) -> AdapterModule:
    try:
        load = ADAPTERS[name]
    except KeyError:
        raise KeyError(f"unknown source {name!r}; known: {', '.join(sorted(ADAPTERS))}") from None
    return cast(AdapterModule, load())
