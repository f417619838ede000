"""``predops allocator``: the topology-aware allocator from the command line.

``predops allocator replay --nodes NODES.csv --pods PODS.csv --policy fgd --seed 42
--json`` replays an openb pod list onto an openb node list the way the FGD paper's
artifact does (random arrival order per seed, inflated to ``--tune`` x the cluster's
GPU capacity) and prints the GPU allocation ratio at each 10 % of arrived load, the
fragmentation ratio and the wall time. Input rows are validated against the inventory
and pods contracts; any bad row stops the run with the file, row, field and reason.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import click
import polars as pl

from predops.allocator.policies import POLICY_NAMES
from predops.allocator.replay import DEFAULT_TUNE, replay
from predops.allocator.requests import PodBatch
from predops.allocator.topology import Topology
from predops.core.schemas import INVENTORY, PODS, FrameSchema
from predops.core.validation import validate
from predops.pipelines.cli.support import reports
from predops.pipelines.ingest.traces.openb import read_nodes, read_pods


def load_valid(frame: pl.DataFrame, schema: FrameSchema, path: Path) -> pl.DataFrame:
    """Rows of ``frame`` cast to ``schema``; any quarantined row is an error naming the
    file, the data row (1 = first row after the header), the field and the reason."""
    result = validate(frame, schema)
    bad = result.quarantined
    if bad.height:
        shown = "; ".join(
            f"row {r['row']} field {r['field']}: {r['reason']}"
            for r in bad.head(3).iter_rows(named=True)
        )
        more = f" (and {bad.height - 3} more)" if bad.height > 3 else ""
        raise ValueError(f"{path}: {bad.height} bad row(s): {shown}{more}")
    return result.good


@click.group("allocator")
def allocator_group() -> None:
    """Topology-aware GPU allocator: replays, what-ifs, fragmentation."""


@allocator_group.command("replay")
@click.option(
    "--nodes",
    "nodes_path",
    required=True,
    type=click.Path(dir_okay=False),
    help="openb node list CSV (e.g. openb_node_list_gpu_node.csv).",
)
@click.option(
    "--pods",
    "pods_path",
    required=True,
    type=click.Path(dir_okay=False),
    help="openb pod list CSV (e.g. openb_pod_list_default.csv).",
)
@click.option("--policy", type=click.Choice(POLICY_NAMES), default="fgd", show_default=True)
@click.option(
    "--seed",
    type=int,
    default=42,
    show_default=True,
    help="Arrival order and tie-breaks (the paper uses 42-51).",
)
@click.option(
    "--tune",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULT_TUNE,
    show_default=True,
    help="Inflate arrivals to this x GPU capacity.",
)
@click.option(
    "--tie-break",
    type=click.Choice(["rank", "random"]),
    default="rank",
    show_default=True,
    help="rank: the artifact's fixed random node order.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@reports
def replay_cmd(
    nodes_path: str,
    pods_path: str,
    policy: str,
    seed: int,
    tune: float,
    tie_break: str,
    as_json: bool,
) -> None:
    """Replay an openb pod list onto an openb node list with one placement policy."""
    started = time.perf_counter()
    nodes = load_valid(read_nodes(Path(nodes_path)), INVENTORY, Path(nodes_path))
    pods = load_valid(read_pods(Path(pods_path)), PODS, Path(pods_path))
    topology = Topology.from_inventory(nodes)
    workload = PodBatch.from_frame(pods, source=pods_path)
    loaded = time.perf_counter()
    result = replay(topology, workload, policy, seed=seed, tune=tune, tie_break=tie_break)
    done = time.perf_counter()
    out = result.to_dict()
    out.update(
        {
            "nodes": len(topology),
            "nodes_file": nodes_path,
            "pods_file": pods_path,
            "wall_time_s": round(done - started, 3),
            "replay_time_s": round(done - loaded, 3),
            "pods_per_s": round(result.pods_arrived / max(done - loaded, 1e-9), 1),
        }
    )
    if as_json:
        click.echo(json.dumps(out, sort_keys=True))
        return
    click.echo(
        f"{out['policy']} seed {seed}: {out['pods_arrived']} pods arrived "
        f"({out['pods_placed']} placed) on {out['nodes']} nodes in "
        f"{out['replay_time_s']} s"
    )
    click.echo("arrived %   GPU allocated %   fragmented idle %")
    for k, v in out["gpu_allocation_pct"].items():
        click.echo(f"{k:>9}   {v:>15.2f}   {out['frag_ratio_pct'].get(k, 0.0):>17.2f}")
