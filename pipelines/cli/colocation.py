"""``predops eval colocation``: capacity reclaimed for batch work against violations.

``predops eval colocation --source azure-vm|synthetic [--path P] --json``: per planning
round, each node lends ``allocatable - peak estimate`` (never above what is unused);
the per-node usage forecaster against Koordinator-, N-sigma-, Crane- and trailing-max
rules, as curves of reclaimed capacity over violation rate, with knobs chosen on a
validation window before the test window (see
:mod:`predops.pipelines.jobs.colocation_evaluation`).
"""

from __future__ import annotations

from typing import Any

import click

from predops.pipelines.cli.support import emit, finite_json, json_option, lightgbm_env, reports


def _human(r: dict[str, Any]) -> str:
    lines = [f"{r['source']}: reclaimed share of allocatable at each violation rate (test)"]
    for name, m in r["test"].items():
        at = "  ".join(f"{k}: {v['reclaimed_share']:.4f}" for k, v in m["at"].items())
        lines.append(f"  {name:13s} {at}   {m['settings']}")
    o = r["oracle"]
    lines.append(f"  {'oracle':13s} {o['reclaimed_share']:.4f} at 0 violations (round peak known)")
    bound = "  ".join(f"{k}: {v:.4f}" for k, v in o["bound_at"].items())
    lines.append(f"  {'bound':13s} {bound}   (the most any once-per-round rule reclaims)")
    for k, c in r["comparison"].items():
        ratio = "n/a" if c["ratio"] is None else f"{c['ratio']:.3f}"
        lines.append(
            f"  at {k}: predops / {c['best_baseline']} = {ratio}  (bound: {c['bound_ratio']:.3f})"
        )
    lines.append(f"bar met: {r['bar']['met']}  (reachable at all: {r['bar']['reachable']})")
    return "\n".join(lines)


def _hours(text: str) -> tuple[float, ...]:
    try:
        out = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise click.BadParameter(f"{text!r}: hours separated by commas") from None
    if not out or any(not 0 < h <= 24 for h in out):
        raise click.BadParameter(f"{text!r}: each window in (0, 24] hours")
    return out


def _targets(text: str) -> tuple[str, ...]:
    out = tuple(v.strip() for v in text.split(",") if v.strip())
    if not out or any(v not in ("peak", "step") for v in out):
        raise click.BadParameter(f"{text!r}: peak and / or step, separated by commas")
    return out


@click.command("colocation")
@click.option("--source", type=click.Choice(("azure-vm", "synthetic")), required=True)
@click.option("--path", default=None, help="azure-vm: the folder (or one file) of the trace.")
@click.option(
    "--usage",
    type=click.Choice(("avg", "max")),
    default="avg",
    show_default=True,
    help="azure-vm: the 5-minute statistic that is the online usage.",
)
@click.option("--subset", type=click.IntRange(1), default=None, help="VMs per family (seeded).")
@click.option("--subset-seed", type=int, default=0, show_default=True)
@click.option("--nodes", type=click.IntRange(1), default=100, show_default=True)
@click.option("--days", type=click.FloatRange(min=4), default=21, show_default=True)
@click.option("--seed", type=int, default=7, show_default=True, help="synthetic fleet seed")
@click.option("--test-days", type=click.FloatRange(min=0.5), default=4, show_default=True)
@click.option("--val-days", type=click.FloatRange(min=0.5), default=4, show_default=True)
@click.option(
    "--windows",
    default="1,2,4",
    show_default=True,
    help="Forecast windows (hours) tried on the validation window.",
)
@click.option(
    "--targets",
    default="peak",
    show_default=True,
    help="Forecaster targets tried on the validation window (peak, step).",
)
@click.option("--n-estimators", type=click.IntRange(1), default=150, show_default=True)
@click.option("--threads", type=click.IntRange(1), default=2, show_default=True)
@json_option
@reports
def eval_colocation(
    source: str,
    path: str | None,
    usage: str,
    subset: int | None,
    subset_seed: int,
    nodes: int,
    days: float,
    seed: int,
    test_days: float,
    val_days: float,
    windows: str,
    targets: str,
    n_estimators: int,
    threads: int,
    as_json: bool,
) -> None:
    """Reclaimed capacity vs violation rate: predops' usage forecasts vs the rules."""
    lightgbm_env()
    from predops.pipelines.cli.progress import stages
    from predops.pipelines.jobs import colocation_evaluation as ce

    if source == "azure-vm" and not path:
        raise click.BadParameter("--path is required for azure-vm", param_hint="--path")
    if source != "azure-vm" and path:
        raise click.BadParameter("synthetic simulates its fleet; no --path", param_hint="--path")
    with stages(f"[eval colocation] {source}", ("read", "evaluate")) as stage:
        stage(f"read {source}" if path else "simulate the fleet")
        if path:
            fleet = ce.load_azure(path, subset=subset, seed=subset_seed, usage=usage)
        else:
            fleet = ce.load_synthetic(nodes=nodes, days=days, seed=seed)
        stage("fit usage forecasts, score the rules")
        report = ce.evaluate_colocation(
            fleet,
            test_days=test_days,
            val_days=val_days,
            windows_h=_hours(windows),
            targets=_targets(targets),
            model_params={"n_estimators": n_estimators, "n_jobs": threads},
        )
    emit(finite_json({"source": source, "path": path, **report}), as_json, _human)
