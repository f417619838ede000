"""Actuators: turn a Plan into effects, safely (composition root: I/O allowed).

- ``apply``: re-validate each action just before it runs, run it at most once per
  idempotency key, dry-run unless told to execute;
- ``kube``: cordon / drain (Eviction API, PDB 429 backoff) / uncordon through the
  official client, and the live cluster state re-validation reads;
- ``clusterapi``: pool resizes through Cluster API MachineDeployments;
- ``purchase``: ``buy`` actions as purchase-request files (JSON + CSV).

Plan files, the audit log and the fleet state as the lake knows it live in the workspace
room (:mod:`predops.pipelines.workspace.plans`, ``.audit``, ``.fleet_state``).
"""
