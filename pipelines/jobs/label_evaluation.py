"""How good the labeller's labels are on the synthetic fleet, whose failures are known.

The simulator writes its ground truth as ``failure`` / ``repair`` events. The labeller
gets everything else a real cluster would record: telemetry (``node_ready`` false while
a node is down, DBE and XID counters) and the other events (maintenance sequences,
kubelet NotReady flaps). A label matches a true failure of the same node within
``tolerance`` either way (default 30 min), one to one
(:func:`predops.features.labelled_events.match_failures`).

- **per rule**: the rule's own candidates that no planned window shields, before
  merging, against every true failure (``gpu_xid_counter`` never labels on its own: its
  row shows why);
- **overall**: the merged failures; with how many matched failures get a cause other
  than ``unknown`` and how often that cause is the true one, and the repair-time error;
- **misses**: true failures the labels miss, and how many of them were down for less
  than the grace period (no Ready-based rule can see those);
- **variants**: the grace period swept, and DBE increases labelling on their own.

The simulator emits no node-problem reports, no XID codes and no tickets, so those rules
are measured on hand-built timelines only (``tests/features/test_labeller.py``).
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from dataclasses import replace
from datetime import timedelta
from typing import Any

import polars as pl

from predops.features.label_rules import RULES, LabelRules
from predops.features.labelled_events import failures_frame, match_failures
from predops.features.labeller import LabelResult, label_nodes
from predops.pipelines.synthetic.run import SOURCE, SimConfig, build

TOLERANCE = timedelta(minutes=30)
GRACE_SWEEP = tuple(timedelta(minutes=m) for m in (5, 10, 15, 20, 30))


def _overall(res: LabelResult, truth: pl.DataFrame, tolerance: timedelta) -> dict[str, Any]:
    labels = failures_frame(res.failures)
    m = match_failures(labels, truth, tolerance)
    out = m.to_dict()
    named = [(i, j) for i, j in m.pairs if labels["cause"][i] != "unknown"]
    right = [labels["cause"][i] == truth["cause"][j] for i, j in named]
    out["cause_named"] = round(len(named) / len(m.pairs), 4) if m.pairs else None
    out["cause_right_when_named"] = round(sum(right) / len(right), 4) if right else None
    errs = [
        abs((labels["repaired_at"][i] - truth["repaired_at"][j]).total_seconds()) / 60
        for i, j in m.pairs
        if labels["repaired_at"][i] is not None and truth["repaired_at"][j] is not None
    ]
    out["repair_error_median_min"] = round(statistics.median(errs), 1) if errs else None
    out["repairs_labelled"] = len(errs)
    return out


def _truth(sim_events: pl.DataFrame) -> pl.DataFrame:
    """True failures with their repairs (node_id, at, cause, repaired_at)."""
    f = sim_events.filter(pl.col("kind") == "failure").select("node_id", "at", "cause")
    r = (
        sim_events.filter(pl.col("kind") == "repair")
        .select("node_id", pl.col("at").alias("repaired_at"))
        .sort("repaired_at")
    )
    return f.sort("at").join_asof(
        r,
        left_on="at",
        right_on="repaired_at",
        by="node_id",
        strategy="forward",
        check_sortedness=False,
    )


def evaluate(
    cfg: SimConfig,
    *,
    rules: LabelRules | None = None,
    tolerance: timedelta = TOLERANCE,
    variants: bool = True,
) -> dict[str, Any]:
    """Precision and recall of the labels on one simulated fleet (see the docstring)."""
    rules = rules or LabelRules()
    t0 = time.perf_counter()
    sim = build(cfg)
    events = sim.events().with_columns(pl.lit(SOURCE).alias("source"))
    truth = _truth(events)
    raw = events.filter(~pl.col("kind").is_in(["failure", "repair"])).lazy()
    tel = sim.telemetry().lazy()
    res = label_nodes(tel, raw, rules)
    cands = res.candidates_frame()
    per_rule = {}
    for rule in RULES:
        mine = cands.filter((pl.col("rule") == rule) & pl.col("shielded_by").is_null())
        row = match_failures(mine, truth, tolerance).to_dict()
        row["shielded"] = cands.filter(
            (pl.col("rule") == rule) & pl.col("shielded_by").is_not_null()
        ).height
        per_rule[rule] = row
    overall = _overall(res, truth, tolerance)
    matched = {j for _, j in match_failures(failures_frame(res.failures), truth, tolerance).pairs}
    prev = pl.col("at").shift(1).over("node_id", order_by="at")
    missed = (
        truth.with_row_index("__j")
        .with_columns((pl.col("at") - prev <= rules.dedup_window).fill_null(False).alias("__near"))
        .filter(~pl.col("__j").is_in(list(matched)))
    )
    lasted = pl.col("repaired_at") - pl.col("at")
    reasons = {  # why a true failure was missed (a miss may have several)
        "down_shorter_than_grace": missed.filter(lasted < rules.grace).height,
        "within_grace_of_the_run_end": missed.filter(
            pl.col("at") > pl.lit(cfg.end - cfg.interval) - rules.grace  # the last sample
        ).height,
        "within_dedup_window_of_the_previous": missed.filter(pl.col("__near")).height,
    }
    out: dict[str, Any] = {
        "fleet": {
            "nodes": cfg.nodes,
            "days": cfg.days,
            "interval_s": cfg.step_s,
            "seed": cfg.seed,
            "start": cfg.start.isoformat(),
        },
        "tolerance_min": tolerance.total_seconds() / 60,
        "rules": rules.to_dict(),
        "true_failures": truth.height,
        "true_failures_by_cause": dict(sorted(Counter(truth["cause"].to_list()).items())),
        "overall": overall,
        "per_rule": per_rule,
        "missed": {"count": missed.height, **reasons},
    }
    if variants:
        sweep = {}
        for g in GRACE_SWEEP:
            r = label_nodes(tel, raw, replace(rules, grace=g))
            sweep[f"{g.total_seconds() / 60:g}m"] = match_failures(
                failures_frame(r.failures), truth, tolerance
            ).to_dict()
        alone = not rules.dbe_labels_alone
        r = label_nodes(tel, raw, replace(rules, dbe_labels_alone=alone))
        out["variants"] = {
            "grace": sweep,
            f"dbe_labels_alone_{str(alone).lower()}": _overall(r, truth, tolerance),
        }
    out["seconds"] = round(time.perf_counter() - t0, 2)
    return out
