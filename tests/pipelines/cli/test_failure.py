"""``predops eval failure`` on real public data (small slices, read where they live)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from predops.pipelines.cli.main import main


def run(*args: str) -> dict[str, object]:
    result = CliRunner().invoke(main, ["eval", "failure", *args, "--json"])
    out = json.loads(result.output.splitlines()[0])
    assert isinstance(out, dict)
    out["_exit"] = result.exit_code
    return out


def test_nab_series_is_scored_next_to_the_published_scoreboard(shared_data: Path) -> None:
    nab = shared_data / "numenta-NAB"
    series = nab / "data" / "realAWSCloudwatch" / "ec2_cpu_utilization_825cc2.csv"
    windows = json.loads((nab / "labels" / "combined_windows.json").read_text())
    out = run("--source", "nab", "--path", str(series))
    assert out["_exit"] == 0, out
    expected = len(windows["realAWSCloudwatch/ec2_cpu_utilization_825cc2.csv"])
    assert out["series"] == 1 and out["windows"] == expected
    scores = out["scores"]["predops_robust"]  # type: ignore[index]
    assert set(scores) == {"standard", "reward_low_FP_rate", "reward_low_FN_rate"}
    assert -100.0 <= scores["standard"]["score"] <= 100.0
    assert out["published_scoreboard"]["numenta"]["standard"] > 0  # type: ignore[index]


def test_backblaze_daily_slice_reports_model_and_both_baselines(
    shared_data: Path, tmp_path: Path
) -> None:
    src = shared_data / "backblaze" / "raw-daily-2013"
    for f in sorted(src.glob("*.csv.gz"))[:10]:
        shutil.copy(f, tmp_path / f.name)  # a slice in tmp, never in the repo
    out = run("--source", "backblaze-daily", "--path", str(tmp_path), "--horizon", "3d")
    assert out["_exit"] == 0, out
    assert out["input"]["drives"] > 20_000  # type: ignore[index]
    splits = out["splits"]
    assert isinstance(splits, dict)
    done = {k: v for k, v in splits.items() if "error" not in v}
    assert done, splits
    for res in done.values():
        for scorer in ("model", "logistic", "rule"):
            assert 0.0 <= res[scorer]["pr_auc"] <= 1.0
            assert set(res[scorer]["at_false_alarm_rate"]) == {"0.001", "0.005", "0.01"}
        assert "brier" in res["model"] and res["model"]["reliability"]
        assert res["comparison"]["rule_false_alarm_rate"] > 0


def test_missing_path_is_a_clear_error() -> None:
    result = CliRunner().invoke(main, ["eval", "failure", "--source", "backblaze-hds"])
    assert result.exit_code != 0
    assert "--path is required for backblaze-hds" in result.output


def test_unreadable_input_names_the_path() -> None:
    bad = "not-a-dir-at-all"
    out = run("--source", "backblaze-daily", "--path", bad)
    assert out["_exit"] != 0
    assert bad in str(out["error"])
