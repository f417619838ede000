"""``predops simulate-ops``: the closed-loop what-if from the command line."""

from __future__ import annotations

import json
from typing import Any

import click

from predops.pipelines.cli.support import emit, json_option, parse_duration, reports

POLICIES = ("reactive", "predictive", "oracle")
SIZING_VARIANTS = ("predictive-placeholders", "predictive-autoscaler", "predictive-static")
SIZING_EVERY_H = 1
SCENARIO_NAMES = ("xid-flood", "exporter-outage", "driver-rollout", "rack-power")
"""``pipelines.whatif.scenarios.SCENARIOS`` (not imported here: the CLI loads fast)."""


@click.command("simulate-ops")
@click.option("--nodes", type=click.IntRange(1), default=2000, show_default=True)
@click.option(
    "--days",
    type=click.FloatRange(min=0, min_open=True),
    default=60,
    show_default=True,
    help="Evaluated days (after the warm-up).",
)
@click.option(
    "--warmup-days",
    type=click.FloatRange(min=1),
    default=14,
    show_default=True,
    help="History simulated before the evaluation (the first models train on it).",
)
@click.option(
    "--policy",
    "policies",
    type=click.Choice([*POLICIES, *SIZING_VARIANTS, "all"]),
    multiple=True,
    help="Policy to run (repeatable). Default: the first three, paired on one world. "
    "predictive-placeholders / -autoscaler / -static: the predictive policy with its "
    "resizes acted on as placeholder pods a node autoscaler honours / not at all, the "
    "autoscaler alone / not at all, every node kept.",
)
@click.option("--seed", type=int, default=7, show_default=True)
@click.option(
    "--sizing-every",
    type=click.IntRange(1),
    default=SIZING_EVERY_H,
    show_default=True,
    help="Hours between the engine's pool-sizing rounds (the reactive autoscaler: 1).",
)
@click.option(
    "--soft-taint-p",
    type=click.FloatRange(min=0, max=1, min_open=True),
    default=None,
    help="Soft-taint (place last) nodes at or above this p_fail (predictive, oracle). "
    "Default: off.",
)
@click.option(
    "--autoscaler-lead",
    default="10m",
    show_default=True,
    help="The node autoscaler's provisioning delay (predictive-placeholders / -autoscaler).",
)
@click.option(
    "--labels",
    type=click.Choice(["today", "censoring", "oracle"]),
    default="oracle",
    show_default=True,
    help="What the predictive policy's weekly retrains learn from: today = a real "
    "cluster's failure records (a failure a drain averted leaves none); censoring = those "
    "and the drains' inspections (a fault found is the failure it prevented, an unknown "
    "outcome censors); oracle = the world's true failures, averted ones included.",
)
@click.option(
    "--inspection-find-rate",
    type=click.FloatRange(0, 1),
    default=0.7,
    show_default=True,
    help="Chance that the inspection of a drain that averted a failure finds the fault.",
)
@click.option(
    "--inspection-unknown-rate",
    type=click.FloatRange(0, 1),
    default=0.2,
    show_default=True,
    help="Chance that an inspection closes with no outcome recorded (censored).",
)
@click.option(
    "--seeds",
    default=None,
    help="Comma-separated seeds, e.g. 7,11,13: one world each (instead of --seed); "
    "the output has each seed's figures and the comparison of their sums (pooled).",
)
@click.option(
    "--jobs",
    type=click.IntRange(1),
    default=1,
    show_default=True,
    help="Processes running the (seed, policy) runs side by side (same figures).",
)
@click.option(
    "--pacing",
    type=click.Choice(["slow_start", "breaker"]),
    default="slow_start",
    show_default=True,
    help="How drains are paced against bursts: slow start per failure domain, or the "
    "former per-pool storm breaker.",
)
@click.option(
    "--scenario",
    "scenarios",
    type=click.Choice([*SCENARIO_NAMES, "all"]),
    multiple=True,
    help="Run a flood scenario instead (repeatable): each under both pacings on one "
    "world. Without --nodes / --days / --warmup-days: 300 nodes, 3 days after 1.",
)
@click.option("--engine", type=click.Choice(["local", "dask"]), default="local", show_default=True)
@click.option("--scheduler", default=None, help="Dask scheduler address, e.g. tcp://host:8786.")
@click.option(
    "--progress/--no-progress",
    default=True,
    show_default=True,
    help="A progress line per run on stderr (local engine).",
)
@click.option(
    "--sharing",
    is_flag=True,
    help="Instead of the policies: co-location on reclaimed capacity (predops' reclaim "
    "policy against a trailing-max rule and none) and tidal lending of whole nodes, on "
    "the world of --seed, knobs tuned on the world of --tune-seed (docs/whatif.md).",
)
@click.option("--tune-seed", type=int, default=None, help="With --sharing: the tuning world.")
@json_option
@reports
def simulate_ops_command(
    nodes: int,
    days: float,
    warmup_days: float,
    policies: tuple[str, ...],
    seed: int,
    sizing_every: int,
    soft_taint_p: float | None,
    autoscaler_lead: str,
    labels: str,
    inspection_find_rate: float,
    inspection_unknown_rate: float,
    pacing: str,
    scenarios: tuple[str, ...],
    seeds: str | None,
    jobs: int,
    engine: str,
    scheduler: str | None,
    progress: bool,
    sharing: bool,
    tune_seed: int | None,
    as_json: bool,
) -> None:
    """Replay a simulated fleet through a policy, hour by hour, and report what it cost:
    interrupted jobs, lost GPU-hours, drains (needless ones too), budget violations,
    capacity provisioned vs used, pending-pod and idle node-hours. With --scenario:
    a flood (an XID flood after one job crash, an exporter outage, a bad driver
    rollout, a rack power failure) under the storm breaker and slow-start pacing."""
    if scenarios:
        _scenarios(scenarios, nodes, days, warmup_days, seed, as_json)
        return
    from predops.pipelines.whatif.run import (
        OpsConfig,
        parse_policies,
        parse_seeds,
        seeds_report,
        simulate_seeds,
    )
    from predops.pipelines.whatif.world import WorldConfig

    if sharing:
        _sharing(nodes, days, warmup_days, seed, tune_seed, as_json)
        return
    cfg = OpsConfig(
        world=WorldConfig(nodes=nodes, days=days, seed=seed, warmup_days=warmup_days),
        policies=parse_policies(policies),
        sizing_every=sizing_every,
        soft_taint_p=soft_taint_p,
        autoscaler_lead=parse_duration(autoscaler_lead),
        labels=labels,
        inspection_find_rate=inspection_find_rate,
        inspection_unknown_rate=inspection_unknown_rate,
        pacing=pacing,
    )
    chosen = parse_seeds(seeds) if seeds else [seed]
    runs = simulate_seeds(
        cfg, chosen, jobs=jobs, engine=engine, scheduler=scheduler, progress=progress
    )
    if len(chosen) == 1:
        emit(runs[chosen[0]], as_json, _human)
    else:
        emit(seeds_report(runs), as_json, _human_seeds)


def _scenarios(
    names: tuple[str, ...], nodes: int, days: float, warmup: float, seed: int, as_json: bool
) -> None:
    from predops.pipelines.whatif.scenarios import SCENARIOS, ScenarioConfig, run_scenario

    ctx = click.get_current_context()

    def given(name: str, value: Any, default: Any) -> Any:
        explicit = ctx.get_parameter_source(name) is not click.core.ParameterSource.DEFAULT
        return value if explicit else default

    chosen = SCENARIOS if "all" in names else tuple(n for n in SCENARIOS if n in names)
    base = ScenarioConfig(chosen[0])
    try:
        cfgs = [
            ScenarioConfig(
                n,
                nodes=given("nodes", nodes, base.nodes),
                days=given("days", days, base.days),
                warmup_days=given("warmup_days", warmup, base.warmup_days),
                seed=seed,
            )
            for n in chosen
        ]
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    out = {"scenarios": {c.name: run_scenario(c) for c in cfgs}}
    emit(out, as_json, _human_scenarios)


def _human_scenarios(o: dict[str, Any]) -> str:
    parts = []
    for name, r in o["scenarios"].items():
        w = r["world"]
        lines = [
            f"{name}: {w['nodes']} nodes x {w['days']:g} days, seed {w['seed']}, onset "
            f"{w['onset_h']} h; {w['flagged_unfounded']} unfounded alarms, "
            f"{w['real_failures']} real failures",
            f"{'':<26}{'breaker':>12}{'slow_start':>12}",
        ]
        for k in r["pacing"]["breaker"]:
            vals = [r["pacing"][p][k] for p in ("breaker", "slow_start")]
            lines.append(f"{k:<26}" + "".join(f"{v!s:>12}" for v in vals))
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def _human(o: dict[str, Any]) -> str:
    keys = (
        "lost_gpu_hours",
        "interrupted_jobs",
        "drains",
        "drains_needless",
        "budget_violations",
        "pending_pod_hours",
        "idle_node_hours",
        "provisioned_node_hours",
    )
    lines = [f"{'':<26}" + "".join(f"{p:>14}" for p in o["policies"])]
    for k in keys:
        lines.append(f"{k:<26}" + "".join(f"{f[k]:>14}" for f in o["policies"].values()))
    lines.append(json.dumps(o["comparison"], indent=2))
    if o.get("sizing_comparison"):
        lines.append(json.dumps({"sizing": o["sizing_comparison"]}, indent=2))
    return "\n".join(lines)


def _human_seeds(o: dict[str, Any]) -> str:
    parts = [f"seed {s}\n{_human(r)}" for s, r in o["seeds"].items()]
    parts.append("pooled " + json.dumps(o["pooled"], indent=2))
    return "\n\n".join(parts)


def _sharing(
    nodes: int, days: float, warmup_days: float, seed: int, tune_seed: int | None, as_json: bool
) -> None:
    from predops.pipelines.whatif.sharing import sharing
    from predops.pipelines.whatif.world import WorldConfig, build_world

    if tune_seed is None or tune_seed == seed:
        raise click.UsageError("--sharing needs --tune-seed, a seed other than --seed")
    world = build_world(WorldConfig(nodes=nodes, days=days, seed=seed, warmup_days=warmup_days))
    tune = build_world(WorldConfig(nodes=nodes, days=days, seed=tune_seed, warmup_days=warmup_days))
    emit(sharing(world, tune), as_json, lambda o: json.dumps(o, indent=2))
