"""Logical inference (PredTrace): where a traced output row's values pin source rows.

A pure function over the IR, run once per plan and before any data is read. It pushes
the row-selection predicate `output column j = v_j` (for every j) down the plan and
returns, per scan, the equalities `scan column = v_j` that every row of the lineage
satisfies. Values are bound only when a trace is asked (`ember.infer.spark`).

Each rule keeps what PredTrace calls a *relaxed* push-down: restricting every scan to its
predicate leaves the rows of each operator's output that match its own predicate, and
their lineage, exactly as in the full run. So a constraint passes an operator only where
the rows that decide its output stay complete:

- a projection passes columns it merely renames; computed columns stop there;
- a join passes each side its own columns and carries values across the columns its
  condition equates; a value on the padded side of an outer join says nothing when null;
- an aggregate passes its grouping columns (whole groups stay), not aggregated values;
- a window passes its partitioning columns (whole partitions stay);
- a union passes each input the column at the same position;
- filters, sorts and limits pass everything (limits are lifted for the re-run).

Scans on the inner side of an anti join, or under a domain aggregate (`plan.domains`),
contribute no lineage; scans inside scalar subqueries get no constraint (the scalar's
value needs all of its rows).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ember.plan import ir
from ember.plan.ir import column_of

# attr id → {(output column, padded)}; negative ids stand for computed expressions (`_Pusher.exprs`)
Cons = dict[int, frozenset[tuple[int, bool]]]


@dataclass(frozen=True)
class Binding:
    """Every lineage row of `scan` has `attr` (or, for a computed column, `expr` evaluated on
    it) equal to the traced row's output `column`; `padded` bindings went through an outer
    join's padded side, where a null means nothing."""

    column: int
    attr: ir.Attr | None
    padded: bool = False
    expr: ir.Expr | None = None


@dataclass(frozen=True)
class ScanPlan:
    scan: ir.Scan
    bindings: tuple[Binding, ...]
    filters: tuple[ir.Expr, ...]  # conditions applied right above the scan
    traced: bool  # False where the scan's rows are in no lineage (an anti join's inner side, a domain)


@dataclass(frozen=True)
class Inference:
    scans: tuple[ScanPlan, ...]
    stops: tuple[str, ...]  # where a constraint could not pass, for the report

    def of_source(self, key: str) -> tuple[ScanPlan, ...]:
        return tuple(s for s in self.scans if s.scan.source.key == key)


@dataclass
class _Pusher:
    scans: list[ScanPlan] = field(default_factory=list)
    stops: list[str] = field(default_factory=list)
    exprs: dict[int, ir.Expr] = field(default_factory=dict)

    def computed(self, node: ir.Node, c: ir.Named, cons: Cons, below: Cons) -> None:
        """Pushes `expression = value` for a bound computed column: a residual predicate,
        evaluated where its columns are read (re-evaluated there, never inverted)."""
        e = c.expr
        if c.attr.id not in cons:
            return
        if isinstance(e, ir.Expr) and e.deterministic and not e.subqueries and e.refs:
            key = -1 - len(self.exprs)
            self.exprs[key] = e
            _add(below, key, cons[c.attr.id])
        else:
            self.stop(node, cons, (c.attr,))

    def keep(self, cons: Cons, ids: set[int]) -> Cons:
        """The computed-column constraints whose columns all pass unchanged (`ids`)."""
        return {k: v for k, v in cons.items() if k < 0 and self.exprs[k].refs <= ids}

    def push(self, node: ir.Node, cons: Cons, traced: bool, filters: tuple[ir.Expr, ...] = ()) -> None:
        for e in node.expressions():
            for sub in e.subqueries:
                self.push(sub, {}, traced)
        getattr(self, f"_{type(node).__name__}", self._rows)(node, cons, traced, filters)

    def stop(self, node: ir.Node, cons: Cons, attrs: tuple[ir.Attr, ...]) -> None:
        for a in attrs:
            if a.id in cons:
                self.stops.append(f"{type(node).__name__}: {a.name}")

    def _Scan(self, node: ir.Scan, cons: Cons, traced: bool, filters: tuple[ir.Expr, ...]) -> None:
        bindings = tuple(
            Binding(col, a, padded) for a in node.attrs for col, padded in sorted(cons.get(a.id, ()))
        )
        residual = self.keep(cons, {a.id for a in node.attrs})
        bindings += tuple(
            Binding(col, None, padded, self.exprs[k]) for k, v in sorted(residual.items()) for col, padded in sorted(v)
        )
        self.scans.append(ScanPlan(node, bindings, filters, traced))

    def _Filter(self, node: ir.Filter, cons: Cons, traced: bool, filters: tuple[ir.Expr, ...]) -> None:
        below = _only(cons, node.child.output) | self.keep(cons, _ids(node.child.output))
        self.push(node.child, below, traced, (*filters, node.cond))

    def _rows(self, node: ir.Node, cons: Cons, traced: bool, filters: tuple[ir.Expr, ...]) -> None:
        """Operators that keep each input row's columns as they are (sort, repartition, ...)."""
        assert isinstance(node, ir.Unary), f"no push-down rule for {type(node).__name__}"
        self.push(node.child, _only(cons, node.child.output) | self.keep(cons, _ids(node.child.output)), traced)

    def _Limit(self, node: ir.Limit, cons: Cons, traced: bool, filters: tuple[ir.Expr, ...]) -> None:
        """Which rows a limit keeps depends on all its input: nothing below it is restricted
        (`lift_limits` removes the limits a traced row merely passes through)."""
        self.stop(node, cons, node.output)
        self.push(node.child, {}, traced)

    def _Project(self, node: ir.Project, cons: Cons, traced: bool, filters: tuple[ir.Expr, ...]) -> None:
        below = self.keep(cons, {c.attr.id for c in node.columns if column_of(c.expr) == c.attr.id})
        for c in node.columns:
            col = column_of(c.expr)
            if c.attr.id in cons and col is not None:
                _add(below, col, cons[c.attr.id])
            elif col is None:
                self.computed(node, c, cons, below)
        self.push(node.child, below, traced)

    def _Aggregate(self, node: ir.Aggregate, cons: Cons, traced: bool, filters: tuple[ir.Expr, ...]) -> None:
        keys = {column_of(k) for k in node.keys} - {None}
        texts = {k.sql for k in node.keys if isinstance(k, ir.Expr)}
        below = self.keep(cons, {c.attr.id for c in node.columns if column_of(c.expr) == c.attr.id} & keys)
        for c in node.columns:
            col = column_of(c.expr)
            if c.attr.id in cons and col is not None and col in keys:
                _add(below, col, cons[c.attr.id])
            elif col is None and _is_key(c.expr, texts):
                self.computed(node, c, cons, below)
            else:
                self.stop(node, cons, (c.attr,))
        self.push(node.child, below, traced and not node.domain)

    def _Window(self, node: ir.Window, cons: Cons, traced: bool, filters: tuple[ir.Expr, ...]) -> None:
        keys = {column_of(p) for p in node.partition} - {None}
        self.stop(node, cons, tuple(a for a in node.output if a.id not in keys))
        below = {k: v for k, v in cons.items() if k in keys} | self.keep(cons, {k for k in keys if k is not None})
        self.push(node.child, below, traced)

    def _Generate(self, node: ir.Generate, cons: Cons, traced: bool, filters: tuple[ir.Expr, ...]) -> None:
        self.stop(node, cons, node.generated)
        self.push(node.child, _only(cons, node.kept) | self.keep(cons, _ids(node.kept)), traced)

    def _Expand(self, node: ir.Expand, cons: Cons, traced: bool, filters: tuple[ir.Expr, ...]) -> None:
        below: Cons = {}
        for i, a in enumerate(node.attrs):
            cols = {column_of(p[i]) for p in node.projections}
            col = cols.pop() if len(cols) == 1 else None
            if a.id in cons and col is not None:
                _add(below, col, cons[a.id])
            else:
                self.stop(node, cons, (a,))
        self.push(node.child, below, traced)

    def _Union(self, node: ir.Union, cons: Cons, traced: bool, filters: tuple[ir.Expr, ...]) -> None:
        for child in node.inputs:
            below: Cons = {}
            for out, a in zip(node.attrs, child.output, strict=True):
                if out.id in cons:
                    _add(below, a.id, cons[out.id])
            self.push(child, below, traced)

    def _Join(self, node: ir.Join, cons: Cons, traced: bool, filters: tuple[ir.Expr, ...]) -> None:
        lids, rids = _ids(node.left.output), _ids(node.right.output)
        left = _only(cons, node.left.output) | self.keep(cons, lids)
        right = _only(cons, node.right.output) | self.keep(cons, rids)
        if node.kind in ("left", "full"):
            right = _padded(right)
        if node.kind in ("right", "full"):
            left = _padded(left)
        changed = True
        while changed:  # carry values across equated columns until nothing new passes
            changed = False
            for lid, rid in node.equi:
                changed |= _carry(left, lid, right, rid)
                if node.kind not in ("semi", "anti", "existence"):
                    changed |= _carry(right, rid, left, lid)
        self.stop(node, cons, (node.exists_attr,) if node.exists_attr is not None else ())
        self.push(node.left, left, traced)
        self.push(node.right, right, traced and node.kind != "anti")


def _ids(attrs: tuple[ir.Attr, ...]) -> set[int]:
    return {a.id for a in attrs}


def _is_key(e: ir.AnyExpr, keys: set[str]) -> bool:
    """Whether an aggregate's output column is (an alias of) one of its grouping expressions."""
    return isinstance(e, ir.Expr) and any(e.sql == k or e.sql.startswith(k + " AS ") for k in keys)


def _only(cons: Cons, attrs: tuple[ir.Attr, ...]) -> Cons:
    ids = {a.id for a in attrs}
    return {k: v for k, v in cons.items() if k in ids}


def _add(cons: Cons, attr: int, values: frozenset[tuple[int, bool]]) -> None:
    """Adds constraints; a padded one is redundant next to the same unpadded one."""
    merged = cons.get(attr, frozenset()) | values
    cons[attr] = frozenset((col, padded) for col, padded in merged if not (padded and (col, False) in merged))


def _padded(cons: Cons) -> Cons:
    return {k: frozenset((col, True) for col, _ in v) for k, v in cons.items()}


def _carry(src: Cons, sid: int, dst: Cons, did: int) -> bool:
    """An equi-join never pairs nulls, so a carried value says nothing when null."""
    if sid not in src:
        return False
    before = dst.get(did, frozenset())
    _add(dst, did, frozenset((col, True) for col, _ in src[sid]))
    return dst[did] != before


def lift_limits(plan: ir.Node, exact: bool = True) -> ir.Node:
    """`plan` without the limits (and offsets) between its output and its first operator that
    combines rows: an output row's lineage is that of the row the limit let through, and
    without the limit a restricted re-run cannot lose that row to rows it does not see.
    Kept where the output does not tell the rows below apart (a GROUP BY's keys, any other
    operator's columns, projected away: `SELECT name ... ORDER BY age LIMIT 1`): a row the
    limit cut could show the kept row's values and be traced with it (in a superset, not
    `exact`, that row is one more false positive: lifted all the same)."""
    lifted = _without_limits(plan)
    return lifted if lifted is plan or not exact or _told_apart(lifted) else plan


def _without_limits(plan: ir.Node) -> ir.Node:
    """`plan` itself where it has no limit to lift."""
    if isinstance(plan, ir.Limit):
        return _without_limits(plan.child)
    if isinstance(plan, ir.Project | ir.Filter | ir.Passthrough):
        child = _without_limits(plan.child)
        return plan if child is plan.child else ir.with_children(plan, (child,))
    return plan


def _told_apart(plan: ir.Node) -> bool:
    """Whether the columns that tell apart the rows of the first operator under `plan`'s
    row-wise top (`telling`) all reach its output."""
    reach = {a.id for a in plan.output}
    node = plan
    while isinstance(node, ir.Project | ir.Filter | ir.Passthrough | ir.Limit):
        if isinstance(node, ir.Project):
            reach = {c for n in node.columns if n.attr.id in reach and (c := column_of(n.expr)) is not None}
        node = node.child
    if isinstance(node, ir.Aggregate):
        return all(any(c.attr.id in reach for c in key_columns(node, k)) for k in node.keys)
    return telling(node) <= reach


def telling(node: ir.Node) -> set[int]:
    """The columns whose values tell `node`'s rows apart: an aggregate's plain grouping
    columns (a computed key: none), any other operator's every column (rows equal in all
    of them are told apart by nothing a plan shows)."""
    if isinstance(node, ir.Aggregate):
        return {c for k in node.keys if (c := column_of(k)) is not None}
    return {a.id for a in node.output}


def key_columns(agg: ir.Aggregate, key: ir.AnyExpr) -> list[ir.Named]:
    """The aggregate's output columns that hold grouping key `key` (passed through, or
    computed as the same expression)."""
    col = column_of(key)
    return [
        c
        for c in agg.columns
        if (col is not None and column_of(c.expr) == col)
        or (col is None and isinstance(key, ir.Expr) and isinstance(c.expr, ir.Expr) and c.expr.sql.startswith(key.sql))
    ]


def infer(plan: ir.Node) -> Inference:
    """Where each output column's value pins rows of each scan of `plan`."""
    pusher = _Pusher()
    top: Cons = {}
    for j, a in enumerate(plan.output):
        _add(top, a.id, frozenset({(j, False)}))
    pusher.push(plan, top, True)
    return Inference(tuple(pusher.scans), tuple(dict.fromkeys(pusher.stops)))


def origins(node: ir.Node, attr: int) -> tuple[tuple[int, ir.Attr], ...]:
    """The scan columns (scan by `id()`) that every lineage row below `node` shares with
    `node`'s column `attr`: where a join's key values come from."""
    pusher = _Pusher()
    pusher.push(node, {attr: frozenset({(0, False)})}, True)
    return tuple((id(sp.scan), b.attr) for sp in pusher.scans if sp.traced for b in sp.bindings if b.attr is not None)
