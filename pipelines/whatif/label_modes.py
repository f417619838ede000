"""The predictive policy under each label mode on one world (``predops simulate-ops
--label-modes``, ``benchmarks/bench_label_modes.py``).

The modes (:data:`~pipelines.whatif.labels.LABEL_MODES`) differ only in what the weekly
retrains learn from; the world (fleet, failures, telemetry, workload) and the node
features are the same, so the failure model's average precision at each retrain is
measured on the same rows against the same truth, and the loop's lost GPU-hours differ
only through the drains the models lead to.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from predops.pipelines.whatif.forecasts import ModelForecasts, loop_demand
from predops.pipelines.whatif.labels import LABEL_MODES
from predops.pipelines.whatif.loop import retrained_loop
from predops.pipelines.whatif.risk import Retrainer
from predops.pipelines.whatif.run import OpsConfig, Stopwatch, _figures, _loop_config, describe
from predops.pipelines.whatif.world import World, build_world


def label_modes(
    cfg: OpsConfig,
    modes: Sequence[str] = LABEL_MODES,
    *,
    world: World | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """The predictive policy once per label mode on one world, the node features
    computed once: per mode the failure model's average precision at each retrain
    (against the world's true failures, on the same rows for every mode) and the loop's
    figures. The first retrain precedes every drain, so it is the same in each mode;
    ``average_precision_mean`` is over the later ones."""
    bad = [m for m in modes if m not in LABEL_MODES]
    if bad or not modes:
        raise ValueError(f"modes must be among {LABEL_MODES}, got {list(modes)}")
    watch = Stopwatch()
    if world is None:
        with watch("world"):
            world = build_world(cfg.world)
    with watch("failure_features"):
        frame = Retrainer(world, cfg.risk).frame
    out: dict[str, Any] = {}
    for mode in modes:
        mcfg = replace(cfg, labels=mode)
        demand = ModelForecasts(loop_demand(world), world.sim.calendar(), cfg.demand_retrain_every)
        loop = retrained_loop(world, _loop_config(mcfg, "predictive"), cfg.risk, demand.at, frame)
        with watch(f"loop_{mode}"):
            figures = _figures(loop, mcfg, progress)
        assert loop.risk is not None
        fits = loop.risk.fits
        aps = [f["average_precision"] for f in fits]
        later = [a for a in aps[1:] if a is not None]
        out[mode] = {
            "average_precision_by_retrain": aps,
            "average_precision_mean": round(sum(later) / len(later), 4) if later else None,
            "lost_gpu_hours": figures["lost_gpu_hours"],
            "failures": figures["failures"],
            "failures_averted_by_drains": figures["failures_averted_by_drains"],
            "drains": figures["drains"],
            "drains_needless": figures["drains_needless"],
            "drain_cost_gpu_hours_unreplaced": figures["drain_cost_gpu_hours_unreplaced"],
            "inspections": figures["inspections"],
            "budget_violations": figures["budget_violations"],
            "failure_model_fits": fits,
        }
    return {
        "config": cfg.to_dict(),
        "world": describe(world),
        "modes": out,
        "seconds": watch.stages,
    }
