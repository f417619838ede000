"""Benchmark: one ``predops eval demand`` run of this checkout against the same command
on the code of an earlier commit (the peer), on the same machine and data, in the same
run.

Why: a speed bar set as a share of an issue's CPU-s can only be judged against the code
the issue measured, on the machine at hand; CPU-s from another machine or another
period of a trace do not compare (docs/demand.md, "the speed bar, measured directly").

The peer's code is checked out with ``git worktree`` into a temporary directory (from
this repository's history: ``--commit`` must be reachable) and imported ahead of the
installed package, so both sides run in this checkout's environment; the worktree is
removed afterwards. Each side is one child process; sides alternate over ``--repeats``
rounds; CPU is the child's user + sys and memory its peak RSS (``os.wait4``). Prints
one JSON object: per side the median CPU-s and wall, peak RSS, what the eval reported
against its bar (the served model's MASE, coverage, actual > p90, the best baseline)
and every model's MASE,
where each side's code was imported from, and the ratio this checkout / peer (below 1:
cheaper). Everything after ``--`` goes to ``predops eval demand`` (``--json`` is added).

    python -m benchmarks.bench_eval_against_commit --commit ff33f03 -- \\
        --source azure-vm --path ../shared/data/azure-v1-vm-cpu
    python -m benchmarks.bench_eval_against_commit --commit HEAD -- \\
        --source synthetic --days 3 --cutoffs 1 --models seasonal_naive_24   # quick
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
WHERE = "import predops.models as m; print(m.__file__)"
RUN_TIMEOUT_S = 4 * 3600
"""One side's eval may take this long before it is killed (the benchmark then fails)."""


def _git(*args: str, cwd: Path = REPO) -> str:
    out = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )
    if out.returncode != 0:
        raise SystemExit(f"git {' '.join(args)} failed: {out.stderr.strip()}")
    return out.stdout.strip()


def _child(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[str, float, float, int]:
    """(stdout, CPU-s, wall s, peak RSS in kB) of one child process."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=err, text=True)
        deadline = t0 + RUN_TIMEOUT_S
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                proc.kill()
                os.wait4(proc.pid, 0)
                raise SystemExit(f"{' '.join(cmd[:6])} ... ran past {RUN_TIMEOUT_S} s")
            time.sleep(0.2)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            what = " ".join(cmd[:6])
            raise SystemExit(f"{what} ... exited {proc.returncode}:\n{err.read()[-3000:]}")
        return out.read(), usage.ru_utime + usage.ru_stime, wall, int(usage.ru_maxrss)


def _served(report: dict[str, Any]) -> dict[str, Any]:
    t = report.get("targets", {})
    if not t.get("evaluated"):
        return {"evaluated": False}
    keys = ("model", "model_mase", "coverage", "under_provisioning", "best_baseline")
    return {k: t[k] for k in (*keys, "best_baseline_mase") if k in t}


def _mase(report: dict[str, Any]) -> dict[str, float]:
    """Every model's MASE over all horizons, as the eval reported it."""
    metrics = report.get("metrics", {})
    return {m: v["all"]["mase"] for m, v in sorted(metrics.items()) if "mase" in v.get("all", {})}


def _absolute_paths(eval_args: list[str]) -> list[str]:
    """``--path P`` and ``--path=P`` made absolute: each side runs in its own directory."""
    out: list[str] = []
    for prev, a in zip(["", *eval_args[:-1]], eval_args, strict=True):
        if prev == "--path":
            a = str(Path(a).resolve())
        elif a.startswith("--path="):
            a = "--path=" + str(Path(a.removeprefix("--path=")).resolve())
        out.append(a)
    return out


def main() -> None:
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commit", required=True, help="The peer: a commit of this repository.")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--json", action="store_true", help="Print one JSON object (the default).")
    args = ap.parse_args(argv[:split])
    eval_args = [a for a in argv[split + 1 :] if a != "--json"]
    if args.repeats < 1:
        raise SystemExit("--repeats >= 1, please")
    if not eval_args:
        raise SystemExit("give the eval's arguments after --, e.g. -- --source helios --path P")
    peer_rev = _git("rev-parse", "--verify", f"{args.commit}^{{commit}}")
    ours_rev = _git("rev-parse", "HEAD")
    dirty = bool(_git("status", "--porcelain", "--untracked-files=no"))
    # Paths the eval reads are taken from this checkout, whichever side runs.
    eval_args = _absolute_paths(eval_args)
    base_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    cmd = [sys.executable, "-m", "predops", "eval", "demand", *eval_args, "--json"]
    runs: dict[str, list[tuple[float, float, int]]] = {"peer": [], "predops": []}
    reports: dict[str, dict[str, Any]] = {}
    where: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="predops-peer-") as tmp:
        tree = Path(tmp) / "tree"
        _git("worktree", "add", "--detach", "--force", str(tree), peer_rev)
        try:
            shim = Path(tmp) / "path"
            shim.mkdir()
            (shim / "predops").symlink_to(tree, target_is_directory=True)
            env = {
                "peer": {**base_env, "PYTHONPATH": str(shim)},
                "predops": base_env,
            }
            cwd = {"peer": tree, "predops": REPO}
            for side in ("peer", "predops"):
                where[side] = _child([sys.executable, "-c", WHERE], cwd[side], env[side])[0].strip()
            for k in range(args.repeats):
                for side in ("peer", "predops") if k % 2 == 0 else ("predops", "peer"):
                    out, cpu, wall, rss = _child(cmd, cwd[side], env[side])
                    reports[side] = json.loads(out.strip().splitlines()[-1])
                    runs[side].append((cpu, wall, rss))
        finally:
            _git("worktree", "remove", "--force", str(tree))
    sides = {
        s: {
            "cpu_s": round(statistics.median(r[0] for r in v), 1),
            "wall_s": round(statistics.median(r[1] for r in v), 1),
            "peak_rss_mb": round(max(r[2] for r in v) / 1024, 1),
            "served": _served(reports[s]),
            "mase": _mase(reports[s]),
            "imported_from": where[s],
        }
        for s, v in runs.items()
    }
    report = {
        "benchmark": "predops eval demand: this checkout against an earlier commit's code",
        "eval_args": eval_args,
        "peer_commit": peer_rev,
        "predops_commit": ours_rev + ("+uncommitted" if dirty else ""),
        "repeats": args.repeats,
        "peer": sides["peer"],
        "predops": sides["predops"],
        "ratio_cpu": round(sides["predops"]["cpu_s"] / max(sides["peer"]["cpu_s"], 1e-9), 3),
        "ratio_wall": round(sides["predops"]["wall_s"] / max(sides["peer"]["wall_s"], 1e-9), 3),
    }
    print(json.dumps(report, sort_keys=True))


if __name__ == "__main__":
    main()
