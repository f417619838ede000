"""The failure model's settings leave the thread count to OpenMP."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from predops.models.failure.classifier import NodeFailureClassifier
from predops.models.failure.config import DRIVE_PARAMS, MODEL_PARAMS
from tests.models.failure.factories import failure_rows
from tests.models.threads import predict_threads, train_threads


@pytest.mark.parametrize("params", [MODEL_PARAMS, DRIVE_PARAMS], ids=["node", "drive"])
def test_the_model_hands_lightgbm_no_thread_count_of_its_own(
    params: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # OMP_NUM_THREADS is the pod's CPU request (manifests) or the cgroup's CPU limit
    # (lightgbm_env). A num_threads above 0 overrides it: min(4, CPUs) gave a pod that
    # requested 2 CPUs on a large node 4 threads. Training and every prediction must
    # leave the count to OpenMP.
    trained = train_threads(monkeypatch)
    seen = predict_threads(monkeypatch)
    X, y, _ = failure_rows(np.random.default_rng(2), n=1200)
    fast = {"n_estimators": 20, "early_stopping_rounds": 5, "min_child_samples": 20}
    clf = NodeFailureClassifier(**{**params, **fast}).fit(X, y)
    clf.predict_proba(X)
    clf.contributions(X)
    assert trained and all(t == 0 for t in trained), trained
    assert seen and all(t == 0 for t in seen), seen
