"""Joining a piece's candidate rows in-process, where cutting them is not exact.

Semi-join cuts (`infer.refine`) are the exact lineage only on a tree of single-equality
joins. With a filter over a join (a column compared with a correlated aggregate), a
composite or theta condition, or a cycle of joins, the candidates left after cutting are
a superset. But they are few, and the operators between them and the traced group are
only filters, projections and inner, cross, semi, left or anti joins: DuckDB joins them
with the plan's own conditions, and the rows that take part in some joined row are the
lineage exactly (a semi join's witnesses are lineage, so it joins as inner; a left
join's padded rows have no right-side lineage; an anti join keeps the rows with no
partner, `NOT EXISTS` with its own condition, which also spells `NOT IN`'s null rule).
The right side of a left or anti join must hold every partner of every left candidate,
so the caller reads it without the traced values, cut only by its own filters and by the
join keys of the candidates already read (Spark plans correlated subqueries as such left
joins, NOT IN and NOT EXISTS as anti joins).
The join is compiled by `engines.duck.compile` in lineage mode (every scan's rids carried
to the top); where a condition does not translate, the trace falls back to a re-run.
"""
from __future__ import annotations

import functools

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ember.engines import duck
from ember.engines.duck.compile import Compiler, run, windowable
from ember.engines.duck.sql import one_of
from ember.infer.exact import block_root, reaching
from ember.infer.ids import distinct
from ember.infer.pushdown import key_columns
from ember.plan import ir
from ember.plan.trees import find


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
    query = Compiler.of({}, "lineage", frames=frames)
    if not query.read(block_root(plan)):
        return None
    group = _in_group(plan, rows, pinned, query)
    if group is None:
        return None
    joined_rows = query.lineage(group)  # an anti join's inner rows are not among its rids
    con = duck.connect()
    try:
        joined = run(joined_rows, con)
    except duckdb.Error:  # an overflow in translated arithmetic: Spark decides
        return None
    finally:
        con.close()
    # a left join's padded rows have null right-side rids
    return {scan: distinct(pc.drop_null(joined.column(r)).to_numpy()) for r, scan in joined_rows.rids.items()}


@functools.lru_cache(maxsize=256)  # the save-point search asks of the same aggregates again and again
def windowed(agg: ir.Aggregate) -> bool:
    """Whether the block can join `agg` in-process (`compile.windowable`: its keys and
    aggregates translate, with the group's values beside each row). Over another aggregate,
    whose group values stand beside each of that group's rows, only min and max: they are
    blind to a group counted once per row (a sum of sums is not)."""
    if not windowable(agg):
        return False
    if not any(isinstance(n, ir.Aggregate) for n in ir.walk(agg.child)):
        return True
    passed = {ir.column_of(k) for k in agg.keys}
    return all(
        ir.column_of(c.expr) in passed
        or (
            isinstance(c.expr, ir.Expr)
            and c.expr.tree is not None
            and all(a.children[0].kind in ("Min", "Max") for a in find(c.expr.tree, {"AggregateExpression"}))
        )
        for c in agg.columns
    )


def _in_group(plan: ir.Node, rows: pa.Table, pinned: set[int], query: Compiler) -> str | None:
    """SQL for: a row below the traced group has the grouping key values of some traced
    row (without an aggregate: the output values), for the keys not `pinned` ("TRUE" when
    none is left); None when such a key does not translate (an inner aggregate's count is
    pinned by nothing else)."""
    position, node = reaching(plan, (ir.Project, ir.Filter, ir.Limit))
    terms: list[tuple[str | None, int]] = []
    if not isinstance(node, ir.Aggregate):  # no group: the traced rows' own values
        position, _ = reaching(plan, (ir.Project, ir.Limit))
        columns = {j: attr for attr, j in position.items()}
        if any(j not in pinned and j not in columns for j in range(len(plan.output))):
            return None
        terms = [(query.column(columns[j]), j) for j in range(len(plan.output)) if j not in pinned]
    agg = node if isinstance(node, ir.Aggregate) else ir.Aggregate(node)
    for key in agg.keys:
        outputs = [position[c.attr.id] for c in key_columns(agg, key) if c.attr.id in position]
        if outputs and outputs[0] in pinned:
            continue
        if not outputs:
            return None
        terms.append((query.expr(key), outputs[0]))
    if any(t is None for t, _ in terms):
        return None
    if not terms:
        return "TRUE"
    return one_of([[(t, rows.column(j)[i].as_py()) for t, j in terms] for i in range(rows.num_rows)])
