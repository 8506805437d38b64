"""A tiny pure-Python evaluator that carries which-provenance with every row.

Independent of ember: each row is `(values, lineage)` where lineage is a frozenset of
`(source, rid)` pairs, and each operator states DESIGN.md's rule directly.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import pyarrow as pa

import ember

Values = tuple[Any, ...]
Lin = frozenset[tuple[str, int]]
Row = tuple[Values, Lin]


def scan(name: str, rows: Iterable[Values]) -> list[Row]:
    return [(tuple(v), frozenset({(name, i)})) for i, v in enumerate(rows)]


def where(rows: list[Row], pred: Callable[[Values], bool]) -> list[Row]:
    return [(v, lin) for v, lin in rows if pred(v)]


def select(rows: list[Row], f: Callable[[Values], Values]) -> list[Row]:
    return [(f(v), lin) for v, lin in rows]


def join(left: list[Row], right: list[Row], on: Callable[[Values, Values], bool], kind: str = "inner",
         lw: int = 0, rw: int = 0) -> list[Row]:
    """Joined pairs; an outer join's unmatched row alone, padded with `None`s (widths lw / rw)."""
    out: list[Row] = []
    matched_right: set[int] = set()
    for lv, ll in left:
        hit = False
        for j, (rv, rl) in enumerate(right):
            if on(lv, rv):
                out.append((lv + rv, ll | rl))
                matched_right.add(j)
                hit = True
        if not hit and kind in ("left", "full"):
            out.append((lv + (None,) * rw, ll))
    if kind in ("right", "full"):
        out += [((None,) * lw + rv, rl) for j, (rv, rl) in enumerate(right) if j not in matched_right]
    return out


def semi(left: list[Row], right: list[Row], on: Callable[[Values, Values], bool]) -> list[Row]:
    """The outer row and every inner row that witnesses it."""
    out = []
    for lv, ll in left:
        witnesses = [rl for rv, rl in right if on(lv, rv)]
        if witnesses:
            out.append((lv, ll.union(*witnesses)))
    return out


def anti(left: list[Row], right: list[Row], on: Callable[[Values, Values], bool]) -> list[Row]:
    """The outer row only."""
    return [(lv, ll) for lv, ll in left if not any(on(lv, rv) for rv, _ in right)]


def group(rows: list[Row], key: Callable[[Values], Values], agg: Callable[[list[Values]], Values],
          global_: bool = False) -> list[Row]:
    """Every row of its group; a global aggregate has one group even over no rows."""
    groups: dict[Values, list[Row]] = defaultdict(list)
    for r in rows:
        groups[key(r[0])].append(r)
    if global_ and not groups:
        groups[()] = []
    return [(k + agg([v for v, _ in rs]), frozenset().union(*(lin for _, lin in rs))) for k, rs in groups.items()]


def distinct(rows: list[Row]) -> list[Row]:
    return group(rows, lambda v: v, lambda vs: ())


def set_op(left: list[Row], right: list[Row], op: str, all_: bool) -> list[Row]:
    """INTERSECT: the equal rows of both sides; EXCEPT: the equal rows of the left side."""
    lg: dict[Values, list[Lin]] = defaultdict(list)
    rg: dict[Values, list[Lin]] = defaultdict(list)
    for v, lin in left:
        lg[v].append(lin)
    for v, lin in right:
        rg[v].append(lin)
    out: list[Row] = []
    for v, lins in lg.items():
        if op == "intersect":
            n = min(len(lins), len(rg[v])) if all_ else int(v in rg)
            lineage = frozenset().union(*lins, *rg[v])
        else:
            n = max(len(lins) - len(rg[v]), 0) if all_ else int(v not in rg)
            lineage = frozenset().union(*lins)
        out += [(v, lineage)] * n
    return out


def window(rows: list[Row], part: Callable[[Values], Values], order: Callable[[Values], Any],
           frame: Callable[[int, int], tuple[int, int]], f: Callable[[list[Values], int], Any]) -> list[Row]:
    """Adds f(frame rows, position) to each row; lineage: the row and its frame. `frame(i, n)` gives
    the frame's [lo, hi) positions in the ordered partition (the test data has no ties)."""
    parts: dict[Values, list[Row]] = defaultdict(list)
    for r in rows:
        parts[part(r[0])].append(r)
    out: list[Row] = []
    for rs in parts.values():
        rs = sorted(rs, key=lambda r: order(r[0]))
        for i, (v, lin) in enumerate(rs):
            lo, hi = frame(i, len(rs))
            framed = rs[max(lo, 0) : max(min(hi, len(rs)), 0)]
            out.append(((*v, f([fv for fv, _ in framed], i)), lin.union(*(fl for _, fl in framed))))
    return out


def ember_rows(lin: ember.Lineage) -> list[Row]:
    """ember's output rows with their backward lineage, in the oracle's form."""
    out = []
    for oid, values in enumerate(value_rows(lin.output().drop_columns(["ember_oid"]))):
        trace = lin.backward(oids=[oid])
        lineage = frozenset((s, int(r)) for s in lin.sources for r in trace.ids(s))
        out.append((values, lineage))
    return out


def value_rows(table: pa.Table) -> list[Values]:
    """Rows as tuples, by position (output columns may share a name, as in `SELECT a.k, b.k`)."""
    return list(zip(*(c.to_pylist() for c in table.columns), strict=True)) if table.num_columns else []


def _key(row: Row) -> tuple[str, list[tuple[str, int]]]:
    return repr(row[0]), sorted(row[1])


def assert_same_lineage(lin: ember.Lineage, expected: Sequence[Row]) -> None:
    """ember's (values, lineage) multiset equals the oracle's; forward traces agree with it."""
    got = ember_rows(lin)
    assert sorted(map(_key, got)) == sorted(map(_key, expected))
    for source in lin.sources:
        for rid in sorted({r for _, lineage in got for s, r in lineage if s == source}):
            want = [oid for oid, (_, lineage) in enumerate(got) if (source, rid) in lineage]
            assert lin.forward(source, ids=[rid]).ids().tolist() == want, (source, rid)


def assert_inferred(lin: ember.InferredLineage, expected: Sequence[Row]) -> None:
    """Lazy lineage agrees with the oracle on the last output row, with set semantics
    (output rows with equal values share one lineage): an exact trace equals it, a
    superset trace contains it; in exact mode, a forward trace from one of its lineage
    rows equals the oracle's too. (Each lazy trace re-reads the sources, so one row.)"""
    merged: dict[str, set[tuple[str, int]]] = defaultdict(set)
    for values, lineage in expected:
        merged[repr(values)] |= lineage
    outputs = value_rows(lin.output().drop_columns(["ember_oid"]))
    if not outputs:
        return
    oid = len(outputs) - 1
    want = merged[repr(outputs[oid])]
    got = {(s, int(r)) for s in lin.sources for r in lin.backward(oids=[oid]).ids(s)}
    assert got == want if lin.exact else got >= want, (oid, sorted(got), sorted(want))
    if lin.exact and want:
        source, rid = min(want)
        want_oids = [i for i, v in enumerate(outputs) if (source, rid) in merged[repr(v)]]
        assert lin.forward(source, ids=[rid]).ids().tolist() == want_oids, (source, rid)
