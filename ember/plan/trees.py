"""Catalyst plans and expressions as plain, immutable Python data.

The Spark engine reads them from the JVM (`engines.spark.catalyst`); the import turns a
plan into the IR, and expressions stay `Tree`s inside it: what they compute is Spark's,
and the DuckDB compiler and the builder translate them from here. A `handle` is the JVM
object it was read from, where there is one (never compared).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ember.plan import ir

JObj = Any  # a JVM object's handle; typed loosely on purpose (the plan layer never calls it)


class Opaque:
    """A literal value with no plain JSON spelling (binary, intervals, structs, NaN, ...)."""

    def __repr__(self) -> str:
        return "<opaque>"


OPAQUE = Opaque()


@dataclass(frozen=True)
class Tree:
    """A Catalyst expression: its class's simple name, how it prints, and its children."""

    kind: str
    text: str
    dtype: str | None  # Spark's simpleString of its type (None: it has none)
    deterministic: bool
    refs: frozenset[int]
    children: tuple[Tree, ...]
    handle: JObj | None = field(default=None, compare=False, hash=False, repr=False)
    id: int | None = None  # a named expression's exprId
    name: str | None = None
    nullable: bool = True
    value: Any = None  # a literal's: int, float, bool, str, Decimal, None, or OPAQUE
    values: tuple[Any, ...] = ()  # an InSet's
    distinct: bool = False  # an AggregateExpression's
    filtered: bool = False  # an AggregateExpression's FILTER clause
    outer: bool = False  # a ScalarSubquery that reads outer columns (correlated)
    plan: PlanTree | None = None  # a ScalarSubquery's
    frame: str | None = None  # a SpecifiedWindowFrame's type: RowFrame or RangeFrame


@dataclass(frozen=True)
class PlanTree:
    """A Catalyst plan node with the fields ember's import reads (see PlanDump.java)."""

    kind: str
    output: tuple[ir.Attr, ...]
    children: tuple[PlanTree, ...]
    exprs: dict[str, tuple[Tree, ...]]  # list, keys, partition, order, exprs, cond, gen, fn
    attrs: dict[str, tuple[ir.Attr, ...]]  # generated, kept, exists, grouping, cogrouping
    facts: dict[str, Any]  # join type, relation class, file format, paths, ids, range bounds
    handle: JObj | None = field(default=None, compare=False, hash=False, repr=False)
    projections: tuple[tuple[Tree, ...], ...] = ()  # an Expand's

    @property
    def child(self) -> PlanTree:
        return self.children[0]

    def expr(self, name: str) -> Tree | None:
        found = self.exprs.get(name, ())
        return found[0] if found else None


def find(e: Tree, kinds: set[str]) -> list[Tree]:
    """The outermost expressions of `kinds` in `e`, left to right (not those inside them)."""
    if e.kind in kinds:
        return [e]
    return [x for c in e.children for x in find(c, kinds)]
