"""The failure model's thread count follows OpenMP's, capped."""

from __future__ import annotations

import os

import pytest

from predops.models.failure.config import MAX_THREADS, default_threads


@pytest.mark.parametrize(
    ("value", "expected"),
    [("1", 1), ("2", 2), ("3", 3), ("64", MAX_THREADS), ("2,1", 2), (" 3 ", 3)],
)
def test_threads_follow_omp_num_threads_up_to_the_cap(value: str, expected: int) -> None:
    # A pod that requests 2 CPUs on a 64-core node gets OMP_NUM_THREADS=2 from the
    # manifests: the model must not count the node's CPUs instead.
    assert default_threads({"OMP_NUM_THREADS": value}) == expected


@pytest.mark.parametrize("value", ["", "0", "-2", "two", "1.5"])
def test_an_unusable_omp_num_threads_falls_back_to_the_cpus(value: str) -> None:
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    expected = max(1, min(MAX_THREADS, cpus or 1))
    assert default_threads({"OMP_NUM_THREADS": value}) == expected
    assert default_threads({}) == expected
