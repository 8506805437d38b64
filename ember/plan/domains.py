"""Spark's domain joins: the outer values a decorrelated subquery is joined with are no lineage.

Spark decorrelates a subquery whose correlation it cannot pull up (`b.v > a.v` under the
subquery's aggregate) by joining the inner query with the *domain*, the distinct outer
values (`Aggregate [a.v] [a.v AS v']` over a copy of the outer plan), and joining the
result back to the outer rows on `v' <=> a.v`. The copy keeps the outer plan's attribute
ids, so a scan under the domain outputs the very ids a scan on the join's other side
does: no plan a user writes does that (Spark gives a relation read twice new ids). Where
the grouped value is computed (a Python UDF Spark evaluates again on each side, under
new ids), the shared scan ids are the only mark left. The domain's rows only say which
outer values exist; a row's lineage is the inner rows its scalar came from, so the
domain carries none (else each outer row would get every outer row with the same value).
"""

from __future__ import annotations

from dataclasses import replace

from ember.plan import ir


def marked(plan: ir.Node) -> ir.Node:
    """`plan` with each domain aggregate marked `domain` (a subquery plan inside an
    expression is marked on its own, as it is imported)."""
    found = {id(a) for join in ir.walk(plan) if isinstance(join, ir.Join) for a in _domains(join)}
    return _marked(plan, found) if found else plan


def _domains(join: ir.Join) -> list[ir.Aggregate]:
    """The aggregates under one side of `join` that only name their distinct grouped values
    (each column an alias of one) and read a copy of the other side (a scan of its ids)."""
    found = []
    for side, other in ((join.left, join.right), (join.right, join.left)):
        copied = _scanned(other)
        for node in ir.walk(side):
            if (
                isinstance(node, ir.Aggregate)
                and node.columns
                and all((col := ir.column_of(c.expr)) is not None and col != c.attr.id for c in node.columns)
                and _scanned(node) & copied
            ):
                found.append(node)
    return found


def _scanned(node: ir.Node) -> set[int]:
    """The attribute ids the scans under `node` output."""
    return {a.id for n in ir.walk(node) if isinstance(n, ir.Scan) for a in n.output}


def _marked(node: ir.Node, found: set[int]) -> ir.Node:
    children = tuple(_marked(c, found) for c in node.children)
    if id(node) in found:
        assert isinstance(node, ir.Aggregate)
        return replace(node, child=children[0], domain=True)
    if all(a is b for a, b in zip(children, node.children, strict=True)):
        return node
    return ir.with_children(node, children)
