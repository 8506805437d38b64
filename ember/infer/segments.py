"""Where exact mode saves intermediates (PredTrace's saved operator outputs), over the IR.

A plan whose pushed predicates are not its exact lineage (`infer.exact`) can often be cut
into pieces whose predicates are: the plan above a subplan S treats S's rows as a scan,
and S's rows are traced through S's own plan. Saving S's output while the job runs (only
the columns either piece's predicates read) lets a trace evaluate both pieces in-process,
with no re-run. A correlated `avg(l_quantity)` per part is the typical case: DuckDB
would average as a double what Spark averages as a decimal, so the join cannot compute
it; saved, it is a scan of one row per part, and the aggregate below it pins whole groups.

A piece is exact when its predicates, cut across joins, are its lineage, or when joining
its cut candidates in-process is (`infer.block`: filters over joins, theta conditions,
cycles, aggregates it can window). Save points are found where that fails: the lowest
node at or above the fault whose own subplan splits (recursively) into exact pieces.
Pure over the IR (whether an aggregate windows asks its Catalyst expressions, no data).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

from ember.infer import block
from ember.infer.exact import block_root, failing
from ember.infer.pushdown import Inference, infer, lift_limits, telling
from ember.infer.refine import cuts
from ember.plan import ir
from ember.plan.sources import SAVED, Source

MAX_SAVES = 8  # per piece; plans needing more keep the re-run
MAX_DEPTH = 3  # saved intermediates nested inside saved intermediates

_keys = itertools.count(1)


@dataclass(frozen=True)
class Save:
    """The output of `node` (the job's subplan `at`, or it widened), saved: `scan` stands
    for it above."""

    node: ir.Node
    scan: ir.Scan
    below: Segment  # traces the saved rows through `node`'s own plan
    at: ir.Node  # the subplan of the job it replaces


@dataclass(frozen=True)
class Segment:
    """A piece of the plan whose predicates are its exact lineage, over sources and saves."""

    plan: ir.Node
    inference: Inference
    saves: tuple[Save, ...]
    evaluated: bool = False  # its rows are joined in-process (`infer.block`), not only cut
    scalars: tuple[Scalar, ...] = ()  # scalar subqueries its rows use: their whole lineage is added


@dataclass(frozen=True)
class Scalar:
    """A scalar subquery a filter of a piece tests rows against."""

    piece: Segment  # its one row's lineage, added whole to the lineage of the rows that used it
    reader: ir.Scan | None  # the scan whose rows the filter tests, below the traced group (then
    # a traced row used the scalar only if one of those rows is in its lineage); None: the
    # filter is above the traced group, which the traced row passed


def split(plan: ir.Node, depth: int = MAX_DEPTH) -> Segment | None:
    """`plan` cut at saved intermediates into exact pieces, or None when no cut is found."""
    saves: list[Save] = []
    top = plan
    for _ in range(MAX_SAVES + 1):
        inference = infer(top)
        failure = failing(top, inference, evaluated=True, windowed=block.windowed)
        if failure is None:
            scalars = _scalars(top, depth)
            if scalars is None:
                return None
            return Segment(top, inference, tuple(saves), failing(top, inference) is not None, scalars)
        save = _save_at(top, failure[1], depth)
        if save is None:
            return None
        saves.append(save)
        top = _replace(top, save.at, save.scan) if save.at is not top else _as_output(save.scan, top.output)
    return None


def _scalars(plan: ir.Node, depth: int) -> tuple[Scalar, ...] | None:
    """The scalar subqueries `plan`'s filters evaluate, or None when one is not a piece
    whose one row's lineage its predicates give with nothing bound (a global aggregate over
    filters and joins) or that would need saves of its own (they are not in the job's tree).
    `exact.failing` lets a piece hold them only in filters above the traced group or over a
    scan below it."""
    below = {id(n) for n in ir.walk(block_root(plan))}
    pieces = []
    for node in ir.walk(plan):
        for e in node.expressions():
            for sub in e.subqueries:
                piece = split(sub, depth - 1) if depth > 0 else None
                if piece is None or piece.saves or any(sp.bindings for sp in piece.inference.scans):
                    return None
                pieces.append(Scalar(piece, _read_by(node) if id(node) in below else None))
    return tuple(pieces)


def _read_by(node: ir.Node) -> ir.Scan:
    """The scan under a chain of filters."""
    while isinstance(node, ir.Filter):
        node = node.child
    assert isinstance(node, ir.Scan), "a filter below the traced group holds a subquery only over a scan"
    return node


def saved_columns(segment: Segment, save: Save) -> tuple[ir.Attr, ...]:
    """The columns of a save that the piece above and the piece below read (in output order)."""
    scan_id = id(save.scan)
    ids: set[int] = set()
    for sp in segment.inference.scans:
        if sp.scan is save.scan:
            for b in sp.bindings:
                ids |= {b.attr.id} if b.attr is not None else set(b.expr.refs if b.expr is not None else ())
            for f in sp.filters:
                ids |= f.refs
    for c in cuts(segment.plan):
        ids |= {c.column.id} if c.target == scan_id else set()
        ids |= {col.id for scan, col in c.by if scan == scan_id}
    for sp in save.below.inference.scans:
        ids |= {save.node.output[b.column].id for b in sp.bindings}
    if segment.evaluated:
        ids |= {a.id for a in block.columns(segment.plan).get(scan_id, ())}
    return tuple(a for a in save.node.output if a.id in ids)


def _save_at(top: ir.Node, fault: ir.Node, depth: int) -> Save | None:
    """A save at the lowest node on the way from `fault` up to `top` whose subplan splits into
    exact pieces (`top` itself only when it is a limit the output does not tell apart)."""
    if depth == 0:
        return None
    path = _ancestors(top, fault)
    for i, node in enumerate(path):
        if (node is top and not isinstance(node, ir.Limit)) or isinstance(node, ir.Scan) or not _plain_names(node):
            continue
        kept = isinstance(node, ir.Limit) and lift_limits(node) is node  # as it is, it would save itself again
        at, below = node, None if kept else _below(node, depth)
        by_name = node is top or isinstance(path[i + 1], ir.Project | ir.Aggregate)  # the top: `_as_output`
        widened = _with_keys(node) if below is None and by_name else None
        widened = widened if widened is not None and _plain_names(widened) else None
        if widened is not None:  # its parent reads its columns by name: one more is harmless
            node, below = widened, _below(widened, depth)
        if below is None:
            continue
        for higher in path[i + 1 :] if widened is None else ():  # filters and projections above save less
            if higher is top or not isinstance(higher, ir.Filter | ir.Project) or not _plain_names(higher):
                break
            above = _below(higher, depth)
            if above is None:
                break
            at = node = higher
            below = above
        n = next(_keys)
        stand_in = Source(key=f"ember-saved-{n}", name=f"saved {type(node).__name__.lower()} #{n}", kind=SAVED, rows=0)
        return Save(node, ir.Scan(stand_in, node.output), below, at)
    return None


def _as_output(scan: ir.Scan, output: tuple[ir.Attr, ...]) -> ir.Node:
    """A save of the plan's top (a limit widened with the columns that tell its rows apart)
    read as the plan's output: the columns the user's job outputs, in its order."""
    if scan.attrs == output:
        return scan
    return ir.Project(scan, columns=tuple(ir.Named(ir.ColumnRef(a), a) for a in output))


def _below(node: ir.Node, depth: int) -> Segment | None:
    """The piece that traces rows saved at `node` through its plan. A saved row passed the
    limits at its top, so they are lifted as at the plan's top (`lift_limits`): inferred
    under them, nothing would pin the rows of a `LIMIT` over a `GROUP BY`."""
    return split(lift_limits(node), depth - 1)


def _with_keys(node: ir.Node) -> ir.Node | None:
    """An aggregate that also outputs the grouping columns it drops (an inner `GROUP BY
    c_custkey` keeping only counts), so its saved rows pin their groups, or a limit whose
    projections keep the columns that tell its rows apart (`pushdown.telling`: a count of
    the first groups by key, the names of the youngest people); None when nothing is
    dropped or a dropped key is computed."""
    if isinstance(node, ir.Limit):
        widened = _telling_through(node)
        return widened if widened is not node else None
    if not isinstance(node, ir.Aggregate):
        return None
    out = {a.id for a in node.output}
    cols = [ir.column_of(k) for k in node.keys]
    if any(c is None for c in cols) or all(c in out for c in cols):
        return None
    inputs = {a.id: a for a in node.child.output}
    added = tuple(ir.Named(ir.ColumnRef(inputs[c]), inputs[c]) for c in dict.fromkeys(cols) if c is not None and c not in out)
    return replace(node, columns=node.columns + added)


def _telling_through(node: ir.Node) -> ir.Node:
    """`node`, whose rows pass on as they are from the first operator that combines them,
    with that operator's telling columns carried up through every projection on the way."""
    if not isinstance(node, ir.Limit | ir.Filter | ir.Passthrough | ir.Project):
        return _with_keys(node) or node
    child = _telling_through(node.child)
    if isinstance(node, ir.Project):
        kept = {a.id for a in node.output}
        wanted = telling(_first_combining(child))
        added = tuple(ir.Named(ir.ColumnRef(a), a) for a in child.output if a.id not in kept and a.id in wanted)
        return replace(node, child=child, columns=node.columns + added) if added or child is not node.child else node
    return node if child is node.child else ir.with_children(node, (child,))


def _first_combining(node: ir.Node) -> ir.Node:
    while isinstance(node, ir.Limit | ir.Filter | ir.Passthrough | ir.Project):
        node = node.child
    return node


def _plain_names(node: ir.Node) -> bool:
    """Saved rows are read in-process by column name, so the names must be distinct."""
    names = [a.name for a in node.output]
    return len(set(names)) == len(names)


def _ancestors(top: ir.Node, node: ir.Node) -> list[ir.Node]:
    """`node`, its parent, ... up to `top` (by identity); empty when `node` is not in `top`."""
    if top is node:
        return [node]
    for child in top.children:
        path = _ancestors(child, node)
        if path:
            return [*path, top]
    return []


def _replace(plan: ir.Node, old: ir.Node, new: ir.Node) -> ir.Node:
    """`plan` with the subplan `old` (by identity) replaced by `new`."""
    if plan is old:
        return new
    children = tuple(_replace(c, old, new) for c in plan.children)
    if all(a is b for a, b in zip(children, plan.children, strict=True)):
        return plan
    return ir.with_children(plan, children)


def wrap(plan: ir.Node, saves: dict[int, tuple[int, ir.Node]]) -> ir.Node:
    """`plan` with each subplan whose `id()` is in `saves` replaced by what is saved there
    (itself or it widened, over the same inputs) and cached as `ir.Shared` under its key, so
    one job computes the output and keeps the saved intermediates."""
    saved = saves.get(id(plan))
    node = plan if saved is None else saved[1]  # a widened save: its own nodes, down to shared inputs
    children = tuple(wrap(c, saves) for c in node.children)
    if saved is None:
        return plan if all(a is b for a, b in zip(children, plan.children, strict=True)) else ir.with_children(plan, children)
    return ir.Shared(ir.with_children(node, children), key=saved[0])
