"""``predops allocator replay`` (pipelines/allocator_cli.py) end to end on small openb
CSV files written by the test."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from predops.pipelines.cli.main import main

NODES = """sn,cpu_milli,memory_mib,gpu,model
n0,64000,262144,8,V100M32
n1,64000,262144,8,V100M32
n2,96000,393216,2,T4
"""
PODS_HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"  # noqa: E501


def _pods(rows: list[str]) -> str:
    return PODS_HEADER + "".join(r + "\n" for r in rows)


def _write(tmp: Path, nodes: str, pods: str) -> tuple[str, str]:
    n, p = tmp / "openb_node_list_test.csv", tmp / "openb_pod_list_test.csv"
    n.write_text(nodes)
    p.write_text(pods)
    return str(n), str(p)


def _rows(k: int) -> list[str]:
    shapes = [
        "4000,8192,1,500,",
        "8000,16384,1,1000,",
        "2000,4096,0,0,",
        "12000,32768,2,1000,",
        "6000,8192,1,300,T4",
    ]
    return [f"pod-{i},{shapes[i % 5]},LS,Running,{i},,{i}" for i in range(k)]


def test_replay_prints_one_json_object(tmp_path: Path) -> None:
    nodes, pods = _write(tmp_path, NODES, _pods(_rows(25)))
    out = CliRunner().invoke(
        main,
        [
            "--workspace",
            str(tmp_path / "ws"),
            "allocator",
            "replay",
            "--nodes",
            nodes,
            "--pods",
            pods,
            "--policy",
            "fgd",
            "--seed",
            "42",
            "--json",
        ],
    )
    assert out.exit_code == 0, out.output
    res = json.loads(out.output)
    assert res["policy"] == "fgd" and res["seed"] == 42 and res["nodes"] == 3
    assert res["total_gpus"] == 18 and res["pods_original"] == 25
    assert res["pods_placed"] + sum(res["unplaced_by_reason"].values()) == res["pods_arrived"]
    assert 0 < res["final_gpu_allocation_pct"] <= 100
    assert res["wall_time_s"] >= res["replay_time_s"] > 0
    human = CliRunner().invoke(
        main, ["allocator", "replay", "--nodes", nodes, "--pods", pods, "--policy", "best_fit"]
    )
    assert human.exit_code == 0 and "GPU allocated %" in human.output


def test_bad_row_is_named(tmp_path: Path) -> None:
    rows = _rows(4)
    rows[2] = "pod-2,lots,8192,1,500,,LS,Running,2,,2"
    nodes, pods = _write(tmp_path, NODES, _pods(rows))
    out = CliRunner().invoke(
        main, ["allocator", "replay", "--nodes", nodes, "--pods", pods, "--json"]
    )
    assert out.exit_code != 0
    err = json.loads(out.output.splitlines()[0])
    assert "row 3 field cpu_milli" in err["error"] and pods in err["error"]
    bad_nodes = NODES.replace("n2,96000", "n2,-5")
    nodes, pods = _write(tmp_path, bad_nodes, _pods(_rows(4)))
    out = CliRunner().invoke(main, ["allocator", "replay", "--nodes", nodes, "--pods", pods])
    assert out.exit_code != 0 and "row 3 field cpu_milli" in out.output
    missing = CliRunner().invoke(
        main, ["allocator", "replay", "--nodes", str(tmp_path / "no"), "--pods", pods]
    )
    assert missing.exit_code != 0 and "No such file" in missing.output
