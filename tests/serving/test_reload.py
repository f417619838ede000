"""Model reload under load on a real uvicorn server: the champion alias moves (promote,
then roll back) while clients score, and no request fails; with the registry unreachable
the server keeps the last good model and /readyz and /metrics say so."""

from __future__ import annotations

import socket
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from predops.pipelines.jobs import failure as failure_jobs
from predops.pipelines.workspace import registry
from tests.serving.api import make_app
from tests.serving.conftest import settings_for

CLIENTS = 4


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Running:
    """A uvicorn server for ``app`` in a thread on 127.0.0.1."""

    def __init__(self, app: Any) -> None:
        self.port = free_port()
        cfg = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(cfg)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            assert time.monotonic() < deadline, "server did not start"
            time.sleep(0.05)
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


class Load:
    """Clients scoring one node each in a loop until stopped; statuses and versions."""

    def __init__(self, url: str, node_ids: list[str]) -> None:
        self.url, self.node_ids = url, node_ids
        self.stop = threading.Event()
        self.statuses: Counter[int] = Counter()
        self.versions: Counter[str] = Counter()
        self.errors: list[str] = []
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.run, args=(i,)) for i in range(CLIENTS)]

    def run(self, i: int) -> None:
        with httpx.Client(base_url=self.url, timeout=30) as c:
            while not self.stop.is_set():
                body = {"node_ids": [self.node_ids[i % len(self.node_ids)]], "explain": 0}
                try:
                    r = c.post("/v1/failure/score", json=body)
                    version = r.json()["model"]["model_version"] if r.status_code == 200 else ""
                except (httpx.HTTPError, ValueError) as exc:
                    with self.lock:
                        self.errors.append(repr(exc))
                    continue
                with self.lock:
                    self.statuses[r.status_code] += 1
                    self.versions[version] += 1

    def __enter__(self) -> Load:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=30)

    def wait_for(self, n: int) -> None:
        deadline = time.monotonic() + 60
        start = sum(self.statuses.values())
        while sum(self.statuses.values()) < start + n:
            assert time.monotonic() < deadline
            time.sleep(0.02)


def prefer(version: str) -> Any:
    """A promotion backtest under which ``version`` wins (lower is better)."""
    return lambda uri: 0.0 if uri.endswith(f"/{version}") else 1.0


def test_alias_moves_under_load_without_failed_requests(
    served_workspace: Path, shared_data: Path
) -> None:
    settings = settings_for(served_workspace, shared_data)
    assert failure_jobs.train(settings, backtest_days=2)["version"] == "2"
    app = make_app(served_workspace, shared_data)
    ctx = app.state.ctx
    with Running(app) as url:
        nodes = httpx.get(f"{url}/v1/failure/risk?limit=8&reasons=false").json()["items"]
        with Load(url, [n["node_id"] for n in nodes]) as load:
            load.wait_for(50)
            moved = registry.promote("node_failure", prefer("2"), uri=settings.mlflow_uri)
            assert moved["promoted"], moved
            assert ctx.failure.refresh() is True
            ctx.warm()
            load.wait_for(50)
            registry.rollback("node_failure", uri=settings.mlflow_uri)
            ctx.refresh_models()
            load.wait_for(50)
        assert load.errors == []
        assert set(load.statuses) == {200}, load.statuses
        assert set(load.versions) == {"1", "2"}, load.versions
        assert ctx.failure.current.version == "1" and ctx.failure.reloads == 3
        metrics = httpx.get(f"{url}/metrics").text
        assert 'predops_model_info{model="node_failure",version="1"} 1.0' in metrics
        assert (
            'predops_http_requests_total{method="POST",route="/v1/failure/score",status="200"}'
            in metrics
        )
        assert "predops_online_features_age_seconds 60.0" in metrics
        assert 'predops_http_request_duration_seconds_bucket{le="0.005",method="POST"' in metrics


def test_unreachable_registry_keeps_the_last_good_model(
    served_workspace: Path, shared_data: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    app = make_app(served_workspace, shared_data)
    ctx = app.state.ctx
    with Running(app) as url:
        node = httpx.get(f"{url}/v1/failure/risk?limit=1").json()["items"][0]["node_id"]
        served = ctx.failure.current.version
        (tmp_path / "not-a-db").mkdir()
        monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'not-a-db'}")
        with Load(url, [node]) as load:
            ctx.refresh_models()
            load.wait_for(30)
        assert set(load.statuses) == {200} and set(load.versions) == {served}
        ready = httpx.get(f"{url}/readyz")
        assert ready.status_code == 200
        assert ready.json()["models"]["node_failure"]["last_error"]
        assert (
            'predops_model_registry_error{model="node_failure"} 1.0'
            in httpx.get(f"{url}/metrics").text
        )
