"""The measured demand handed to the engine with the forecasts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl

from predops.pipelines.whatif.forecasts import observed
from predops.policy.anchoring import OBSERVED, measurements

H = timedelta(hours=1)
T0 = datetime(2026, 3, 1, 12, tzinfo=UTC)


def demand(hours: int) -> pl.DataFrame:
    ts = [T0 + (k - hours + 3) * H for k in range(hours)]  # runs 2 h past T0
    return pl.DataFrame(
        {"series_id": "p/cpu_cores", "ts": ts, "value": [float(k) for k in range(hours)]}
    ).cast({"ts": pl.Datetime("us", "UTC")})


def test_observed_now_only_by_default() -> None:
    [f] = observed(demand(30), T0)
    assert (f.issued_at, f.valid_at, f.method) == (T0, T0, OBSERVED)
    assert f.p10 == f.p50 == f.p90 == 27.0


def test_observed_history_is_issued_at_its_own_time_and_never_ahead() -> None:
    rows = observed(demand(30), T0, timedelta(hours=5))
    assert [f.valid_at for f in rows] == [T0 - k * H for k in range(5, -1, -1)]
    assert all(f.issued_at == f.valid_at and f.method == OBSERVED for f in rows)
    assert [f.p50 for f in rows] == [22.0, 23.0, 24.0, 25.0, 26.0, 27.0]
    # what the sizing reads back: the same values, keyed by time
    assert measurements(rows, T0, timedelta(hours=5)) == {
        "p/cpu_cores": {f.valid_at: f.p50 for f in rows}
    }
