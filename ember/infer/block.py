"""Joining a piece's candidate rows in-process, where cutting them is not exact.

Semi-join cuts (`infer.refine`) are the exact lineage only on a tree of single-equality
joins. With a filter over a join (Q2's `ps_supplycost = min(...)`, Q17's `l_quantity <
0.2 * avg`), a composite or theta condition (Q9, Q19) or a cycle (Q5, Q7), the candidates
left after cutting are a superset. But they are few, and the operators between them and
the traced group are only filters, projections and inner, cross, semi or left joins:
DuckDB joins them with the plan's own conditions, and the rows that take part in some
joined row are the lineage exactly (a semi join's witnesses are lineage, so it joins as
inner; a left join's padded rows have no right-side lineage; an anti join keeps the rows
with no partner, `NOT EXISTS` with its own condition, which also spells `NOT IN`'s null
rule). The right side of a left or anti join must hold every partner of every left
candidate, so the caller reads it unrestricted by traced values that reach it only
through the padded side, or not at all (Spark plans Q2's, Q17's and Q20's correlated
subqueries as such left joins; Q16's and Q21's NOT IN / NOT EXISTS as anti joins).
Conditions are Catalyst expressions translated by `duck_scan.sql`; where one does not
translate, the trace falls back to a re-run.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ember import duck
from ember.infer.duck_scan import sql
from ember.infer.exact import under_global
from ember.infer.spark import RID
from ember.plan import ir
from ember.plan.jvm import JObj

_KEEP_ROWS = ("sort", "repartition")


def columns(plan: ir.Node) -> dict[int, set[ir.Attr]]:
    """Per scan (by `id()`), the columns the operators below the traced group read."""
    body = below_group(plan)
    refs: set[int] = set()
    for node in ir.walk(body):
        for e in node.expressions():
            refs |= e.refs
        if isinstance(node, ir.Project):
            refs |= {c.expr.attr.id for c in node.columns if isinstance(c.expr, ir.ColumnRef)}
    return {id(n): {a for a in n.attrs if a.id in refs} for n in ir.walk(body) if isinstance(n, ir.Scan)}


def below_group(plan: ir.Node) -> ir.Node:
    """The operators below the traced group (as `infer.exact` delimits them)."""
    node = plan
    while isinstance(node, ir.Project | ir.Filter | ir.Limit) or _keeps_rows(node):
        assert isinstance(node, ir.Unary)
        node = node.child
    if isinstance(node, ir.Aggregate):
        return under_global(node)
    node = plan
    while isinstance(node, ir.Project | ir.Limit) or _keeps_rows(node):
        assert isinstance(node, ir.Unary)
        node = node.child
    return node


def evaluate(plan: ir.Node, frames: dict[int, pa.Table]) -> dict[int, np.ndarray] | None:
    """Per scan (by `id()`), the rids of its candidates (`frames`: `__ember_rid` and columns
    `a<attr id>`) that take part in some joined row; None when a condition does not translate."""
    query = _Query(frames)
    built = query.sql(below_group(plan))
    if built is None:
        return None
    text, names = built
    rids = [n for n in names if n.startswith("r")]  # an anti join's inner rows are not among them
    con = duck.connect()
    try:
        for name, table in query.tables.items():
            con.register(name, table)
        joined = con.sql(f"SELECT DISTINCT {', '.join(rids)} FROM ({text})").to_arrow_table()
    except duckdb.Error:  # a column that did not translate is read, or an overflow: Spark decides
        return None
    finally:
        con.close()
    # a left join's padded rows have null right-side rids
    return {query.scans[r]: np.unique(pc.drop_null(joined.column(r)).to_numpy().astype(np.int64)) for r in rids}


def _keeps_rows(node: ir.Node) -> bool:
    return isinstance(node, ir.Passthrough) and node.kind in _KEEP_ROWS


def _named(attr: JObj) -> str:
    return f"a{int(attr.exprId().id())}"


class _Query:
    """Builds the SQL of a block bottom-up; each piece returns its text and column names
    (`r<n>`: the rids of scan n, `a<id>`: attributes)."""

    def __init__(self, frames: dict[int, pa.Table]):
        self.frames = frames
        self.tables: dict[str, pa.Table] = {}
        self.scans: dict[str, int] = {}  # rid column → id() of its scan

    def sql(self, node: ir.Node) -> tuple[str, list[str]] | None:
        if isinstance(node, ir.Scan):
            return self._scan(node)
        if _keeps_rows(node):
            assert isinstance(node, ir.Unary)
            return self.sql(node.child)
        if isinstance(node, ir.Filter) and _over_scan(node):
            return self.sql(node.child)  # read with the candidates (`duck_scan`, or Spark)
        if isinstance(node, ir.Filter):
            child, cond = self.sql(node.child), _condition(node.cond)
            if child is None or cond is None:
                return None
            return f"SELECT * FROM ({child[0]}) WHERE {cond}", child[1]
        if isinstance(node, ir.Project):
            return self._project(node)
        if isinstance(node, ir.Join):
            return self._join(node)
        return None

    def _scan(self, scan: ir.Scan) -> tuple[str, list[str]] | None:
        frame = self.frames.get(id(scan))
        if frame is None:
            return None
        n = len(self.tables)
        self.tables[f"f{n}"] = frame
        self.scans[f"r{n}"] = id(scan)
        names = [c for c in frame.column_names if c != RID]
        return f"SELECT {RID} AS r{n}{''.join(f', {c}' for c in names)} FROM f{n}", [f"r{n}", *names]

    def _project(self, node: ir.Project) -> tuple[str, list[str]] | None:
        child = self.sql(node.child)
        if child is None:
            return None
        rids = [c for c in child[1] if c.startswith("r")]
        out: list[tuple[str, str]] = []
        for c in node.columns:
            if isinstance(c.expr, ir.ColumnRef):
                text: str | None = f"a{c.expr.attr.id}"
            elif isinstance(c.expr, ir.Expr) and c.expr.column is not None:
                text = f"a{c.expr.column}"
            elif isinstance(c.expr, ir.Expr) and c.expr.handle is not None:
                text = sql(c.expr.handle, _named)
            else:
                text = None
            if text is not None:  # one the aggregate alone reads may not translate: unread here
                out.append((f"{text} AS a{c.attr.id}", f"a{c.attr.id}"))
        columns = [*rids, *(name for _, name in out)]
        return f"SELECT {', '.join([*rids, *(text for text, _ in out)])} FROM ({child[0]})", columns

    def _join(self, node: ir.Join) -> tuple[str, list[str]] | None:
        left, right = self.sql(node.left), self.sql(node.right)
        cond = "TRUE" if node.cond is None else _condition(node.cond)
        if left is None or right is None or cond is None or set(left[1]) & set(right[1]):
            return None
        n = len(self.tables)
        if node.kind == "anti":
            absent = f"NOT EXISTS (SELECT 1 FROM ({right[0]}) AS _r{n} WHERE {cond})"
            return f"SELECT * FROM ({left[0]}) AS _l{n} WHERE {absent}", left[1]
        kind = "LEFT JOIN" if node.kind == "left" else "JOIN"
        return f"SELECT * FROM ({left[0]}) AS _l{n} {kind} ({right[0]}) AS _r{n} ON {cond}", left[1] + right[1]


def _over_scan(node: ir.Filter) -> bool:
    below: ir.Node = node
    while isinstance(below, ir.Filter):
        below = below.child
    return isinstance(below, ir.Scan)


def _condition(cond: ir.Expr) -> str | None:
    return None if cond.handle is None else sql(cond.handle, _named)
