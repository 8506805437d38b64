"""Binding inferred predicates to a traced row's values and running them on Spark.

The predicates are Catalyst conditions over each scan's own columns, so Spark's scan
filtering, Parquet row-group skipping and partition pruning apply; UDFs are never
inverted (a computed column simply stops the push-down, see `pushdown`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ember.engines.spark.build import Builder
from ember.engines.spark.catalyst import expression
from ember.engines.spark.jvm import Jvm, class_name, iterate
from ember.infer.pushdown import Binding, ScanPlan
from ember.plan import ir
from ember.plan.slots import FRESH_IDS_FROM
from ember.plan.sources import Source

RID = "__ember_rid"
MAX_DISJUNCTS = 256  # beyond this many distinct value tuples, one IN list per column


def columns(jvm: Jvm, scan: ir.Scan) -> dict[int, Column]:
    """The scan's columns by attribute id, resolved (no name lookups)."""
    return {int(a.exprId().id()): jvm.column(a) for a in iterate(scan.handle.output())}


def selection(jvm: Jvm, plan: ScanPlan, rows: pa.Table | None, filters: bool) -> Column | None:
    """The condition a scan's lineage rows meet for the traced `rows` (None: no restriction).

    One conjunction of equalities per traced row, or per column an IN list when there are
    many rows (a superset, which restricted re-runs allow). With `filters`, the conditions
    Spark applies right above the scan are added (superset answers use them; re-runs apply
    them anyway).
    """
    cols = columns(jvm, plan.scan)
    tuples = None if rows is None else bound_values(plan.bindings, rows)
    conds: list[Column] = []
    if tuples is not None:
        conds.append(_match_any([_term(jvm, cols, b) for b in plan.bindings], tuples))
    if filters:
        conds += [jvm.column(f.handle) for f in plan.filters]
    if not conds:
        return None
    return _all(conds)


def _term(jvm: Jvm, cols: dict[int, Column], b: Binding) -> Column:
    """The scan-side value a binding compares: a column, or a computed column re-evaluated."""
    if b.attr is not None:
        return cols[b.attr.id]
    assert b.expr is not None
    handle = b.expr.handle
    return jvm.column(handle.child() if class_name(handle) == "Alias" else handle)


def bound_values(bindings: tuple[Binding, ...], rows: pa.Table) -> list[tuple[tuple[int, Any], ...]] | None:
    """Per traced row, the (binding number, value) pairs it pins; None when some row pins nothing."""
    if not bindings:
        return None
    columns = {j: rows.column(j).to_pylist() for j in {b.column for b in bindings}}
    seen: dict[str, tuple[tuple[int, Any], ...]] = {}
    for i in range(rows.num_rows):
        pinned = tuple(
            (n, columns[b.column][i])
            for n, b in enumerate(bindings)
            if not (b.padded and columns[b.column][i] is None)
        )
        if not pinned:
            return None
        seen.setdefault(repr(pinned), pinned)
    return list(seen.values())


def _equals(col: Column, value: Any) -> Column:
    return col.isNull() if value is None else col == F.lit(value)


def _match_any(terms: list[Column], tuples: list[tuple[tuple[int, Any], ...]]) -> Column:
    if not tuples:
        return F.lit(False)
    if len(tuples) <= MAX_DISJUNCTS:
        return _any([_all([_equals(terms[n], v) for n, v in t]) for t in tuples])
    conds = []
    for n, term in enumerate(terms):
        values = {repr(v): v for t in tuples for m, v in t if m == n}
        if not values:
            continue
        plain = [v for v in values.values() if v is not None]
        cond = term.isin(plain) if plain else F.lit(False)
        conds.append(cond | term.isNull() if len(plain) < len(values) else cond)
    return _all(conds)


def _all(conds: Iterable[Column]) -> Column:
    out: Column | None = None
    for c in conds:
        out = c if out is None else out & c
    return F.lit(True) if out is None else out


def _any(conds: Iterable[Column]) -> Column:
    out: Column | None = None
    for c in conds:
        out = c if out is None else out | c
    return F.lit(False) if out is None else out


def catalyst(jvm: Jvm, scan: ir.Scan, cond: Column) -> ir.Expr:
    """`cond` resolved over the scan's own attributes, as an IR expression."""
    analyzed = jvm.analyzed(jvm.dataframe(scan.handle).filter(cond))
    tree = expression(jvm, analyzed.condition())
    return ir.Expr(tree.text, tree.refs, tree.handle, tree=tree)


def restricted(plan: ir.Node, conds: dict[int, ir.Expr]) -> ir.Node:
    """`plan` with the scans named in `conds` (by `id()`) reading only matching rows."""
    if isinstance(plan, ir.Scan):
        cond = conds.get(id(plan))
        return plan if cond is None else ir.Filter(plan, cond=cond)
    children = tuple(restricted(c, conds) for c in plan.children)
    return ir.with_children(plan, children)


_ids = itertools.count(FRESH_IDS_FROM)


def scan_rows(jvm: Jvm, sources: dict[str, Source], scan: ir.Scan, cond: Column | None) -> DataFrame:
    """The scan's rows (its columns plus `__ember_rid`) matching `cond`, as a DataFrame."""
    numbered = ir.Numbered(scan, rid=ir.Attr(next(_ids), RID, "bigint", False))
    df = Builder(jvm, sources).dataframe(numbered)
    return df if cond is None else df.filter(cond)


def candidates(df: DataFrame, cols: dict[int, Column], attrs: Iterable[ir.Attr]) -> pa.Table:
    """The rows' rids and the chosen columns (named `a<attr id>`), on the driver."""
    return df.select(df[RID], *[cols[a.id].alias(f"a{a.id}") for a in attrs]).toArrow()

