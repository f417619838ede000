"""GPU fragmentation of a node and of the cluster, as the FGD paper defines it.

For a node and one pod type ``t`` of the target distribution, the node's idle GPU
milli are *fragmented for t* when ``t`` cannot use them: all of them when ``t`` cannot
run on the node at all (too little CPU, too few GPUs with enough free milli, a GPU
model it may not use) or needs no GPU; otherwise only the idle milli on GPUs with less
free than ``t`` needs per GPU. The node's fragmentation is the expectation over the
distribution, ``F_n = sum_t p_t * frag_t(n)`` in milli-GPU; the cluster's is the sum
over nodes, and the fragmentation ratio is that sum over all idle GPU milli.

Writing ``above_j(n)`` for the idle milli on GPUs with at least ``thr_j`` free and
``cnt_j(n)`` for the number of such GPUs (``thr_j`` the distinct per-GPU requests of the
distribution), ``F_n = idle(n) - sum_t p_t * fits_t(n) * above_{j(t)}(n)``: a few
per-node numbers that change only when the node changes. :class:`FragmentationIndex`
caches them per node (recomputing only nodes whose ``snapshot.version`` moved) and
evaluates candidate placements — one per (node, distinct GPU free value) — as arrays.
"""

from __future__ import annotations

import numpy as np

from predops.allocator.distribution import PodTypeDistribution
from predops.allocator.requests import PodRequest
from predops.allocator.snapshot import ClusterSnapshot


class FragmentationIndex:
    """Per-node fragmentation against one pod-type distribution, kept up to date.

    GPU pod types that differ only in CPU are grouped: for a node with ``c`` free
    milli-cores, a group contributes the summed probability of its types needing at
    most ``c`` (a table lookup), which makes each evaluation a few (nodes x groups)
    array operations.
    """

    def __init__(self, distribution: PodTypeDistribution) -> None:
        self.distribution = distribution
        gpu_types = np.flatnonzero(distribution.num_gpu > 0)
        self._types = gpu_types
        milli = distribution.gpu_milli[gpu_types]
        self.thresholds = np.unique(milli)
        # Group = (GPUs, per-GPU milli, model spec); CPU need varies inside a group.
        keys = [
            (int(distribution.num_gpu[t]), int(distribution.gpu_milli[t]), distribution.gpu_spec[t])
            for t in gpu_types.tolist()
        ]
        groups = sorted(set(keys))
        gid = np.array([groups.index(k) for k in keys], dtype=np.int64)
        self._group_of_type = gid
        self._gk = np.array([g[0] for g in groups], dtype=np.int64)
        self._gj = np.searchsorted(self.thresholds, [g[1] for g in groups]).astype(np.int64)
        self._cpu_levels = np.unique(distribution.cpu_milli[gpu_types])
        # table[i, g]: probability of group g's types needing <= the i-th CPU level
        table = np.zeros((len(self._cpu_levels) + 1, len(groups)))
        for t, g in zip(gpu_types.tolist(), gid.tolist(), strict=True):
            level = int(np.searchsorted(self._cpu_levels, distribution.cpu_milli[t]))
            table[level + 1 :, g] += distribution.prob[t]
        self._cpu_table = table
        self._acc_group: np.ndarray = np.zeros((1, len(groups)), dtype=np.bool_)
        self._n_models = -1
        self._seen_change = -1
        self._version = np.zeros(0, dtype=np.int64)
        self._total = np.zeros(0, dtype=np.int64)
        self._cnt = np.zeros((0, len(self.thresholds)), dtype=np.int64)
        self._above = np.zeros((0, len(self.thresholds)), dtype=np.int64)
        self._frag = np.zeros(0, dtype=np.float64)

    # ------------------------------------------------------------------ cache
    def _accessible(self, snap: ClusterSnapshot) -> np.ndarray:
        if self._n_models != len(snap.models):
            full = self.distribution.accessible(snap.models)[:, self._types]
            acc = np.zeros((full.shape[0], len(self._gk)), dtype=np.bool_)
            for t, g in enumerate(self._group_of_type.tolist()):
                acc[:, g] = full[:, t]  # one spec per group, so any member says it
            self._acc_group = acc
            self._n_models = len(snap.models)
            self._version[:] = 0  # model rows moved: recompute everything
        return self._acc_group

    def refresh(self, snap: ClusterSnapshot) -> None:
        """Recompute the nodes that changed since the last refresh."""
        n = snap.n_nodes
        if snap.last_change == self._seen_change and len(self._version) == n:
            return
        self._accessible(snap)
        if len(self._version) != n:
            self._resize(n)
        stale = np.flatnonzero(self._version != snap.version)
        if stale.size:
            self._recompute(snap, stale)
        self._seen_change = snap.last_change

    def _resize(self, n: int) -> None:
        def fit(a: np.ndarray) -> np.ndarray:
            out = np.zeros((n, *a.shape[1:]), dtype=a.dtype)
            m = min(n, len(a))
            out[:m] = a[:m]
            return out

        # Versions are unique across snapshots and revisions, so kept rows stay valid.
        self._version = fit(self._version)
        self._total, self._cnt = fit(self._total), fit(self._cnt)
        self._above, self._frag = fit(self._above), fit(self._frag)

    def _recompute(self, snap: ClusterSnapshot, rows: np.ndarray) -> None:
        free = snap.gpu_free[rows]
        ge = free[:, :, None] >= self.thresholds[None, None, :]
        self._cnt[rows] = ge.sum(axis=1)
        self._above[rows] = (free[:, :, None] * ge).sum(axis=1)
        self._total[rows] = free.sum(axis=1)
        self._frag[rows] = self._frag_of(
            self._acc_group[snap.model[rows]],
            self._total[rows],
            self._cnt[rows],
            self._above[rows],
            snap.cpu_free[rows],
        )
        self._version[rows] = snap.version[rows]

    def _frag_of(
        self,
        acc: np.ndarray,
        total: np.ndarray,
        cnt: np.ndarray,
        above: np.ndarray,
        cpu: np.ndarray,
    ) -> np.ndarray:
        """Node fragmentation (milli-GPU) for candidate states given as columns."""
        prob = self._cpu_table[np.searchsorted(self._cpu_levels, cpu, side="right")]
        fits = acc & (cnt[:, self._gj] >= self._gk)
        return np.asarray(total - (prob * fits * above[:, self._gj]).sum(axis=1))

    # ------------------------------------------------------------------ queries
    def node_frag(self, snap: ClusterSnapshot) -> np.ndarray:
        """Fragmented milli-GPU of every node (refreshing first)."""
        self.refresh(snap)
        return self._frag[: snap.n_nodes]

    def cluster_frag_milli(self, snap: ClusterSnapshot) -> float:
        return float(self.node_frag(snap).sum())

    def frag_ratio(self, snap: ClusterSnapshot) -> float:
        """Fragmented share of the idle GPU milli (0 when nothing is idle)."""
        frag = self.node_frag(snap)
        idle = float(self._total[: snap.n_nodes].sum())
        return float(frag.sum()) / idle if idle > 0 else 0.0

    def after_whole(self, snap: ClusterSnapshot, rows: np.ndarray, pod: PodRequest) -> np.ndarray:
        """Fragmentation of each node in ``rows`` after it takes ``pod`` on idle GPUs
        (or no GPU). Idle GPUs have 1000 free, at or above every threshold, so each
        used one lowers every count by one and every ``above`` by 1000."""
        self.refresh(snap)
        used = pod.num_gpu * pod.gpu_milli
        return self._frag_of(
            self._acc_group[snap.model[rows]],
            self._total[rows] - used,
            self._cnt[rows] - pod.num_gpu,
            self._above[rows] - used,
            snap.cpu_free[rows] - pod.cpu_milli,
        )

    def after_share(
        self, snap: ClusterSnapshot, rows: np.ndarray, pod: PodRequest
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Candidates for a GPU-share pod: one per (node, distinct free value of a GPU
        that fits), the lowest GPU index of each value. Returns (position in ``rows``,
        GPU index, node fragmentation after placement), grouped by position."""
        self.refresh(snap)
        m = pod.gpu_milli
        free = snap.gpu_free[rows]
        ok = free >= m
        for g in range(1, free.shape[1]):
            ok[:, g] &= ~(free[:, :g] == free[:, g : g + 1]).any(axis=1)
        pos, gpu = np.nonzero(ok)
        f = free[pos, gpu]
        f2 = f - m
        thr = self.thresholds[None, :]
        ge_old = f[:, None] >= thr
        ge_new = f2[:, None] >= thr
        node = rows[pos]
        after = self._frag_of(
            self._acc_group[snap.model[node]],
            self._total[node] - m,
            self._cnt[node] - ge_old + ge_new,
            self._above[node] - f[:, None] * ge_old + f2[:, None] * ge_new,
            snap.cpu_free[node] - pod.cpu_milli,
        )
        return pos, gpu, after
