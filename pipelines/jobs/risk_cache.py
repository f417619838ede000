"""The last scoring pass's answers, re-used while neither the rows nor the model changed.

The scheduled pipeline scores every node every few minutes, but a node's risk is a
function of its online feature row and the model alone (``as_of`` only stamps it, and
with reasons for every node nothing depends on the other rows). So when the online rows
are the same (their ``rows_id``, :class:`predops.pipelines.workspace.feature_store.
OnlineFrame`, which a restamp keeps) and the served model is the same version of the same
run with the same horizons, the previous answers are those the model would give again:
they are re-stamped with the new ``as_of`` and the provenance of this pass (its data
cutoff is the oldest last sample among the nodes fresh now), and the model is not even
loaded. Anything else — another key, a node fresh now that was not scored then, a
missing or unreadable file — is a miss, and the caller scores as usual and saves.

The file (``<features>/online/risk_cache.pickle``) holds one entry in two pickles: the
key, then the risks in scoring order, ``(node_id, horizon seconds, p_fail, ((feature,
contribution, text), ...))`` each. A miss reads the key only: at every new bucket end
the rows change. (JSON took about 0.3 CPU-s to write and as much to read for 10,000
risks, a pickle a tenth of it; like the registry's models and the snapshot of running
pods, it is a pickle because the workspace is trusted.) A long-running process keeps
the last entry it wrote or read in memory while the file is the one it was kept for
(:class:`predops.pipelines.workspace.file_memo.FileMemo`). Memory: the risks of one pass.
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from predops.core.contracts import FailureRisk, Provenance, Reason
from predops.pipelines.workspace.file_memo import FileMemo, identity

FILE = "risk_cache.pickle"
VERSION = 3
_MEMO = FileMemo(capacity=2)


def cache_key(
    prov: Provenance, rows_id: str | None, horizons: Sequence[timedelta]
) -> dict[str, Any] | None:
    """What the answers depend on, or None when they cannot be re-used (rows of a file
    from before row ids)."""
    if rows_id is None:
        return None
    return {
        "version": VERSION,
        "rows_id": rows_id,
        "model": [prov.model_name, prov.model_version, prov.run_id],
        "feature_set_hash": prov.feature_set_hash,
        "horizons_s": [h.total_seconds() for h in horizons],
    }


def lookup(
    path: Path,
    key: dict[str, Any],
    fresh: Sequence[str],
    *,
    as_of: datetime,
    provenance: Provenance,
) -> list[FailureRisk] | None:
    """The saved risks of the ``fresh`` nodes, stamped ``as_of`` with ``provenance``, in
    the saved order; None on a miss (see the module docstring)."""
    kept = _MEMO.get(path)
    if kept is None:
        ident = identity(path)
        try:
            with path.open("rb") as fh:
                if pickle.load(fh) != key:
                    return None
                saved = pickle.load(fh)
            kept = (dict(key), [(n, h, p, tuple(Reason(*x) for x in r)) for n, h, p, r in saved])
        except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError):
            return None
        except (IndexError, KeyError, TypeError, ValueError):
            return None
        _MEMO.put(path, kept, ident)
    saved_key, entries = kept
    if saved_key != key:
        return None
    wanted = set(fresh)
    out: list[FailureRisk] = []
    scored: set[str] = set()
    try:
        for node, horizon_s, p_fail, reasons in entries:
            scored.add(node)
            if node in wanted:
                out.append(
                    FailureRisk(
                        node_id=node,
                        as_of=as_of,
                        horizon=timedelta(seconds=horizon_s),
                        p_fail=p_fail,
                        reasons=reasons,  # the kept tuple itself (risk_file memoises by it)
                        provenance=provenance,
                    )
                )
    except (KeyError, TypeError, ValueError):
        return None
    if not wanted <= scored:
        return None  # a node fresh now that the saved pass did not score
    return out


def save(path: Path, key: dict[str, Any] | None, risks: Sequence[FailureRisk]) -> None:
    """Keep one pass's risks under ``key`` (atomically; nothing when ``key`` is None)."""
    if key is None:
        path.unlink(missing_ok=True)
        return
    entries = [(r.node_id, r.horizon.total_seconds(), r.p_fail, r.reasons) for r in risks]
    body = [
        (n, h, p, tuple((x.feature, x.contribution, x.text) for x in r)) for n, h, p, r in entries
    ]

    def write(p: Path) -> None:
        with p.open("wb") as fh:
            pickle.dump(key, fh, protocol=pickle.HIGHEST_PROTOCOL)
            pickle.dump(body, fh, protocol=pickle.HIGHEST_PROTOCOL)

    _MEMO.write(path, write, (dict(key), entries))


__all__ = ["FILE", "cache_key", "lookup", "save"]
