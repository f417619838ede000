"""Actuators: turn a Plan into effects, safely (composition root: I/O allowed).

| module | concept |
|---|---|
| `plan_files.py` | plans as JSON files under ``<workspace>/plans``, atomic writes, typed read-back |
| `audit.py` | the append-only, fsynced audit log ``<workspace>/audit.jsonl`` |
| `apply.py` | apply a plan: re-validate each action just before it runs, at most once per idempotency key, dry-run unless told to execute |
| `kube.py` | cordon / drain (Eviction API, PDB 429 backoff) / uncordon via the official client; the live cluster state |
| `purchase.py` | ``buy`` actions as purchase-request files (JSON + CSV) |
| `lake_state.py` | the fleet, node states and running-pod snapshot as the lake knows them at a time |
"""
