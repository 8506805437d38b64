"""What DuckDB reads of a side table's plan."""

from __future__ import annotations

from ember.capture.decided import without_decided
from ember.plan import ir
from ember.plan.slots import GROUPS, SideTable


def as_read(table: SideTable) -> ir.Node:
    """The plan DuckDB reads for the table's wanted rows: a group table's without the
    conditions its keys decide (`capture.decided`)."""
    plan = table.plan
    if table.why != GROUPS or not isinstance(plan, ir.Project) or table.prefixes:
        return plan  # a rollup's coarser groups are not decided by all of its keys
    return without_decided(plan, table.keys)


def kept(plan: ir.Node) -> ir.Node:
    """What an input read beside the job holds of an aggregate's input: an expand's child,
    whose rows the reads repeat per grouping set (kept once, not once per set)."""
    return plan.child if isinstance(plan, ir.Expand) else plan


def held(table: SideTable) -> ir.Node:
    """The plan whose rows an input read holds (what other reads may read from it)."""
    assert table.aggregated is not None
    return kept(table.aggregated)


def keyed(plan: ir.Node) -> bool:
    """Whether the wanted keys come into the plan through an `ir.Keys` node (a semi join's
    witnesses), not joined to its rows by the read."""
    return any(isinstance(n, ir.Keys) for n in ir.walk(plan))
