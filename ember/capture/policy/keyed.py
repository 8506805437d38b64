"""By key: a column unique in its source names the source's row instead of its rid.

A scan whose rows reach a join with a column the join equates, read unchanged, needs no
rid where that column is unique (and never null) in its source: above the join, the
column's value names the row, and it is turned into the rid after the job
(`capture.keys`). So the rid does not ride through the join's shuffles (Smoke's rid
through a key-foreign key join). A semi join whose right side is one such scan has one
witness per kept row, named by the row's own probe value: no side table of witnesses.
Not inside a subplan DuckDB reads after the job: there a rid costs nothing, and a key
would cost turning it into a rid afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass

from ember.capture.policy.base import Setting, Site
from ember.plan import ir

# Joins whose output holds both sides' columns, so either side's key can be read above it.
_BOTH_SIDES = ("inner", "cross", "left", "right", "full")


@dataclass(frozen=True)
class ByKey:
    """The rows of `scan` named by their value of `column`, which the join at `site` holds
    as `attr` (a semi join: its left side's probe column, equated with `column`)."""

    site: Site
    scan: ir.Scan
    column: str
    attr: ir.Attr
    why: str


def claim(join: ir.Join, site: Site, left: bool, setting: Setting, claimed: set[int]) -> ByKey | None:
    """The first scan under the join's `left` (or right) side that one of its equated
    columns may name, unless a join above claimed it already (`claimed`: id() of scans,
    updated).

    >>> from ember.capture.policy.examples import join, scan
    >>> j = join(scan("o", "ck", kind="parquet"), scan("c", "ck2", kind="parquet"), "ck", "ck2")
    >>> claim(j, (), False, Setting(keyed=frozenset({("c", "ck2")})), set()).column
    'ck2'
    >>> claim(j, (), True, Setting(keyed=frozenset({("c", "ck2")})), set()) is None  # not unique in o
    True
    """
    for scan, column, attr in keyed_scans(join, left):
        if id(scan) not in claimed and setting.nameable(scan.source, column):
            claimed.add(id(scan))
            why = f"{column} is unique in {scan.source.name}: its value names the row above the join, no rid"
            return ByKey(site, scan, column, attr, why)
    return None


def witness(join: ir.Join, site: Site, setting: Setting) -> ByKey | None:
    """A semi join's witness named by the row's probe value, where its right side is one
    scan whose equated column is unique: no rid on the right, no side table of witnesses.

    >>> from ember.capture.policy.examples import join, scan
    >>> semi = join(scan("l", "a"), scan("r", "b", kind="parquet"), "a", "b", kind="semi")
    >>> witness(semi, (), Setting(keyed=frozenset({("r", "b")}))).attr.name  # the probe names the witness
    'a'
    """
    for scan, column, probe in witness_scans(join):
        if setting.nameable(scan.source, column):
            why = f"{column} is unique in {scan.source.name}: each kept row has one witness, named by its {probe.name}"
            return ByKey(site, scan, column, probe, why)
    return None


def readable_sides(join: ir.Join) -> tuple[bool, ...]:
    """The sides (left: True) whose columns the join's output holds."""
    return (True, False) if join.kind in _BOTH_SIDES else (True,)


def join_key_columns(plan: ir.Node) -> set[tuple[ir.Scan, str]]:
    """(scan, column) of every join column in `plan` that could name the scan's rows, if
    the column is unique in its source."""
    found: set[tuple[ir.Scan, str]] = set()
    for join in ir.walk(plan):
        if isinstance(join, ir.Join):
            candidates = [c for left in readable_sides(join) for c in keyed_scans(join, left)] + witness_scans(join)
            found.update((scan, column) for scan, column, _ in candidates)
    return found


def witness_scans(join: ir.Join) -> list[tuple[ir.Scan, str, ir.Attr]]:
    """(scan, its column, the left attribute equated with it) for a semi join whose right
    side is one Parquet scan under filters and projections, on a column it reads as is.
    Only plain equalities: a null-safe one or another condition could match other rows."""
    if join.kind != "semi" or join.theta or not all(_plain_scan_step(n) for n in ir.walk(join.right)):
        return []
    left = {a.id: a for a in join.left.output}
    found = []
    for lid, rid in sorted(join.equi):
        hit = _reading_scan(join.right, rid)
        if hit is not None:
            found.append((*hit, left[lid]))
    return found


def keyed_scans(join: ir.Join, left: bool) -> list[tuple[ir.Scan, str, ir.Attr]]:
    """(scan, its column, the join side's attribute) for each column the join equates that
    its side reads straight from a Parquet scan, through filters, column projections and
    joins that keep the column: each joined row holds that scan row's value of it (null
    where an outer join padded the scan's side)."""
    side = join.left if left else join.right
    by_id = {a.id: a for a in side.output}
    found: list[tuple[ir.Scan, str, ir.Attr]] = []
    for top in sorted({a if left else b for a, b in join.equi} & by_id.keys()):
        hit = _reading_scan(side, top)
        if hit is not None:
            found.append((*hit, by_id[top]))
    return found


def _plain_scan_step(node: ir.Node) -> bool:
    return isinstance(node, ir.Filter | ir.Project | ir.Scan) and not any(e.subqueries for e in node.expressions())


def _reading_scan(node: ir.Node, attr: int) -> tuple[ir.Scan, str] | None:
    """The Parquet scan and column that `node`'s output attribute `attr` is read from unchanged."""
    while not isinstance(node, ir.Scan):
        if any(e.subqueries for e in node.expressions()):
            return None
        if isinstance(node, ir.Project):
            below = {c.attr.id: ir.column_of(c.expr) for c in node.columns}.get(attr)
            if below is None:
                return None
            attr, node = below, node.child
        elif isinstance(node, ir.Filter):
            node = node.child
        elif isinstance(node, ir.Join) and node.kind != "existence":
            node = node.left if any(a.id == attr for a in node.left.output) else node.right
            if not any(a.id == attr for a in node.output):
                return None
        else:
            return None
    if node.source.kind != "parquet":
        return None
    return next(((node, a.name) for a in node.attrs if a.id == attr), None)
