"""Catalyst plans and expressions as plain, immutable Python data.

The Spark engine's jar writes them as one JSON message (the plan out, schema version 1:
docs/design/import.md); `read` makes them from it alone. The import turns a plan into
the IR, and expressions stay `Tree`s inside it: what they compute is Spark's, and the
DuckDB compiler and the builder translate them from here. A `handle` is what the engine
gave for the object ("h": a reference the engine resolves; never compared).
"""

from __future__ import annotations

import decimal
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ember.errors import EmberError
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


def plans(p: PlanTree) -> Iterator[PlanTree]:
    """Every plan node under `p`, its expressions' subqueries' too."""
    yield p
    for e in (*(t for ts in p.exprs.values() for t in ts), *(t for row in p.projections for t in row)):
        yield from _subplans(e)
    for child in p.children:
        yield from plans(child)


def _subplans(e: Tree) -> Iterator[PlanTree]:
    if e.plan is not None:
        yield from plans(e.plan)
    for child in e.children:
        yield from _subplans(child)


def find(e: Tree, kinds: set[str]) -> list[Tree]:
    """The outermost expressions of `kinds` in `e`, left to right (not those inside them)."""
    if e.kind in kinds:
        return [e]
    return [x for c in e.children for x in find(c, kinds)]


@dataclass(frozen=True)
class PlanOut:
    """The plan-out message: a DataFrame's optimized plan and what the import reads beside
    it. A streaming DataFrame's message says only that (`plan` None)."""

    streaming: bool
    clock: bool = False  # its analyzed plan reads the clock (`current_timestamp()`, ...)
    views: tuple[tuple[str, PlanTree], ...] = ()  # views and tables that are one leaf (no handles)
    plan: PlanTree | None = None


VERSION = 1  # of the plan-out message this reader reads


def read(body: dict[str, Any], handle: Callable[[str], JObj]) -> PlanOut:
    """The plan out from its JSON; `handle` makes the engine's handle of a reference.

    >>> leaf = {"k": "OneRowRelation", "out": [], "kids": []}
    >>> read({"version": 1, "streaming": False, "clock": False, "views": [], "plan": leaf}, str).plan.kind
    'OneRowRelation'
    >>> read({"version": 2}, str)
    Traceback (most recent call last):
    ...
    ember.errors.EmberError: ember's Java helpers wrote a plan message of version 2, and this ember reads version 1: reinstall ember
    """
    if body.get("version") != VERSION:
        raise EmberError(
            f"ember's Java helpers wrote a plan message of version {body.get('version')}, and this ember "
            f"reads version {VERSION}: reinstall ember"
        )
    if body["streaming"]:
        return PlanOut(streaming=True)
    reader = Reader(handle)
    views = tuple((str(name), Reader(None).plan(leaf)) for name, leaf in body["views"])
    return PlanOut(False, bool(body["clock"]), views, reader.plan(body["plan"]))


_EXPR_FIELDS = ("list", "keys", "partition", "order", "exprs")
_ONE_EXPR_FIELDS = ("cond", "gen", "fn")
_ATTR_FIELDS = ("generated", "kept", "grouping", "cogrouping")


@dataclass
class Reader:
    """Reads nodes and expressions; `handle` (None: none) makes their handles."""

    handle_of: Callable[[str], JObj] | None

    def plan(self, d: dict[str, Any]) -> PlanTree:
        exprs = {k: tuple(self.tree(e) for e in d[k]) for k in _EXPR_FIELDS if k in d}
        exprs.update({k: (self.tree(d[k]),) for k in _ONE_EXPR_FIELDS if k in d})
        attrs = {k: _attrs(d[k]) for k in _ATTR_FIELDS if k in d}
        if "exists" in d:
            attrs["exists"] = _attrs([d["exists"]])
        skip = {"k", "h", "bare", "out", "kids", "projections", "exists", *_EXPR_FIELDS, *_ONE_EXPR_FIELDS, *_ATTR_FIELDS}
        facts = {k: v for k, v in d.items() if k not in skip}
        if "bare" in d and self.handle_of is not None:  # a text scan without its `_metadata` column
            facts["bare"] = self.handle_of(d["bare"])
        return PlanTree(
            kind=d["k"],
            output=_attrs(d["out"]),
            children=tuple(self.plan(c) for c in d["kids"]),
            exprs=exprs,
            attrs=attrs,
            facts=facts,
            handle=self.handle(d),
            projections=tuple(tuple(self.tree(e) for e in row) for row in d.get("projections", ())),
        )

    def tree(self, d: dict[str, Any]) -> Tree:
        return Tree(
            kind=d["k"],
            text=d["t"],
            dtype=d["dt"],
            deterministic=d["det"],
            refs=frozenset(d["refs"]),
            children=tuple(self.tree(c) for c in d["c"]),
            handle=self.handle(d),
            id=d.get("id"),
            name=d.get("n"),
            nullable=d.get("nullable", True),
            value=_value(d["v"]) if "v" in d else None,
            values=tuple(_value(v) for v in d.get("set", ())),
            distinct=d.get("distinct", False),
            filtered=d.get("filtered", False),
            outer=d.get("outer", False),
            plan=self.plan(d["plan"]) if "plan" in d else None,
            frame=d.get("frame"),
        )

    def handle(self, d: dict[str, Any]) -> JObj | None:
        return self.handle_of(d["h"]) if "h" in d and self.handle_of is not None else None


def _attrs(rows: list[list[Any]]) -> tuple[ir.Attr, ...]:
    return tuple(ir.Attr(int(i), str(n), str(t), bool(null)) for i, n, t, null in rows)


def _value(v: Any) -> Any:
    if isinstance(v, dict):
        return decimal.Decimal(v["decimal"]) if "decimal" in v else OPAQUE
    return v


