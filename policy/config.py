"""Policy configuration as data: disruption budgets, costs, and the knobs of each policy.

Every number here has a default that is documented where it is declared; callers (the
composition roots) load overrides from settings. Money is counted in *cost units*: by
default one unit is one GPU-hour of an 8-GPU training node (so the defaults read as
GPU-hours); any currency works if every cost field uses it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import timedelta

SCOPES = ("pool", "rack", "spine")

PACINGS = ("slow_start", "breaker")
"""How drains are paced against correlated bursts (``DisruptionConfig.pacing``)."""


@dataclass(frozen=True, slots=True)
class DisruptionBudget:
    """At most ``max_nodes`` nodes, or ``max_percent`` % of the domain (at least
    ``min_nodes``), may be disrupted at once in each domain of ``scope`` ('pool',
    'rack' or 'spine'). ``domain`` restricts the budget to one pool name or one rack /
    spine name; None applies it to every domain of the scope. A disrupted node is one
    that is cordoned, draining or under repair; several budgets may match a node and
    the most restrictive wins (as in Karpenter)."""

    scope: str
    max_nodes: int | None = None
    max_percent: float | None = None
    min_nodes: int = 0
    domain: str | None = None

    def __post_init__(self) -> None:
        if self.scope not in SCOPES:
            raise ValueError(f"budget scope must be one of {SCOPES}, got {self.scope!r}")
        if (self.max_nodes is None) == (self.max_percent is None):
            raise ValueError(f"{self.scope} budget: give exactly one of max_nodes, max_percent")
        if self.max_nodes is not None and self.max_nodes < 0:
            raise ValueError(f"{self.scope} budget: max_nodes must be >= 0")
        if self.max_percent is not None and not 0 <= self.max_percent <= 100:
            raise ValueError(f"{self.scope} budget: max_percent must be in 0..100")
        if self.min_nodes < 0:
            raise ValueError(f"{self.scope} budget: min_nodes must be >= 0")

    def matches(self, scope: str, domain: str) -> bool:
        return self.scope == scope and (self.domain is None or self.domain == domain)

    def allowed(self, size: int) -> int:
        """Nodes this budget lets be disrupted at once in a domain of ``size`` nodes."""
        if self.max_nodes is not None:
            return min(self.max_nodes, size)
        assert self.max_percent is not None
        # floor, then the floor of min_nodes: max(1, 10 %) of a 5-node pool is 1
        return min(size, max(self.min_nodes, math.floor(size * self.max_percent / 100)))


def default_budgets() -> tuple[DisruptionBudget, ...]:
    """max(1, 10 %) of a pool, 1 node per rack, max(1, 10 %) of a spine."""
    return (
        DisruptionBudget("pool", max_percent=10.0, min_nodes=1),
        DisruptionBudget("rack", max_nodes=1),
        DisruptionBudget("spine", max_percent=10.0, min_nodes=1),
    )


@dataclass(frozen=True, slots=True)
class Budgets:
    """The disruption budgets in force; the most restrictive matching one wins."""

    budgets: tuple[DisruptionBudget, ...] = field(default_factory=default_budgets)

    def allowed(self, scope: str, domain: str, size: int) -> int | None:
        """Nodes that may be disrupted at once in ``domain``; None when no budget applies."""
        limits = [b.allowed(size) for b in self.budgets if b.matches(scope, domain)]
        return min(limits) if limits else None


@dataclass(frozen=True, slots=True)
class CostModel:
    """What failures and drains cost, in cost units per hour of capacity.

    Defaults (one unit = one GPU-hour; a CPU core-hour is worth 1/50 of it, roughly the
    public-cloud price ratio of an A100 hour to a vCPU hour):

    - ``gpu_hour`` 1.0, ``cpu_core_hour`` 0.02;
    - ``checkpoint_interval`` 2 h: when a job's last checkpoint is unknown a failure
      loses half an interval of work on average;
    - ``restart_overhead`` 0.25 h per interrupted job (reschedule, image pull, reload the
      checkpoint), paid by a failure and by a drain alike;
    - ``detection_delay`` 0.5 h: a failure is noticed late (NotReady grace, then the
      collective-communication watchdog of the surviving gang members times out), and
      the job holds its resources meanwhile; a drain is announced and pays nothing;
    - ``inspection_window`` 4 h: a drained node is out for inspection that long; this
      is lost only if the node was healthy, i.e. with weight ``1 - p_fail``;
    - ``capacity_value`` 1.0: the fraction of a lost node-hour that hurts when nothing
      replaces the node; the engine prices the window by the pool's headroom
      (:mod:`policy.headroom`): 0 when an idle node of the same kind is spare beyond the
      forecast, ``replacement_lead / inspection_window`` when a parked node can be
      brought back, the full value when the pool is full;
    - ``replacement_lead`` 30 min: a parked node a scale-up brings back serves after that
      long (the scale-up lead time);
    - ``price_by_headroom`` True: False prices the window at ``capacity_value`` in every
      pool, whatever its headroom (flat);
    - ``spare_share`` 0: with the headroom price, the least share of the window a drain
      costs even when its pool has an idle or parked node to replace it.
    """

    gpu_hour: float = 1.0
    cpu_core_hour: float = 0.02
    checkpoint_interval: timedelta = timedelta(hours=2)
    restart_overhead: timedelta = timedelta(minutes=15)
    detection_delay: timedelta = timedelta(minutes=30)
    inspection_window: timedelta = timedelta(hours=4)
    capacity_value: float = 1.0
    replacement_lead: timedelta = timedelta(minutes=30)
    price_by_headroom: bool = True
    spare_share: float = 0.0

    def __post_init__(self) -> None:
        for name in ("gpu_hour", "cpu_core_hour", "capacity_value"):
            if getattr(self, name) < 0:
                raise ValueError(f"cost model: {name} must be >= 0")
        if not 0.0 <= self.spare_share <= 1.0:
            raise ValueError(f"cost model: spare_share must be in [0, 1], got {self.spare_share}")

    def hourly(self, gpus: float, cpu_cores: float) -> float:
        """Value of one hour of ``gpus`` GPUs and ``cpu_cores`` cores, in cost units."""
        return gpus * self.gpu_hour + cpu_cores * self.cpu_core_hour


@dataclass(frozen=True, slots=True)
class DisruptionConfig:
    """Cordon / drain / uncordon knobs.

    - ``max_risk_age`` 2 h / ``max_data_age`` 6 h: a risk scored longer ago, or on data
      older than that, is stale and never acted on;
    - ``max_clock_skew`` 5 min: a risk from further in the future is rejected as bad data;
    - ``benefit_margin`` 1.0: drain when p x failure cost > margin x drain cost;
    - ``pacing`` 'slow_start': disruption width per failure domain (pool, rack, spine,
      SKU, driver version, detecting signal; :mod:`policy.pacing`): a domain where
      ``burst_nodes`` 4 or more candidates cross at once drains at most
      ``slow_start_width`` 1 at a time, the width growing by one per disruption that
      completes without a confirmed false alarm (halved on one) until
      ``slow_start_open_width`` 16 hands it back to the budgets alone; a burst of one
      detecting signal or one driver version over ``burst_spread_racks`` 3 racks or more
      pauses that domain (one probe drain; an inspection that finds a fault resumes it
      in slow start, one that finds none stops the probes) and alerts, the other domains
      go on; a paced or paused domain with no candidate for ``pacing_hold`` 6 h is open
      again; at most ``pacing_max_domains`` 1024 domains are remembered between rounds.
      'breaker' is the former per-pool storm breaker:
    - ``storm_fraction`` 0.2 / ``storm_min_nodes`` 3 (``pacing`` 'breaker' only): a pool
      where more than 20 % of the nodes (and at least 3) cross the threshold at once acts
      on none and alerts;
    - ``min_hold`` 6 h: no drain within 6 h of an uncordon, no uncordon within 6 h of a
      cordon (no flapping; a finished repair or inspection uncordons at once);
    - ``repair_hold`` 0 (off): no drain within that long of a finished repair or
      inspection (the risk still reads the telemetry from before it). 24 h halved the
      needless drains of a 1,000-node x 21-day simulated fleet (19 against 42) but
      missed 7 failures it would have averted (13 against 20), 700 lost GPU-hours:
      failures recur on repaired nodes there;
    - ``clean_window`` 24 h / ``uncordon_p_fail`` 0.02: a cordoned node whose risk stayed
      that low for the window goes back into service;
    - ``confirm_scores`` 1 / ``confirm_gap`` 90 min: a drain needs the node's last
      ``confirm_scores`` scores (each within ``confirm_gap`` of the next) over the
      threshold; 2 confirms a risk over two consecutive hourly scores (fewer drains on
      a one-hour spike, an hour later on a real one) and needs the caller to pass the
      previous score too, so the default acts on the latest score alone;
    - ``max_checkpoint_wait`` 2 h: a drain waits for the node's next known checkpoint if
      it comes that soon;
    - ``expires_after`` 2 h: an action not run by then is dropped (the next plan decides);
    - ``owner``: cordons this system made carry this owner; it never uncordons others'.
    - ``soft_taint_p`` 0 (off): a node scored at or above it and not drained gets a soft
      taint (``PreferNoSchedule``: new pods go elsewhere when they fit, nothing is
      evicted), at most ``soft_taint_max_percent`` 10 % of each pool (at least one
      node; its own budget, not the disruption budgets); it is removed when the node's
      risk falls below ``soft_taint_clear_p`` (0: half of ``soft_taint_p``), see
      :mod:`policy.soft_taint`.
    """

    max_risk_age: timedelta = timedelta(hours=2)
    max_data_age: timedelta = timedelta(hours=6)
    max_clock_skew: timedelta = timedelta(minutes=5)
    benefit_margin: float = 1.0
    pacing: str = "slow_start"
    burst_nodes: int = 4
    burst_spread_racks: int = 3
    slow_start_width: int = 1
    slow_start_open_width: int = 16
    pacing_hold: timedelta = timedelta(hours=6)
    pacing_max_domains: int = 1024
    storm_fraction: float = 0.2
    storm_min_nodes: int = 3
    min_hold: timedelta = timedelta(hours=6)
    repair_hold: timedelta = timedelta(0)
    clean_window: timedelta = timedelta(hours=24)
    uncordon_p_fail: float = 0.02
    confirm_scores: int = 1
    confirm_gap: timedelta = timedelta(minutes=90)
    max_checkpoint_wait: timedelta = timedelta(hours=2)
    expires_after: timedelta = timedelta(hours=2)
    owner: str = "predops"
    placement_policy: str = "best_fit"
    seed: int = 0
    soft_taint_p: float = 0.0
    soft_taint_clear_p: float = 0.0
    soft_taint_max_percent: float = 10.0
    costs: CostModel = field(default_factory=CostModel)

    def __post_init__(self) -> None:
        if not 0.0 <= self.soft_taint_p <= 1.0:
            raise ValueError(f"soft_taint_p must be in [0, 1], got {self.soft_taint_p}")
        if self.soft_taint_p and not 0.0 <= self.soft_taint_clear_p <= self.soft_taint_p:
            raise ValueError("soft_taint_clear_p must be in [0, soft_taint_p]")
        if self.confirm_scores < 1:
            raise ValueError(f"confirm_scores must be >= 1, got {self.confirm_scores}")
        if self.pacing not in PACINGS:
            raise ValueError(f"pacing must be one of {PACINGS}, got {self.pacing!r}")
        if min(self.burst_nodes, self.burst_spread_racks, self.pacing_max_domains) < 1:
            raise ValueError("burst_nodes, burst_spread_racks and pacing_max_domains must be >= 1")
        if not 1 <= self.slow_start_width <= self.slow_start_open_width:
            raise ValueError("need 1 <= slow_start_width <= slow_start_open_width")


@dataclass(frozen=True, slots=True)
class SizingConfig:
    """Elastic pool sizing knobs.

    - ``scale_up_lead`` 30 min: new nodes take that long to join, so the target covers
      the peak of the p90 forecast over lead + ``hold``;
    - ``hold`` 1 h: the time until the next sizing round (the engine plans every hour;
      a longer hold sizes for a longer peak and holds more idle nodes);
    - ``scale_in_cooldown`` 2 h: no scale-in within that long of the last scale-up;
    - ``deadband_nodes`` 1: changes this small are not worth an action;
    - ``failure_service_level`` 0.9: the failure buffer covers the window's failures
      with this probability (a Poisson quantile; the p90 of the demand's convention);
    - ``anchor_history`` 7 days: the measured demand of this trailing window, when the
      caller hands it in, anchors the next hour (:mod:`policy.anchoring`; 0 turns it
      off); ``anchor_min_changes`` 24: fewer hourly changes keep the model's forecast;
    - ``packing_policy`` 'best_fit': the allocator policy the estimate packs with;
    - ``max_packed_pods`` 200: pods of a demand increase packed onto new nodes one by
      one; beyond them the node count is scaled by the resource (a sample's packing
      ratio holds for the rest; packing thousands of queued pods every hour cost
      seconds per pool);
    - ``lend_min_anticorrelation`` 0.5: pools whose hourly p50 profiles correlate below
      -0.5 over the next day have opposite peaks and may lend nodes to each other.
    """

    scale_up_lead: timedelta = timedelta(minutes=30)
    hold: timedelta = timedelta(hours=1)
    scale_in_cooldown: timedelta = timedelta(hours=2)
    deadband_nodes: int = 1
    failure_service_level: float = 0.9
    anchor_history: timedelta = timedelta(days=7)
    anchor_min_changes: int = 24
    packing_policy: str = "best_fit"
    max_packed_pods: int = 200
    seed: int = 0
    max_forecast_age: timedelta = timedelta(hours=6)
    lend_min_anticorrelation: float = 0.5
    lend_horizon: timedelta = timedelta(hours=24)
    costs: CostModel = field(default_factory=CostModel)


@dataclass(frozen=True, slots=True)
class BuyConfig:
    """Inventory purchase knobs (newsvendor).

    - ``review_period`` 30 days: an order must cover demand until the next order can land
      (lead time + review period);
    - ``annual_failure_rate`` 0.05: failures per node-year where no risk score exists;
    - ``repair_yield`` 0.8: the share of nodes in repair / RMA that come back within the
      lead time;
    - ``max_forecast_age`` 7 days.
    """

    review_period: timedelta = timedelta(days=30)
    annual_failure_rate: float = 0.05
    repair_yield: float = 0.8
    max_forecast_age: timedelta = timedelta(days=7)


@dataclass(frozen=True, slots=True)
class ReclaimConfig:
    """Reclaimable (batch) capacity knobs (:mod:`policy.reclaim`).

    - ``risk`` 0.01: the forecast peak is the usage quantile exceeded with this
      probability over the window (0.5, 0.05 or 0.01: the forecast's p50 / p95 / p99);
    - ``margin_share`` 0.05 / ``margin_cores`` 0: held back beyond that peak, the larger
      of this share of allocatable and these cores (memory: the share);
    - ``max_share`` 0.8: never more than this share of a node's allocatable;
    - ``grow_deadband_milli`` 250 / ``grow_deadband_mib`` 256: an increase smaller than
      this is not published (a decrease always is, at once);
    - ``max_grow_percent`` 25: at most this share of a pool's nodes (at least one) may
      have their value raised in one round; decreases are never budgeted;
    - ``hold`` 1 h: the time to the next planning round; a forecast whose window ends
      before it is stale;
    - ``max_forecast_age`` 2 h / ``max_usage_age`` 15 min: older inputs are stale, and
      a node with stale or missing inputs is set to 0 (nothing reclaimed blind);
    - ``expires_after`` 15 min: an increase applied later than that is dropped (usage may
      have risen since).
    """

    risk: float = 0.01
    margin_share: float = 0.05
    margin_cores: float = 0.0
    max_share: float = 0.8
    grow_deadband_milli: int = 250
    grow_deadband_mib: int = 256
    max_grow_percent: float = 25.0
    hold: timedelta = timedelta(hours=1)
    max_forecast_age: timedelta = timedelta(hours=2)
    max_usage_age: timedelta = timedelta(minutes=15)
    expires_after: timedelta = timedelta(minutes=15)
    costs: CostModel = field(default_factory=CostModel)

    def __post_init__(self) -> None:
        if self.risk not in (0.5, 0.05, 0.01):
            raise ValueError(f"reclaim risk must be 0.5, 0.05 or 0.01, got {self.risk}")
        if not 0.0 <= self.margin_share <= 1.0 or not 0.0 <= self.max_share <= 1.0:
            raise ValueError("reclaim margin_share and max_share must be in [0, 1]")
        if self.margin_cores < 0 or self.grow_deadband_milli < 0 or self.grow_deadband_mib < 0:
            raise ValueError("reclaim margin_cores and deadbands must be >= 0")
        if not 0.0 <= self.max_grow_percent <= 100.0:
            raise ValueError("reclaim max_grow_percent must be in 0..100")


@dataclass(frozen=True, slots=True)
class PolicyConfig:
    """All policy knobs; ``PolicyConfig()`` is the documented default."""

    disruption: DisruptionConfig = field(default_factory=DisruptionConfig)
    sizing: SizingConfig = field(default_factory=SizingConfig)
    buy: BuyConfig = field(default_factory=BuyConfig)
    reclaim: ReclaimConfig = field(default_factory=ReclaimConfig)
