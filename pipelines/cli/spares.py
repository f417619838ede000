"""``predops eval spares``: spare-part stocking rules on real failure records.

``predops eval spares --source alibaba-ssd|lanl|olcf-disk --path P --json``: weekly
replacement demand per hardware group, the newsvendor rule on the forecast (budgeted:
at most what the fixed rule stocks in total, one service level for every group) vs a
fixed share of the installed base vs a constant-rate Poisson rule, simulated over the
last weeks of the trace with knobs chosen on the weeks before (see
:mod:`predops.pipelines.jobs.spares_evaluation`).
"""

from __future__ import annotations

from typing import Any

import click

from predops.pipelines.cli.support import emit, json_option, reports


def _human(r: dict[str, Any]) -> str:
    t = r["test"]
    lines = [
        f"{r['source']}: {t['groups']} groups, test {t['from']} .. {t['to']}, "
        f"lead {r['lead_weeks']} weeks, demand {t['demand']}, "
        f"budget (total level) {r['budget']['test_units']:.0f} units"
    ]
    for name, tot in t["totals"].items():
        lines.append(
            f"  {name:20s} stock-out weeks {tot['stock_out_weeks']:.0f}  "
            f"units short {tot['units_short']:.0f}  spares held {tot['spares_held_mean']:.1f}"
        )
    f = r["rules"]["forecast"]
    lines.append(
        f"forecast: service cap {f['service_level']:.10g}, half-life {f['half_life_weeks']:g} "
        f"weeks, {f['dispersion']} dispersion (chosen on {r['selection']['window']['from']} .. "
        f"{r['selection']['window']['to']})"
    )
    lines.append(f"bar met: {r['bar']['met']}")
    return "\n".join(lines)


@click.command("spares")
@click.option("--source", type=click.Choice(("alibaba-ssd", "lanl", "olcf-disk")), required=True)
@click.option("--path", required=True, help="The trace file or its folder.")
@click.option("--lead-weeks", type=click.IntRange(1), default=4, show_default=True)
@click.option(
    "--test-weeks",
    type=click.IntRange(1),
    default=None,
    help="Weeks at the end simulated (default 26 alibaba-ssd, 52 otherwise).",
)
@click.option("--fixed-share", type=click.FloatRange(0, 1), default=0.05, show_default=True)
@json_option
@reports
def eval_spares(
    source: str,
    path: str,
    lead_weeks: int,
    test_weeks: int | None,
    fixed_share: float,
    as_json: bool,
) -> None:
    """Forecast-newsvendor vs fixed vs Poisson spares on SOURCE failure records."""
    from predops.pipelines.cli.progress import stages
    from predops.pipelines.jobs.spares_evaluation import evaluate_spares

    with stages(f"[eval spares] {source}", ("read", "validation", "test")) as stage:
        report = evaluate_spares(
            source,
            path,
            lead_weeks=lead_weeks,
            test_weeks=test_weeks,
            fixed_share=fixed_share,
            stage=stage,
        )
    emit(report, as_json, _human)
