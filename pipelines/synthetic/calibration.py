"""Every number the synthetic fleet is calibrated on, with its source.

Two kinds of constants live here:

- **calibrated** figures, copied from :mod:`pipelines.synthetic.calibrate` (which
  recomputes them from the real traces under the shared data folder). ``CALIBRATED``
  maps each to the figure it came from and a tolerance; a test recomputes them all.
- **choices** (marked ``# choice:``): where no trace in the shared data measures the
  thing (precursor lead times, promotion sizes, ...) or where the simulator departs
  from the traces on purpose (rates scaled up so a 14-day, 200-node run has failures).
  ``data/README.md`` lists both kinds, and why.

Units are in the names: ``_per_node_year``, ``_min``, ``_h``, ``_share`` (0..1).
"""

from __future__ import annotations

import math
from typing import Final

# =============================================================================== failures
# LANL LA-UR-05-7318, commodity cluster systems (<= 4 procs/node, >= 128 nodes): median
# failures per node-year (planned maintenance excluded).
LANL_FAILURES_PER_NODE_YEAR: Final = 0.891
# LANL: median over systems (>= 500 records) of the MLE Weibull shape of per-node
# inter-failure times. Grid'5000 (>= 1 h outages) gives 0.638: the two agree.
INTERARRIVAL_WEIBULL_SHAPE: Final = 0.652
G5K_INTERARRIVAL_WEIBULL_SHAPE: Final = 0.638
# LANL: gamma shape of per-node failure counts (method of moments, median over the
# commodity systems) -- per-node frailty, mean 1.
NODE_FRAILTY_GAMMA_SHAPE: Final = 0.469
# Titan (OLCF, K20X): GPU failure events (DBE + off-the-bus) per GPU-year, and the DBE
# share of them; a GPU node adds 8 x this rate to the LANL node rate.
TITAN_GPU_EVENTS_PER_GPU_YEAR: Final = 0.0629
TITAN_DBE_SHARE: Final = 0.761
# Titan: deaths per GPU-year of the old batch over the new one. A per-rack install lot
# gets a lognormal frailty for GPU modes whose 2.5th..97.5th percentile ratio is this.
TITAN_OLD_TO_NEW_RATE_RATIO: Final = 25.3
LOT_FRAILTY_LOG_SD: Final = math.log(TITAN_OLD_TO_NEW_RATE_RATIO) / (2 * 1.959964)

# LANL root-cause groups (share of failure records, planned maintenance excluded).
LANL_GROUP_SHARE: Final = {
    "hardware": 0.5823,
    "software": 0.2420,
    "undetermined": 0.1326,
    "network": 0.0197,
    "facilities": 0.0173,
    "human": 0.0061,
}
# LANL hardware sub-causes mapped to failure modes (calibrate.LANL_HARDWARE_MODE).
LANL_HARDWARE_MODE_SHARE: Final = {
    "cpu": 0.4075,
    "memory": 0.2207,
    "unknown": 0.2372,
    "nic": 0.0512,
    "psu": 0.0491,
    "disk": 0.0230,
    "thermal": 0.0111,
}
# choice: LANL's mix is of 1996-2005 diskless HPC nodes; CPU faults dominate it (the
# systems 18-20 batch). Re-weight so a modern fleet's modes all occur: fewer CPU
# faults, more local-disk (NVMe), thermal (dense GPU racks), PSU and NIC faults.
MODE_REWEIGHT: Final = {"cpu": 0.25, "disk": 6.0, "thermal": 10.0, "psu": 2.5, "nic": 2.5}

# choice: real rates give ~11 failures in 14 days on 200 nodes; scale them so a default
# run has ~50 (enough positives to train and evaluate a failure model on).
FAILURE_RATE_SCALE: Final = 5.0

# Repair times, lognormal (median, sd of log).
# LANL software-caused records: reboot-class repairs (kernel, unknown, GPU reset, human).
REPAIR_REBOOT_MEDIAN_MIN: Final = 43.0
REPAIR_REBOOT_LOG_SD: Final = 1.419
# LANL facilities-caused records (rack power loss).
REPAIR_FACILITIES_MEDIAN_MIN: Final = 260.5
REPAIR_FACILITIES_LOG_SD: Final = 1.229
# Grid'5000 isolated (not cluster-wide) outages >= 1 h: part-replacement repairs (GPU,
# PSU, disk, NIC, DIMM, CPU, fan). LANL hardware (66 min, sd 1.234) had on-site spares;
# a GPU swap with RMA takes the Grid'5000-like day.
REPAIR_PART_MEDIAN_MIN: Final = 19.64 * 60.0
REPAIR_PART_LOG_SD: Final = 1.670
LANL_REPAIR_HARDWARE_MEDIAN_MIN: Final = 66.0
REPAIR_MAX_DAYS: Final = 14.0  # choice: a node not back in two weeks is replaced

# Grid'5000: share of >= 1 h outages that start together with >= 2 others of the same
# cluster (cluster-wide events). choice: the fleet models such correlated outages as
# rack power losses (cause "facilities") at the LANL facilities share, plus the
# rack-wide hot-aisle episodes below -- not at 85 %, which in Grid'5000 are mostly
# planned site-wide reboots (we model those as maintenance windows).
G5K_CORRELATED_SHARE: Final = 0.851

# ======================================================================= precursors
# Backblaze hds: share of failed drives whose last record shows a SMART warning (5, 187,
# 197 or 198 > 0), and of never-failed drives with the same warning.
BACKBLAZE_WARN_SHARE_FAILED: Final = 0.787
BACKBLAZE_WARN_SHARE_HEALTHY: Final = 0.171
BACKBLAZE_FAILED_DRIVES: Final = 4702
BACKBLAZE_HEALTHY_DRIVES: Final = 44128
# Backblaze hds, time-resolved: warning onsets not followed by a failure within 30 days,
# per onset that is. Real warnings are even less specific than the simulator's.
BACKBLAZE_ONSET_BENIGN_RATIO_30D: Final = 7.24
# Benign anomalies per precursor: for every failed drive that warned, this many healthy
# drives showed the same warning. choice: every mode gets the disk ratio.
BENIGN_PER_PRECURSOR: Final = (BACKBLAZE_WARN_SHARE_HEALTHY * BACKBLAZE_HEALTHY_DRIVES) / (
    BACKBLAZE_WARN_SHARE_FAILED * BACKBLAZE_FAILED_DRIVES
)

# choice (no trace in the shared data records telemetry before a failure): per mode,
# the share of failures with a precursor, the precursor's lead time (lognormal median
# hours, sd of log) and its strength (median counter increments or degrees C).
# Disk uses the Backblaze share; the others are anchored around it.
PRECURSOR: Final = {
    #  mode       share  lead_h  lead_sd  strength
    "gpu_ecc": (0.80, 24.0, 0.8, 30.0),
    "gpu_xid": (0.60, 18.0, 0.8, 10.0),
    "thermal": (0.85, 12.0, 0.8, 14.0),
    "psu": (0.40, 8.0, 0.8, 12.0),
    "disk": (BACKBLAZE_WARN_SHARE_FAILED, 72.0, 0.8, 24.0),
    "nic": (0.70, 12.0, 0.8, 12.0),
    "kernel": (0.55, 10.0, 0.8, 10.0),
    "memory": (0.80, 36.0, 0.8, 20.0),
    "cpu": (0.60, 18.0, 0.8, 12.0),
    "unknown": (0.40, 18.0, 0.9, 10.0),
    "facilities": (0.0, 1.0, 0.5, 0.0),
    "human": (0.0, 1.0, 0.5, 0.0),
}
PRECURSOR_STRENGTH_LOG_SD: Final = 1.0  # choice: some precursors are barely visible
PRECURSOR_LEAD_MIN_H: Final = 0.5
PRECURSOR_LEAD_MAX_H: Final = 7 * 24.0

# ========================================================================= demand
# Helios Earth (SenseTime), running + pending GPUs over 16 VCs, 2020-05-01..24.
HELIOS_DAILY_AMPLITUDE: Final = 0.124  # (max - min) / mean of the hour-of-day profile
HELIOS_PEAK_HOUR: Final = 23  # trace clock (Beijing time)
HELIOS_WEEKEND_RATIO: Final = 1.049  # no weekend dip in a training cluster
HELIOS_PENDING_SHARE: Final = 0.0902  # pending / (running + pending)
HELIOS_UTILISATION: Final = 0.690  # running / quota
HELIOS_HOURLY_LOG_SD: Final = 0.0382  # sd of hour-to-hour log change, whole cluster
HELIOS_TREND_PER_DAY: Final = 0.0171  # slope of daily means / mean
HELIOS_SHARE_GPUS_IN_8PLUS_JOBS: Final = 0.880
HELIOS_JOB_RUNTIME_MEDIAN_S: Final = 206.0
HELIOS_JOB_RUNTIME_LOG_SD: Final = 2.636
# Azure Public Dataset V2 whole-region VM CPU (online reference) and Alibaba 2018
# co-located online + batch cluster CPU (batch reference).
AZURE_DAILY_AMPLITUDE: Final = 0.122
AZURE_WEEKEND_RATIO: Final = 0.905
ALIBABA2018_DAILY_AMPLITUDE: Final = 0.792
PHILLY_DAILY_AMPLITUDE: Final = 0.0314

# Demand level: mean demand / capacity. Helios: running/quota 0.690 with 9.0 % of demand
# pending -> demand/quota = 0.690 / (1 - 0.090).
TRAINING_DEMAND_LEVEL: Final = HELIOS_UTILISATION / (1.0 - HELIOS_PENDING_SHARE)
# choice: level of the other pools (no quota data for them); pending there comes
# mostly from promotions.
DEMAND_LEVEL: Final = {
    "online": 0.55,
    "bigdata": 0.62,
    "training": TRAINING_DEMAND_LEVEL,
    "inference": 0.55,
}
# choice: per pool (daily amplitude, peak local hour, weekend ratio, trend per day).
DEMAND_SHAPE: Final = {
    "online": (AZURE_DAILY_AMPLITUDE, 21, AZURE_WEEKEND_RATIO, 0.002),
    "bigdata": (ALIBABA2018_DAILY_AMPLITUDE, 2, 1.0, 0.002),
    "training": (HELIOS_DAILY_AMPLITUDE, HELIOS_PEAK_HOUR, 1.0, HELIOS_TREND_PER_DAY),
    "inference": (AZURE_DAILY_AMPLITUDE * 1.5, 21, AZURE_WEEKEND_RATIO, 0.004),
}
# choice: demand trend saturates with this time constant (days) so long runs stay sane.
TREND_SATURATION_DAYS: Final = 30.0
# Helios, per VC (>= 48 GPUs of quota; a VC is the unit closest to one pool): median sd
# of log hourly demand and its lag-1 h autocorrelation.
HELIOS_VC_LOG_SD: Final = 0.547
HELIOS_VC_PHI_1H: Final = 0.810


def lognormal_sd_for_pending(level: float, pending_share: float) -> float:
    """The sd of log demand (mean-1 lognormal times ``level``) at which the expected
    pending share E[(D - 1)+] / E[D] (capacity 1) equals ``pending_share``."""
    from scipy.optimize import brentq
    from scipy.stats import norm

    def gap(sd: float) -> float:
        d1 = (math.log(level) + sd * sd / 2) / sd
        return float((level * norm.cdf(d1) - norm.cdf(d1 - sd)) / level - pending_share)

    return float(brentq(gap, 1e-3, 3.0))


# Training demand noise: the sd that gives Helios's pending share at Helios's level
# (0.467; the per-VC sd above, 0.547, also carries the daily cycle and trend), with the
# per-VC 1-h autocorrelation as its time constant (4.7 h).
TRAINING_NOISE_SD: Final = lognormal_sd_for_pending(TRAINING_DEMAND_LEVEL, HELIOS_PENDING_SHARE)
TRAINING_NOISE_TAU_H: Final = -1.0 / math.log(HELIOS_VC_PHI_1H)
# Log-AR(1) noise of demand per pool: (stationary sd, time constant in hours).
# choice for the pools without a trace of their own.
DEMAND_NOISE: Final = {
    "online": (0.04, 2.0),
    "bigdata": (0.12, 1.0),
    "training": (TRAINING_NOISE_SD, TRAINING_NOISE_TAU_H),
    "inference": (0.06, 2.0),
}
LOCAL_UTC_OFFSET_H: Final = 8  # choice: the fleet serves UTC+8 (Double 11 at local 00:00)

# choice: promotions (demand multiplier at peak per pool).
PROMOTION_MAGNITUDE: Final = {
    "double11": {"online": 3.0, "inference": 2.2, "bigdata": 1.6, "training": 0.85},
    "618": {"online": 2.2, "inference": 1.8, "bigdata": 1.4, "training": 0.9},
    "mega-sale": {"online": 2.5, "inference": 2.0, "bigdata": 1.5, "training": 0.9},
    "flash-sale": {"online": 1.4, "inference": 1.3},
}

# ================================================================== pods (openb trace)
# Alibaba openb default pod list: share of GPU pods that share a GPU, and the gpu_milli
# pmf of sharing pods (top 8 values, renormalised when sampled).
OPENB_GPU_SHARE_PODS: Final = 0.4357
OPENB_GPU_MILLI_SHARE: Final = {
    810: 0.3502,
    470: 0.2437,
    320: 0.1066,
    650: 0.0822,
    230: 0.0455,
    460: 0.0416,
    590: 0.0244,
    160: 0.0240,
}
# Quantiles (q10, q50, q90) of cpu_milli and memory_mib per pod class.
OPENB_CPU_POD: Final = {
    "cpu_milli": (8000.0, 12500.0, 32000.0),
    "memory_mib": (30517.0, 51200.0, 57344.0),
}
OPENB_SHARED_POD: Final = {
    "cpu_milli": (3152.0, 4000.0, 11908.0),
    "memory_mib": (5600.0, 15258.0, 47104.0),
}
OPENB_WHOLE_POD: Final = {
    "cpu_milli": (3152.0, 11400.0, 18708.0),
    "memory_mib": (5600.0, 48128.0, 64512.0),
}
OPENB_NUM_GPU_SHARE: Final = {0: 0.1335, 1: 0.8573, 2: 0.001963, 4: 0.001840, 8: 0.005397}
OPENB_QOS_SHARE: Final = {
    "LS": 0.5700,
    "BE": 0.4168,
    "Burstable": 0.01227,
    "Guaranteed": 0.000859,
}
OPENB_CPU_NODE_SHARE: Final = 0.2035
# Alibaba v2026 spot-GPU inventory: GPU share per model among named 8-GPU nodes.
TRAINING_MODEL_SHARE: Final = {"A100-SXM4-80GB": 0.6419, "H800": 0.3254, "A800-SXM4-80GB": 0.0327}

# choice: pod lifetimes (lognormal median hours, sd of log) per pool; training uses the
# Helios runtime above.
POD_LIFETIME_H: Final = {"online": (6.0, 1.2), "bigdata": (0.75, 1.0), "inference": (8.0, 1.0)}

# (constant name, calibrate family, figure, relative tolerance): what the calibration
# test recomputes from the traces.
CALIBRATED: Final[tuple[tuple[str, str, str, float], ...]] = (
    ("LANL_FAILURES_PER_NODE_YEAR", "lanl", "failures_per_node_year", 0.01),
    ("INTERARRIVAL_WEIBULL_SHAPE", "lanl", "interarrival_weibull_shape", 0.01),
    ("G5K_INTERARRIVAL_WEIBULL_SHAPE", "grid5000", "interarrival_weibull_shape", 0.01),
    ("NODE_FRAILTY_GAMMA_SHAPE", "lanl", "node_frailty_gamma_shape", 0.01),
    ("TITAN_GPU_EVENTS_PER_GPU_YEAR", "titan", "events_per_gpu_year", 0.01),
    ("TITAN_DBE_SHARE", "titan", "dbe_share", 0.01),
    ("TITAN_OLD_TO_NEW_RATE_RATIO", "titan", "old_to_new_rate_ratio", 0.01),
    ("REPAIR_REBOOT_MEDIAN_MIN", "lanl", "repair_software_median_min", 0.01),
    ("REPAIR_REBOOT_LOG_SD", "lanl", "repair_software_log_sd", 0.01),
    ("REPAIR_FACILITIES_MEDIAN_MIN", "lanl", "repair_facilities_median_min", 0.01),
    ("REPAIR_FACILITIES_LOG_SD", "lanl", "repair_facilities_log_sd", 0.01),
    ("LANL_REPAIR_HARDWARE_MEDIAN_MIN", "lanl", "repair_hardware_median_min", 0.01),
    ("G5K_CORRELATED_SHARE", "grid5000", "correlated_share", 0.01),
    ("BACKBLAZE_WARN_SHARE_FAILED", "backblaze", "warn_share_failed", 0.01),
    ("BACKBLAZE_WARN_SHARE_HEALTHY", "backblaze", "warn_share_healthy", 0.01),
    ("BACKBLAZE_ONSET_BENIGN_RATIO_30D", "backblaze", "onset_benign_ratio_30d", 0.01),
    ("HELIOS_DAILY_AMPLITUDE", "helios", "daily_amplitude", 0.01),
    ("HELIOS_PEAK_HOUR", "helios", "peak_hour", 0.0),
    ("HELIOS_WEEKEND_RATIO", "helios", "weekend_ratio", 0.01),
    ("HELIOS_PENDING_SHARE", "helios", "pending_share", 0.01),
    ("HELIOS_UTILISATION", "helios", "utilisation", 0.01),
    ("HELIOS_HOURLY_LOG_SD", "helios", "hourly_log_sd", 0.01),
    ("HELIOS_TREND_PER_DAY", "helios", "trend_per_day", 0.01),
    ("HELIOS_SHARE_GPUS_IN_8PLUS_JOBS", "helios", "share_gpus_in_8plus_jobs", 0.01),
    ("HELIOS_VC_LOG_SD", "helios", "vc_log_sd_median", 0.01),
    ("HELIOS_VC_PHI_1H", "helios", "vc_phi_1h_median", 0.01),
    ("HELIOS_JOB_RUNTIME_MEDIAN_S", "helios_jobs", "gpu_job_runtime_median_s", 0.01),
    ("HELIOS_JOB_RUNTIME_LOG_SD", "helios_jobs", "gpu_job_runtime_log_sd", 0.01),
    ("AZURE_DAILY_AMPLITUDE", "cpu_cloud", "azure_daily_amplitude", 0.01),
    ("AZURE_WEEKEND_RATIO", "cpu_cloud", "azure_weekend_ratio", 0.01),
    ("ALIBABA2018_DAILY_AMPLITUDE", "cpu_cloud", "alibaba2018_daily_amplitude", 0.01),
    ("PHILLY_DAILY_AMPLITUDE", "philly", "daily_amplitude", 0.01),
    ("OPENB_GPU_SHARE_PODS", "openb", "gpu_share_pods", 0.01),
    ("OPENB_CPU_NODE_SHARE", "openb", "openb_cpu_node_share", 0.01),
)
# Dict-valued constants checked key by key: (constant, family, figure prefix, tol).
CALIBRATED_MAPS: Final[tuple[tuple[str, str, str, float], ...]] = (
    ("LANL_GROUP_SHARE", "lanl", "group_share_", 0.01),
    ("LANL_HARDWARE_MODE_SHARE", "lanl", "hw_share_", 0.01),
    ("OPENB_GPU_MILLI_SHARE", "openb", "gpu_milli_share_", 0.01),
    ("OPENB_NUM_GPU_SHARE", "openb", "num_gpu_share_", 0.02),
    ("OPENB_QOS_SHARE", "openb", "qos_share_", 0.02),
    ("TRAINING_MODEL_SHARE", "openb", "model_share_", 0.01),
)
# Quantile triples checked against openb "<class>_<column>_q<p>" figures.
CALIBRATED_QUANTILES: Final = {
    "cpu": OPENB_CPU_POD,
    "shared": OPENB_SHARED_POD,
    "whole": OPENB_WHOLE_POD,
}

# =================================================================== operations
# choice: every rack gets a rolling maintenance window (kernel / firmware patching)
# about this often, starting at a local night hour, lognormal duration.
MAINTENANCE_EVERY_DAYS: Final = 45.0
MAINTENANCE_LOCAL_START_H: Final = (1.0, 4.0)
MAINTENANCE_MEDIAN_H: Final = 2.5
MAINTENANCE_LOG_SD: Final = 0.4
# choice: share of failures whose precursor is under way when a maintenance window
# starts that the maintenance averts (the part is swapped; the precursor leads nowhere).
MAINTENANCE_AVERTS_SHARE: Final = 0.5
# choice: kubelet heartbeat flaps (node NotReady for minutes, no failure).
FLAPS_PER_NODE_DAY: Final = 0.03
FLAP_MEDIAN_MIN: Final = 4.0
# choice: random scrape misses (share of samples) in runs of 1-3 samples.
SCRAPE_MISS_SHARE: Final = 0.0005
# choice: rack-wide hot-aisle episodes on GPU racks (cooling trouble that passes).
HOT_AISLE_PER_RACK_DAY: Final = 0.02
HOT_AISLE_AMPLITUDE_C: Final = (4.0, 10.0)
HOT_AISLE_MEDIAN_H: Final = 3.0

# ======================================================== signals in telemetry (choice)
# The signal a mode's precursor shows, by node class (GPU node, CPU node).
PRECURSOR_SIGNAL: Final = {
    "gpu_ecc": ("sbe", "sbe"),
    "gpu_xid": ("pcie", "pcie"),
    "thermal": ("temp", "mce"),  # CPU nodes log thermal-throttle machine checks
    "psu": ("power", "gap"),
    "disk": ("realloc", "realloc"),
    "nic": ("nic", "nic"),
    "kernel": ("mce", "mce"),
    "memory": ("mce", "mce"),
    "cpu": ("mce", "mce"),
    "unknown": ("mce", "mce"),
}
# Companion signals of a precursor (and of its benign look-alike) late in its window:
# (signal, share of episodes that have it, mean count; 0 = a missed-scrape probability).
# An early DBE with page retirement, sporadic XIDs, kubelet NotReady flaps and missed
# scrapes are what a reactive 'any XID / DBE / NotReady' rule sees before a failure.
PRECURSOR_COMPANION: Final = {
    "gpu_ecc": (("dbe", 0.3, 1.0),),
    "gpu_xid": (("xid", 0.5, 2.0), ("gap", 0.3, 0.0), ("flap", 0.2, 1.0)),
    "nic": (("gap", 0.6, 0.0), ("flap", 0.4, 2.0)),
    "psu": (("gap", 0.6, 0.0), ("flap", 0.3, 1.0)),
    "kernel": (("gap", 0.5, 0.0), ("flap", 0.4, 1.5)),
    "unknown": (("gap", 0.5, 0.0), ("flap", 0.3, 1.0)),
}
# choice: a benign look-alike is on average weaker than a real precursor (the strong
# ones overlap): its strength is drawn like a precursor's, times this factor.
BENIGN_STRENGTH_FACTOR: Final = 0.5
# choice: and shorter (a burst of corrected errors that stops rather than builds up).
BENIGN_DURATION_FACTOR: Final = 0.5
# The reactive signal right before the node goes down: (signal, mean count); it
# happens with TERMINAL_SHARE within TERMINAL_LEAD_MAX_MIN minutes of the failure.
TERMINAL_SIGNAL: Final = {
    "gpu_ecc": ("dbe", 1.5),
    "gpu_xid": ("xid", 2.0),
    "nic": ("nic", 2.0),
    "disk": ("realloc", 16.0),
    "memory": ("mce", 2.0),
    "cpu": ("mce", 1.0),
}
TERMINAL_SHARE: Final = 0.9
TERMINAL_LEAD_MAX_MIN: Final = 30.0
# Background counter increments per node-day (GPU counters on GPU nodes only), times a
# per-node lognormal noisiness; XIDs from applications (XID 13/31/43) come in bursts.
BACKGROUND_PER_NODE_DAY: Final = {
    "sbe": 0.5,
    "dbe": 0.003,
    "xid": 0.25,
    "pcie": 0.5,
    "nic": 0.05,
    "realloc": 0.01,
    "mce": 0.05,
}
NOISINESS_LOG_SD: Final = 1.2
XID_BURST_MEAN: Final = 3.0
BENIGN_PROPENSITY_LOG_SD: Final = 0.7
TEMP_STRENGTH_LOG_SD: Final = 0.4

# ======================================================================= jobs (choice)
# Training gang sizes in 8-GPU pods (one per node); the share of small single-pod jobs
# is solved so that jobs of >= 8 GPUs hold Helios's share of the GPUs.
GANG_PODS_SHARE: Final = {1: 0.45, 2: 0.25, 4: 0.15, 8: 0.10, 16: 0.05}
# Priority and QoS class per pool (openb QoS names).
POOL_PRIORITY: Final = {
    "online": (1000, "LS"),
    "inference": (900, "LS"),
    "training": (500, "Guaranteed"),
    "bigdata": (100, "BE"),
}
# Training job runtimes are Helios's lognormal, clipped to this range (seconds).
JOB_RUNTIME_CLIP_S: Final = (60.0, 7 * 86400.0)
