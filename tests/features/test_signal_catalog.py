"""The XID catalogue and node-problem reasons: what is a failure and what is not."""

from __future__ import annotations

import pytest

from predops.core.schemas import FAILURE_CAUSES
from predops.features.signal_catalog import (
    NODE_PROBLEMS,
    XID_CATALOGUE,
    classify_problem,
    classify_xid,
    xid_code,
    xid_text,
)


@pytest.mark.parametrize(
    ("code", "verdict", "cause"),
    [
        (48, "failure", "gpu_ecc"),  # double-bit ECC
        (64, "failure", "gpu_ecc"),  # row remap / page retirement failed
        (74, "failure", "gpu_xid"),  # NVLink
        (79, "failure", "gpu_xid"),  # fallen off the bus
        (95, "failure", "gpu_ecc"),  # uncontained ECC
        (63, "degraded", "gpu_ecc"),  # a row remapped: active at the next reset
        (94, "degraded", "gpu_ecc"),  # contained ECC: only the application stopped
        (13, "application", "software"),
        (31, "application", "software"),
        (43, "application", "software"),
        (999, "unclassified", "gpu_xid"),
    ],
)
def test_xid_catalogue_separates_failed_gpus_from_application_faults(
    code: int, verdict: str, cause: str
) -> None:
    c = classify_xid(code)
    assert (c.verdict, c.cause) == (verdict, cause)


def test_every_cause_is_a_schema_cause() -> None:
    for c in (*XID_CATALOGUE.values(), *NODE_PROBLEMS.values()):
        assert c.cause in FAILURE_CAUSES


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.", 79),
        ("XID 48 An uncorrectable double bit error", 48),
        ("xid=95", 95),
        ("DCGM_FI_DEV_XID_ERRORS=74", 74),
        ("Xid 13: Graphics Engine Exception", 13),
        ("GPU has fallen off the bus", None),
        (None, None),
    ],
)
def test_xid_code_is_read_from_driver_and_exporter_messages(text: str | None, code: int) -> None:
    assert xid_code(text) == code


def test_problem_reasons() -> None:
    assert classify_problem(None, "kubelet stopped") is None  # a plain Ready transition
    assert classify_problem("KernelDeadlock", "task docker:7 blocked").verdict == "failure"  # type: ignore[union-attr]
    assert classify_problem("readonly-filesystem", None).cause == "disk"  # type: ignore[union-attr]
    assert classify_problem("NodeNotReady", None).verdict == "ready"  # type: ignore[union-attr]
    rebooted = classify_problem("Rebooted", "Node rebooted")
    assert rebooted is not None and rebooted.verdict == "failure" and rebooted.reboot_like
    assert classify_problem("FrequentKubeletRestart", None).verdict == "info"  # type: ignore[union-attr]
    assert classify_problem("SomethingNew", None).verdict == "info"  # type: ignore[union-attr]
    xid = classify_problem("XidError", "NVRM: Xid (PCI:0000:3b:00): 79, pid=1")
    assert xid is not None and (xid.verdict, xid.cause) == ("failure", "gpu_xid")
    assert classify_problem("gpu_xid", "Xid 13").verdict == "application"  # type: ignore[union-attr]
    assert classify_problem("XidError", "no code here").verdict == "unclassified"  # type: ignore[union-attr]
    assert xid_text(79) == "DCGM XID 79 (GPU has fallen off the bus)"
