"""Benchmark: the window forecasts of the classical candidates as predops makes them
(ETS from statsmodels' compiled smoother without a model object per forecast; Theta's
least-squares search, a first pass shared by every series of the call) against
statsmodels one series at a time with its model and results objects (the peer: how
predops made them before), in the same run.

The work is what each refit of the served combination and each cutoff of a backtest
asks: from each of three window origins a day apart, every series' ETS forecast with
the parameters estimated once (estimated here outside the timing) and its Theta
forecast (re-estimated on that history). The series are the first ``--series`` VMs of
the Azure V1 VM CPU trace (``--path``, the mean-CPU family), or seeded synthetic ones.
Sides alternate over ``--repeats`` rounds in one process, one BLAS thread each; CPU is
the process's user + sys over the work alone. Prints one JSON object: per side the
median CPU-s, the ratio predops / peer (below 1: cheaper), and how the answers agree:
ETS means equal to the bit, its band to rounding; Theta's least-squares weight against
statsmodels' optimiser (how far the forecasts move, and on how many histories ours has
the smaller sum of squares).

    python -m benchmarks.bench_window_forecasts --path ../shared/data/azure-v1-vm-cpu --json
    python -m benchmarks.bench_window_forecasts --series 4 --json   # synthetic, quick
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import warnings
from typing import Any

import numpy as np

from benchmarks.bench_classical import HORIZONS, ORIGINS, SEASON, azure_series, synthetic_series


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def peer_ets(z: np.ndarray, fit: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    from predops.models.demand.baselines import _ets_model

    res = _ets_model(z, fit.season, fit.trend).smooth(fit.params)
    frame = res.get_prediction(start=z.size, end=z.size + int(HORIZONS.max()) - 1)
    f = frame.summary_frame(alpha=0.2)
    h = HORIZONS - 1
    return f["pi_lower"].to_numpy()[h], f["mean"].to_numpy()[h], f["pi_upper"].to_numpy()[h]


def peer_theta(z: np.ndarray) -> tuple[np.ndarray, float, float, float]:
    """The previous implementation: statsmodels' decomposition and SES fit per series.
    Returns the point forecast, and the SES weight, initial level and the series'
    deseasonalised sum of squares they give."""
    from statsmodels.tsa.holtwinters import SimpleExpSmoothing
    from statsmodels.tsa.seasonal import seasonal_decompose

    n, h = z.size, HORIZONS
    seas = np.asarray(seasonal_decompose(z, period=SEASON, two_sided=True).seasonal)
    x = z - seas
    slope = float(np.polyfit(np.arange(n, dtype=float), x, 1)[0])
    res = SimpleExpSmoothing(x, initialization_method="estimated").fit()
    alpha = float(res.params["smoothing_level"])
    a = float(np.clip(alpha, 1e-3, 1.0))
    mean = float(res.forecast(1)[0]) + slope / 2 * (h - 1 + 1 / a - (1 - a) ** n / a)
    mean = mean + seas[n - SEASON + (h - 1) % SEASON]
    return (
        mean,
        alpha,
        float(res.params["initial_level"]),
        _sse(x, alpha, res.params["initial_level"]),
    )


def _sse(x: np.ndarray, alpha: float, level0: float) -> float:
    level, total = float(level0), 0.0
    for v in x:
        total += (v - level) ** 2
        level = alpha * v + (1 - alpha) * level
    return total


def histories(ys: np.ndarray) -> list[list[np.ndarray]]:
    return [[y[: y.size - back] for y in ys] for back in ORIGINS]


def run_peer(ys: np.ndarray, fits: list[Any]) -> list[list[Any]]:
    out: list[list[Any]] = []
    for hist in histories(ys):
        out.append(
            [
                (peer_ets(z, f) if f else None, peer_theta(z))
                for z, f in zip(hist, fits, strict=True)
            ]
        )
    return out


def run_predops(ys: np.ndarray, fits: list[Any]) -> list[list[Any]]:
    from predops.models.demand.ets_filter import ets_forecasts
    from predops.models.demand.theta import theta_forecasts

    out: list[list[Any]] = []
    for hist in histories(ys):
        known = [i for i, f in enumerate(fits) if f is not None]
        ets = ets_forecasts([hist[i] for i in known], HORIZONS, [fits[i] for i in known])
        by = dict(zip(known, ets, strict=True))
        theta = theta_forecasts(hist, HORIZONS, SEASON)
        out.append([(by.get(i), theta[i]) for i in range(len(hist))])
    return out


def agreement(ys: np.ndarray, peer: list[list[Any]], ours: list[list[Any]]) -> dict[str, Any]:
    from statsmodels.tsa.seasonal import seasonal_decompose

    from predops.models.demand.theta import ses_least_squares

    ets_equal, band_rel, theta_rel, better = [], [], [], []
    for hist, prow, orow in zip(histories(ys), peer, ours, strict=True):
        for z, (p_ets, p_theta), (o_ets, o_theta) in zip(hist, prow, orow, strict=True):
            if p_ets is not None and o_ets is not None:
                ets_equal.append(bool(np.array_equal(p_ets[1], o_ets.p50)))
                half = np.maximum(np.abs(p_ets[2] - p_ets[1]), 1e-12)
                band_rel.append(
                    float(np.max(np.abs((o_ets.p90 - o_ets.p50) - (p_ets[2] - p_ets[1])) / half))
                )
            scale = max(float(np.mean(np.abs(np.diff(z)))), 1e-12)
            theta_rel.append(float(np.max(np.abs(o_theta.p50 - p_theta[0])) / scale))
            x = z - np.asarray(seasonal_decompose(z, period=SEASON, two_sided=True).seasonal)
            (alpha,), (level0,) = ses_least_squares([x])
            better.append(_sse(x, float(alpha), float(level0)) <= p_theta[3] * (1 + 1e-9))
    return {
        "ets_p50_bit_equal": f"{sum(ets_equal)}/{len(ets_equal)}",
        "ets_band_max_rel_diff": max(band_rel) if band_rel else None,
        "theta_p50_diff_in_mean_steps": {
            "median": float(np.median(theta_rel)),
            "p95": float(np.percentile(theta_rel, 95)),
            "max": float(np.max(theta_rel)),
        },
        "theta_sse_no_worse_than_statsmodels": f"{sum(better)}/{len(better)}",
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--path", default=None, help="The Azure V1 VM CPU trace (else synthetic).")
    ap.add_argument("--series", type=int, default=100)
    ap.add_argument("--days", type=int, default=18)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true", help="Print one JSON object.")
    args = ap.parse_args()
    if args.series < 1 or args.days < 5 or args.repeats < 1:
        raise SystemExit("--series >= 1, --days >= 5 and --repeats >= 1, please")
    from predops.models.demand.baselines import fit_ets, one_blas_thread

    warnings.simplefilter("ignore")
    hours = 24 * args.days
    ys = azure_series(args.path, args.series, hours) if args.path else None
    if ys is None:
        ys = synthetic_series(args.series, hours, args.seed)
    cpu: dict[str, list[float]] = {"peer": [], "predops": []}
    results: dict[str, Any] = {}
    with one_blas_thread():
        fits = [fit_ets(y, SEASON) for y in ys]
        run_peer(ys[:1], fits[:1])  # imports and first calls out of the timing
        run_predops(ys[:1], fits[:1])
        for k in range(args.repeats):
            for side in ("peer", "predops") if k % 2 == 0 else ("predops", "peer"):
                c0 = _cpu()
                results[side] = (run_peer if side == "peer" else run_predops)(ys, fits)
                cpu[side].append(_cpu() - c0)
        agree = agreement(ys, results["peer"], results["predops"])
    sides = {s: round(statistics.median(v), 3) for s, v in cpu.items()}
    report = {
        "benchmark": "window forecasts (ETS filtering + Theta): predops vs statsmodels per series",
        "source": "azure-vm" if args.path else "synthetic",
        "series": int(ys.shape[0]),
        "origins": len(ORIGINS),
        "hours": hours,
        "repeats": args.repeats,
        "peer_cpu_s": sides["peer"],
        "predops_cpu_s": sides["predops"],
        "ratio_cpu": round(sides["predops"] / sides["peer"], 3),
        "cores": os.cpu_count(),
        **agree,
    }
    if args.json:
        print(json.dumps(report, sort_keys=True))
    else:
        for key, v in report.items():
            print(f"{key}: {v}")


if __name__ == "__main__":
    main()
