"""What a raw node signal means for failure labels: NVIDIA XID codes and node problems.

Two catalogues, each mapping what a cluster records to a :class:`Verdict`:

- :data:`XID_CATALOGUE`, the XID codes of NVIDIA's Xid catalogue (Ampere and later)
  that decide a label. ``failure``: the GPU cannot run work again before a GPU reset,
  a node reboot or a replacement (48 double-bit ECC, 64 row-remap / page-retirement
  failure, 74 NVLink, 79 fallen off the bus, 95 uncontained ECC, 119 / 120 GSP, 140
  unrecovered ECC). ``degraded``: hardware worth watching that keeps working (63 a row
  remapped, active at the next reset; 92 a high single-bit ECC rate; 94 a *contained*
  ECC error: only the application that touched the memory was stopped). ``application``:
  the job's own fault (13 graphics engine exception, 31 memory page fault, 43 stopped
  channel, 45 pre-emptive cleanup). Any other code is ``unclassified`` and never a
  failure on its own.
- :data:`NODE_PROBLEMS`, node-problem-detector conditions and Kubernetes Event reasons
  (compared without case and punctuation): ``KernelDeadlock`` and ``ReadonlyFilesystem``
  are failures of the kernel and the disk; ``Rebooted`` (an unplanned reboot) is a
  failure of unknown cause; ``NodeNotReady``, ``NodeStatusUnknown``, ``KubeletNotReady``,
  ``NodeReady`` and ``KubeletReady`` are the Ready condition itself (the Ready rule
  judges them, with its grace period); the rest (restarting runtimes, OOM kills, hung
  tasks, kernel oopses) are information. Reasons naming an XID are read through the XID catalogue,
  the code taken from the message.

Causes are :data:`predops.core.schemas.FAILURE_CAUSES`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Verdict = Literal["failure", "degraded", "application", "unclassified", "ready", "info"]


@dataclass(frozen=True, slots=True)
class SignalClass:
    """What one code or reason means: the verdict, the failure cause, a short text, and
    whether it is reboot-like (a planned drain explains it: see the labeller)."""

    verdict: Verdict
    cause: str
    text: str
    reboot_like: bool = False


def _xid(verdict: Verdict, cause: str, text: str) -> SignalClass:
    return SignalClass(verdict, cause, text)


XID_CATALOGUE: dict[int, SignalClass] = {
    13: _xid("application", "software", "graphics engine exception"),
    31: _xid("application", "software", "GPU memory page fault"),
    43: _xid("application", "software", "GPU stopped processing (reset channel)"),
    45: _xid("application", "software", "pre-emptive cleanup after earlier errors"),
    48: _xid("failure", "gpu_ecc", "double-bit ECC error"),
    63: _xid("degraded", "gpu_ecc", "row remapped, pending a GPU reset"),
    64: _xid("failure", "gpu_ecc", "row remapping / page retirement failed"),
    74: _xid("failure", "gpu_xid", "NVLink error"),
    79: _xid("failure", "gpu_xid", "GPU has fallen off the bus"),
    92: _xid("degraded", "gpu_ecc", "high single-bit ECC error rate"),
    94: _xid("degraded", "gpu_ecc", "contained ECC error"),
    95: _xid("failure", "gpu_ecc", "uncontained ECC error"),
    119: _xid("failure", "gpu_xid", "GSP RPC timeout"),
    120: _xid("failure", "gpu_xid", "GSP error"),
    140: _xid("failure", "gpu_ecc", "unrecovered ECC error"),
}


def _norm(reason: str) -> str:
    return re.sub(r"[^a-z0-9]", "", reason.lower())


NODE_PROBLEMS: dict[str, SignalClass] = {
    _norm(k): v
    for k, v in {
        "KernelDeadlock": SignalClass("failure", "kernel", "kernel deadlock"),
        "ReadonlyFilesystem": SignalClass("failure", "disk", "filesystem remounted read-only"),
        "Rebooted": SignalClass("failure", "unknown", "node rebooted", reboot_like=True),
        "NodeNotReady": SignalClass("ready", "unknown", "node not ready"),
        "NodeStatusUnknown": SignalClass("ready", "unknown", "kubelet stopped posting status"),
        "KubeletNotReady": SignalClass("ready", "unknown", "kubelet not ready"),
        "NodeReady": SignalClass("ready", "unknown", "node ready"),
        "KubeletReady": SignalClass("ready", "unknown", "kubelet ready"),
        "FrequentKubeletRestart": SignalClass("info", "software", "kubelet restarting"),
        "FrequentContainerdRestart": SignalClass("info", "software", "containerd restarting"),
        "FrequentDockerRestart": SignalClass("info", "software", "docker restarting"),
        "CorruptDockerOverlay2": SignalClass("info", "software", "corrupt overlay2"),
        "OOMKilling": SignalClass("info", "software", "OOM kill"),
        "TaskHung": SignalClass("info", "kernel", "task hung"),
        "KernelOops": SignalClass("info", "kernel", "kernel oops"),
    }.items()
}

_XID_CODE = re.compile(r"xid(?:_errors)?\s*(?:\([^)]*\))?\s*[:=#]?\s*(\d{1,3})\b", re.IGNORECASE)


def xid_code(text: str | None) -> int | None:
    """The XID code in a message: ``NVRM: Xid (PCI:0000:3b:00): 79, pid=...``,
    ``XID 79``, ``xid=48``, ``DCGM_FI_DEV_XID_ERRORS=79``; None when there is none."""
    if not text:
        return None
    m = _XID_CODE.search(text)
    return int(m.group(1)) if m else None


def classify_xid(code: int) -> SignalClass:
    """The catalogue's class of an XID code (``unclassified`` when not catalogued)."""
    return XID_CATALOGUE.get(code) or SignalClass("unclassified", "gpu_xid", "not catalogued")


def names_xid(reason: str | None) -> bool:
    """Does a problem reason name an XID report (``XidError``, ``gpu_xid``, ``NVRMXid``)?"""
    return bool(reason) and "xid" in _norm(reason or "")


def classify_problem(reason: str | None, detail: str | None) -> SignalClass | None:
    """The class of a node-problem report with this reason (an event's ``cause``) and
    message (its ``detail``). None: no reason, so it is a plain Ready transition."""
    if not reason:
        return None
    if names_xid(reason):
        code = xid_code(detail) or xid_code(reason)
        if code is None:
            return SignalClass("unclassified", "gpu_xid", "XID report without a code")
        return classify_xid(code)
    return NODE_PROBLEMS.get(_norm(reason)) or SignalClass("info", "unknown", reason)


def xid_text(code: int) -> str:
    """``DCGM XID 79 (GPU has fallen off the bus)``: how the labeller names a code."""
    return f"DCGM XID {code} ({classify_xid(code).text})"
