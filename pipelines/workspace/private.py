"""Workspace files that hold secrets or approvals: readable by their owner only.

The demo's operator token, plan approvals and the audit log (it records who approved
what) are files of mode 0600; a directory that holds only such files (the approvals)
is 0700. The mode is set on every write, not only at creation: a file or directory
left more open by an older version, a copy or a hand edit is closed again by the next
write, and the process's umask never widens nor narrows it.
"""

from __future__ import annotations

import os
from pathlib import Path

from predops.pipelines.workspace.atomic import atomic_write_text

PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700


def private_dir(path: Path) -> Path:
    """``path`` (created with its parents when missing) with mode 0700."""
    path.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    os.chmod(path, PRIVATE_DIR)
    return path


def write_private_text(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` atomically; the new file is 0600 from its first byte
    (whatever mode the file it replaces had)."""
    atomic_write_text(path, text, mode=PRIVATE_FILE)
