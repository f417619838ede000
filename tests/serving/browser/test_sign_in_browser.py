"""Signing in to a server that protects reads, in a real Chromium: a page asked for
without a session lands on the sign-in form, a wrong token is refused there, a viewer
token opens the page that was asked for (with its chart drawn), and signing out ends it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.serving.browser.conftest import VIEWER_SECRET, browser_page

pytestmark = pytest.mark.integration

HEATMAP_POINTS = """() => {
  const d = document.getElementById('rack-heatmap');
  if (!d || !d.data || !d.querySelector('svg.main-svg')) return 0;
  return d.data.map(t => (t.z || []).flat().filter(v => v !== null && Number.isFinite(v)).length)
    .reduce((a, b) => a + b, 0);
}"""


def test_sign_in_opens_the_asked_page_and_sign_out_ends_it(
    browser: Any, protected_url: str, artifacts: Path
) -> None:
    with browser_page(browser, protected_url) as (ctx, page, errors):
        page.goto("/")
        assert page.url.startswith(f"{protected_url}/login"), page.url
        page.fill("#token", "not-a-token")
        page.click("#sign-in")
        page.wait_for_selector("#login-error")
        assert "not valid" in page.locator("#login-error").inner_text()
        page.screenshot(path=str(artifacts / "sign_in_refused.png"), full_page=True)
        page.fill("#token", VIEWER_SECRET)
        page.click("#sign-in")
        page.wait_for_url(f"{protected_url}/")
        page.wait_for_load_state("networkidle")
        assert page.evaluate(HEATMAP_POINTS) > 0, "the risk board's heat map has no data"
        page.screenshot(path=str(artifacts / "signed_in_board.png"), full_page=True)
        cookies = {c["name"]: c for c in ctx.cookies()}
        assert cookies["predops_session"]["httpOnly"]
        assert page.evaluate("() => document.cookie") == ""  # scripts cannot read it
        page.click("nav.top form.signout button")
        page.wait_for_url(f"{protected_url}/login")
        page.goto("/models")
        assert page.url.startswith(f"{protected_url}/login"), page.url
        assert errors == [], errors
