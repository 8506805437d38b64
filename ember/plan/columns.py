"""Column-level lineage read off the plan: the source columns each output column is
computed from (for OpenLineage's column lineage facet; rows are ember's own business).

A column computed by an expression comes from every column the expression reads
(a grouped map's, from every column of its inputs: its function is opaque); a column
that only passes through keeps its origins. Filters, join conditions and
grouping do not count: they choose rows, not values.
"""

from __future__ import annotations

from ember.plan import ir

Origins = dict[int, frozenset[tuple[str, str]]]


def column_lineage(plan: ir.Node) -> list[tuple[str, list[tuple[str, str]]]]:
    """Per output column, in order: its name and the sorted (source, column) pairs it comes from."""
    found = _origins(plan)
    return [(a.name, sorted(found.get(a.id, frozenset()))) for a in plan.output]


def _refs(e: ir.AnyExpr) -> frozenset[int]:
    if isinstance(e, ir.Expr):
        return e.refs
    if isinstance(e, ir.ColumnRef):
        return frozenset({e.attr.id})
    return frozenset()


def _origins(node: ir.Node) -> Origins:
    if isinstance(node, ir.Scan):
        return {a.id: frozenset({(node.source.name, a.name)}) for a in node.attrs}
    below: Origins = {}
    for child in node.children:
        below.update(_origins(child))

    def of(*exprs: ir.AnyExpr) -> frozenset[tuple[str, str]]:
        return frozenset(o for e in exprs for r in _refs(e) for o in below.get(r, ()))

    made: Origins = {}
    if isinstance(node, ir.Project | ir.Aggregate | ir.Window):
        made = {c.attr.id: of(c.expr) for c in node.columns}
    elif isinstance(node, ir.Union):
        made = {a.id: frozenset().union(*(below.get(c.output[i].id, ()) for c in node.inputs)) for i, a in enumerate(node.attrs)}
    elif isinstance(node, ir.Expand):
        made = {a.id: of(*(p[i] for p in node.projections)) for i, a in enumerate(node.attrs)}
    elif isinstance(node, ir.Generate):
        made = {a.id: of(node.generator) for a in node.generated}
    elif isinstance(node, ir.Passthrough):
        made = {a.id: of(*node.exprs) for a in node.added}
    elif isinstance(node, ir.GroupMap):  # an opaque function of its whole input tables
        every = frozenset().union(*(below.get(a.id, frozenset()) for c in node.inputs for a in c.output))
        made = {a.id: every for a in node.attrs}
    elif isinstance(node, ir.Join) and node.exists_attr is not None and node.cond is not None:
        made = {node.exists_attr.id: of(node.cond)}
    return below | made
