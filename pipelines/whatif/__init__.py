"""``predops simulate-ops``: the closed-loop what-if simulator.

One seeded synthetic fleet run hour by hour under three policies — ``reactive`` (repair
after failure, pools sized from usage), ``predictive`` (the real failure model and demand
forecaster feeding the real policy engine and allocator) and ``oracle`` (the same engine
handed the truth) — counting per policy the lost GPU-hours, drains (needless too), budget
violations, and pending / idle node-hours. ``run.py`` runs one world and compares the
policies; ``loop.py`` is the hourly tick. The ``predictive-placeholders``,
``-autoscaler`` and ``-static`` variants act on the engine's resizes through
placeholder pods and a node autoscaler with a lead time (``autoscaler.py``), the
autoscaler alone, or not at all.

The design note — how the loop counts, what is approximated and why, and the measured
rounds with their results tables — is ``docs/whatif.md``.
"""
