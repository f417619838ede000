"""``predops simulate-ops``: the closed-loop what-if simulator (design note).

What it answers: on one seeded synthetic fleet, how much work do failures destroy, and
how much capacity is held idle or missing, when the fleet is run by

- ``reactive`` — today's practice: nothing happens before a failure (the node is
  repaired after it), pools are sized from current usage by an autoscaler (busy
  nodes + 10 % + what the pending pods need, every hour);
- ``predictive`` — the real failure model (``models.failure``, retrained every week on
  the data up to that day only, 24 h horizon) and the real demand forecaster
  (``models.demand``, retrained weekly) feeding the real policy engine
  (``policy.engine.plan``, every hour: cost threshold, guards, budgets, storm breaker,
  allocator fit check, pool sizing) with every drain and uncordon re-validated
  (``policy.revalidate``) just before it runs;
- ``oracle`` — the same engine handed the truth: p_fail 1 for a node whose next
  failure (not already averted) falls in the horizon, else 0, and the demand that will
  arrive as its forecast. It is the ceiling of this engine, not of any policy: its
  guards (budgets, checkpoint timing, the storm breaker) still apply.

Same seed, same world: every policy sees the same fleet, failures, maintenance,
telemetry and workload (paired comparison). Modules:

| module | concept |
|---|---|
| ``world.py`` | the seeded world: topology, failures, maintenance, hour-quantised workload |
| ``risk.py`` | hourly features once; weekly retrains on the past; p_fail per node and hour |
| ``forecasts.py`` | the demand forecaster refitted weekly / the true demand |
| ``cluster.py`` | live allocator snapshot: placement, evictions, checkpoints, node state arrays |
| ``loop.py`` | the hourly loop (see its docstring for the order of a tick) |
| ``scaler.py`` | the pool autoscaler: which nodes a resize parks or brings back; reactive sizing |
| ``tally.py`` | the figures; the budget auditor that re-counts disruptions independently |
| ``run.py`` | one world, the policies on it, the comparison with the issue's targets |

How the loop counts (all per evaluated hour):

- lost GPU-hours: per failure on a node running jobs, every job with a pod there (whole
  gangs) loses its GPUs x the time since its last checkpoint (jobs checkpoint every
  ``CostModel.checkpoint_interval`` = 2 h from their last start); the pods queue again
  and keep their original end. Detection delay and restart time are not added.
- a drain evicts the node's jobs (each losing its work since its last checkpoint —
  none for the job the engine timed the drain to) and sends the node to inspection.
  Needed: the node would have failed within the 24 h horizon; the fault is found, the
  repair starts at the drain and that failure never happens. Needless: the node is out
  for the 4 h inspection and back when the engine uncordons it (at the first plan after
  the inspection ends). Drain cost = the work its evictions lost + the capacity a
  needless drain kept out (node GPU-hours; CPU nodes in cost units, 1/50 of a GPU-hour
  per core-hour), reported three ways:

  - ``drain_cost_gpu_hours_full_capacity`` counts every out-of-service hour in full,
    from the drain to the uncordon: the upper bound, what the fleet held and could not
    use whether or not anyone needed it;
  - ``drain_cost_gpu_hours_unreplaced`` counts the capacity cost that bit: the eviction
    losses + a needless drain's out-of-service hours only in the hours its pool could
    not replace it. Exactly: at each evaluated hour ``[t, t + 1 h)`` (for the first,
    from the drain on) each needlessly drained node still out is charged its value for
    the span when (a) its pool had pending pods a node of its kind (pool, GPU model;
    CPU nodes: the pool) could run — the loop's per-model pending demand of the pool —
    and (b) no spare node of that kind was left for it: spare = in service,
    schedulable and empty, or parked and healthy; each spare node replaces one out node
    of its kind (rows in order). Summed per drain and added at the uncordon, like the
    full count (``tally.unreplaced``; ``needless_drain_out_unreplaced_gpu_hours``). It
    depends on no engine knob; it does not charge hours in which the pool had spare it
    did not use (the sizing's miss, not the drain's), and per-pod fit on a node of the
    kind is not checked (a pool's nodes of one model are alike here);
  - ``drain_cost_gpu_hours`` at the engine's ``capacity_value`` (the full count x
    ``capacity_value`` + the evictions; ``capacity_value`` is 0.1 in the simulator, a
    knob that also sets the drain threshold).
- budget violations: :class:`~pipelines.whatif.tally.BudgetAuditor` re-counts, at
  each drain, the disrupted nodes (cordoned, in repair or inspection, in maintenance)
  of the node's pool, rack and spine from the loop's own state.
- pending-pod hours (pods queued at the hour), idle node-hours (nodes the pool holds,
  in service — not cordoned, in repair or maintenance — with no pod; the same count
  for every policy, also per pool), capacity provisioned vs used (GPU-hours,
  core-hours), stock-out node-hours (sizing asked for more nodes than the pool
  physically has).

What is approximated, and why:

- telemetry and failures are exogenous: a drain does not change a node's telemetry,
  only whether its failure happens (found at inspection). Features are therefore
  computed once, point in time, and shared by all policies.
- hourly resolution: pods that live entirely between two hours are invisible (on the
  2,000-node fleet ~7 % of training GPU-hours); arrivals and departures are rounded up
  to the next hour; failures keep their exact times.
- CPU-only pods of one pool arriving and leaving at the same hours are packed into
  groups of up to 48 cores / 192 GiB (big data runs ~28,000 single-hour ~14-core pods
  a day); GPU pods and gangs are placed one by one by the allocator (best fit).
- pool sizing acts on the pool's node count: a scale-up brings back parked healthy
  nodes, in service from the next tick (past the 30 min lead: ``Cluster.joining``;
  until this session they served in the same tick, which gave the reactive autoscaler
  capacity with no lead time and made any forecast worthless), a scale-in parks empty
  nodes; nodes beyond the physical pool are a stock-out. Which nodes: GPU models with
  pending demand first, then, for the predictive and oracle policies, by risk — a
  scale-in parks the idle nodes in the engine's ``scale_in_order`` (likeliest to fail
  in the window first), a scale-up brings back the parked nodes with the lowest p_fail
  of the hour; the reactive autoscaler reads no risk (``scaler.py``). A node that fails
  parked interrupts nothing. Lending between pools and
  inventory buys are not executed (the pools' GPU models differ; a buy needs a
  long-horizon node-demand forecast, and two weeks of history give the weekly
  forecaster 2 of the 16 weekly points it needs), so purchase cost is 0 and stock-outs
  are reported instead.
- both size pools every hour. The engine reads the demand measured at the tick (placed
  and queued) and an estimate of the next hour: the demand measured now plus the p90
  of the trailing week's hour-to-hour changes (``policy.anchoring``; ``ModelForecasts``
  hands in a week of hourly measurements with the forecasts; the oracle gets the
  truth). On seed 11 (500 x 21) the forecaster's next-hour p90 ran 6-19 % above the
  demand and covered it 0.78 (training) to 0.94 (big-data) of the hours; the anchored
  p90 covers 0.89-0.90 on every pool with a lower p90 quantile loss (big-data 165 vs
  189, online 31 vs 70, inference 1.7 vs 3.5, training 29 vs 41 — on training it is
  higher on average, +22 % vs +15 %, because gangs arrive in jumps). The failure
  buffer is the 0.9 quantile of a Poisson count with the window's expected failures as
  mean (0.08-0.17 a pool in 1.5 h: 0 or 1 node, where the rounded-up sum held 1 in
  every pool every hour). Packing the whole forecast with the
  allocator's estimator cost ~2 s a round on 2,000 nodes, so only the increase over
  what runs now is packed (``policy.packing``), a few hundred pods at most. The demand
  series the forecaster learns are the loop's own (``forecasts.loop_demand``): the
  synthetic fleet's demand table also counted the pods invisible at hourly resolution
  and its own queueing, 25-40 % off the loop's demand per hour on big-data.
- engine configuration (``run.SIM_COSTS``): the documented ``CostModel`` defaults
  except a flat ``capacity_value`` 0.1 in every pool (``price_by_headroom`` off): the
  loop's pools are elastic and hold parked nodes, so a drained node's hour costs a
  fraction of an hour of work (a threshold setting; the drain cost is reported in full
  and as the cost that bit beside it). The engine's default prices the window by the
  pool's headroom instead (``policy.headroom``; the loop hands each pool its physical
  size as ``PoolState.max_nodes``); on seed 11 it averted more failures but saved no
  more GPU-hours (below), so it is not the simulator's setting.
- the failure model scores one horizon (24 h) and trains on rows every 2 h of all the
  history before its cutoff (a trailing 21-day window until this round) with at most
  300 rounds (speed); everything else is the production ``MODEL_PARAMS``.

Measured (2 shared cores at load 6-17 from other jobs; CPU seconds are the honest
cost). Settings were chosen on seed 11 (500 nodes x 21 days, 1,000 x 21), never on the
reported seed 7.

Seed 11, 500 nodes x 21 days (2,000 GPUs, 144 failures), before this round (pools
sized every 6 h for the 6 h peak of the synthetic demand table; scale-ups served in the
same tick) and after it (``git log`` of this package):

| figure | reactive before / after | predictive before / after | oracle before / after |
|---|---|---|---|
| lost GPU-hours | 1,733 / 1,921 | 1,636 / 1,603 | 271 / 252 |
| drains (needless) | 0 / 0 | 33 (27) / 16 (14) | 102 (0) / 99 (0) |
| drain cost GPU-h, full | 0 / 0 | 1,476 / 551 | 56 / 53 |
| pending pod-hours | 4,504 / 8,805 | 4,073 / 5,924 (0.67x) | 5,247 / 6,951 (0.79x) |
| idle node-hours | 17,986 / 15,574 | 52,154 / 18,683 (1.20x) | 30,519 / 6,370 (0.41x) |
| predictive loop CPU s | | 84 / 79 (sizing 6x as often) | |

Pool sizing round 3 (the anchored next hour and the Poisson failure buffer; seed 11,
predictive loop with the same failure-model scores and forecasts before / after, the
reactive loop unchanged): 500 x 21 idle node-hours 18,688 / 14,724 (reactive 15,574:
+20 % / -5.5 %), pending pod-hours 5,877 / 7,026 (reactive 8,805: 0.67x / 0.80x); by
pool, idle before / after (reactive): training 11,399 / 11,172 (5,478), big-data 4,923
/ 2,947 (2,295), online 1,175 / 251 (4,619), inference 1,191 / 354 (3,182). The
Poisson buffer alone: 17,498 idle, 6,402 pending. 1,000 x 21: idle 32,999 / 22,775
(reactive 28,949: +14 % / -21 %), pending 12,777 / 15,235 (reactive 18,007: 0.71x /
0.85x); training 18,740 / 15,550 (9,640), big-data 8,476 / 5,914 (4,493), online 3,556
/ 794 (9,053), inference 2,227 / 517 (5,763). Predictive loop CPU s with the
forecasts precomputed: 38 / 46 at 500 nodes, 74 after at 1,000 (131 before, forecasts
computed in the loop). Training keeps about twice the reactive idle (500 x 21, after):
4,705 of its 11,172 idle node-hours fall in hours when pods of the pool pend (mostly
H800 demand the free nodes of other models cannot run), 7,136 are A100 nodes: the
pool's demand is one merged GPU series (its pods may run on several models), so the
sizing's count does not say which model to bring back; sizing per GPU model needs
per-model demand. Restricting the loop's scale-up to the models of the pending pods
while pods pend was tried and left out (500 x 21: idle 13,296 but pending 9,514, and
the reactive autoscaler's big-data pending doubled: it stops the headroom too).
Then the simulator's scale-in cooldown went from 2 h to one sizing round
(``run.SIM_SCALE_IN_COOLDOWN``): 500 x 21 idle 14,724 -> 12,684 (-19 % vs reactive),
pending 7,026 -> 7,109 (0.81x); training 9,689, big-data 2,489, online 182, inference
324. 1,000 x 21: idle 22,775 -> 19,674 (-32 %), pending 15,235 -> 15,576 (0.87x);
training 13,359, big-data 5,146, online 669, inference 500. These rounds ran on the
drain settings before ``policy.headroom`` (flat ``capacity_value`` 0.1). The drains
barely moved (1,000 x 21: 62 / 75 / 64 drains, 20 / 19 / 17 failures averted, 184 /
183 failures on busy nodes before / round 3 / cooldown) but the lost GPU-hours did
(3,825 / 4,981 / 4,149; reactive 5,424): which jobs the same failures hit moves with
placement (a 16-node gang loses its whole work), and tighter pools are placed
differently. The headroom pricing reads the idle spare the sizing leaves, so fewer
idle nodes make drains dearer there; the two were not measured together.

Where the idle hours are (before round 3; reactive / predictive / oracle): training 5,478 /
11,345 / 5,373, big-data 2,295 / 4,950 / 504, online 4,619 / 1,175 / 225, inference
3,182 / 1,213 / 268. With the true demand the engine's sizing holds 59 % fewer idle
node-hours and 21 % fewer pending pod-hours than the reactive autoscaler; with the
forecaster's p90 it wins on online and inference (-75 %, -62 % idle) and loses on
training and big-data, whose next-hour p90 is 22 % above the demand on average (p90
coverage 0.78 on training; the last hour's value has a smaller error than the
forecaster's p50 on every series). A drain confirmed over two hourly scores
(``DisruptionConfig.confirm_scores`` 2) was tried on seed 11 at 1,000 x 21: 30 drains,
19 needless, 11 caught, and 28 failures missed on a ``hysteresis`` skip — it is not
the simulator's setting. At 500 nodes the failure model averts 2 failures: the lost
GPU-hours there move with where jobs happen to run, not with drains.

Drain pricing by pool headroom (``policy.headroom``) and the count that bit, seed 11,
1,000 nodes x 21 days (203 failures on busy nodes under reactive, 5,424 lost GPU-h),
reactive + predictive in one process each run, with the pool sizing before commits
557fbbd and 22907c1:

| predictive | flat 0.1 (kept) | headroom, 1.0 | headroom, 0.1 | headroom, 1.0, margin 1.5 |
|---|---|---|---|---|
| failures averted / on busy nodes | 20 / 184 | 31 / 179 | 35 / 173 | 17 / 180 |
| lost GPU-h avoided | 29.5 % | 29.4 % | 24.8 % | 24.6 % |
| drains (needless) | 62 (42) | 127 (96) | 137 (102) | 58 (41) |
| drain cost GPU-h: full / unreplaced | 1,809 / 295 | 3,936 / 418 | 4,138 / 461 | 1,750 / 159 |
| ... over the GPU-h saved | 1.13 / 0.18 | 2.47 / 0.26 | 3.08 / 0.34 | 1.31 / 0.12 |
| run CPU s (user + sys) | 188 | 210 | 190 | 187 |

At 500 x 21 (99 failures on busy nodes under reactive, 1,921 lost GPU-h): flat 0.1 /
headroom 1.0 / headroom 1.0 margin 1.5 averted 4 / 22 / 10 failures, avoided 24.9 / 15.0
/ 7.9 % of the lost GPU-h with 33 (29) / 207 (185) / 50 (40) drains (needless), drain
cost over the savings full 2.35 / 19.5 / 7.15, unreplaced 0.14 / 0.99 / 0.51; run CPU s
114 / 105 / 107.

Pricing by headroom catches more failures (at 1,000 nodes 55 % more at the documented
defaults), but the lost GPU-hours do not follow: in every setting tried on seed 11
fewer failures hit busy nodes, yet the lost GPU-hours per such failure rose (500 x 21:
15.9 flat, 21.2 and 21.1 with the headroom price; 1,000 x 21: 20.8 flat, 21.4 to 23.6),
so more drains saved no more GPU-hours. Whether that is the loop (evicted gangs
re-placed where the next failure hits, say) or chance is open. Of the needless drains'
out-of-service hours only 4-16 % bit (the pool had work waiting and no spare node of
the kind); the extra drains are the over-eager ones (76 % needless against 68 %). The
flat setting is kept.

A soft taint (``PreferNoSchedule``) on risky nodes is an option, off by default
(``OpsConfig.soft_taint_p``, ``--soft-taint-p``): nodes whose p_fail of the hour is at
or above it are placed last (new and requeued pods go elsewhere when they fit; no
eviction). Seed 11, 1,000 x 21, predictive, commit 160148f (off: one ``simulate-ops`` run
with reactive, the code before it; on: one process, one model fit, two loops). The
model's p_fail: median 0.008, p99 0.10, p99.9 0.29; 1.1 % of node-hours are at or above
0.1 and hold 22 % of the 306 failures, 0.26 % at or above 0.2 hold 12 %.

| predictive | off | taint >= 0.1 | taint >= 0.2 |
|---|---|---|---|
| lost GPU-h (reactive 5,424) | 4,149 (-23.5 %) | 3,791 (-30.1 %) | 4,535 (-16.4 %) |
| failures on busy nodes (reactive 203) / averted | 192 / 17 | 192 / 11 | 193 / 13 |
| drains (needless) / unreplaced cost GPU-h | 64 (47) / 347 | 29 (18) / 68 | 41 (28) / 177 |
| pending pod-h (reactive 18,007) | 15,576 | 15,519 | 15,424 |
| idle node-h (reactive 28,949) | 19,674 | 19,763 | 19,830 |
| tainted node-h | - | 4,011 | 1,020 |
| loop CPU s | 110 | 113 | 117 |

The failures on busy nodes did not move. The taint steers only new and requeued
pods: the pods on a node when its risk rises stay, and a pod that fits nowhere else
still lands there (which of the two bit was not counted). The lost GPU-hours moved both
ways (-9 %, +9 %), within what placement alone moves on this seed (3,825 to 4,981
above), so no gain is measured. The drains fell (64 -> 29 at 0.1; unreplaced cost
347 -> 68 GPU-h; likely fewer risky nodes busy, the drain candidates), with pending and
idle hours unchanged. The option stays off.

Seed 7, 2,000 nodes x 60 days (8,000 GPUs, 1,699 failures in the period; nine weekly
retrains of each model), ``benchmarks/whatif.py --jobs 3`` under ``nice`` at load 7-14:
1,244 CPU s in all (failure model 160, loops: reactive 161, predictive 539, oracle
315; world 19 per process), 1,166 s wall, peak RSS 6.4 GiB. Run 1 with a 24 h repair
hold (commit 7f1ef42); run 2, the default since (hold off), predictive and oracle:

| figure | reactive | predictive run 1 / run 2 | oracle run 1 / run 2 |
|---|---|---|---|
| lost GPU-hours | 21,164 | 16,283 (-23 %) / 13,866 (-34 %) | 2,897 / 2,082 (-90 %) |
| failures on busy nodes / averted | 1,003 / 0 | 829 / 196; 774 / 252 | 175 / 1,008; 143 / 1,065 |
| drains (needless) | 0 | 612 (416) / 859 (607) | 1,008 (0) / 1,065 (0) |
| drain cost GPU-h, full / engine | 0 | 14,450 / 1,694; 21,925 / 2,441 | 626; 672 |
| ... over the GPU-hours saved | | 2.96 / 0.35; 3.00 / 0.33 | 0.03; 0.04 |
| budget violations | 0 | 0 / 0 | 0 / 0 |
| pending pod-hours | 90,374 | 67,773 / 67,390 (0.75x) | 70,576 / 70,854 (0.78x) |
| idle node-hours | 164,915 | 141,002 / 140,451 (-14.8 %) | 49,730 / 48,452 (-71 %) |
| provisioned node-hours | 2,084,698 | 2,051,835 / 2,052,586 | 1,959,069 / 1,957,623 |
| GPU-h provisioned / used (k) | 9,059 / 7,579 | 8,938 / 7,577; 8,941 / 7,577 | 8,578 / 7,541 (1) |
| stock-out node-hours | 34,647 | 25,693 / 25,685 | 24,316 / 24,170 |

Run 2 ran as two ``predops simulate-ops --policy`` processes: predictive 785 CPU s
(failure model 167, loop 593), oracle 350; reactive is the same code path in both
runs. Idle node-hours by pool (reactive / predictive run 2): training 57,853 / 77,257,
big-data 24,548 / 45,439, online 48,446 / 10,711, inference 34,068 / 7,044. The
predictive misses of run 2: 712 failures on busy nodes below the drain threshold, 29
budget, 17 hysteresis, 9 fit / gang.

Run 3 (commit 2d2d2bf, this round's defaults: the anchored next hour, the Poisson
failure buffer, the one-round scale-in cooldown, the flat drain price) ran predictive
alone (``predops simulate-ops --policy predictive``: 758 CPU s, failure model 161, loop
572, world 19; 20.7 min wall at load 5-9; peak RSS 6.2 GiB); reactive and oracle
come from run 3h, ``benchmarks/whatif.py --jobs 3`` on commit 1a5bdc7 with the
engine's headroom price switched on in the simulator (1,386 CPU s in all, 31.6 min
wall, peak RSS 6.2 GiB; reactive is unchanged code, and the oracle's p_fail 1 makes
the inspection price irrelevant):

| figure | reactive | predictive run 3 (default) / run 3h (headroom price) | oracle |
|---|---|---|---|
| lost GPU-hours | 21,164 | 14,364 (-32 %) / 14,835 (-30 %) | 1,682 (-92 %) |
| failures on busy nodes / averted | 1,003 / 0 | 811 / 244; 720 / 319 | 127 / 1,065 |
| drains (needless) | 0 | 881 (637) / 1,539 (1,220) | 1,065 (0) |
| drain cost GPU-h: full / engine / unrepl. | 0 | 23,043 / 2,555 / 2,219; 40,238 / - / 4,032 | 628 |
| ... over the GPU-hours saved | | 3.39 / 0.38 / **0.33**; 6.36 / - / 0.64 | 0.03 |
| budget violations | 0 | 0 / 0 | 0 |
| pending pod-hours | 90,374 | 76,898 (0.85x) / 77,492 (0.86x) | 70,524 (0.78x) |
| idle node-hours | 164,915 | **98,705 (-40.1 %)** / 99,362 (-39.8 %) | 46,374 (-72 %) |
| provisioned node-hours | 2,084,698 | 2,018,072 / 2,018,113 | 1,957,085 |
| stock-out node-hours | 34,647 | 36,164 / 36,309 | 23,745 |

Idle node-hours by pool (reactive / run 3): training 57,853 / 63,702, big-data
24,548 / 29,479, online 48,446 / 2,971, inference 34,068 / 2,553; pending pod-hours
training 53,157 / 51,816, big-data 34,795 / 20,379, online 2,422 / 3,865. Run 3's
misses: 739 failures on busy nodes below the drain threshold, 28 budget, 24
hysteresis, 10 drains scheduled after the failure, 10 fit / gang.

Against the targets (run 3, the defaults): idle node-hours -40.1 % (target -15 %) —
met, with pending pod-hours 0.85x — met, and zero budget violations — met. Lost
GPU-hours avoided 32 % (target 40 %) — missed: the drains catch as many failures as
in run 2 (244 against 252), and the tighter pools put more failures on busy nodes
(811 against 774; an idle node that fails costs nothing), so the gain the sizing made
on idle hours paid some of it back in lost work. Drain cost over the savings
(target 0.25) — missed: 0.33 counted as the capacity that bit (evictions 278 GPU-h +
1,941 out-of-service GPU-h when the pool had work waiting and no spare), 0.38 at the
engine's valuation, 3.39 counting every out-of-service hour (637 of 881 drains
needless). The headroom price drains more and is worse on every drain figure here, as
on seed 11, so the simulator keeps the flat price. The oracle meets every target
(-92 %, 0.03, 0.78x, -72 %): the guards do not limit the predictive policy; the
failure model's recall at an affordable precision does.

Round 4: which nodes a resize parks, and the failure model on all its history. Until
this round a scale-in parked the empty nodes with the highest row numbers and a
scale-up brought back the lowest; now the engine's ``scale_in_order`` parks the idle
nodes likeliest to fail first and the parked nodes with the lowest p_fail come back
first (``scaler.py``), and each weekly retrain of the failure model fits on all the
history before its cutoff instead of the trailing 21 days (``risk.RiskConfig``).
Chosen on seed 11: parking at 1,000 x 21 (predictive before / parking / both; reactive
5,424 lost GPU-h, 203 failures on busy nodes): lost GPU-h 4,149 / 3,969 / 4,049,
failures on busy nodes 192 / 139 / 139, drains 64 (47) / 64 (45) / 76 (54),
unreplaced drain cost 347 / 235 / 278 GPU-h, idle node-h 19,674 / 19,243 / 19,341,
pending 15,576 / 15,711 / 15,717 (loop CPU about 150 s a run). The window on the
failure model alone, 1,000 x 60 (nine retrains): average precision of the next-24 h
failures 0.130 (21 days) / 0.146 (42) / 0.148 (all), precision at p >= 0.3 0.39 / 0.46
/ 0.42; 600 rounds instead of 300 changed nothing (0.149). The loop on the same world,
21 days / all history (reactive: 8,837 lost GPU-h, 81,293 idle node-h, 34,596 pending
pod-h): lost GPU-h 5,954 (-32.6 %) / 4,602 (-47.9 %), drains 253 (195) / 319 (241),
unreplaced drain cost over the savings 0.27 / 0.22 (full 2.72 / 2.33), idle -35.3 % /
-35.0 %, pending 0.78x / 0.78x; failure-model CPU 86 / 138 s, loop 402 / 411 s.

Seed 7, 2,000 x 60. Run 4: parking only (commit 939c78d), predictive alone, 716 CPU s
user, 20.2 min wall, peak RSS 6.9 GB. Run 5: both (commit 417fda9; the module split
and the docs after it change no figure, checked on a small three-policy run),
``benchmarks/whatif.py --jobs 3``: 1,523 CPU s in all (failure model 308, loops:
reactive 178, predictive 602, oracle 362; world 19 per process), 26.6 min wall, peak
RSS 9.4 GB. The predictive policy run again alone on the later demand-model change
(commit f312e87: outage pairs left out, Holt-Winters over 504 h) gave the same figures
to the last digit, because the simulator's sizing never reads the forecaster (below).

| figure | reactive | predictive run 4 / run 5 | oracle run 5 |
|---|---|---|---|
| lost GPU-hours | 21,164 | 12,318 (**-41.8 %**) / 12,109 (**-42.8 %**) | 1,215 (-94.3 %) |
| failures on busy nodes / averted | 1,003 / 0 | 583 / 170; 532 / 215 | 93 / 943 |
| drains (needless) | 0 | 650 (480) / 876 (661) | 943 (0) |
| drain cost GPU-h, unreplaced | 0 | 1,895 / 2,674 | 680 |
| ... over the GPU-hours saved | | **0.21** / **0.30** | 0.03 |
| drain cost GPU-h, engine; full | 0 | 1,966 / 2,710; 17,940 / 23,559 | 680 |
| ... over the GPU-hours saved | | 0.22 / 0.30; 2.03 / 2.60 | 0.03 |
| budget violations | 0 | 0 / 0 | 0 |
| pending pod-hours | 90,374 | 76,042 (0.84x) / 76,571 (0.85x) | 71,490 (0.79x) |
| idle node-hours | 164,915 | 96,589 (-41.4 %) / 96,899 (-41.2 %) | 45,062 (-72.7 %) |
| provisioned node-hours | 2,084,698 | - / 2,008,899 | 1,949,879 |

Run 5: idle node-hours by pool training 62,685, big-data 29,412, online 2,566,
inference 2,236; pending pod-hours training 51,768, big-data 20,435, online 3,554,
inference 814; evictions lost 393 GPU-h of the drain cost; misses: 482 failures on busy
nodes below the drain threshold, 14 budget, 13 gang, 12 hysteresis, 9 drains scheduled
after the failure, 2 fit.

Against the targets (run 5, the defaults): lost GPU-hours avoided 42.8 % — met (32 %
in run 3): parking the risky idle nodes took failures on busy nodes from 811 to 532.
Idle -41.2 %, pending 0.85x, zero budget violations — met. Drain cost over the
savings, counted as the capacity that bit, 0.30 (engine's valuation 0.30, every
out-of-service hour 2.60) — missed (target 0.25); run 4, on the 21-day failure model,
had 0.21. The all-history model drains more (876 against 650) at about the same
precision (25 % of drains caught a failure, 26 % in run 4): its 226 extra drains
averted 45 more failures but saved only 209 more GPU-hours, and their capacity cost
that bit was 779 GPU-hours. It was chosen on seed 11, where it was better on both
figures (0.22 against 0.27 at 1,000 x 60). Seed 7 is not used to choose, so it stays.

A price floor for the headroom pricing, ``CostModel.spare_share`` (the least share of
the window a drain costs, spare or not; 0 by default, an option), was tried on the
same seed 11 world, 1,000 x 60: capacity value 1 priced by headroom with a floor of
0.1 (so 0.1 with an idle spare, 0.125 with a parked one, 1 in a full pool) against the
flat 0.1: 261 drains (197 needless) against 319 (241), unreplaced cost 627 against
924 GPU-h, 0.19 against 0.22 of the savings, but lost GPU-hours avoided 36.9 %
against 47.9 % (64 failures averted against 78; 290 failures on busy nodes against
286). The flat price stays in the simulator.

The soft taint at 0.1 (off by default) on the same world: 138 drains (103 needless),
unreplaced cost 0.09 of the savings, failures on busy nodes 275, but 35 failures
averted and lost GPU-hours avoided 35.0 % (47.9 % without): it keeps new pods off
the risky nodes, so fewer of them are drain candidates when their failure comes; on
this seed that cost more work than it saved. It stays off.

A second seed at the issue's size, run after the choices, as a check (seed 11, 2,000 x
60, commit 5b5f1d0, ``benchmarks/whatif.py --seed 11 --jobs 2``: 1,326 CPU s, 14.9
min wall, peak RSS 9.3 GB): reactive / predictive / oracle lost GPU-hours 18,366 /
8,412 (-54.2 %) / 678 (-96.3 %); failures on busy nodes 957 / 436 / 69, averted 0 /
218 / 939; drains 911 (693 needless) / 939 (0); drain cost over the savings,
unreplaced 0.13 (engine 0.27, full 2.43) / 0.03; zero budget violations; pending
pod-hours 62,011 / 51,961 (0.84x) / 44,959 (0.73x); idle node-hours 156,648 / 89,084
(-43.1 %) / 37,246 (-76.2 %). Every target met there; on seed 7 the drain cost (0.30)
is not, so the drain-cost figure moves with the seed by more than its margin.

The simulator's pool sizing does not read the demand forecaster. The sizing window is
the scale-up lead plus the hold (30 min + 1 h), so its only hourly target is the next
hour, and that hour is the anchored persistence forecast (``policy.anchoring``). The
forecaster is still fitted every week and handed in, but with these settings its
forecasts go unused. It matters when the lead time is hours, as for cloud GPU
capacity or bare metal brought back from a powered-down reserve, and for the
long-horizon buys the simulator does not run.

Round 5, looking for what limits the drain cost (seed 11, 1,000 x 60; seed 7 not run).

- Escalation features did not help the failure model. The world's precursors build up
  towards the failure while their benign look-alikes fade (``synthetic.episodes``),
  so per counter the rate of the last 6 h minus that of the 18 h before, and of the
  last 1 h minus the 5 h before, were added to the hourly frame (14 columns, a
  scratch script). Average precision of the next-24 h failures 0.147 against 0.148
  without, precision at p >= 0.3 0.41 against 0.42. The trees already read the 1 h /
  6 h / 24 h increases side by side. Not added.
- Where the cost bites (every drain of one predictive run recorded: pool, p_fail,
  caught or needless, its unreplaced hours). 319 drains, 78 caught; 868 GPU-h of
  needless out-of-service hours bit, 853 of them in the training pool, the one that
  runs out of nodes (pending pods there and no spare); evictions lost 55 GPU-h. 239
  drains were of gang members, with a break-even p_fail of about 0.2: they caught 48
  failures whose jobs held 5,936 GPU-h at risk (the engine's count at the drain),
  against 820 GPU-h that bit. By p_fail at the drain, cost (bit + evictions) against
  the GPU-h at risk on the caught nodes: 0.1-0.2 (69 drains, 17 % caught) 221 against
  1,960; 0.2-0.3 (105, 16 %) 392 against 2,100; 0.3-0.4 (86, 23 %) 206 against 601;
  0.4 and up (59, 49 %) 105 against 1,470. In every band the caught failures held
  more at risk than the band cost, so no band is a clear loss to cut.
- A node drained again within 72 h of a needless drain (55 drains) was caught 22 % of
  the time, as often as any drain (24 %): a clean inspection does not make the next
  alarm less likely to be real on this world, so no guard for it.
- A better-ranking failure model did not save more work in the loop. Two ways of
  training on more rows, on the model alone (nine retrains): rows every hour instead
  of every 2 h, average precision 0.154 (0.148 now), precision at p >= 0.3 0.44
  (0.42), 229 CPU-s (137); no subsampling of the negatives (``negative_rate`` 1
  instead of 0.2), 0.158, 0.42, 303 CPU-s. In the loop (reactive: 8,837 lost GPU-h):

  | predictive | now | rows every hour | all negatives |
  |---|---|---|---|
  | lost GPU-h avoided | 47.9 % | 27.2 % | 35.6 % |
  | failures averted / on busy nodes | 78 / 286 | 71 / 292 | 65 / 290 |
  | drains (needless) | 319 (241) | 310 (239) | 300 (235) |
  | unreplaced drain cost / savings | 0.22 | 0.38 | 0.24 |
  | idle node-h, pending pod-h (x reactive) | -35.0 %, 0.78x | -34.9 %, 0.79x | -35.1 %, 0.78x |

  Nearly the same drains and failures on busy nodes, yet the lost GPU-hours moved by
  1,800: a few failures under large gangs (a 16-node gang loses all its GPUs' work
  since the checkpoint) decide the figure, and small changes move which gangs a
  failure meets. On one 1,000-node, 60-day world the lost-work figure carries about
  +-10 points of such noise, and the drain-cost ratio, which divides by the savings,
  more. Neither variant is kept.

A third seed at the issue's size, never looked at before (seed 13, 2,000 x 60, commit
d8e2f04, the simulator as in run 5; ``benchmarks/whatif.py --seed 13 --jobs 2``: 1,484
CPU s, 19.0 min wall, peak RSS 9.2 GB):

| figure | reactive | predictive | oracle |
|---|---|---|---|
| lost GPU-hours | 19,645 | 11,553 (**-41.2 %**) | 1,414 (-92.8 %) |
| failures on busy nodes / averted | 1,095 / 0 | 567 / 254 | 134 / 963 |
| drains (needless) | 0 | 939 (685) | 963 (0) |
| drain cost GPU-h, unreplaced (evictions + needless out) | 0 | 2,370 (248 + 2,122) | 604 |
| ... over the GPU-hours saved: unreplaced / engine / full | | **0.29** / 0.34 / 3.08 | 0.03 |
| budget violations | 0 | 0 | 0 |
| pending pod-hours | 75,183 | 62,914 (0.84x) | 57,602 (0.77x) |
| idle node-hours | 160,840 | 89,858 (-44.1 %) | 39,542 (-75.4 %) |

Predictive misses: 519 failures on busy nodes below the drain threshold, 20
hysteresis, 13 budget, 7 gang, 6 drains scheduled after the failure, 2 fit. Over the
three seeds at 2,000 x 60 (7 / 11 / 13) the predictive policy avoids 42.8 / 54.2 /
41.2 % of the lost GPU-hours, holds 41-44 % fewer idle node-hours at 0.84-0.85x the
pending pod-hours, with zero budget violations, and its drain cost is 0.30 / 0.13 /
0.29 of the savings: the drain-cost target (0.25) is met on one seed of three, so the
miss on seed 7 is not bad luck of one seed. What is left is the failure model's
precision at the threshold (24-27 % of drains catch a failure) against drains that
bite in the pool that runs out of nodes (training).

Summed over the three worlds (``run.pooled``; ``benchmarks/whatif.py --seeds 7,11,13``
now prints it beside each seed's figures), the predictive policy avoids 45.8 % of the
lost GPU-hours at a drain cost of 0.23 of the savings counted as the capacity that
bit (0.30 at the engine's valuation, 2.68 counting every hour out), idle -42.8 %,
pending 0.84x, zero violations; the oracle -94.4 %, 0.03. The pooled figure was
computed after the three runs were seen, so it is reported, not used to call the
target met; a next round could fix the seeds and the pooled figure beforehand.

Where the predictive loop's time goes (cProfile, seed 11, 1,000 nodes x 10 days, 70
CPU s): the demand forecaster 28 s (two weekly fits 15 s, the hourly forecasts 9 s,
the measured demand 3 s), pod placement 20 s, pool sizing 14 s (packing 11 s), the
drain decisions 5 s. With the sizing window above, the forecaster's output reaches
only the lending proposals, which the loop does not execute; it is kept because the
issue asks for the models retrained as in production, and a longer scale-up lead
would read it.

Round 6, fixed before running (written and committed before any of these worlds ran,
at any size): the simulator as at commit 7327a29, three new worlds at the issue's
size (2,000 x 60, seeds 17, 19 and 23, never run before), ``benchmarks/whatif.py
--seeds 17,19,23 --jobs 2``. The figure of record is the pooled comparison
(``run.pooled``, sums over the three worlds) against the five targets: lost
GPU-hours avoided >= 40 %, drain cost counted as the capacity that bit (unreplaced)
< 0.25 of the savings, zero budget violations, pending pod-hours <= reactive, idle
node-hours >= 15 % lower. Each world's figures are reported beside it. If the pooled
figures meet all five, the simulator's targets are taken as met on the expected
(pooled) figure, with seed 7's single-world miss stated beside it; if not, they stay
missed. Nothing in the simulator or the engine changes between that commit and the
runs. The seeds may run one by one (``--seed 17``, ...) and be pooled afterwards with
``run.pooled``: the same sums. Not run to the end yet: the session that fixed the rule
ran out of time with seeds 17 and 19 at day 3-4 of the predictive run (no figure was
seen); the next round runs all three from the start.

Round 6, run (the next session, first thing, from a clone of daf22de: the rule's
commit plus docstrings; ``benchmarks/whatif.py --seeds 17,19,23 --jobs 2 --json``,
5,179 CPU-s, 55.9 min wall, peak RSS 9.1 GB, nothing else changed in ``policy/`` or
here):

| | seed 17 | seed 19 | seed 23 | **pooled (of record)** | target |
|---|---|---|---|---|---|
| lost GPU-h, reactive | 20,322 | 21,127 | 15,523 | 56,972 | |
| lost GPU-h, predictive | 11,690 | 10,708 | 7,068 | 29,466 | |
| lost GPU-h avoided | 42.5 % | 49.3 % | 54.5 % | **48.3 %** | >= 40 % met |
| drain cost / savings, unreplaced | 0.257 | 0.197 | 0.106 | **0.188** | < 0.25 met |
| ... engine's valuation | 0.36 | 0.26 | 0.26 | 0.29 | (reported) |
| ... every hour out | 3.30 | 2.34 | 2.30 | 2.63 | (reported) |
| budget violations | 0 | 0 | 0 | **0** | 0 met |
| pending pod-h vs reactive | 0.77x | 0.82x | 0.72x | **0.77x** | <= 1 met |
| idle node-h | -41.4 % | -40.5 % | -44.2 % | **-41.9 %** | >= 15 % lower met |
| failures on busy nodes, R / P / O | 1,007 / 489 / 98 | 1,033 / 519 / 63 | 889 / 407 / 58 | | |
| drains (needless) | 1,054 (780) | 900 (686) | 777 (587) | | |
| oracle: lost GPU-h avoided | 90.5 % | 97.1 % | 94.3 % | 94.0 % | |
| oracle: unreplaced cost / savings | 0.03 | 0.03 | 0.05 | 0.04 | |
| oracle: pending, idle | 0.66x, -74.4 % | 0.75x, -73.1 % | 0.67x, -77.0 % | 0.70x, -74.8 % | |

By the rule, the pooled figures meet all five targets, so the simulator's targets
count as met on the expected figure. Beside it: a single world misses the drain-cost
target in three of the six worlds run at this size (seed 7 0.30, seed 13 0.29, seed
17 0.257; met on 11, 19, 23: 0.13, 0.20, 0.11), and on the engine's own valuation of
a drain (capacity at ``capacity_value``) the pooled ratio is 0.29, over 0.25; only the
count of capacity that bit, fixed as the figure of record before these runs, is under
it.
"""
