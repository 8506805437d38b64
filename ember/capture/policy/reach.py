"""Reach: how the rows of a node reach the job's result, the context the policy walks with.

Whether an aggregate's groups can ride in the result as lists, or must be read whole,
depends on what stands above it: operators that pass each input row on as at most one
output row (projections, filters, limits, sorts, unions) keep a list uncopied; operators
that pass every row on (no filter, limit, join, sample) keep every group wanted.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ember.plan import ir

# Operators that pass each input row to the output at most once (no join, no group):
# a list made below them reaches the result without being copied.
ONE_FOR_ONE = (ir.Project, ir.Filter, ir.Limit, ir.Passthrough, ir.Union)

# Passthroughs that pass every row on (a sample or a UDTF may drop some).
_KEEPING = ("sort", "repartition", "observe", "python udf", "pandas udf", ir.SEQUENCE)


@dataclass(frozen=True)
class Reach:
    """How the rows of the node being placed reach the result.

    `one_for_one`: each of its rows reaches the result as one row of it (or not at all).
    `every_row`: none of its rows is dropped on the way. `listed`: it is in the input of
    an aggregate that lists its groups (its own lists would nest in those). `subquery`:
    it is in a scalar subquery's plan, whose rows are a side table's. `read_after`: it is
    in the input of a side table DuckDB reads (a rid costs DuckDB nothing there)."""

    one_for_one: bool = True
    every_row: bool = True
    listed: bool = False
    subquery: bool = False
    read_after: bool = False

    def below(self, node: ir.Node) -> Reach:
        """The reach of `node`'s inputs.

        >>> from ember.capture.policy.examples import having, scan, sort
        >>> Reach().below(sort(scan("t", "a")))
        Reach(one_for_one=True, every_row=True, listed=False, subquery=False, read_after=False)
        >>> Reach().below(having(scan("t", "a")))
        Reach(one_for_one=True, every_row=False, listed=False, subquery=False, read_after=False)
        """
        return replace(
            self,
            one_for_one=self.one_for_one and isinstance(node, ONE_FOR_ONE),
            every_row=self.every_row and keeps_every_row(node),
        )

    def in_subquery(self) -> Reach:
        """The reach of a scalar subquery's plan: its rows reach its own table one for one."""
        return replace(self, one_for_one=True, every_row=False, subquery=True)


def keeps_every_row(node: ir.Node) -> bool:
    """Whether `node` passes every input row on to its output (a filter, limit, join, sample
    or UDTF may drop some).

    >>> from ember.capture.policy.examples import having, scan, sort
    >>> keeps_every_row(sort(scan("t", "a"))), keeps_every_row(having(scan("t", "a")))
    (True, False)
    """
    if isinstance(node, ir.Passthrough):
        return node.kind in _KEEPING
    return isinstance(node, ir.Project | ir.Union)


def limited(plan: ir.Node) -> frozenset[int]:
    """id() of the aggregates whose rows reach the result through a LIMIT or a filter (a
    HAVING), and otherwise one for one: some of their groups are dropped, whose lists
    would be built for nothing (an OFFSET alone keeps them all but a few).

    >>> from ember.capture.policy.examples import group_by, limit, scan
    >>> g = group_by(scan("t", "a"), "a")
    >>> limited(limit(g)) == {id(g)}, limited(g)
    (True, frozenset())
    """
    found: set[int] = set()
    todo = [(plan, False)]
    while todo:
        node, cut = todo.pop()
        if isinstance(node, ir.Aggregate) and cut:
            found.add(id(node))
        elif isinstance(node, ONE_FOR_ONE):
            cut = cut or (isinstance(node, ir.Limit) and node.kind != "Offset") or isinstance(node, ir.Filter)
            todo += [(c, cut) for c in node.children]
    return frozenset(found)
