"""Recompute the synthetic fleet's calibration figures from the real public traces.
Over 500 lines: one short ``*_figures`` function per trace family, all feeding
``all_figures``, which the calibration test compares with ``calibration.py`` as a whole.

Each ``*_figures(root)`` function reads one trace family under ``root`` (the shared
data folder; see each folder's PROVENANCE.md) and returns named figures. The constants
in :mod:`pipelines.synthetic.calibration` were copied from these functions' output;
``tests/pipelines/synthetic/test_calibration.py`` recomputes them and checks that the
constants still agree, so the write-up in ``data/README.md`` cannot silently drift.

Run ``python -m predops.pipelines.synthetic.calibrate [DATA_ROOT]`` to print every figure as
one JSON object.
"""

from __future__ import annotations

import gzip
import io
import json
import sys
from pathlib import Path

import numpy as np
import polars as pl
from scipy import stats

LANL_FILE = "lanl-failure-data/LA-UR-05-7318-failure-data-1996-2005.csv.gz"
G5K_FILE = "grid5000-availability/event_trace.tab.gz"
TITAN_FILE = "olcf-titan-gpu/data/gc_full.csv.gz"
TITAN_SUMMARY = "olcf-titan-gpu/data/gc_summary_loc.csv.gz"
HDS_FILE = "backblaze/dynamichazard-hds/hds.csv.gz"
HELIOS_DIR = "helios-philly-demand/Earth_vcs"
PHILLY_FILE = "helios-philly-demand/philly_node_sequence.csv.gz"
HELIOS_SUMMARY = "helios-philly-demand/helios_cluster_summary.csv"
AZURE_V2_DIR = "datacenter-traces/azure_v2"
ALIBABA2018_DIR = "datacenter-traces/alibaba2018"
OPENB_PODS = "alibaba-clusterdata/cluster-trace-gpu-v2023/csv/openb_pod_list_default.csv"
OPENB_NODES = "alibaba-clusterdata/cluster-trace-gpu-v2023/csv/openb_node_list_all_node.csv"
SPOT_NODES = "alibaba-clusterdata/cluster-trace-v2026-spot-gpu/node_info_df.csv"

SECONDS_PER_YEAR = 365.25 * 86400.0

# LANL hardware sub-causes (column "Hardware") mapped onto the fleet's failure modes.
# Anything not listed (node/system boards, "Other", ...) counts as "unknown".
LANL_HARDWARE_MODE = {
    "CPU": "cpu",
    "Memory Dimm": "memory",
    "Memory Module": "memory",
    "Power Supply": "psu",
    "Fibre Raid Power Supply": "psu",
    "Disk Drive": "disk",
    "SCSI Drive": "disk",
    "Fibre Drive": "disk",
    "SAN Disk Drive": "disk",
    "Interconnect Interface": "nic",
    "Interconnect Soft Error": "nic",
    "Interconnect": "nic",
    "Interconnect Cable": "nic",
    "PCI GBIT Ethernet Board": "nic",
    "1 GBit Ethernet Card": "nic",
    "Fan Assembly": "thermal",
    "Fan": "thermal",
    "40MM Cooling Fan": "thermal",
    "Temp Probe": "thermal",
}


def _lognormal(x: np.ndarray) -> dict[str, float]:
    """Median and standard deviation of log(x) of the positive values of ``x``."""
    x = x[np.isfinite(x) & (x > 0)]
    lx = np.log(x)
    return {"median": float(np.exp(np.median(lx))), "log_sd": float(lx.std()), "n": int(x.size)}


def _weibull_shape(x: np.ndarray) -> float:
    """Maximum-likelihood Weibull shape (location fixed at 0) of the positive values."""
    x = x[np.isfinite(x) & (x > 0)]
    shape, _, _ = stats.weibull_min.fit(x, floc=0)
    return float(shape)


# --------------------------------------------------------------------------- LANL
def read_lanl(root: Path) -> pl.DataFrame:
    """LANL records with parsed start time, downtime (minutes) and a cause group."""
    df = pl.read_csv(root / LANL_FILE, infer_schema_length=0)
    group = (
        pl.when(pl.col("Hardware").is_not_null())
        .then(pl.lit("hardware"))
        .when(pl.col("Software").is_not_null())
        .then(pl.lit("software"))
        .when(pl.col("Network").is_not_null())
        .then(pl.lit("network"))
        .when(pl.col("Facilities").is_not_null())
        .then(pl.lit("facilities"))
        .when(pl.col("Human Error").is_not_null())
        .then(pl.lit("human"))
        .otherwise(pl.lit("undetermined"))
    )
    return df.select(
        pl.col("System").cast(pl.Int32).alias("system"),
        pl.col("nodes").cast(pl.Float64).cast(pl.Int64).alias("nodes"),
        pl.col("procsinnode").cast(pl.Float64, strict=False).alias("procs_per_node"),
        pl.col("nodenumz").alias("node"),
        pl.col("Prob Started").str.to_datetime("%m/%d/%Y %H:%M").alias("start"),
        pl.col("Down Time").cast(pl.Float64, strict=False).alias("down_min"),
        pl.col("Hardware").alias("hardware"),
        group.alias("group"),
    )


def lanl_figures(root: Path) -> dict[str, float]:
    """Failure rate, inter-arrival shape, repair times and cause mix from LANL.

    - ``failures_per_node_year``: median over the cluster systems with <= 4 processors
      per node and >= 128 nodes (the commodity-node systems) of records / (nodes x
      years between the system's first and last record). Planned "Maintenance"
      records are not failures and are left out everywhere.
    - ``node_frailty_gamma_shape``: median over those systems of the method-of-moments
      gamma shape of per-node failure counts (smaller = a few nodes fail much more).
    - ``interarrival_weibull_shape``: median over systems with >= 500 records of the
      MLE Weibull shape of the time between successive failures of the same node.
    - ``repair_*``: lognormal fit (median minutes, sd of log) of ``Down Time`` > 0.
    - ``group_share_*``: share of records per root-cause group.
    - ``hw_share_*``: share of hardware records per failure mode (LANL_HARDWARE_MODE).
    """
    df = read_lanl(root).filter(pl.col("hardware").fill_null("") != "Maintenance")
    out: dict[str, float] = {}
    per_sys = (
        df.group_by("system")
        .agg(
            pl.len().alias("records"),
            pl.col("nodes").first(),
            pl.col("procs_per_node").first(),
            (
                (pl.col("start").max() - pl.col("start").min()).dt.total_seconds()
                / SECONDS_PER_YEAR
            ).alias("years"),
        )
        .with_columns((pl.col("records") / pl.col("nodes") / pl.col("years")).alias("rate"))
    )
    commodity = per_sys.filter((pl.col("procs_per_node") <= 4) & (pl.col("nodes") >= 128))
    out["failures_per_node_year"] = float(commodity["rate"].median())  # type: ignore[arg-type]
    out["commodity_systems"] = float(commodity.height)
    # Node heterogeneity: method-of-moments gamma shape k of per-node failure counts
    # (negative binomial: var = mu + mu^2 / k), nodes without records counted as 0.
    shapes_k = []
    for system, nodes in commodity.select("system", "nodes").iter_rows():
        counts = df.filter(pl.col("system") == system).group_by("node").len()["len"].to_numpy()
        counts = np.concatenate([counts, np.zeros(max(nodes - counts.size, 0))])
        mu, var = counts.mean(), counts.var()
        if var > mu:
            shapes_k.append(mu * mu / (var - mu))
    out["node_frailty_gamma_shape"] = float(np.median(shapes_k))

    shapes = []
    for system in per_sys.filter(pl.col("records") >= 500)["system"].sort():
        gaps = (
            df.filter(pl.col("system") == system)
            .sort("node", "start")
            .select(pl.col("start").diff().over("node").dt.total_seconds() / 3600.0)
            .to_series()
            .drop_nulls()
            .to_numpy()
        )
        shapes.append(_weibull_shape(gaps))
    out["interarrival_weibull_shape"] = float(np.median(shapes))

    down = df["down_min"].to_numpy()
    fit = _lognormal(down)
    out["repair_median_min"] = fit["median"]
    out["repair_log_sd"] = fit["log_sd"]
    for group in ("hardware", "software", "facilities"):
        g = _lognormal(df.filter(pl.col("group") == group)["down_min"].to_numpy())
        out[f"repair_{group}_median_min"] = g["median"]
        out[f"repair_{group}_log_sd"] = g["log_sd"]

    total = df.height
    for group, n in df.group_by("group").len().iter_rows():
        out[f"group_share_{group}"] = n / total
    hw = df.filter(pl.col("group") == "hardware").with_columns(
        pl.col("hardware").replace_strict(LANL_HARDWARE_MODE, default="unknown").alias("mode")
    )
    for mode, n in hw.group_by("mode").len().iter_rows():
        out[f"hw_share_{mode}"] = n / hw.height
    return out


# --------------------------------------------------------------------------- Grid'5000
def read_g5k(root: Path) -> pl.DataFrame:
    """Grid'5000 availability intervals: node, cluster, type (1 up / 0 down), start, hours."""
    text = gzip.decompress((root / G5K_FILE).read_bytes()).decode()
    lines = text.splitlines()
    header = lines[0].lstrip("#").split()
    body = "\n".join(" ".join(line.split()) for line in lines[1:] if line.strip())
    df = pl.read_csv(io.StringIO(body), separator=" ", has_header=False, new_columns=header)
    return df.select(
        "node_id",
        pl.col("node_name").str.replace(r"/node\d+$", "").alias("cluster"),
        "event_type",
        pl.col("event_start_time").alias("start_s"),
        ((pl.col("event_stop_time") - pl.col("event_start_time")) / 3600.0).alias("hours"),
    )


def g5k_figures(root: Path, *, min_outage_h: float = 1.0) -> dict[str, float]:
    """Outages of >= ``min_outage_h`` (shorter ones are mostly redeploy reboots).

    - ``correlated_share``: share of outages starting in the same minute as >= 2 other
      outages of the same cluster (cluster-wide events, not node failures).
    - ``isolated_per_node_year``, ``isolated_median_h``, ``isolated_log_sd``: rate and
      lognormal duration of the outages that start alone in their cluster-minute.
    - ``interarrival_weibull_shape``: MLE Weibull shape of the time between successive
      outage starts of the same node.
    """
    df = read_g5k(root)
    nodes = df["node_id"].n_unique()
    start_s = df["start_s"].to_numpy()
    span_y = float(start_s.max() - start_s.min()) / SECONDS_PER_YEAR
    out_ = df.filter((pl.col("event_type") == 0) & (pl.col("hours") >= min_outage_h))
    out_ = out_.with_columns((pl.col("start_s") // 60).alias("minute"))
    out_ = out_.with_columns(pl.len().over("cluster", "minute").alias("same_minute"))
    isolated = out_.filter(pl.col("same_minute") == 1)
    fit = _lognormal(isolated["hours"].to_numpy())
    gaps = (
        out_.sort("node_id", "start_s")
        .select(pl.col("start_s").diff().over("node_id") / 3600.0)
        .to_series()
        .drop_nulls()
        .to_numpy()
    )
    return {
        "correlated_share": float((out_["same_minute"] >= 3).mean()),  # type: ignore[arg-type]
        "isolated_per_node_year": isolated.height / nodes / span_y,
        "isolated_median_h": fit["median"],
        "isolated_log_sd": fit["log_sd"],
        "interarrival_weibull_shape": _weibull_shape(gaps),
    }


# --------------------------------------------------------------------------- Titan
def titan_figures(root: Path) -> dict[str, float]:
    """GPU failure events (double-bit ECC ``DBE`` and off-the-bus ``OTB``) on Titan.

    - ``events_per_gpu_year``: DBE + OTB events / total GPU service years (all batches).
    - ``dbe_share``: DBE share of those events.
    - ``old_to_new_rate_ratio``: deaths per GPU-year of the pre-2016 batch over the
      newer one (the lot effect behind the fleet's per-lot frailty).
    """
    full = pl.read_csv(root / TITAN_FILE, infer_schema_length=10000)
    summ = pl.read_csv(root / TITAN_SUMMARY, infer_schema_length=10000)
    events = full.filter(pl.col("event").is_not_null())
    gpu_years = float(summ["time"].sum()) / SECONDS_PER_YEAR
    rates = {}
    for batch in ("old", "new"):
        b = summ.filter(pl.col("batch") == batch)
        rates[batch] = float(b["dead"].sum()) / (float(b["time"].sum()) / SECONDS_PER_YEAR)
    return {
        "events_per_gpu_year": events.height / gpu_years,
        "dbe_share": float((events["event"] == "DBE").mean()),  # type: ignore[arg-type]
        "old_to_new_rate_ratio": rates["old"] / rates["new"],
    }


# --------------------------------------------------------------------------- Backblaze
def backblaze_figures(root: Path) -> dict[str, float]:
    """Share of drives whose last record shows a SMART warning (5, 187, 197 or 198 > 0).

    ``warn_share_failed`` is the disk mode's precursor share; ``warn_share_healthy``
    is how common the same signal is on drives that never failed (benign anomalies).
    ``onset_benign_ratio_30d``: time-resolved view of the same thing -- among the
    intervals where the warning sum first turns positive (an onset), those not followed
    by the drive's failure within 30 days per one that is.
    """
    hds = pl.read_csv(
        root / HDS_FILE,
        infer_schema_length=20000,
        columns=[
            "serial_number",
            "tstart",
            "tstop",
            "fails",
            "smart_5",
            "smart_187",
            "smart_197",
            "smart_198",
        ],
    )
    last = hds.sort("serial_number", "tstop").group_by("serial_number").last()
    warn = pl.any_horizontal(
        pl.col(c) > 0 for c in ("smart_5", "smart_187", "smart_197", "smart_198")
    )
    r = last.with_columns(warn.alias("warn")).group_by("fails").agg(pl.col("warn").mean())
    shares = dict(r.iter_rows())
    cols = ("smart_5", "smart_187", "smart_197", "smart_198")
    total = pl.sum_horizontal(pl.col(c).fill_null(0) for c in cols)
    hds = hds.sort("serial_number", "tstart").with_columns(total.alias("w"))
    onset = hds.filter(
        (pl.col("w") > 0) & (pl.col("w").shift(1).over("serial_number").fill_null(0) == 0)
    )
    drives = hds.group_by("serial_number").agg(
        pl.col("fails").max().alias("failed"), pl.col("tstop").max().alias("end")
    )
    onset = onset.join(drives, on="serial_number")
    followed = onset.filter((pl.col("failed") == 1) & (pl.col("end") - pl.col("tstart") <= 720))
    return {
        "warn_share_failed": float(shares[1.0]),
        "warn_share_healthy": float(shares[0.0]),
        "onset_benign_ratio_30d": (onset.height - followed.height) / followed.height,
    }


# --------------------------------------------------------------------------- demand
def _daily_amplitude(hour_of_day: np.ndarray, values: np.ndarray) -> tuple[float, int]:
    """(max - min) / mean of the mean hour-of-day profile, and the peak hour."""
    prof = np.array([values[hour_of_day == h].mean() for h in range(24)])
    return float((prof.max() - prof.min()) / values.mean()), int(prof.argmax())


def helios_figures(root: Path) -> dict[str, float]:
    """GPU demand shape of SenseTime Helios "Earth" (16 VCs, 1-min, 2020-05-01..24).

    Demand = running + pending GPUs summed over the VCs, hourly means; minutes where
    the whole cluster reports zero (a 1-day trace outage on 2020-05-10) are dropped.
    - ``daily_amplitude`` / ``peak_hour``: hour-of-day profile (trace clock).
    - ``weekend_ratio``: mean weekend demand / mean weekday demand.
    - ``pending_share``: pending GPUs / demand; ``utilisation``: running / quota.
    - ``hourly_log_sd``: sd of hour-to-hour log changes of demand (burstiness).
    - ``trend_per_day``: least-squares slope of daily means / their mean.
    - ``share_gpus_in_8plus_jobs``: share of running GPUs held by jobs of >= 8 GPUs.
    - ``vc_log_sd_median`` / ``vc_phi_1h_median``: over the VCs with >= 48 GPUs of
      quota, the median sd of log hourly demand and its lag-1 h autocorrelation (one
      VC ~ one pool: much burstier than the whole cluster).
    """
    frames = []
    for path in sorted((root / HELIOS_DIR).glob("*/cluster_sequence_vc.csv.gz")):
        frames.append(
            pl.read_csv(path, try_parse_dates=True).select(
                "time",
                "total_gpu_num",
                "running_gpu_num",
                "pending_gpu_num",
                "running_gpu_num_noless_8",
            )
        )
    df = pl.concat(frames).group_by("time").sum().sort("time")
    df = df.filter(pl.col("running_gpu_num") + pl.col("pending_gpu_num") > 0)
    df = df.with_columns((pl.col("running_gpu_num") + pl.col("pending_gpu_num")).alias("demand"))
    hourly = df.group_by_dynamic("time", every="1h").agg(
        pl.col("demand").mean(),
        pl.col("running_gpu_num").mean().alias("running"),
        pl.col("pending_gpu_num").mean().alias("pending"),
        pl.col("total_gpu_num").mean().alias("quota"),
    )
    d = hourly["demand"].to_numpy()
    hours = hourly["time"].dt.hour().to_numpy()
    weekend = hourly["time"].dt.weekday().to_numpy() >= 6
    amp, peak = _daily_amplitude(hours, d)
    daily = df.group_by_dynamic("time", every="1d").agg(pl.col("demand").mean())
    y = daily["demand"].to_numpy()
    days = (daily["time"] - daily["time"][0]).dt.total_days().to_numpy()
    slope = float(np.polyfit(days, y, 1)[0])
    contiguous = np.diff(hourly["time"].to_numpy()).astype("timedelta64[m]").astype(int) == 60
    dlog = np.diff(np.log(d))[contiguous]
    vc_sd, vc_phi = [], []
    for vc in frames:
        if float(vc["total_gpu_num"].median()) < 48:  # type: ignore[arg-type]
            continue
        h = (
            vc.with_columns((pl.col("running_gpu_num") + pl.col("pending_gpu_num")).alias("demand"))
            .group_by_dynamic("time", every="1h")
            .agg(pl.col("demand").mean())
            .filter(pl.col("demand") > 0)
        )
        x = np.log(h["demand"].to_numpy())
        vc_sd.append(x.std())
        xc = x - x.mean()
        vc_phi.append(np.corrcoef(xc[:-1], xc[1:])[0, 1])
    return {
        "vc_log_sd_median": float(np.median(vc_sd)),
        "vc_phi_1h_median": float(np.median(vc_phi)),
        "daily_amplitude": amp,
        "peak_hour": float(peak),
        "weekend_ratio": float(d[weekend].mean() / d[~weekend].mean()),
        "pending_share": float(hourly["pending"].to_numpy().sum() / d.sum()),
        "utilisation": float(hourly["running"].to_numpy().sum() / hourly["quota"].to_numpy().sum()),
        "hourly_log_sd": float(dlog.std()),
        "trend_per_day": slope / float(y.mean()),
        "share_gpus_in_8plus_jobs": float(
            df["running_gpu_num_noless_8"].to_numpy().sum() / df["running_gpu_num"].to_numpy().sum()
        ),
    }


def helios_job_figures(root: Path) -> dict[str, float]:
    """Helios (all four clusters) GPU job statistics from the published summary.

    Runtime is lognormal-fitted from its median and mean: sd = sqrt(2 ln(mean/median)).
    """
    s = pl.read_csv(root / HELIOS_SUMMARY).filter(pl.col("id") == "total").row(0, named=True)
    med, mean = float(s["med_run_time_gpu"]), float(s["avg_run_time_gpu"])
    return {
        "gpu_job_runtime_median_s": med,
        "gpu_job_runtime_log_sd": float(np.sqrt(2.0 * np.log(mean / med))),
        "gpu_job_mean_gpus": float(s["avg_gpu_num"]),
    }


def cpu_cloud_figures(root: Path) -> dict[str, float]:
    """Daily/weekly shape of whole-datacentre CPU use (online and batch references).

    - ``azure_daily_amplitude`` / ``azure_weekend_ratio``: Azure V2, summed VM CPU
      cores, 3 weeks at 5 min (trace days 1,2, 8,9, 15,16 are the weekends: the
      two lowest daily means of every week).
    - ``alibaba2018_daily_amplitude``: Alibaba 2018 co-located online + batch cluster,
      mean machine CPU %, 5-min buckets, days with a complete 288 buckets.
    """
    frames = [
        pl.read_csv(p)
        for p in sorted(
            (root / AZURE_V2_DIR).glob("week*/vm_cpu_readings_week*_aggregated_cpu_mem.csv")
        )
    ]
    az = pl.concat(frames).unique("timestamp").sort("timestamp")
    t = az["timestamp"].to_numpy()
    v = az["cpu_usage"].to_numpy()
    amp, _ = _daily_amplitude((t // 3600) % 24, v)
    day = t // 86400
    weekend = np.isin(day % 7, (1, 2))
    out = {
        "azure_daily_amplitude": amp,
        "azure_weekend_ratio": float(v[weekend].mean() / v[~weekend].mean()),
    }
    days = []
    for p in sorted(
        (root / ALIBABA2018_DIR).glob("day_*/machine_usage_day_*_grouped_300_seconds.csv*")
    ):
        x = pl.read_csv(p)["cpu_util_percent"].to_numpy()
        if x.size >= 288:
            days.append(x[:288])
    prof = np.mean(days, axis=0).reshape(24, 12).mean(axis=1)
    out["alibaba2018_daily_amplitude"] = float((prof.max() - prof.min()) / prof.mean())
    return out


def philly_figures(root: Path) -> dict[str, float]:
    """Microsoft Philly: daily amplitude and mean share of the 420 nodes active."""
    ph = pl.read_csv(root / PHILLY_FILE, try_parse_dates=True)
    amp, _ = _daily_amplitude(ph["time"].dt.hour().to_numpy(), ph["active"].to_numpy())
    return {"daily_amplitude": amp, "active_share": float((ph["active"] / ph["total"]).mean())}  # type: ignore[arg-type]


# --------------------------------------------------------------------------- openb
def openb_figures(root: Path) -> dict[str, float]:
    """Pod-size mix of the Alibaba openb GPU trace and the GPU model mix of v2026.

    - ``num_gpu_share_<k>``: share of all pods requesting k GPUs.
    - ``gpu_share_pods``: share of GPU pods that share a GPU (num_gpu 1, gpu_milli < 1000).
    - ``gpu_milli_share_<m>``: pmf of gpu_milli among sharing pods (top values).
    - ``<class>_cpu_milli_q<p>`` / ``<class>_memory_mib_q<p>``: quantiles per class
      (cpu = no GPU, shared, whole = whole GPUs).
    - ``qos_share_<q>``; ``model_share_<m>``: GPU share per model among 8-GPU nodes of the
      v2026 spot-GPU cluster inventory.
    """
    p = pl.read_csv(root / OPENB_PODS)
    out: dict[str, float] = {}
    for k, n in p.group_by("num_gpu").len().iter_rows():
        out[f"num_gpu_share_{k}"] = n / p.height
    gpu = p.filter(pl.col("num_gpu") > 0)
    shared = gpu.filter((pl.col("num_gpu") == 1) & (pl.col("gpu_milli") < 1000))
    out["gpu_share_pods"] = shared.height / gpu.height
    for m, n in shared.group_by("gpu_milli").len().sort("len", descending=True).head(8).iter_rows():
        out[f"gpu_milli_share_{m}"] = n / shared.height
    classes = {
        "cpu": p.filter(pl.col("num_gpu") == 0),
        "shared": shared,
        "whole": gpu.filter(pl.col("gpu_milli") == 1000),
    }
    for name, c in classes.items():
        for q in (10, 50, 90):
            out[f"{name}_cpu_milli_q{q}"] = float(np.quantile(c["cpu_milli"].to_numpy(), q / 100))
            out[f"{name}_memory_mib_q{q}"] = float(np.quantile(c["memory_mib"].to_numpy(), q / 100))
    for q, n in p.group_by("qos").len().iter_rows():
        out[f"qos_share_{q}"] = n / p.height
    spot = pl.read_csv(root / SPOT_NODES).filter(pl.col("gpu_capacity_num") == 8)
    named = spot.filter(~pl.col("gpu_model").str.starts_with("GPU-series"))
    for m, n in named.group_by("gpu_model").agg(pl.col("gpu_capacity_num").sum()).iter_rows():
        out[f"model_share_{m}"] = n / float(named["gpu_capacity_num"].sum())
    nodes = pl.read_csv(root / OPENB_NODES)
    out["openb_cpu_node_share"] = float((nodes["gpu"] == 0).mean())  # type: ignore[arg-type]
    return out


def all_figures(root: Path) -> dict[str, dict[str, float]]:
    """Every calibration figure, by trace family."""
    return {
        "lanl": lanl_figures(root),
        "grid5000": g5k_figures(root),
        "titan": titan_figures(root),
        "backblaze": backblaze_figures(root),
        "helios": helios_figures(root),
        "helios_jobs": helios_job_figures(root),
        "philly": philly_figures(root),
        "cpu_cloud": cpu_cloud_figures(root),
        "openb": openb_figures(root),
    }


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path("../shared/data")
    print(json.dumps(all_figures(root), indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv))
