"""A real uvicorn server over the served workspace and Debian's Chromium driven by
Playwright — never a downloaded browser."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from predops.core.clock import FixedClock
from predops.pipelines.workspace.lake import Lake
from predops.serving.app import create_app
from predops.serving.config import ApiToken, ServeConfig, token_digest
from tests.serving.conftest import settings_for

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
APPROVER_SECRET = "approver-secret-for-browser-tests"
OPERATOR_SECRET = "operator-secret-for-browser-tests"
VIEWER_SECRET = "viewer-secret-for-browser-tests"
REPO = Path(__file__).resolve().parents[3]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _app(served_workspace: Path, shared_data: Path, config: ServeConfig) -> Any:
    """The app with its clock just after the fleet's last telemetry sample (so the
    online features are fresh)."""
    settings = settings_for(served_workspace, shared_data)
    end = Lake(settings.lake_dir).scan("telemetry").select(pl.col("ts").max()).collect().item()
    return create_app(
        settings, config, clock=FixedClock(end + timedelta(minutes=5)), reload_in_background=False
    )


@contextmanager
def _serving(app: Any) -> Iterator[str]:
    """Base URL of a uvicorn server running ``app`` on 127.0.0.1 (in a thread)."""
    import uvicorn

    port = _free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, name="dashboard-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 120
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the dashboard server did not start")
        time.sleep(0.1)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@contextmanager
def browser_page(browser: Any, base_url: str) -> Iterator[tuple[Any, Any, list[str]]]:
    """A fresh context and page (1366x768) on ``base_url``, and the page's script errors."""
    ctx = browser.new_context(viewport={"width": 1366, "height": 768}, base_url=base_url)
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        yield ctx, page, errors
    finally:
        ctx.close()


@pytest.fixture(scope="module")
def dashboard_url(served_workspace: Path, shared_data: Path) -> Iterator[str]:
    """A server with open reads, one approver and one operator token (apply: dry-run)."""
    config = ServeConfig(
        tokens=(
            ApiToken("browser-test", "approver", token_digest(APPROVER_SECRET)),
            ApiToken("browser-operator", "operator", token_digest(OPERATOR_SECRET)),
        )
    )
    with _serving(_app(served_workspace, shared_data, config)) as url:
        yield url


@pytest.fixture(scope="module")
def protected_url(served_workspace: Path, shared_data: Path) -> Iterator[str]:
    """A server with ``protect_reads`` on and one viewer token."""
    config = ServeConfig(
        tokens=(ApiToken("browser-viewer", "viewer", token_digest(VIEWER_SECRET)),),
        protect_reads=True,
    )
    with _serving(_app(served_workspace, shared_data, config)) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: run scripts/system-deps.sh (Debian package chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="module")
def artifacts() -> Path:
    """Screenshots go to ``test-artifacts/browser`` in the repository (git-ignored)."""
    out = REPO / "test-artifacts" / "browser"
    out.mkdir(parents=True, exist_ok=True)
    print(f"\nbrowser screenshots: {out}")
    return out
