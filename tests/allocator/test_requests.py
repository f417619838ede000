"""Pod requests: the three GPU shapes, batches from pods-contract frames."""

from __future__ import annotations

from datetime import UTC, datetime

import polars as pl
import pytest

from predops.allocator.requests import PodBatch, PodRequest, parse_gpu_spec
from predops.core.schemas import PODS


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_gpu": 0, "gpu_milli": 300}, "without num_gpu"),
        ({"num_gpu": 1, "gpu_milli": 0}, "must be in 1..1000"),
        ({"num_gpu": 2, "gpu_milli": 500}, "needs num_gpu 1"),
        ({"cpu_milli": -1}, ">= 0"),
    ],
)
def test_bad_requests_name_the_pod(kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=f"pod 'p'.*{message}"):
        PodRequest("p", **kwargs)  # type: ignore[arg-type]


def test_shapes() -> None:
    assert PodRequest("s", num_gpu=1, gpu_milli=250).is_share
    assert not PodRequest("w", num_gpu=4, gpu_milli=1000).is_share
    assert PodRequest("w", num_gpu=4, gpu_milli=1000).total_gpu_milli == 4000
    assert PodRequest("n", num_gpu=2, gpu_milli=1000, nvlink=True).constrained
    assert not PodRequest("n", num_gpu=1, gpu_milli=1000, nvlink=True).constrained
    assert parse_gpu_spec("A10| T4|") == frozenset({"A10", "T4"})
    assert parse_gpu_spec("") is None and parse_gpu_spec(None) is None


def _pods(rows: list[dict[str, object]]) -> pl.DataFrame:
    t = datetime(2026, 1, 1, tzinfo=UTC)
    base = {
        "created_at": t,
        "cpu_milli": 1000,
        "memory_mib": 10,
        "num_gpu": 1,
        "gpu_milli": 1000,
        "gpu_spec": None,
    }
    return pl.DataFrame([base | r for r in rows]).cast(
        {k: v for k, v in PODS.polars_schema().items() if k in base or k == "pod_id"}
    )


def test_batch_from_frame_and_back() -> None:
    frame = _pods(
        [{"pod_id": "a", "gpu_spec": "T4|A10"}, {"pod_id": "b", "num_gpu": 0, "gpu_milli": 1000}]
    )
    batch = PodBatch.from_frame(frame)
    assert len(batch) == 2 and batch.gpu_milli.tolist() == [1000, 0]
    assert batch.request(0).gpu_models == frozenset({"T4", "A10"})
    assert batch.request(1, "clone").pod_id == "clone"
    assert batch.total_gpu_milli.tolist() == [1000, 0]


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"pod_id": "x", "num_gpu": 2, "gpu_milli": 400}, r"row 2 \(pod 'x'\).*gpu_milli 400"),
        ({"pod_id": "y", "num_gpu": 1, "gpu_milli": 0}, r"row 2 \(pod 'y'\).*gpu_milli 0"),
        ({"pod_id": "z", "cpu_milli": -5}, "row 2: field cpu_milli is negative"),
    ],
)
def test_batch_errors_name_source_row_and_field(row: dict[str, object], message: str) -> None:
    frame = _pods([{"pod_id": "ok"}, row])
    with pytest.raises(ValueError, match=f"trace.csv {message}"):
        PodBatch.from_frame(frame, source="trace.csv")
    with pytest.raises(ValueError, match="lacks column"):
        PodBatch.from_frame(frame.drop("num_gpu"))
