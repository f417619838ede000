"""predops allocator: topology-aware placement of pods, gangs and GPU shares.

Knows nothing about ML and does no I/O: it takes inventory / pods-contract frames or
plain dataclasses and answers placement questions on a forkable
:class:`~allocator.snapshot.ClusterSnapshot`:

- do these pods and gangs still fit if these nodes are drained, and where —
  :meth:`~allocator.engine.Allocator.fits_after_drain`;
- how many nodes of which SKU does this demand need —
  :class:`~allocator.estimator.NodeCountEstimator`;
- how fragmented is the cluster — :mod:`allocator.metrics`.

Placement policies (:mod:`allocator.policies`) are small strategies behind one
interface; :mod:`allocator.replay` replays a trace the way the FGD paper's artifact does.
"""

from predops.allocator.distribution import PodTypeDistribution
from predops.allocator.engine import Allocator, Decision, DrainCheck, GangDecision
from predops.allocator.estimator import Estimate, NodeCountEstimator, sample_pods
from predops.allocator.policies import POLICY_NAMES, Policy, make_policy
from predops.allocator.replay import ReplayResult, replay
from predops.allocator.requests import Gang, PodBatch, PodRequest
from predops.allocator.snapshot import ClusterSnapshot, OverCommitError, Placement
from predops.allocator.topology import NodeSpec, Topology

__all__ = [
    "POLICY_NAMES",
    "Allocator",
    "ClusterSnapshot",
    "Decision",
    "DrainCheck",
    "Estimate",
    "Gang",
    "GangDecision",
    "NodeCountEstimator",
    "NodeSpec",
    "OverCommitError",
    "Placement",
    "PodBatch",
    "PodRequest",
    "PodTypeDistribution",
    "Policy",
    "ReplayResult",
    "Topology",
    "make_policy",
    "replay",
    "sample_pods",
]
