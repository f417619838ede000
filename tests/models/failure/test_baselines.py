"""The baselines: the reactive rule's score and the logistic regression's correction."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from predops.models.failure.baselines import LogisticBaseline, ReactiveRule, node_rule_columns
from tests.models.failure.factories import failure_rows


def test_rule_fires_on_any_condition_and_ranks_more_conditions_higher() -> None:
    cols = node_rule_columns()
    assert cols == (
        "xid_errors__increase_24h",
        "ecc_dbe__increase_24h",
        "disk_realloc__increase_24h",
        "not_ready__frac_24h",
    )
    frame = pl.DataFrame(
        {
            cols[0]: [0.0, 3.0, 1.0, None],
            cols[1]: [0.0, 0.0, 1.0, None],
            cols[2]: [0.0, 0.0, 0.0, None],
            cols[3]: [0.0, 0.0, 0.0, 0.2],
        }
    )
    rule = ReactiveRule(cols)
    s = rule.score(frame)
    assert list(rule.fires(frame)) == [False, True, True, True]
    assert s[0] == 0.0 and s[2] > s[1] > s[3] > 0  # two conditions beat one


def test_rule_names_missing_columns() -> None:
    with pytest.raises(ValueError, match="lacks columns"):
        ReactiveRule(["smart_5_raw__last"]).score(pl.DataFrame({"x": [1.0]}))


def test_logistic_baseline_probabilities_refer_to_the_real_base_rate() -> None:
    X, y, _ = failure_rows(np.random.default_rng(3), n=20000, base_rate=0.02)
    lr = LogisticBaseline(negative_rate=0.1).fit(X.iloc[:15000], y[:15000])
    p = lr.predict_proba(X.iloc[15000:])[:, 1]
    assert p.mean() == pytest.approx(y[15000:].mean(), rel=0.35)
