"""What defines the node failure model: its training strategy, parameters and features.

Every trainer of the model reads these: the production job
(:mod:`predops.pipelines.jobs.failure`), the evaluations
(:mod:`predops.pipelines.jobs.evaluation`), the what-if loop's retrains
(:mod:`predops.pipelines.whatif.risk`) and the benchmarks.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from predops.features.definitions import FeatureDef, NodeFeatureSpec, node_feature_set

PRIMARY_HORIZON = timedelta(hours=24)
"""The horizon the registry promotes by, the planner acts on and the dashboards show."""
STRATEGY = "stacked"
"""One model with the horizon as a monotone feature (see :mod:`models.failure.model`)."""
EXCLUDED_FEATURES = frozenset({"node__rack"})
"""A rack id lets the trees memorise which racks failed in the training window. On the
simulated 2,000-node fleet (24 h horizon, trained on days 0-26, validated on days
27-39, never the test period) dropping it raised PR-AUC in all 8 parameter settings
tried, e.g. 0.109 -> 0.116 at 15 leaves; rack-level effects still reach the model
through the rack-peer deviation features."""

MAX_THREADS = 4
"""LightGBM threads of the failure model at most: its fits (a few hundred thousand rows)
and scoring (10,000 nodes x 3 horizons) gain little beyond this."""


def default_threads(environ: Mapping[str, str] | None = None) -> int:
    """The failure model's LightGBM threads: OpenMP's thread count, at most
    :data:`MAX_THREADS`. That count is ``OMP_NUM_THREADS`` where it is a positive whole
    number (its first entry where it lists one per nesting level): in the manifests the
    container's CPU request, on the CLI the cgroup's CPU limit
    (``predops.pipelines.cli.support.lightgbm_env``). Else the CPUs this process may run
    on. A ``num_threads`` given to LightGBM overrides ``OMP_NUM_THREADS``, so the model
    has to read it: counting the node's CPUs alone gave a pod that requested 2 CPUs on a
    large node 4 threads."""
    env = os.environ if environ is None else environ
    first = env.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    if first.isdigit() and int(first) > 0:
        return min(MAX_THREADS, int(first))
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(MAX_THREADS, cpus or 1))


MODEL_PARAMS: dict[str, Any] = {
    "learning_rate": 0.02,
    "n_estimators": 600,
    "early_stopping_rounds": 200,
    "min_child_samples": 200,
    "reg_lambda": 10.0,
    "feature_fraction": 0.3,
    "num_leaves": 15,
    "negative_rate": 0.2,
    "calibration": "sigmoid",
    "n_jobs": default_threads(),
}
"""Chosen on the simulated fleet's time-later validation slice (never its test period).
``n_jobs`` is read when this module is first imported: the CLI sets ``OMP_NUM_THREADS``
before any command imports a model. At most 600 rounds bounds scoring cost (10,000
nodes x 3 horizons in about a second on 2 cores); early stopping on the 2,000-node fleet
stopped at 147-415 rounds anyway."""

DRIVE_PARAMS: dict[str, Any] = {**MODEL_PARAMS, "n_estimators": 3000}
"""Backblaze drives (evaluation only, never served): the node settings with room for
more boosting rounds, since scoring latency does not bind here. Early stopping ends far
below the cap (validation windows inside training: hds 694 rounds on the time cut and
247 on the cohort cut, daily 187; the evaluation's own fits: hds 681 and 521, daily
425). Each source's own settings go on top
(``predops.pipelines.jobs.evaluation.DRIVE_SOURCE_PARAMS``)."""


def node_model_defs(spec: NodeFeatureSpec | None = None) -> list[FeatureDef]:
    """The node features the model reads: the node feature set (of ``spec``, default
    the production spec) minus the excluded ids."""
    return [d for d in node_feature_set(spec).defs if d.name not in EXCLUDED_FEATURES]
