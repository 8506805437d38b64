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
candidate, so the caller reads it without the traced values, cut only by its own filters
and by the join keys of the candidates already read (Spark plans Q2's, Q17's and Q20's
correlated subqueries as such left joins; Q16's and Q21's NOT IN / NOT EXISTS as anti
joins).
Conditions are Catalyst expressions translated by `engines.duck.sql.sql`; where one does not
translate, the trace falls back to a re-run.
"""

from __future__ import annotations

import functools

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ember.engines import duck
from ember.engines.duck.sql import python_literal, sql
from ember.infer.exact import block_root, over_scan, reaching
from ember.infer.ids import distinct
from ember.infer.pushdown import key_columns
from ember.infer.spark import RID
from ember.plan import ir
from ember.plan.trees import Tree, find

_KEEP_ROWS = ("sort", "repartition", "observe")


def columns(plan: ir.Node) -> dict[int, set[ir.Attr]]:
    """Per scan (by `id()`), the columns the operators below the traced group read."""
    body = block_root(plan)
    refs: set[int] = set()
    for node in ir.walk(body):
        for e in node.expressions():
            refs |= e.refs
        if isinstance(node, ir.Project):
            refs |= {c.expr.attr.id for c in node.columns if isinstance(c.expr, ir.ColumnRef)}
    return {id(n): {a for a in n.attrs if a.id in refs} for n in ir.walk(body) if isinstance(n, ir.Scan)}


def evaluate(plan: ir.Node, frames: dict[int, pa.Table], rows: pa.Table, pinned: set[int]) -> dict[int, np.ndarray] | None:
    """Per scan (by `id()`), the rids of its candidates (`frames`: `__ember_rid` and columns
    `a<attr id>`) that take part in some joined row of the traced `rows`' groups; None when
    a condition does not translate. Grouping keys reaching an output column in `pinned`
    were applied to the candidates (bindings); the others are applied here."""
    query = _Query(frames)
    built = query.sql(block_root(plan))
    group = _in_group(plan, rows, pinned)
    if built is None or group is None:
        return None
    text, names = built
    rids = [n for n in names if n.startswith("r")]  # an anti join's inner rows are not among them
    con = duck.connect()
    try:
        for name, table in query.tables.items():
            con.register(name, table)
        joined = con.sql(f"SELECT DISTINCT {', '.join(rids)} FROM ({text}) WHERE {group or 'TRUE'}").to_arrow_table()
    except duckdb.Error:  # a column that did not translate is read, or an overflow: Spark decides
        return None
    finally:
        con.close()
    # a left join's padded rows have null right-side rids
    return {query.scans[r]: distinct(pc.drop_null(joined.column(r)).to_numpy()) for r in rids}


@functools.lru_cache(maxsize=256)  # the save-point search asks of the same aggregates again and again
def windowed(agg: ir.Aggregate) -> bool:
    """Whether the block can join `agg` in-process: its keys and aggregates translate (min,
    max, sum, count, avg of a decimal; not DISTINCT). Over another aggregate, whose group
    values stand beside each of that group's rows, only min and max: they are blind to a
    group counted once per row (TPC-DS Q1's sums of customers' totals are not)."""
    keys = [_expression(k) for k in agg.keys]
    if any(k is None for k in keys):
        return False
    window = f"PARTITION BY {', '.join(k for k in keys if k is not None)}" if keys else ""
    passed = {ir.column_of(k) for k in agg.keys}
    repeated = any(isinstance(n, ir.Aggregate) for n in ir.walk(agg.child))
    return all(
        ir.column_of(c.expr) in passed
        or (
            isinstance(c.expr, ir.Expr)
            and c.expr.tree is not None
            and sql(c.expr.tree, _named, window) is not None
            and (not repeated or all(a.children[0].kind in ("Min", "Max") for a in find(c.expr.tree, {"AggregateExpression"})))
        )
        for c in agg.columns
    )


def _in_group(plan: ir.Node, rows: pa.Table, pinned: set[int]) -> str | None:
    """SQL for: a row below the traced group has the grouping key values of some traced
    row (without an aggregate: the output values), for the keys not `pinned` ("TRUE" when
    none is left); None when such a key does not translate (Q13's `c_count`, an inner
    aggregate's count, is pinned by nothing else)."""
    position, node = reaching(plan, (ir.Project, ir.Filter, ir.Limit))
    terms = []
    if not isinstance(node, ir.Aggregate):  # no group: the traced rows' own values
        position, _ = reaching(plan, (ir.Project, ir.Limit))
        columns = {j: attr for attr, j in position.items()}
        if any(j not in pinned and j not in columns for j in range(len(plan.output))):
            return None
        terms = [(f"a{columns[j]}", j) for j in range(len(plan.output)) if j not in pinned]
    agg = node if isinstance(node, ir.Aggregate) else ir.Aggregate(node)
    for key in agg.keys:
        text = _expression(key)
        outputs = [position[c.attr.id] for c in key_columns(agg, key) if c.attr.id in position]
        if outputs and outputs[0] in pinned:
            continue
        if text is None or not outputs:
            return None
        terms.append((text, outputs[0]))
    if not terms:
        return "TRUE"
    matches = []
    for i in range(rows.num_rows):
        values = [python_literal(rows.column(j)[i].as_py()) if rows.column(j)[i].is_valid else "NULL" for _, j in terms]
        if any(v is None for v in values):
            return None
        matches.append(" AND ".join(f"({t} IS NOT DISTINCT FROM {v})" for (t, _), v in zip(terms, values, strict=True)))
    return "(" + " OR ".join(f"({m})" for m in matches) + ")" if matches else "FALSE"


def _expression(e: ir.AnyExpr) -> str | None:
    """A column or expression of the block as SQL over its `a<id>` columns."""
    if isinstance(e, ir.ColumnRef):
        return f"a{e.attr.id}"
    if isinstance(e, ir.Expr) and e.column is not None:
        return f"a{e.column}"
    if isinstance(e, ir.Expr) and e.tree is not None:
        return sql(e.tree, _named)
    return None


def _keeps_rows(node: ir.Node) -> bool:
    return isinstance(node, ir.Passthrough) and node.kind in _KEEP_ROWS


def _named(attr: Tree) -> str:
    return f"a{attr.id}"


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
        if isinstance(node, ir.Filter) and over_scan(node):
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
        if isinstance(node, ir.Aggregate):
            return self._aggregate(node)
        return None

    def _aggregate(self, node: ir.Aggregate) -> tuple[str, list[str]] | None:
        """Every input row, with its group's aggregate values beside it (window functions),
        so the rows of a group that some joined row reaches all stay: its lineage."""
        child = self.sql(node.child)
        keys = [_expression(k) for k in node.keys]
        if child is None or any(k is None for k in keys):
            return None
        window = f"PARTITION BY {', '.join(k for k in keys if k is not None)}" if keys else ""
        out = [(c, c) for c in child[1] if c.startswith("r")]  # its input's rids, then its own columns
        for c in node.columns:
            name = f"a{c.attr.id}"
            if name in child[1]:
                out.append((name, name))  # a grouping column passed through
                continue
            text = _expression(c.expr) if not isinstance(c.expr, ir.Expr) or c.expr.tree is None else sql(c.expr.tree, _named, window)
            if text is not None:  # one nothing above reads may not translate
                out.append((f"{text} AS {name}", name))
        return f"SELECT {', '.join(t for t, _ in out)} FROM ({child[0]})", [n for _, n in out]

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
            text = _expression(c.expr)
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


def _condition(cond: ir.Expr) -> str | None:
    return None if cond.tree is None else sql(cond.tree, _named)
