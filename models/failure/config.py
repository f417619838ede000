"""What defines the node failure model: its training strategy, parameters and features.

Every trainer of the model reads these: the production job
(:mod:`predops.pipelines.jobs.failure`), the evaluations
(:mod:`predops.pipelines.jobs.evaluation`), the what-if loop's retrains
(:mod:`predops.pipelines.whatif.risk`) and the benchmarks.
"""

from __future__ import annotations

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
    "n_jobs": 0,
}
"""Chosen on the simulated fleet's time-later validation slice (never its test period).
``n_jobs`` 0: OpenMP's thread count, that is ``OMP_NUM_THREADS`` where set (in the
manifests the container's CPU request, on the CLI the cgroup's CPU limit:
``predops.pipelines.cli.support.lightgbm_env``), else every CPU, as the demand and usage
models run. A count of the model's own would override it: ``min(4, CPUs)`` gave a pod
that requested 2 CPUs on a large node 4 threads. At most 600 rounds bounds scoring cost
(10,000 nodes x 3 horizons in about a second on 2 cores); early stopping on the
2,000-node fleet stopped at 147-415 rounds anyway."""

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
