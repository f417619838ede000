"""/v1/demand/forecast: the champion's forecasts (as ``demand_jobs.forecast`` gives them),
filtered by series, horizon and quantile; unknown series are a 404."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from predops.pipelines.jobs import demand as demand_jobs
from tests.serving.api import make_app
from tests.serving.conftest import settings_for


def test_forecast_equals_the_champions(served_workspace: Path, shared_data: Path) -> None:
    want = demand_jobs.forecast(settings_for(served_workspace, shared_data))
    by_key = {(f["series_id"], f["valid_at"]): f for f in want["forecasts"]}
    series = sorted({f["series_id"] for f in want["forecasts"]})
    with TestClient(make_app(served_workspace, shared_data)) as c:
        everything = c.post("/v1/demand/forecast", json={}).json()
        assert sorted(s["series_id"] for s in everything["series"]) == series
        assert everything["model"]["model_version"] == want["version"]
        # The served combination says how: its windows, and each series' weights as
        # the forecast report gives them (both fresh loads of the same version).
        sel = everything["selection"]
        assert sel is not None and sel["candidates"] == want["selection"]["candidates"]
        assert sel["window_origins"] and all(
            o < sel["data_cutoff"] for o in sel["window_origins"]
        ), sel
        for s in everything["series"]:
            assert s["weights"] == want["selection"]["series"][s["series_id"]]["weights"]
            for w in s["weights"].values():
                assert abs(sum(w.values()) - 1) < 1e-3, (s["series_id"], w)
        r = c.post(
            "/v1/demand/forecast",
            json={"series_ids": series[:1], "horizons": [1, 3], "quantiles": ["p50", "p90"]},
        )
        assert r.status_code == 200, r.text
        (one,) = r.json()["series"]
        assert [p["horizon"] for p in one["points"]] == [1, 3]
        for p in one["points"]:
            f = by_key[(series[0], p["valid_at"].replace("Z", "+00:00"))]
            assert p["quantiles"] == {"p50": f["p50"], "p90": f["p90"]}
        assert c.post("/v1/demand/forecast", json={"series_ids": ["nope"]}).status_code == 404
        surrogate = c.post(
            "/v1/demand/forecast",
            content=rb'{"series_ids": ["\ud800"]}',
            headers={"Content-Type": "application/json"},
        )
        assert surrogate.status_code == 422, surrogate.text
        assert surrogate.json()["field"].startswith("body.series_ids.0")
        bad = c.post("/v1/demand/forecast", json={"horizons": [10_000]})
        assert bad.status_code == 422 and bad.json()["field"] == "body.horizons.0"
        bad = c.post("/v1/demand/forecast", json={"quantiles": ["p42"]})
        assert bad.status_code == 422 and bad.json()["field"].startswith("body.quantiles")


def test_a_model_that_cannot_forecast_the_lake_is_a_503_not_a_500(
    served_workspace: Path, shared_data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A champion trained on other features than the lake's (here: its predict raising as
    LightGBM does on a feature-count mismatch) is reported, with the version, as 503."""
    from lightgbm.basic import LightGBMError

    def mismatch(*args: object, **kwargs: object) -> None:
        raise LightGBMError("The number of features in data (40) is not the same as it was")

    monkeypatch.setattr(demand_jobs, "forecast", mismatch)
    with TestClient(make_app(served_workspace, shared_data)) as c:
        r = c.post("/v1/demand/forecast", json={})
        assert r.status_code == 503, r.text
        assert "cannot forecast" in r.json()["error"] and "retrain" in r.json()["error"]
        index = c.get("/demand").text
        series = re.search(r'href="(/demand/[^"]+)"', index)
        assert series is not None, index
        page = c.get(html.unescape(series.group(1)))
        assert page.status_code == 200 and "cannot forecast" in page.text
