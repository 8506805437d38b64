"""Reading an aggregate's wanted groups: the conditions their keys decide are skipped, and
the keys other keys fix are not compared.

A group that reaches the result had at least one input row pass every filter and semi or
anti join below the aggregate. A condition that reads only columns equal to the group's
keys on every input row (the key columns themselves, and columns an inner join equates
with them) is true or false for the whole group at once; its group passed it, so every
row of the group does. Reading the rows of wanted groups again, such conditions change
nothing and can be left out: groups by order under an `o_orderkey IN (SELECT l_orderkey
... GROUP BY l_orderkey HAVING ...)` semi join would otherwise aggregate all of
`lineitem` again to keep rows of orders that already passed it.

Only where every input row reaches the aggregate through the condition is it skipped:
under projections, filters, inner joins and the left side of semi and anti joins, not
below an outer join (whose unmatched rows a skipped condition would turn into matches),
an aggregate or a subplan the job shares. The inner joins whose equalities tie columns
to the keys always stay; a filter's equality does not tie them (it may be what is skipped).

In the same region a key column unique and never null in its source fixes its scan's row,
so the row's other columns, and through the inner joins' equalities the rows joined on
their own unique columns: a key those fix is not compared with the wanted values (every
wanted tuple is a real group's, whose fixed keys agree with the row they come from).
"""

from __future__ import annotations

from dataclasses import replace

from ember.plan import ir

_THROUGH = ("inner", "cross")  # joins whose both sides' rows all reach the output
_FILTERING = ("semi", "anti")  # joins that only keep or drop left rows


def without_decided(plan: ir.Project, keys: tuple[ir.Attr, ...]) -> ir.Project:
    """`plan` (an aggregate group table: its key columns, then its slots) without the
    filters and semi and anti joins its `keys` decide; valid only for reading groups that
    reach the result. A global aggregate's one group has a row even where none passed: kept
    whole."""
    if not keys:
        return plan
    seeds = {c for c in (_column_of(n.expr) for n in plan.columns if n.attr in keys) if c is not None}
    equal = _Classes()
    _collect(plan, equal)
    pruned = _pruned(plan, frozenset(_fixed(seeds, equal, [], frozenset())))
    assert isinstance(pruned, ir.Project)
    return pruned


def matched_keys(plan: ir.Project, keys: tuple[ir.Attr, ...], unique: frozenset[tuple[str, str]]) -> tuple[int, ...]:
    """The positions of the `keys` a read of wanted groups must match; the others follow
    from them. A scan is one source row per value of a column unique and never null in
    its source (`unique`, as `capture.keys` found it), so the key `c_custkey` fixes the
    `customer` row and with it `c_name` and `c_comment`, and, through `c_nationkey =
    n_nationkey`, the `nation` row and `n_name`: of those keys only `c_custkey` is matched."""
    made = {n.attr: _column_of(n.expr) for n in plan.columns}
    columns = [made.get(k) for k in keys]
    equal = _Classes()
    _collect(plan, equal)
    scans = [n for n in _walk_region(plan) if isinstance(n, ir.Scan)]
    kept = list(range(len(keys)))
    for i in range(len(keys)):
        others = {c for j in kept if j != i and (c := columns[j]) is not None}
        column = columns[i]
        if column is not None and column in _fixed(others, equal, scans, unique):
            kept.remove(i)
    return tuple(kept)


def _walk_region(node: ir.Node) -> list[ir.Node]:
    return [node, *(n for child in _region(node) for n in _walk_region(child))]


def _fixed(seeds: set[int], equal: _Classes, scans: list[ir.Scan], unique: frozenset[tuple[str, str]]) -> set[int]:
    """The columns `seeds` fix on every row: those equal to one, and every column of a scan
    one of whose unique columns is fixed."""
    fixed = set(seeds)
    while True:
        grown = {a for a in equal.members() if any(equal.same(a, s) for s in fixed)} | fixed
        for scan in scans:
            if any(a.id in grown and (scan.source.key, a.name) in unique for a in scan.attrs):
                grown |= {a.id for a in scan.attrs}
        if grown == fixed:
            return fixed
        fixed = grown


def _column_of(e: ir.AnyExpr) -> int | None:
    if isinstance(e, ir.ColumnRef):
        return e.attr.id
    if isinstance(e, ir.Expr):
        return e.column
    return None


class _Classes:
    """Attribute ids known equal on every row (union-find)."""

    def __init__(self) -> None:
        self.parent: dict[int, int] = {}

    def find(self, a: int) -> int:
        self.parent.setdefault(a, a)
        while self.parent[a] != a:
            self.parent[a] = self.parent[self.parent[a]]
            a = self.parent[a]
        return a

    def union(self, a: int, b: int) -> None:
        self.parent[self.find(a)] = self.find(b)

    def same(self, a: int, b: int) -> bool:
        return self.find(a) == self.find(b)

    def members(self) -> set[int]:
        return set(self.parent)


def _region(node: ir.Node) -> tuple[ir.Node, ...]:
    """The children whose every row reaches `node`'s output (through which conditions on
    the group's rows may be skipped)."""
    if isinstance(node, ir.Project | ir.Filter | ir.Numbered):
        return (node.child,)
    if isinstance(node, ir.Join) and node.kind in _THROUGH:
        return (node.left, node.right)
    if isinstance(node, ir.Join) and node.kind in _FILTERING:
        return (node.left,)
    return ()


def _collect(node: ir.Node, equal: _Classes) -> None:
    """Equalities every row of the region satisfies: inner joins' equated columns and
    projections' renames."""
    if isinstance(node, ir.Project):
        for n in node.columns:
            column = _column_of(n.expr)
            if column is not None:
                equal.union(n.attr.id, column)
    if isinstance(node, ir.Join) and node.kind in _THROUGH:
        for left, right in node.equi:
            equal.union(left, right)
    for child in _region(node):
        _collect(child, equal)


def _decides(cond: ir.Expr | None, refs: frozenset[int], decided: frozenset[int]) -> bool:
    if cond is None:
        return True
    return cond.deterministic and not cond.subqueries and refs <= decided


def _pruned(node: ir.Node, decided: frozenset[int]) -> ir.Node:
    if isinstance(node, ir.Filter) and _decides(node.cond, node.cond.refs, decided):
        return _pruned(node.child, decided)
    if isinstance(node, ir.Join) and node.kind in _FILTERING and node.exists_attr is None:
        left_refs = frozenset() if node.cond is None else node.cond.refs & {a.id for a in node.left.output}
        if _decides(node.cond, left_refs, decided):
            return _pruned(node.left, decided)
        return replace(node, left=_pruned(node.left, decided))
    if isinstance(node, ir.Project | ir.Filter):
        return replace(node, child=_pruned(node.child, decided))
    if isinstance(node, ir.Join) and node.kind in _THROUGH:
        return replace(node, left=_pruned(node.left, decided), right=_pruned(node.right, decided))
    return node
