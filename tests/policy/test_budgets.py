"""The budget ledger: each ledger counts its own disruptions over the domains of the
nodes it is given, even when the domain table of the same node tuple is re-used."""

from __future__ import annotations

from predops.policy.budgets import BudgetLedger, domains_of
from predops.policy.config import Budgets, DisruptionBudget
from tests.allocator.factories import make_node

RACK_ONLY = Budgets((DisruptionBudget("rack", max_nodes=1),))


def test_ledgers_on_one_topology_keep_their_own_counts_and_a_new_topology_its_domains() -> None:
    a = tuple(make_node(node_id=f"a{i}", rack="r1") for i in range(3))
    first = BudgetLedger(RACK_ONLY, a, disrupted=["a0"])
    assert first.blocked("a1") is not None  # one node per rack, a0 already out
    first.take("a2")  # planned on the first ledger only
    second = BudgetLedger(RACK_ONLY, a, disrupted=[])  # the same tuple: table re-used
    assert second.blocked("a1") is None
    rack = domains_of(a[2])["rack"]
    assert first.usage("a2")[f"rack:{rack}"]["planned"] == 1
    assert second.usage("a2")[f"rack:{rack}"]["planned"] == 0
    b = tuple(make_node(node_id=f"b{i}", rack=f"q{i}") for i in range(3))
    other = BudgetLedger(RACK_ONLY, b, disrupted=["b0"])
    assert other.blocked("b1") is None  # b1 sits in its own rack
    assert other.size[("rack", domains_of(b[1])["rack"])] == 1
    assert other.size[("rack", rack)] == 0  # nothing of the first topology is left
    listed = BudgetLedger(RACK_ONLY, list(b), disrupted=["b0"])  # not a tuple: no cache
    assert listed.size == other.size
