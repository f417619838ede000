"""Actuators: turn a Plan into effects, safely (composition root: I/O allowed).

- ``plan_files``: plans as JSON under ``<workspace>/plans``, atomic writes, typed read-back;
- ``audit``: the append-only, fsynced audit log ``<workspace>/audit.jsonl``;
- ``apply``: re-validate each action just before it runs, run it at most once per
  idempotency key, dry-run unless told to execute;
- ``kube``: cordon / drain (Eviction API, PDB 429 backoff) / uncordon through the
  official client, and the live cluster state re-validation reads;
- ``purchase``: ``buy`` actions as purchase-request files (JSON + CSV);
- ``lake_state``: the fleet, node states and running-pod snapshot as the lake knows them.
"""
