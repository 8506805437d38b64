"""Rollups whose groups need no copies of their input rows.

Spark computes ROLLUP(k1, ..., kn) as an aggregate over an expand that emits every input
row once per grouping set: with the keys past the set's first ones nulled, and a grouping
id saying which were. A group table read from the expand holds each input row once per
set (n + 1 copies of it). Where every set groups by leading keys, the groups of a set
are runs of rows sorted by all the keys: its group table holds the expand's input once
(where the policy allows it: `policy.aggregate.compact`), and a ref `(k1, ..., kn,
grouping id)` points at the rows equal on the set's leading keys (`store.index`). The
rolled-up keys of a ref are null and not compared; a null in the data is a value like
any other. CUBE and other grouping sets keep the expand.
"""

from __future__ import annotations

from dataclasses import dataclass

from ember.plan import ir


@dataclass(frozen=True)
class Rollup:
    expand: ir.Expand
    keys: tuple[ir.Attr, ...]  # the expand input's column for each key but the grouping id, in key order
    prefixes: tuple[tuple[int, int], ...]  # (grouping id, how many leading keys its set groups by)


def rollup(node: ir.Aggregate) -> Rollup | None:
    """The rollup `node` computes, or None where it groups otherwise: its keys must be the
    expand's columns, the last one a grouping id that is a distinct integer in each
    projection, each other one a column of the expand's input or a null, the columns kept
    a prefix of the keys in every projection."""
    expand = node.child
    if not isinstance(expand, ir.Expand) or len(node.keys) < 2 or any(e.subqueries for e in expand.expressions()):
        return None
    at = {a.id: i for i, a in enumerate(expand.attrs)}
    positions = [at.get(k.column) if isinstance(k, ir.Expr) and k.column is not None else None for k in node.keys]
    if any(p is None for p in positions):
        return None
    inputs = {a.id: a for a in expand.child.output}
    *grouped, gid = (p for p in positions if p is not None)
    keys: list[ir.Attr | None] = [None] * len(grouped)
    prefixes: dict[int, int] = {}
    for projection in expand.projections:
        made = [_column(projection[p], inputs) for p in grouped]
        kept = next((i for i, m in enumerate(made) if m is None), len(made))
        if any(m is not None for m in made[kept:]) or not all(_null(projection[p]) for p in grouped[kept:]):
            return None
        for i, m in enumerate(made[:kept]):
            if keys[i] not in (None, m):
                return None
            keys[i] = m
        value = _integer(projection[gid])
        if value is None or value in prefixes:
            return None
        prefixes[value] = kept
    if any(k is None for k in keys):
        return None
    return Rollup(expand, tuple(k for k in keys if k is not None), tuple(sorted(prefixes.items())))


def _column(e: ir.AnyExpr, inputs: dict[int, ir.Attr]) -> ir.Attr | None:
    """The input column `e` reads as it is, or None."""
    if isinstance(e, ir.Expr) and e.column is not None and e.names in (None, e.column) and e.tree is not None:
        return inputs.get(e.column) if e.tree.kind == "AttributeReference" else None
    return None


def _null(e: ir.AnyExpr) -> bool:
    return isinstance(e, ir.Expr) and e.tree is not None and e.tree.kind == "Literal" and e.tree.value is None


def _integer(e: ir.AnyExpr) -> int | None:
    if isinstance(e, ir.Expr) and e.tree is not None and e.tree.kind == "Literal" and type(e.tree.value) is int:
        return int(e.tree.value)
    return None
