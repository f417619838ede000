"""Screenshots of every dashboard page at the demo's fleet size and at fleet scale.

    python -m benchmarks.dashboard_screenshots [--nodes 10000] [--peer-nodes 200]

Serves the cached workspaces of :mod:`benchmarks.bench_dashboards` (built when missing,
same parameters, same cache) with ``predops serve``, loads each of its pages in Debian's
Chromium through Playwright (as the browser tests do: never a downloaded browser) at
1366 x 768, waits until the network is idle, and writes a full-page PNG per page to
``test-artifacts/screenshots/<demo|fleet>/<page>.png`` (git-ignored). Prints one JSON
object: per size and page, the file, the HTTP status, the load seconds, the page's
height in pixels and any script errors.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.bench_dashboards import cached, pages, period_end, served
from benchmarks.bench_serving import ROOT
from tests.serving.browser.conftest import CHROMIUM, CHROMIUM_ARGS

OUT = ROOT / "test-artifacts" / "screenshots"


def _file_name(label: str) -> str:
    name = re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_")
    return f"{name or 'fleet_risk'}.png"


def shoot(browser: Any, port: int, ws: Path, out: Path) -> dict[str, Any]:
    """Every page of the server on ``port`` as a PNG under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    shots: dict[str, Any] = {}
    for label, path in pages(port, ws):
        ctx = browser.new_context(viewport={"width": 1366, "height": 768})
        page = ctx.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
        try:
            t0 = time.perf_counter()
            response = page.goto(f"http://127.0.0.1:{port}{path}", timeout=120_000)
            page.wait_for_load_state("networkidle", timeout=120_000)
            seconds = time.perf_counter() - t0
            target = out / _file_name(label)
            page.screenshot(path=str(target), full_page=True)
            shots[label] = {
                "path": path,
                "file": str(target.relative_to(ROOT)),
                "status": response.status if response else None,
                "load_s": round(seconds, 2),
                "height_px": page.evaluate("document.documentElement.scrollHeight"),
                "script_errors": errors,
            }
        finally:
            ctx.close()
    return shots


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--peer-nodes", type=int, default=200)
    ap.add_argument("--days", type=float, default=3.0)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--cache", type=Path, default=ROOT / ".predops" / "bench-cache" / "dashboards")
    args = ap.parse_args()
    if not CHROMIUM.exists():
        raise SystemExit(f"{CHROMIUM} is missing: run scripts/system-deps.sh")
    from playwright.sync_api import sync_playwright

    end = period_end(datetime.now(UTC))
    report: dict[str, Any] = {}
    with sync_playwright() as p:
        exe = str(CHROMIUM)
        browser = p.chromium.launch(executable_path=exe, headless=True, args=CHROMIUM_ARGS)
        try:
            for name, n in (("demo", args.peer_nodes), ("fleet", args.nodes)):
                base = cached(args.cache, n, args.days, args.seed, end)
                with served(base) as (port, _pid, ws):
                    report[name] = {"nodes": n, "pages": shoot(browser, port, ws, OUT / name)}
        finally:
            browser.close()
    print(json.dumps(report, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
