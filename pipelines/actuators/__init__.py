"""Actuators: turn a Plan into effects, safely (composition root: I/O allowed).

- ``apply``: re-validate each action just before it runs, run it at most once per
  idempotency key, dry-run unless told to execute;
- ``kube``: cordon / drain (Eviction API, PDB 429 backoff) / uncordon through the
  official client, and the live cluster state re-validation reads;
- ``node_signals``: the failure-risk annotation, the ``PredictedFailure`` node condition
  and Events on each node; ``soft_taint``: predops' ``PreferNoSchedule`` taint;
- ``pool_resizers``: which actuator resizes each pool (a setting, or read from the
  cluster), and the one ``resize_pool`` actuator an apply runs;
- ``clusterapi``: pool resizes through Cluster API MachineDeployments;
- ``placeholders`` (objects in ``placeholder_objects``, the pool read by
  ``pool_state``): pool headroom as low-priority placeholder pods any node autoscaler
  provisions nodes for;
- ``karpenter``: Karpenter NodePool limits, with the pool's placeholders;
- ``resize_check``: the re-validation every pool resizer's ``check`` shares;
- ``purchase``: ``buy`` actions as purchase-request files (JSON + CSV).

The pool actuators' design note: ``docs/pool_actuators.md``. Plan files, the audit log
and the fleet state as the lake knows it live in the workspace room
(:mod:`predops.pipelines.workspace.plans`, ``.audit``, ``.fleet_state``).
"""
