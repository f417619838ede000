"""NAB (Numenta Anomaly Benchmark) scoring, from its published definition.

Lavin & Ahmad, "Evaluating Real-time Anomaly Detection Algorithms - the Numenta
Anomaly Benchmark" (2015), and NAB v1.1's scorer:

- Each labelled anomaly has a window of points. A detection (score >= threshold) at
  relative position ``y`` in a window (``-1`` at its first point, approaching 0 at its
  last: ``y = -(right - i + 1) / width``) earns ``A_tp * S(y) / S(-1)`` where
  ``S(y) = 2 / (1 + exp(5 y)) - 1`` (the scaled sigmoid); only a window's earliest
  detection counts. A window without detection costs ``A_fn``.
- A detection outside every window is a false positive worth ``A_fp * S(y)`` with
  ``y = (i - last window's right edge) / (that window's width - 1)`` (``S = -1`` for
  ``y >= 3`` or before the first window): a detection just after a window costs
  little, one far from any window costs ``A_fp``.
- The first 15 % of each file (at most 750 points) is a probationary period: its points
  count neither way (windows wholly inside it are not scored).
- One threshold per detector and profile is chosen to maximise the summed raw score
  over the corpus; the reported score is ``100 * (raw - null) / (perfect - null)``,
  where *null* never detects (every window missed) and *perfect* detects each window at
  its first point.

Profiles (weights ``A_tp, A_fp, A_fn``): standard (1, 0.11, 1), reward_low_FP_rate
(1, 0.22, 1), reward_low_FN_rate (1, 0.11, 2).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

PROFILES: dict[str, dict[str, float]] = {
    "standard": {"tp": 1.0, "fp": 0.11, "fn": 1.0},
    "reward_low_FP_rate": {"tp": 1.0, "fp": 0.22, "fn": 1.0},
    "reward_low_FN_rate": {"tp": 1.0, "fp": 0.11, "fn": 2.0},
}
PROBATION_SHARE = 0.15


def scaled_sigmoid(y: np.ndarray | float) -> np.ndarray:
    """NAB's ``S(y)``: 2 * sigmoid(-5 y) - 1, and -1 from y >= 3 on."""
    yy = np.asarray(y, dtype=np.float64)
    out: np.ndarray = np.where(yy >= 3.0, -1.0, 2.0 / (1.0 + np.exp(5.0 * yy)) - 1.0)
    return out


def probation_length(n: int) -> int:
    """Points at the start of a file that are not scored."""
    return int(min(math.floor(PROBATION_SHARE * n), PROBATION_SHARE * 5000))


@dataclass(frozen=True)
class ScoredFile:
    """Per point of one file: its detector score, its NAB weight if detected (unweighted
    by the profile: ``tp`` part inside windows, ``fp`` part outside) and its window
    index (-1 outside every window); probationary points are already dropped."""

    score: np.ndarray
    sweep: np.ndarray
    window: np.ndarray
    n_windows: int


def prepare_file(
    timestamps: np.ndarray,
    scores: np.ndarray,
    windows: Sequence[tuple[np.datetime64, np.datetime64]],
) -> ScoredFile:
    """Positions of every point relative to the windows (profile independent).

    ``timestamps`` sorted ascending; ``windows`` as (start, end) inclusive times.
    """
    ts = np.asarray(timestamps)
    s = np.asarray(scores, dtype=np.float64)
    if ts.shape != s.shape:
        raise ValueError("timestamps and scores must have the same length")
    if np.isnan(s).any():
        raise ValueError("detector scores contain NaN")
    n = ts.size
    window = np.full(n, -1, dtype=np.int64)
    y = np.full(n, 3.0)  # outside windows, before the first: S = -1
    bounds = []
    for w, (start, end) in enumerate(sorted(windows)):
        left = int(np.searchsorted(ts, start, side="left"))
        right = int(np.searchsorted(ts, end, side="right")) - 1
        if right < left:
            continue
        bounds.append((left, right))
        width = right - left + 1
        idx = np.arange(left, right + 1)
        window[idx] = w
        y[idx] = -(right - idx + 1) / width
    # False positives: relative distance past the last window that ended before them.
    prev_right, prev_width = -1, 0
    b = 0
    for i in range(n):
        while b < len(bounds) and bounds[b][1] < i:
            prev_right, prev_width = bounds[b][1], bounds[b][1] - bounds[b][0] + 1
            b += 1
        if window[i] < 0 and prev_right >= 0:
            y[i] = abs(i - prev_right) / max(prev_width - 1, 1)
    keep = np.arange(n) >= probation_length(n)
    scored_windows = set(window[keep & (window >= 0)].tolist())
    # Renumber windows that survive probation 0..k-1.
    remap = {w: k for k, w in enumerate(sorted(scored_windows))}
    win = np.array([remap.get(int(w), -1) for w in window[keep]], dtype=np.int64)
    return ScoredFile(s[keep], scaled_sigmoid(y[keep]), win, len(remap))


def corpus_scores(
    files: Sequence[ScoredFile], profile: Mapping[str, float]
) -> tuple[np.ndarray, np.ndarray]:
    """Raw corpus score at every distinct threshold (descending): (thresholds, scores).

    A point detects when its score >= the threshold; each window keeps its best (i.e.
    earliest) detection, missed windows cost ``fn``.
    """
    scores = np.concatenate([f.score for f in files]) if files else np.zeros(0)
    offsets = np.cumsum([0] + [f.n_windows for f in files])
    win = np.concatenate(
        [np.where(f.window >= 0, f.window + offsets[k], -1) for k, f in enumerate(files)]
    )
    sweep = np.concatenate([f.sweep for f in files])
    n_win = int(offsets[-1])
    tp_w, fp_w, fn_w = profile["tp"], profile["fp"], profile["fn"]
    maxtp = float(scaled_sigmoid(-1.0))
    order = np.argsort(-scores, kind="stable")
    best = np.full(n_win, -math.inf)
    total_fp = 0.0
    thresholds, totals = [math.inf], [-fn_w * n_win]
    tp_sum = 0.0  # sum over detected windows of their best tp weight
    detected = 0
    i = 0
    while i < order.size:
        thr = scores[order[i]]
        while i < order.size and scores[order[i]] == thr:
            j = order[i]
            if win[j] < 0:
                total_fp += fp_w * sweep[j]
            else:
                v = tp_w * sweep[j] / maxtp
                w = win[j]
                if best[w] == -math.inf:
                    detected += 1
                    tp_sum += v
                    best[w] = v
                elif v > best[w]:
                    tp_sum += v - best[w]
                    best[w] = v
            i += 1
        thresholds.append(float(thr))
        totals.append(tp_sum - fn_w * (n_win - detected) + total_fp)
    return np.array(thresholds), np.array(totals)


def nab_score(files: Sequence[ScoredFile], profile: str = "standard") -> dict[str, float]:
    """The normalised NAB score (0 = null detector, 100 = perfect) at the best corpus
    threshold, with the raw figures."""
    weights = PROFILES[profile]
    thr, raw = corpus_scores(files, weights)
    k = int(np.argmax(raw))
    n_win = sum(f.n_windows for f in files)
    null = -weights["fn"] * n_win
    perfect = weights["tp"] * n_win
    return {
        "score": 100.0 * (raw[k] - null) / (perfect - null) if perfect != null else math.nan,
        "threshold": float(thr[k]),
        "raw": float(raw[k]),
        "null_raw": null,
        "perfect_raw": perfect,
        "windows": n_win,
    }
