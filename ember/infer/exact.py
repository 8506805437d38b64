"""Whether the pushed-down predicates select exactly the lineage, so a trace needs no re-run.

PredTrace's exact mode evaluates the pushed predicates at the sources and saves an
intermediate only where they would select more than the lineage; ember re-runs the job,
restricted, in those places instead (`ember.infer.lineage`). This pure check over the IR
finds the plans that need neither: a trace is then the rows each scan's predicates and
filters select, cut across every join to the rows whose key has a partner (superset
mode's refinement), and that is the lineage exactly.

A plan qualifies when, under a top of projections, sorts, filters and limits (which keep
or drop whole output rows):
- either one aggregate whose grouping keys all reach the output, so the traced row pins
  its whole group; or no aggregate, and every output column pins some scan column;
- below that, only scans, filters right over scans (applied with the predicates),
  projections, sorts and repartitions, and inner or semi joins on exactly one
  `column = column` condition whose columns come from scans.
One equality per join makes the joins a tree, and on a tree cutting each side to the
values of the other until nothing changes is a full reducer (Yannakakis): every row
left joins into some result row of the traced group, and every such result row's rows
are left. Anything else (outer and anti joins, subqueries, windows, unions, nested
aggregates, composite or theta conditions, filters above joins) keeps the re-run.
"""

from __future__ import annotations

from collections.abc import Callable

from ember.errors import UnsupportedOperatorError
from ember.infer.pushdown import Inference, key_columns, origins
from ember.plan import ir
from ember.plan.ir import choosing, column_of, walk

_KEEP_ROWS = ("sort", "repartition", "observe")


# why a plan's predicates are not its exact lineage, and the node where that shows
Failure = tuple[str, ir.Node]


def why_rerun(plan: ir.Node, inference: Inference) -> str | None:
    """None when the pushed predicates are the exact lineage of any traced row, otherwise
    why a trace must re-run the job."""
    failure = failing(plan, inference)
    return None if failure is None else failure[0]


def failing(
    plan: ir.Node, inference: Inference, evaluated: bool = False, windowed: Callable[[ir.Aggregate], bool] | None = None
) -> Failure | None:
    """Like `why_rerun`, with the node at fault (where a saved intermediate could help).

    `evaluated`: the rows below the traced group will be joined in-process (`infer.block`)
    rather than only cut, so any conditions and cycles among inner, semi, left and anti
    joins are exact too; so are scalar subqueries in filters every joined row passes (their
    own lineage is added whole, `infer.segments`), and aggregates below a global one (all
    their rows are its lineage), and aggregates `windowed` accepts (joined with their
    group's values beside each row). Other operators still are not."""
    if evaluated:
        def below(node: ir.Node) -> Failure | None:
            return _not_a_block(node, windowed or _never)
    else:
        below = _not_a_join_tree
    off = off_path(plan) if evaluated else set()
    joined = {id(n) for n in walk(block_root(plan))} if evaluated else set()
    for node in walk(plan):
        # a scalar's value is not known in-process: only a scan's reader (Spark) or the
        # operators above the traced group (which the traced row passed) may use one
        usable = isinstance(node, ir.Filter) and id(node) not in off and (id(node) not in joined or over_scan(node))
        if any(e.subqueries for e in node.expressions()) and (not evaluated or not usable):
            return f"{type(node).__name__} holds a subquery", node
    bound = {a.id for a in plan.output}
    node = plan
    while _passes_rows(node, (ir.Project, ir.Filter, ir.Limit)):
        assert isinstance(node, ir.Unary)
        if isinstance(node, ir.Limit):  # `lift_limits` kept it: the output does not tell its rows apart
            return "a LIMIT keeps rows its output does not tell apart from those it cuts", node
        if isinstance(node, ir.Project):
            bound = {c for c in (column_of(n.expr) for n in node.columns if n.attr.id in bound) if c is not None}
        node = node.child
    if isinstance(node, ir.Aggregate):  # filters above it drop whole groups
        unpinned = _unpinned_key(node, bound, inference)
        return (unpinned, node) if unpinned else below(under_global(node) if evaluated else node.child)
    pinned = {b.column for sp in inference.scans for b in sp.bindings if not b.padded}
    if evaluated:  # a column the joined rows carry is compared there (`infer.block`)
        pinned |= set(reaching(plan, (ir.Project, ir.Limit))[0].values())
    missing = [a for j, a in enumerate(plan.output) if j not in pinned]
    if missing:
        return f"output columns {[a.name for a in missing]} pin no source column", _producer(plan, missing[0].id)
    body = plan
    while _passes_rows(body, (ir.Project, ir.Limit)):  # no filters: one above a join would be lost
        assert isinstance(body, ir.Unary)
        body = body.child
    return below(body)


def block_root(plan: ir.Node) -> ir.Node:
    """The top of the operators below the traced group (those `infer.block` joins)."""
    _, node = reaching(plan, (ir.Project, ir.Filter, ir.Limit))
    if isinstance(node, ir.Aggregate):
        return under_global(node)
    return reaching(plan, (ir.Project, ir.Limit))[1]


def over_scan(node: ir.Filter) -> bool:
    below: ir.Node = node
    while isinstance(below, ir.Filter):
        below = below.child
    return isinstance(below, ir.Scan)


def reaching(plan: ir.Node, kinds: tuple[type[ir.Node], ...]) -> tuple[dict[int, int], ir.Node]:
    """The first node under a top of `kinds` (and sorts), and which of its columns are which
    output columns (attribute id → position), through renaming projections."""
    position = {a.id: j for j, a in enumerate(plan.output)}
    node = plan
    while _passes_rows(node, kinds):
        if isinstance(node, ir.Project):
            position = {c: position[n.attr.id] for n in node.columns if n.attr.id in position and (c := column_of(n.expr)) is not None}
        assert isinstance(node, ir.Unary)
        node = node.child
    return position, node


def _passes_rows(node: ir.Node, kinds: tuple[type[ir.Node], ...]) -> bool:
    return isinstance(node, kinds) or (isinstance(node, ir.Passthrough) and node.kind in _KEEP_ROWS)


def _unpinned_key(agg: ir.Aggregate, bound: set[int], inference: Inference) -> str | None:
    """Why some grouping key of `agg` is not fixed by the traced row, or None."""
    residuals = {id(b.expr) for sp in inference.scans for b in sp.bindings if b.expr is not None and not b.padded}
    for key in agg.keys:
        col = column_of(key)
        reached = [c for c in key_columns(agg, key) if c.attr.id in bound and (col is not None or id(c.expr) in residuals)]
        if not reached:
            text = key.sql if isinstance(key, ir.Expr) else str(key)
            return f"grouping key {text} does not reach the output"
    return None


def _not_a_join_tree(node: ir.Node) -> Failure | None:
    """Why the rows below the traced group are not a tree of single-equality joins over
    filtered scans, or None."""
    if isinstance(node, ir.Scan):
        return None
    if isinstance(node, ir.Filter):
        below = node.child
        while isinstance(below, ir.Filter):
            below = below.child
        return None if isinstance(below, ir.Scan) else ("a filter sits above a join or projection", node)
    if isinstance(node, ir.Project) or (isinstance(node, ir.Passthrough) and node.kind in _KEEP_ROWS):
        return _not_a_join_tree(node.child)
    if isinstance(node, ir.Join):
        if node.kind not in ("inner", "semi"):
            return f"{node.kind} join", node
        if node.theta or len(node.equi) != 1:
            return "a join condition other than one column equality", node
        (lid, rid), = node.equi
        if not origins(node.left, lid) or not origins(node.right, rid):
            return "a join key computed from more than one scan column", node
        return _not_a_join_tree(node.left) or _not_a_join_tree(node.right)
    return f"{type(node).__name__.lower()} below the traced group", node


def _never(agg: ir.Aggregate) -> bool:
    return False


def _not_a_block(node: ir.Node, windowed: Callable[[ir.Aggregate], bool]) -> Failure | None:
    """Why the rows below the traced group are not scans under filters, projections,
    aggregates and inner, cross, semi, left or anti joins (on any condition), or None."""
    if isinstance(node, ir.Scan):
        return None
    if isinstance(node, ir.Aggregate) and windowed(node):
        return _not_a_block(node.child, windowed)  # its groups stay whole: bindings pass only its keys
    if isinstance(node, ir.Filter | ir.Project) or (isinstance(node, ir.Passthrough) and node.kind in _KEEP_ROWS):
        return _not_a_block(node.child, windowed)
    if isinstance(node, ir.Join):
        if node.kind not in ("inner", "cross", "semi", "left", "anti"):
            return f"{node.kind} join", node
        return _not_a_block(node.left, windowed) or _not_a_block(node.right, windowed)
    return f"{type(node).__name__.lower()} below the traced group", node


def under_global(agg: ir.Aggregate) -> ir.Node:
    """The rows below an aggregate's input: below a global aggregate (one group of every
    row), aggregates and projections pass all their rows, so the rows under them are all
    lineage too (a `max` over a view that aggregates)."""
    node = agg.child
    if agg.keys:
        return node
    while isinstance(node, ir.Project | ir.Aggregate) or (isinstance(node, ir.Passthrough) and node.kind in _KEEP_ROWS):
        node = node.child
    return node


def off_path(plan: ir.Node) -> set[int]:
    """Nodes some joined rows do not pass: the right sides of left and anti joins (their
    scans are read whole where candidates are joined: every partner must be there)."""
    off: set[int] = set()
    for node in walk(plan):
        if isinstance(node, ir.Join) and node.kind in ("left", "anti"):
            off |= {id(n) for n in walk(node.right)}
    return off


def _producer(plan: ir.Node, attr: int) -> ir.Node:
    """The node that computes column `attr` (its output has it, its inputs do not): a save
    there or above makes the column a saved scan's."""
    for node in walk(plan):
        if any(a.id == attr for a in node.output) and not any(a.id == attr for c in node.children for a in c.output):
            return node
    return plan


def chooses(node: ir.Node) -> str | None:
    """The operator, in a user's words, if `node` keeps a row or computes a value that a
    second run may choose otherwise: an aggregate that picks a row of its group
    (`dropDuplicates` on some columns, `first`, `any_value`, `collect_list`, `max_by`, ...),
    a LIMIT over rows in no order, a window function over a partition in no order that
    tells its rows apart. None for the others."""
    if isinstance(node, ir.Aggregate):
        picked = [(c, choosing(c.expr)) for c in node.columns]
        names = [name for _, name in picked if name is not None]
        if not names:
            return None
        keys = {column_of(k) for k in node.keys}
        plain = {a.id: a.name for a in node.child.output}
        if names == ["first"] * len(names) and all(
            column_of(c.expr) in keys or (name == "first" and plain.get(next(iter(c.expr.refs), -1)) == c.attr.name)
            for c, name in picked
            if isinstance(c.expr, ir.Expr)
        ):
            kept = sorted(plain[k] for k in keys if k is not None and k in plain)
            return f"dropDuplicates({kept}), which keeps any one row of each group"
        return f"{names[0]}() in an aggregate, whose value depends on the order rows reach it"
    if isinstance(node, ir.Limit) and not _ordered(node.child) and not _alike(node.child):
        return "a LIMIT over rows in no order (no ORDER BY), which keeps any of them"
    if isinstance(node, ir.Window) and not node.order and not node.tie_free:
        return "a window function over a partition in no order (no ORDER BY), which tells its rows apart by chance"
    return None


def _alike(node: ir.Node) -> bool:
    """Whether every row reaching here is the same constant row, so keeping any of them
    keeps the same (an uncorrelated EXISTS is `SELECT 1 ... LIMIT 1`)."""
    while isinstance(node, ir.Limit):
        node = node.child
    return isinstance(node, ir.Project) and all(
        isinstance(c.expr, ir.Constant) or (isinstance(c.expr, ir.Expr) and not c.expr.refs and c.expr.deterministic and not c.expr.subqueries)
        for c in node.columns
    )


def _ordered(node: ir.Node) -> bool:
    """Whether rows reach here in an order of their values: a sort under limits, filters
    and projections."""
    while isinstance(node, ir.Limit | ir.Filter | ir.Project):
        node = node.child
    return isinstance(node, ir.Passthrough) and node.kind == "sort"


def check_choices(plan: ir.Node) -> frozenset[int]:
    """Refuses (`UnsupportedOperatorError`, before any job) a plan whose exact traces an
    operator that chooses rows by chance would make wrong (`choices`); else the output
    positions whose values were chosen (a re-run's rows are matched without them)."""
    refused, chosen = choices(plan)
    if refused is not None:
        raise UnsupportedOperatorError(
            f"ember.infer cannot trace {refused} exactly: a trace re-runs the job, which may choose other rows; "
            "use ember.capture (it records the rows this run chose), or ember.infer(df, exact=False) for a superset"
        )
    return chosen


def choices(plan: ir.Node) -> tuple[str | None, frozenset[int]]:
    """Whether exact traces of `plan` can be answered although some operator chooses rows
    by chance (`chooses`): (the refused operator, or None; the output positions whose values
    are such a choice). A trace may re-run the job, which chooses anew, so only the top
    group may choose values (`first(x)` per group, its grouping keys all in the output): a
    re-run's rows are then matched on the other columns, and its group's lineage is every
    row of it whatever was chosen. Anything else that chooses is refused."""
    position, top = reaching(plan, (ir.Project, ir.Filter, ir.Limit))
    for node in ir.walk_all(plan):
        refused = chooses(node)
        if refused is not None and node is not top:
            return refused, frozenset()
    refused = chooses(top)
    if refused is None:
        return None, frozenset()
    if not isinstance(top, ir.Aggregate):  # a LIMIT or a window: it chooses which rows, or values the output does not tell
        return refused, frozenset()
    if not all(any(c.attr.id in position for c in key_columns(top, k)) for k in top.keys):
        return f"{refused} (its grouping keys do not all reach the output)", frozenset()
    chosen = {c.attr.id for c in top.columns if choosing(c.expr) is not None}
    why, ids = _chosen_above(plan, top, chosen)
    if why is not None:
        return f"{refused}, {why}", frozenset()
    return None, frozenset(j for j, a in enumerate(plan.output) if a.id in ids)


def _chosen_above(node: ir.Node, top: ir.Node, chosen: set[int]) -> tuple[str | None, set[int]]:
    """The columns of `node` computed from the `chosen` columns of `top` below it, through
    the projections, filters, sorts and limits between them; or why the choice would decide
    which rows there are (a filter or a limit above it)."""
    if node is top:
        return None, chosen
    assert isinstance(node, ir.Unary)
    why, ids = _chosen_above(node.child, top, chosen)
    if why is not None:
        return why, ids
    if isinstance(node, ir.Project):
        return None, {c.attr.id for c in node.columns if _reads(c.expr) & ids}
    if isinstance(node, ir.Filter) and node.cond.refs & ids:
        return "tested by a filter above it", ids
    if isinstance(node, ir.Limit):
        return "under a LIMIT", ids
    return None, ids


def _reads(e: ir.AnyExpr) -> set[int]:
    if isinstance(e, ir.ColumnRef):
        return {e.attr.id}
    return set(e.refs) if isinstance(e, ir.Expr) else set()
