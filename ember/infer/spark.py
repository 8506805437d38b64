"""Binding inferred predicates to a traced row's values and running them on Spark.

A scan's rows are built as a plan (`engines.spark.engine.builder`: one message, on a
classic session or a Spark Connect server alike), with each computed binding's
expression as a column of its own; the traced values are then compared to its columns
by name, so the same conditions serve either session. A re-run's scans are restricted
by that condition as Spark analyzed it. UDFs are never inverted (a computed column
simply stops the push-down, see `pushdown`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame

from ember.engines.spark import engine as engines
from ember.engines.spark.frames import functions_of
from ember.engines.spark.jvm import Jvm
from ember.infer.pushdown import Binding, ScanPlan
from ember.plan import ir
from ember.plan.slots import FRESH_IDS_FROM
from ember.plan.sources import Source

RID = "__ember_rid"
MAX_DISJUNCTS = 256  # beyond this many distinct value tuples, one IN list per column

_ids = itertools.count(FRESH_IDS_FROM)


@dataclass(frozen=True)
class ScanRows:
    """A scan's rows as a DataFrame (`node` built), and per binding the column it compares."""

    node: ir.Node
    df: DataFrame
    terms: tuple[Column, ...]

    def selection(self, bindings: tuple[Binding, ...], rows: pa.Table | None) -> Column | None:
        """The condition a scan's lineage rows meet for the traced `rows` (None: no
        restriction): one conjunction of equalities per traced row, or per column an IN list
        when there are many rows (a superset, which restricted re-runs allow)."""
        tuples = None if rows is None else bound_values(bindings, rows)
        return None if tuples is None else _match_any(list(self.terms), tuples, functions_of(self.df))

    def candidates(self, cond: Column | None, attrs: Iterable[ir.Attr]) -> pa.Table:
        """The rows' rids and the chosen columns (named `a<attr id>`) where `cond` holds, on the driver."""
        df = self.df if cond is None else self.df.filter(cond)
        return df.select(df[RID], *[df[a.name].alias(f"a{a.id}") for a in attrs]).toArrow()


def scan_rows(engine: engines.Engine, sources: dict[str, Source], sp: ScanPlan, numbered: bool, filters: bool) -> ScanRows:
    """The scan's rows, with `__ember_rid` when `numbered`, only those its filters keep
    when `filters`, and a column of its own per computed binding."""
    node: ir.Node = sp.scan
    if numbered:
        node = ir.Numbered(node, rid=ir.Attr(next(_ids), RID, "bigint", False))
    if filters:
        for f in sp.filters:
            node = ir.Filter(node, cond=f)
    computed = {n: _column(b.expr) for n, b in enumerate(sp.bindings) if b.attr is None and b.expr is not None}
    if computed:
        node = ir.Project(node, columns=(*(ir.Named(ir.ColumnRef(a), a) for a in node.output), *computed.values()))
    df = engines.builder(engine, sources).dataframe(node)
    terms = tuple(df[b.attr.name if b.attr is not None else computed[n].attr.name] for n, b in enumerate(sp.bindings))
    return ScanRows(node, df, terms)


def restriction(engine: engines.Engine, sources: dict[str, Source], sp: ScanPlan, rows: pa.Table) -> ir.Node | None:
    """The scan reading only the rows the traced `rows`' values allow, as a plan to put in
    its place for a re-run (None: they allow every row). The condition is Spark's analysis
    of the one `ScanRows.selection` builds, over the scan's own columns and the computed
    ones, which a projection then drops."""
    made = scan_rows(engine, sources, sp, numbered=False, filters=False)
    cond = made.selection(sp.bindings, rows)
    if cond is None:
        return None
    tree = _analyzed(engine, made.df.filter(cond))
    filtered = ir.Filter(made.node, cond=ir.Expr(tree.text, tree.refs, tree.handle, dtype=tree.dtype, tree=tree))
    if made.node is sp.scan:
        return filtered
    return ir.Project(filtered, columns=tuple(ir.Named(ir.ColumnRef(a), a) for a in sp.scan.output))


def restricted(plan: ir.Node, nodes: dict[int, ir.Node]) -> ir.Node:
    """`plan` with the scans named in `nodes` (by `id()`) replaced by their restriction."""
    if isinstance(plan, ir.Scan):
        return nodes.get(id(plan), plan)
    return ir.with_children(plan, tuple(restricted(c, nodes) for c in plan.children))


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


def _column(e: ir.Expr) -> ir.Named:
    """A computed binding's expression as a new column (the plan message names what the
    user's alias names, not the alias)."""
    n = next(_ids)
    return ir.Named(e, ir.Attr(n, f"__ember_b{n}", e.dtype))


def _analyzed(engine: engines.Engine, filtered: DataFrame) -> Any:
    """The filter's condition as Spark analyzed it, as a tree with a handle."""
    if isinstance(engine, Jvm):
        from ember.engines.spark.catalyst import expression

        return expression(engine, engine.analyzed(filtered).condition())
    from ember.engines.spark.connect import condition

    return condition(filtered)  # type: ignore[arg-type]  # a Connect engine's frames are Connect ones


def _equals(col: Column, value: Any, F: ModuleType) -> Column:
    return col.isNull() if value is None else col == F.lit(value)


def _match_any(terms: list[Column], tuples: list[tuple[tuple[int, Any], ...]], F: ModuleType) -> Column:
    if not tuples:
        return F.lit(False)
    if len(tuples) <= MAX_DISJUNCTS:
        return _any([_all([_equals(terms[n], v, F) for n, v in t], F) for t in tuples], F)
    conds = []
    for n, term in enumerate(terms):
        values = {repr(v): v for t in tuples for m, v in t if m == n}
        if not values:
            continue
        plain = [v for v in values.values() if v is not None]
        cond = term.isin(plain) if plain else F.lit(False)
        conds.append(cond | term.isNull() if len(plain) < len(values) else cond)
    return _all(conds, F)


def _all(conds: Iterable[Column], F: ModuleType) -> Column:
    out: Column | None = None
    for c in conds:
        out = c if out is None else out & c
    return F.lit(True) if out is None else out


def _any(conds: Iterable[Column], F: ModuleType) -> Column:
    out: Column | None = None
    for c in conds:
        out = c if out is None else out | c
    return F.lit(False) if out is None else out
