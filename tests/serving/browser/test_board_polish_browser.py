"""The risk board and node page as drawn in Chromium: the colour bar's labels do not
overlap on screen, every listed in-service node has reasons, counts carry thousands
separators, and the node page explains a risk by what raises it. Screenshots go to
``test-artifacts/browser``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.serving.browser.conftest import browser_page

pytestmark = pytest.mark.integration

BAR_LABELS = """() => Array.from(document.querySelectorAll('#rack-heatmap .colorbar text'))
  .filter(t => t.textContent.trim() && !t.closest('.cbtitle'))
  .map(t => { const b = t.getBoundingClientRect();
              return {text: t.textContent, top: b.top, bottom: b.bottom, left: b.left,
                      right: b.right}; })"""


@pytest.fixture
def page(browser: Any, dashboard_url: str) -> Iterator[Any]:
    with browser_page(browser, dashboard_url) as (_ctx, pg, errors):
        pg.errors = errors
        yield pg


def test_colour_bar_labels_do_not_overlap_on_screen(page: Any, artifacts: Path) -> None:
    page.goto("/")
    page.wait_for_load_state("networkidle")
    page.locator("#rack-heatmap").screenshot(path=str(artifacts / "fleet_colour_bar.png"))
    labels = page.evaluate(BAR_LABELS)
    texts = [x["text"] for x in labels]
    assert any(t.startswith("fleet mean") for t in texts), texts
    assert len(labels) >= 3, texts
    for i, a in enumerate(labels):
        for b in labels[i + 1 :]:
            apart = a["bottom"] <= b["top"] or b["bottom"] <= a["top"]
            beside = a["right"] <= b["left"] or b["right"] <= a["left"]
            assert apart or beside, (a, b)
    assert page.errors == []


def test_board_rows_all_have_reasons_and_counts_read_as_numbers(page: Any, artifacts: Path) -> None:
    page.goto("/")
    page.wait_for_load_state("networkidle")
    page.screenshot(path=str(artifacts / "fleet_reasons.png"), full_page=True)
    rows = page.locator("#top-nodes tbody tr")
    assert rows.count() == 25
    for k in range(rows.count()):
        assert rows.nth(k).locator("ul.reasons li").count() >= 1, rows.nth(k).inner_text()
    assert "lowers risk" not in page.locator("#top-nodes").inner_text()
    lede = page.locator("p.lede").inner_text()
    assert re.search(r"\b(\d{1,3}(,\d{3})*) of (\d{1,3}(,\d{3})*) nodes scored", lede), lede


def test_node_page_reasons_raise_the_risk(page: Any, artifacts: Path) -> None:
    page.goto("/")
    node_id = page.locator("#top-nodes tbody tr a").first.inner_text()
    page.goto(f"/nodes/{node_id}")
    page.wait_for_load_state("networkidle")
    page.screenshot(path=str(artifacts / "node_reasons.png"), full_page=True)
    raising = page.locator("#node-reasons li").all_inner_texts()
    note = page.locator("#reasons-note").all_inner_texts()
    assert raising or note, "the node page gives no reason and does not say why"
    assert all("raises risk" in t for t in raising), raising
    assert not [t for t in raising if "lowers risk" in t]
    assert (len(raising) < 3) == bool(note), (raising, note)
    lowering = page.locator("#node-lowering li").all_inner_texts()
    assert all("lowers risk" in t for t in lowering), lowering
    facts = page.locator(".facts").inner_text()
    assert re.search(r"\(#\d[\d,]* of \d{1,3}(,\d{3})*\)", facts), facts
    assert page.errors == []
