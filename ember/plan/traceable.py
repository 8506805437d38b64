"""Can ember trace this plan? Refuses, naming the operator, what no capture could trace
exactly, before any job runs (capture and `ember.infer` ask alike).

Three things are refused where the rows they read carry lineage (a source a workload
leaves out, or an empty relation, carries none; nor does the outer side of a
decorrelated subquery, `Aggregate.domain`, nor an anti join's right side):

- a scalar subquery that samples rows or computes a random value: its lineage would
  come from another run than its value;
- a GROUP BY on a nondeterministic value: a second read of the groups would group
  otherwise;
- a window frame narrower than its partition over an unordered partition: which rows
  are in a row's frame is left to chance.
"""

from __future__ import annotations

from ember.errors import UnsupportedOperatorError
from ember.plan import ir
from ember.plan.workload import Workload


def check(plan: ir.Node, workload: Workload | None = None) -> None:
    """Raises `UnsupportedOperatorError` for the first part of `plan` ember cannot trace
    (inputs first, then the node, then the scalar subqueries it runs); `workload`: the
    sources traces will name (others carry no lineage).

    >>> from ember.plan.sources import Source
    >>> a = ir.Attr(1, "a", "int")
    >>> t = ir.Scan(Source("t", "t", "memory", 3), (a,))
    >>> rand = ir.Expr("rand()", frozenset(), deterministic=False)
    >>> check(ir.Aggregate(t, keys=(rand,), columns=(ir.Named(ir.ColumnRef(a), a),)))
    Traceback (most recent call last):
    ...
    ember.errors.UnsupportedOperatorError: ember cannot trace a GROUP BY on the nondeterministic rand()
    >>> check(ir.Aggregate(t, keys=(rand,), columns=(ir.Named(ir.ColumnRef(a), a),)), Workload(sources=()))
    """
    _lineage(plan, workload or Workload())


def _lineage(node: ir.Node, workload: Workload) -> bool:
    """Checks `node` and returns whether its rows carry lineage (the capture rewrite gives
    them slots)."""
    carries = _own(node, workload)
    for sub in (s for e in node.expressions() for s in e.subqueries):
        if ir.varies(sub):
            raise UnsupportedOperatorError(
                f"ember cannot trace a scalar subquery that samples rows or computes a random value "
                f"({ir.outline(sub)}): its lineage would come from another run than its value"
            )
        carries = _lineage(sub, workload) or carries
    return carries


def _own(node: ir.Node, workload: Workload) -> bool:
    if isinstance(node, ir.Scan):
        return node.source.kind != "none" and workload.keeps(node.source.name)
    if isinstance(node, ir.Aggregate):
        if node.domain:  # the outer values a decorrelated subquery is joined with
            return False
        carries = _lineage(node.child, workload)
        for k in node.keys:
            if carries and isinstance(k, ir.Expr) and not k.deterministic:
                raise UnsupportedOperatorError(f"ember cannot trace a GROUP BY on the nondeterministic {k.sql}")
        return carries
    if isinstance(node, ir.Window):
        carries = _lineage(node.child, workload)
        if carries and not node.order and any(not f.partition_wide for f in node.frames):
            raise UnsupportedOperatorError("ember cannot trace a window frame over an unordered partition")
        return carries
    if isinstance(node, ir.Join):
        left = _lineage(node.left, workload)
        return left if node.kind == "anti" else _lineage(node.right, workload) or left
    if isinstance(node, ir.Union):
        inputs = [_lineage(c, workload) for c in node.inputs]
        return any(c for i, c in enumerate(inputs) if i not in node.blind)
    return any([_lineage(c, workload) for c in node.children])
