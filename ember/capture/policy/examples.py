"""Tiny plans for the policy's examples (its doctests and tests): columns are named, and
each name is one attribute wherever it appears."""

from __future__ import annotations

import zlib

from ember.plan import ir
from ember.plan.sources import Source


def attr(name: str) -> ir.Attr:
    """The attribute named `name` (its id derives from the name)."""
    return ir.Attr(zlib.crc32(name.encode()) % 1_000_000 + 1, name, "int")


def ref(name: str) -> ir.Expr:
    a = attr(name)
    return ir.Expr(name, frozenset({a.id}), dtype=a.dtype, column=a.id)


def scan(source: str, *columns: str, rows: int = 3, kind: str = "memory") -> ir.Scan:
    return ir.Scan(Source(source, source, kind, rows), tuple(attr(c) for c in columns))


def group_by(child: ir.Node, *keys: str, distinct: bool = False) -> ir.Aggregate:
    """`SELECT keys..., count(*) FROM child GROUP BY keys` (a global count without keys);
    with `distinct`, a count(DISTINCT) of the child's first column."""
    first = child.output[0]
    count = ir.Expr(f"count(distinct {first.name})" if distinct else "count(1)", frozenset({first.id}), dtype="bigint")
    n = ir.Attr(attr("n").id, "n", "bigint")
    columns = (*(ir.Named(ref(k), attr(k)) for k in keys), ir.Named(count, n))
    return ir.Aggregate(child, keys=tuple(ref(k) for k in keys), columns=columns)


def join(left: ir.Node, right: ir.Node, lcol: str, rcol: str, kind: str = "inner") -> ir.Join:
    """`left JOIN right ON lcol = rcol` (semi, anti, left, ... by `kind`)."""
    a, b = attr(lcol), attr(rcol)
    cond = ir.Expr(f"{lcol} = {rcol}", frozenset({a.id, b.id}))
    return ir.Join(kind, left, right, cond, equi=((a.id, b.id),))


def limit(child: ir.Node) -> ir.Limit:
    return ir.Limit(child, kind="GlobalLimit")


def having(child: ir.Node) -> ir.Filter:
    return ir.Filter(child, cond=ir.Expr("n > 1", frozenset({attr("n").id})))


def sort(child: ir.Node) -> ir.Passthrough:
    return ir.Passthrough(child, kind="sort")


def everything(plan: ir.Node) -> bool:
    """A `local` answer: DuckDB reads any subplan."""
    return True
