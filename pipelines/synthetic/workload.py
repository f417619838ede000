"""Pods and jobs that realise each series' demand.

Jobs arrive as a Poisson process whose rate follows the series demand (Little's law:
rate = demand / (mean units per job x mean lifetime)), so the pods alive at a time add
up to about the demand. Sizes follow the Alibaba openb pod mix (CPU pods, GPU-sharing
inference pods with fractional ``gpu_milli``, whole-GPU pods); training jobs are small
single pods or gangs of 8-GPU pods (one per node) in the Helios proportion.

A job created while its series has pending demand waits until the series has room;
its lifetime counts from creation (the wait is demand too), and a job whose lifetime
ends before it is scheduled gives up (phase ``Failed``, never scheduled). A pod dies
early when its node fails (phase ``Failed``; its gang dies with it) or is
drained for maintenance (``Evicted``). Pods already running at the start are drawn
length-biased, with creation times before the start.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import numpy as np
import polars as pl

from predops.core.schemas import PODS
from predops.pipelines.synthetic import calibration as cal
from predops.pipelines.synthetic.demand import DemandSeries, SeriesSpec
from predops.pipelines.synthetic.failures import Failures, Windows, overlaps, time_key
from predops.pipelines.synthetic.topology import SKUS, Fleet

MC_DRAWS = 4096
Z90 = 1.2815516


def small_job_share() -> float:
    """Share of training jobs that are small single pods, so that jobs of >= 8 GPUs hold
    HELIOS_SHARE_GPUS_IN_8PLUS_JOBS of the GPUs (by job count x GPUs)."""
    gang = 8.0 * sum(k * p for k, p in cal.GANG_PODS_SHARE.items())
    small_p = {k: cal.OPENB_NUM_GPU_SHARE[k] for k in (1, 2, 4)}
    small = sum(k * p for k, p in small_p.items()) / sum(small_p.values())
    s8 = cal.HELIOS_SHARE_GPUS_IN_8PLUS_JOBS
    return gang * (1 - s8) / (gang * (1 - s8) + small * s8)


def _quantile_lognormal(
    q: tuple[float, float, float], size: int, rng: np.random.Generator
) -> np.ndarray:
    """Draws from the lognormal through a (q10, q50, q90) triple."""
    sd = np.log(q[2] / q[0]) / (2 * Z90)
    out: np.ndarray = q[1] * np.exp(sd * rng.standard_normal(size))
    return out


@dataclass(slots=True)
class Jobs:
    """Drawn jobs of one series: units of the series resource, lifetime (s), pods."""

    units: np.ndarray
    life: np.ndarray
    pods: np.ndarray  # pods per job (gang size)
    num_gpu: np.ndarray  # per pod
    gpu_milli: np.ndarray  # per pod
    cpu_milli: np.ndarray  # per pod
    memory_mib: np.ndarray  # per pod


def draw_jobs(spec: SeriesSpec, size: int, rng: np.random.Generator) -> Jobs:
    """``size`` jobs of the kind the series' pool runs."""
    sku = SKUS[spec.sku]
    node_cpu, node_mem = float(sku.cpu_milli), float(sku.memory_mib)
    pods = np.ones(size, dtype=np.int64)
    num_gpu = np.zeros(size, dtype=np.int64)
    gpu_milli = np.zeros(size, dtype=np.int64)
    if spec.pool in ("online", "bigdata"):
        cls = cal.OPENB_CPU_POD
        med, sd = cal.POD_LIFETIME_H[spec.pool]
        life = med * 3600.0 * np.exp(sd * rng.standard_normal(size))
        cpu = _quantile_lognormal(cls["cpu_milli"], size, rng)
        mem = _quantile_lognormal(cls["memory_mib"], size, rng)
        units = np.round(cpu / 500.0) * 0.5
    elif spec.pool == "inference":
        shared = rng.random(size) < cal.OPENB_GPU_SHARE_PODS
        values = np.array(list(cal.OPENB_GPU_MILLI_SHARE))
        p = np.array(list(cal.OPENB_GPU_MILLI_SHARE.values()))
        gpu_milli = np.where(shared, rng.choice(values, size=size, p=p / p.sum()), 1000)
        num_gpu[:] = 1
        cls_s, cls_w = cal.OPENB_SHARED_POD, cal.OPENB_WHOLE_POD
        cpu = np.where(
            shared,
            _quantile_lognormal(cls_s["cpu_milli"], size, rng),
            _quantile_lognormal(cls_w["cpu_milli"], size, rng),
        )
        mem = np.where(
            shared,
            _quantile_lognormal(cls_s["memory_mib"], size, rng),
            _quantile_lognormal(cls_w["memory_mib"], size, rng),
        )
        med, sd = cal.POD_LIFETIME_H["inference"]
        life = med * 3600.0 * np.exp(sd * rng.standard_normal(size))
        units = gpu_milli / 1000.0
    else:  # training
        small = rng.random(size) < small_job_share()
        ks = np.array(list(cal.GANG_PODS_SHARE))
        kp = np.array(list(cal.GANG_PODS_SHARE.values()))
        gang = np.minimum(rng.choice(ks, size=size, p=kp / kp.sum()), max(spec.nodes.size, 1))
        sk = np.array([1, 2, 4])
        sp = np.array([cal.OPENB_NUM_GPU_SHARE[k] for k in (1, 2, 4)])
        num_gpu = np.where(small, rng.choice(sk, size=size, p=sp / sp.sum()), sku.gpus)
        pods = np.where(small, 1, gang)
        gpu_milli = np.full(size, 1000)
        per_gpu = cal.OPENB_WHOLE_POD
        cpu = num_gpu * _quantile_lognormal(per_gpu["cpu_milli"], size, rng)
        mem = num_gpu * _quantile_lognormal(per_gpu["memory_mib"], size, rng)
        life = np.exp(
            np.log(cal.HELIOS_JOB_RUNTIME_MEDIAN_S)
            + cal.HELIOS_JOB_RUNTIME_LOG_SD * rng.standard_normal(size)
        )
        life = np.clip(life, *cal.JOB_RUNTIME_CLIP_S)
        units = (num_gpu * pods).astype(np.float64)
    cpu = np.clip(np.round(cpu / 100.0) * 100.0, 100.0, 0.9 * node_cpu)
    mem = np.clip(np.round(mem / 512.0) * 512.0, 512.0, 0.9 * node_mem)
    if spec.pool in ("online", "bigdata"):
        units = cpu / 1000.0
    return Jobs(
        units.astype(np.float64),
        life,
        pods,
        num_gpu,
        gpu_milli,
        cpu.astype(np.int64),
        mem.astype(np.int64),
    )


def _take(j: Jobs, idx: np.ndarray) -> Jobs:
    return Jobs(
        j.units[idx],
        j.life[idx],
        j.pods[idx],
        j.num_gpu[idx],
        j.gpu_milli[idx],
        j.cpu_milli[idx],
        j.memory_mib[idx],
    )


def _series_jobs(
    d: DemandSeries, i: int, t: np.ndarray, step: float, rng: np.random.Generator
) -> tuple[Jobs, np.ndarray]:
    """Jobs of series ``i`` and their creation times (negative: running at the start)."""
    spec = d.specs[i]
    mc = draw_jobs(spec, MC_DRAWS, rng)
    mean_units = float(mc.units.mean())
    mean_life = float(mc.life.mean())
    rate = d.value[i] / (mean_units * mean_life)  # jobs per second
    counts = rng.poisson(rate * step)
    sample = np.repeat(np.arange(t.size), counts)
    created = t[sample] + rng.random(sample.size) * step
    new = draw_jobs(spec, sample.size, rng)
    # Already running at the start: length-biased draw, uniform age.
    n0 = int(rng.poisson(d.value[i][0] / mean_units)) if t.size else 0
    cand = draw_jobs(spec, max(4 * n0, 1), rng)
    pick = rng.choice(cand.life.size, size=n0, p=cand.life / cand.life.sum())
    old = _take(cand, pick)
    age = rng.random(n0) * old.life
    jobs = Jobs(*(np.concatenate([getattr(old, f), getattr(new, f)]) for f in Jobs.__slots__))
    return jobs, np.concatenate([-age, created])


def _next_free(pending: np.ndarray) -> np.ndarray:
    """For each sample, the first sample at or after it without pending demand (or T)."""
    n = pending.size
    idx = np.where(pending > 0, n, np.arange(n))
    return np.minimum.accumulate(idx[::-1])[::-1]


def simulate_pods(
    fleet: Fleet,
    d: DemandSeries,
    t: np.ndarray,
    step: float,
    failures: Failures,
    maint: Windows,
    rng: np.random.Generator,
    start: datetime,
) -> pl.DataFrame:
    """The PODS table of the run."""
    horizon = float(t[-1] + step) if t.size else 0.0
    down = _down_windows(failures, maint)
    ikey, ikind = _interrupts(failures, maint)
    frames = []
    for i, spec in enumerate(d.specs):
        jobs, created = _series_jobs(d, i, t, step, rng)
        nj = created.size
        # Scheduling: wait while the series is short of capacity.
        free = _next_free(d.pending[i])
        s_idx = np.clip(
            np.floor(np.maximum(created, 0.0) / step).astype(np.int64), 0, max(t.size - 1, 0)
        )
        nxt = free[s_idx] if t.size else s_idx
        waits = (created >= 0) & (nxt != s_idx)
        sched = np.where(created < 0, created, created + rng.uniform(1.0, 30.0, size=nj))
        sched = np.where(
            waits,
            np.where(nxt < t.size, t[np.minimum(nxt, t.size - 1)] + rng.random(nj) * step, np.nan),
            sched,
        )
        # A job's lifetime runs from its creation (Little's law counts the wait as
        # demand): a job still waiting when its lifetime is up gives up unscheduled.
        deadline = created + jobs.life
        sched = np.where(sched >= deadline, np.nan, sched)
        # Expand jobs to pods.
        job = np.repeat(np.arange(nj), jobs.pods)
        rank = np.arange(job.size) - np.repeat(np.cumsum(jobs.pods) - jobs.pods, jobs.pods)
        p_sched = sched[job]
        unscheduled = np.isnan(p_sched)
        node = _place(spec.nodes, job, rank, p_sched, down, rng)
        end = deadline[job]
        phase = np.where(unscheduled, "Failed", "Succeeded").astype(object)
        k = time_key(node, np.nan_to_num(p_sched, nan=0.0))
        j = np.searchsorted(ikey, k, side="right")
        jj = np.minimum(j, max(ikey.size - 1, 0))
        if ikey.size:
            cand_node = (ikey[jj] // 1e9).astype(np.int64)
            t_int = ikey[jj] - cand_node * 1e9
            hit = ~unscheduled & (j < ikey.size) & (cand_node == node) & (t_int < end)
            end = np.where(hit, t_int, end)
            phase = np.where(hit, np.where(ikind[jj] == 1, "Evicted", "Failed"), phase)
        # A gang ends when its first pod ends early.
        gang_end = np.full(nj, np.inf)
        np.minimum.at(gang_end, job, end)
        torn = (jobs.pods[job] > 1) & (gang_end[job] < end)
        end = np.where(torn, gang_end[job], end)
        phase = np.where(torn, "Failed", phase)
        alive = end > horizon
        pending = unscheduled & alive
        running = ~unscheduled & alive
        phase = np.where(pending, "Pending", np.where(running, "Running", phase))
        frames.append(
            pl.DataFrame(
                {
                    "__created": created[job],
                    "__series": np.full(job.size, i),
                    "__job": job,
                    "__rank": rank,
                    "gang_size": jobs.pods[job],
                    "pool": spec.pool,
                    "cpu_milli": jobs.cpu_milli[job],
                    "memory_mib": jobs.memory_mib[job],
                    "num_gpu": jobs.num_gpu[job],
                    "gpu_milli": jobs.gpu_milli[job],
                    "gpu_spec": _gpu_spec(spec.gpu_model),
                    "phase": phase.astype(str),
                    "__sched": p_sched,
                    "__deleted": np.where(alive, np.nan, end),
                    "__node": np.where(unscheduled, -1, node),
                },
                schema_overrides={"gpu_spec": pl.String},
            )
        )
    return _finish(pl.concat(frames), fleet, start)


def _gpu_spec(model: str | None) -> str | None:
    if model in ("A100-SXM4-80GB", "A800-SXM4-80GB"):
        return "A100-SXM4-80GB|A800-SXM4-80GB"  # same 80 GB Ampere part, interchangeable
    return model


def _down_windows(f: Failures, m: Windows) -> Windows:
    node = np.concatenate([f.node, m.node])
    a = np.concatenate([f.at, m.start - 1800.0])
    b = np.concatenate([f.repair_at, m.end + 600.0])
    order = np.lexsort((a, node))
    return Windows(node[order], a[order], b[order])


def _interrupts(f: Failures, m: Windows) -> tuple[np.ndarray, np.ndarray]:
    """Sorted (node, time) keys of pod-ending events: failures (0) and drains (1)."""
    key = np.concatenate([time_key(f.node, f.at), time_key(m.node, m.start - 1200.0)])
    kind = np.concatenate([np.zeros(len(f), np.int8), np.ones(len(m), np.int8)])
    order = np.argsort(key, kind="stable")
    return key[order], kind[order]


def _place(
    nodes: np.ndarray,
    job: np.ndarray,
    rank: np.ndarray,
    at: np.ndarray,
    down: Windows,
    rng: np.random.Generator,
) -> np.ndarray:
    """A node of the series for every pod: gang members on distinct nodes where the
    series has enough; a pod whose node is down when it starts is placed again."""
    offset = rng.integers(0, nodes.size, size=int(job.max()) + 1 if job.size else 0)
    # Gang member r of job j goes to node (offset_j + r) mod n: distinct, and neighbours
    # in the series share racks, as a topology-aware scheduler would place them.
    pick: np.ndarray = nodes[(offset[job] + rank) % nodes.size]
    when = np.nan_to_num(at, nan=0.0)
    for _ in range(4):
        bad = overlaps(pick, when, down)
        if not bad.any():
            break
        # Move the whole job, so gang members stay on distinct nodes.
        redo = np.isin(job, np.unique(job[bad]))
        offset[np.unique(job[bad])] = rng.integers(0, nodes.size, size=np.unique(job[bad]).size)
        pick[redo] = nodes[(offset[job[redo]] + rank[redo]) % nodes.size]
    return pick


def _finish(df: pl.DataFrame, fleet: Fleet, start: datetime) -> pl.DataFrame:
    """Stable ids in creation order, timestamps, node names, priorities."""
    epoch_us = start.timestamp() * 1e6

    def ts(col: str) -> pl.Expr:
        return (
            (pl.col(col).fill_nan(None) * 1e6 + epoch_us)
            .round(0)
            .cast(pl.Int64)
            .cast(pl.Datetime("us", "UTC"))
        )

    df = df.sort("__created", "__series", "__job", "__rank")
    jobs = df.select("__series", "__job").unique(maintain_order=True).with_row_index("__jid")
    df = df.join(jobs, on=["__series", "__job"], how="left", maintain_order="left")
    prio = {p: v[0] for p, v in cal.POOL_PRIORITY.items()}
    qos = {p: v[1] for p, v in cal.POOL_PRIORITY.items()}
    out = df.with_row_index("__pid").select(
        pl.format("pod-{}", pl.col("__pid").cast(pl.String).str.zfill(9)).alias("pod_id"),
        pl.format("job-{}", pl.col("__jid").cast(pl.String).str.zfill(9)).alias("job_id"),
        pl.when(pl.col("gang_size") > 1)
        .then(pl.format("gang-{}", pl.col("__jid").cast(pl.String).str.zfill(9)))
        .alias("gang_id"),
        pl.when(pl.col("gang_size") > 1).then(pl.col("gang_size")).alias("gang_size"),
        "pool",
        "cpu_milli",
        "memory_mib",
        "num_gpu",
        "gpu_milli",
        "gpu_spec",
        pl.col("pool").replace_strict(qos).alias("qos"),
        pl.col("pool").replace_strict(prio, return_dtype=pl.Int32).alias("priority"),
        "phase",
        ts("__created").alias("created_at"),
        ts("__sched").alias("scheduled_at"),
        ts("__deleted").alias("deleted_at"),
        pl.col("__node"),
    )
    names = np.array(fleet.node_id, dtype=object)
    node_col = np.where(
        out["__node"].to_numpy() >= 0, names[np.maximum(out["__node"].to_numpy(), 0)], None
    )
    out = out.with_columns(pl.Series("node_id", node_col, dtype=pl.String)).drop("__node")
    return out.select(PODS.names).cast(PODS.polars_schema())
