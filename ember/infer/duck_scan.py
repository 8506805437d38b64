"""Scan conditions evaluated in-process by DuckDB instead of by a Spark job.

A superset trace (and an exact trace on a plan `infer.exact` accepts) only needs, per
scan, the rids and key columns of the rows its bindings and filters select. Spark
answers that with one job per scan, scheduled before it reads a byte; DuckDB reads the
same Parquet files with the same row-group skipping in-process, when the scan's
conditions translate (`engines.duck.compile` reads the scan); otherwise the scan stays
on Spark.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import duckdb
import pyarrow as pa

from ember.engines import duck
from ember.engines.duck.compile import Compiler, run
from ember.engines.duck.sql import one_of, python_literal
from ember.engines.duck.syntax import Column
from ember.fetch.rows import check_unchanged
from ember.infer.pushdown import Binding, ScanPlan
from ember.infer.spark import MAX_DISJUNCTS, RID
from ember.plan import ir
from ember.plan.sources import SAVED, Source


def candidates(
    source: Source,
    plan: ScanPlan,
    tuples: list[tuple[tuple[int, Any], ...]] | None,
    attrs: list[ir.Attr],
    keys: Sequence[tuple[ir.Attr, pa.ChunkedArray]] = (),
    keep_nulls: bool = False,
) -> pa.Table | None:
    """The rids (`__ember_rid`) and columns `a<attr id>` of the scan's rows that its filters
    and bound values select, read by DuckDB; None when some part does not translate. A
    saved intermediate (`infer.segments`) is read from its rows in memory.

    `tuples` are the traced rows' bound values (`infer.spark.bound_values`; None: no
    binding restricts). `keys`: columns whose value must be among the given ones (a join's
    cut, applied while reading), or null with `keep_nulls`.
    """
    saved = source.kind == SAVED
    if not saved and (source.kind != "parquet" or not source.files):
        return None
    query = Compiler.of({plan.scan.source.key: source})
    if not query.read(plan.scan):
        return None
    conds = [query.expr(f, subqueries=False) for f in plan.filters]
    if tuples is not None:
        terms = [_term(query, b) for b in plan.bindings]
        conds.append(_match_any(terms, tuples))
    for attr, values in keys:
        column = query.column(attr.id)
        if column is None:
            return None
        among = f"{column} IN (SELECT v FROM {query.register('k', pa.table({'v': values}))})"
        conds.append(f"({among} OR {column} IS NULL)" if keep_nulls else among)
    rid = query.rid(plan.scan)
    columns = [query.column(a.id) for a in attrs]
    if rid is None or any(c is None for c in (*conds, *columns)):
        return None
    query.conditions += [c for c in conds if c is not None]
    selected = [Column(rid, RID), *(Column(c, f"a{a.id}") for c, a in zip(columns, attrs, strict=True) if c is not None)]
    if not saved:
        check_unchanged(source)
    con = duck.connect()
    try:
        return run(query.compiled(query.rows_query(selected)), con)
    except duckdb.Error:  # an overflow in translated arithmetic: Spark's own semantics decide
        return None
    finally:
        con.close()


def _term(query: Compiler, b: Binding) -> str | None:
    """The scan-side SQL a binding compares: a column, or a computed column re-evaluated."""
    if b.attr is not None:
        return query.column(b.attr.id)
    return None if b.expr is None else query.expr(b.expr, subqueries=False)


def _match_any(terms: list[str | None], tuples: list[tuple[tuple[int, Any], ...]]) -> str | None:
    """SQL for: the scan row matches the bound values of some traced row (past
    `MAX_DISJUNCTS` rows, a superset: each bound column among its values)."""
    if len(tuples) <= MAX_DISJUNCTS:
        return one_of([[(terms[n], v) for n, v in t] for t in tuples])
    conds = []
    for n, term in enumerate(terms):
        values = {repr(v): v for t in tuples for m, v in t if m == n}
        if not values:
            continue
        if term is None:
            return None
        plain = [python_literal(v) for v in values.values() if v is not None]
        if any(p is None for p in plain):
            return None
        cond = f"{term} IN ({', '.join(p for p in plain if p is not None)})" if plain else "FALSE"
        conds.append(f"({cond} OR {term} IS NULL)" if len(plain) < len(values) else cond)
    return "(" + " AND ".join(conds) + ")" if conds else "TRUE"
