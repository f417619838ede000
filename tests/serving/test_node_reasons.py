"""The node page explains a risk by what raises it: positive contributions first, largest
first; risk-lowering features apart; fewer raising ones than asked said plainly."""

from __future__ import annotations

import pytest

from predops.core.contracts import Reason
from predops.serving.dashboards.why import SHOWN, split


def _r(name: str, c: float) -> Reason:
    return Reason(name, c, f"{name} ({'raises' if c > 0 else 'lowers'} risk)")


def test_raising_reasons_lead_largest_first_lowering_apart() -> None:
    why = split(
        (_r("a", -0.9), _r("b", 0.2), _r("c", -0.5), _r("d", 0.7), _r("e", 0.1), _r("f", 0.3))
    )
    assert [r.feature for r in why.raising] == ["d", "f", "b"]
    assert [r.feature for r in why.lowering] == ["a", "c"]
    assert why.raising_total == 4 and why.note is None


@pytest.mark.parametrize(
    ("raising", "words"),
    [(0, "No feature raises"), (1, "Only 1 feature raises"), (2, "Only 2 features raise")],
)
def test_fewer_raising_reasons_than_shown_are_said_plainly(raising: int, words: str) -> None:
    reasons = tuple(_r(f"up{i}", 0.1 * (i + 1)) for i in range(raising))
    why = split((*reasons, _r("x", -1.2), _r("y", -0.8), _r("z", -0.6)))
    assert len(why.raising) == raising < SHOWN
    assert why.note is not None and why.note.startswith(words)
    assert [r.feature for r in why.lowering] == ["x", "y", "z"]  # shown, but not as "why"


def test_counts_print_with_thousands_separators() -> None:
    import numpy as np

    from predops.serving.dashboards.formatting import num

    assert num(10_000) == "10,000" and num(np.int64(10_003)) == "10,003"
    assert num(1234.5) == "1,234.5" and num(24.0, 0) == "24" and num(None) == "—"
    assert num(True) == "True" and num("n/a") == "n/a"


def test_the_board_cell_says_briefly_when_few_features_raise_the_risk() -> None:
    assert split((_r("a", 0.4), _r("b", 0.3), _r("c", 0.2))).brief is None
    assert split((_r("a", 0.4), _r("x", -1.0))).brief == "only 1 feature raises it"
    none = split((_r("x", -1.0),)).brief
    assert none is not None and none.startswith("no feature raises its risk")
