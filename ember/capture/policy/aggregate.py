"""Where an aggregate's groups go: lists in the result, or a side table Spark or DuckDB reads.

A side table is a job of its own, unless it can ride in the job's result: an aggregate
whose rows reach the result one for one carries each group's input rows as a list
column, so the result is already the side table grouped by output row. An aggregate
below such a one (and below only such operators) lists its groups too, nested in the
outer lists; so does one in a scalar subquery, whose rows are its table's. Below a join
a list would be copied into every row the output row meets, so there the side table
stays separate; so does a group list too large for the driver (`bounds`), and one a
pandas UDAF computes (Spark runs no other aggregate function beside it).

Lists cost more than reading the groups afterwards where Spark builds them for nothing
or the hard way (lists make Spark aggregate with its slower object-based operator): a
global aggregate gathers all its input in one list on one task; a LIMIT or a HAVING
above drops groups whose lists were built all the same; a count(DISTINCT) repeats the
list over its aggregation stages; an aggregate under a listing one nests its lists in
the outer ones; a scalar subquery's list has Spark compute its table as a job of its
own; and an aggregate over joins whose groups all reach the result makes every joined
scan carry its rid through the joins' shuffles. There, where DuckDB can read the input,
its groups become a side table DuckDB reads after the job (the groups that reach the
result), or beside the job, whole, where every group reaches it. Every group also
reaches it, though not one for one, through operators that drop no row: a full join's
sides, a left join's kept side, a union, the input of a table read whole.
"""

from __future__ import annotations

from ember.capture.policy.base import Kind, Placement, Setting, Site
from ember.capture.policy.bounds import bounded, input_rows
from ember.capture.policy.reach import Reach
from ember.capture.rollup import rollup
from ember.plan import ir


def place_aggregate(
    node: ir.Aggregate, site: Site, reach: Reach, setting: Setting, limited: frozenset[int], compact: bool = False
) -> Placement:
    """Where the groups of the aggregate `node` go, reached as `reach` says; `limited`:
    id() of the aggregates under a LIMIT or a HAVING (`reach.limited`); `compact`:
    whether a rollup's groups are indexed from its expand's input (`compact`).

    >>> from ember.capture.policy.examples import everything, group_by, scan
    >>> from ember.capture.policy.reach import limited
    >>> g = group_by(scan("t", "a"), "a")
    >>> place_aggregate(g, (), Reach(), Setting(), frozenset()).kind
    'list'
    >>> place_aggregate(g, (), Reach(), Setting(inline_rids=2), frozenset()).kind  # 3 rows: too many
    'spark'
    >>> under_limit = Reach(every_row=False)  # a LIMIT above drops some rows
    >>> place_aggregate(g, (), under_limit, Setting(local=everything), frozenset({id(g)})).kind
    'duck_after'
    >>> under_full_join = Reach(one_for_one=False)  # every group reaches the result, not one for one
    >>> place_aggregate(g, (), under_full_join, Setting(local=everything), frozenset()).kind
    'duck_beside'
    """
    why = _costly(node, reach, setting, limited) if reach.one_for_one else None
    # Every group reaches the result, though not one for one (below a full join, or in the
    # input of a table read whole): DuckDB reads them all, beside the job.
    reached = not reach.one_for_one and reach.every_row and setting.reads_again(node.child)
    after = reached or (
        why is not None and setting.local is not None and not setting.restricted(node.child) and setting.local(node.child)
    )
    kind: Kind
    if after:
        if not reach.every_row:
            kind, why = "duck_after", f"{why}: DuckDB reads the groups the result keeps after the job"
        else:
            if reached:
                why = "every group reaches the result, not one for one: DuckDB reads them whole beside the job"
            else:
                why = f"{why}; every group reaches the result: DuckDB reads them whole beside the job"
            kind = "duck_beside"
            if at_trace(node, setting, compact):
                kind, why = "at_trace", f"{why}, or the traces that reach them: its input scans past at_trace rows"
        return Placement(site, kind, why)
    if not reach.one_for_one:
        return Placement(site, "spark", "its rows do not reach the result one for one: a list would be copied")
    if not bounded(node.child, setting.inline_rids):
        return Placement(site, "spark", "its input has more rows than may come back through the driver")
    if node.python:
        return Placement(site, "spark", "a pandas UDAF runs no other aggregate function (a list) beside it")
    return Placement(site, "list", "its rows reach the result one for one: each carries its group's rows as a list")


def _costly(node: ir.Aggregate, reach: Reach, setting: Setting, limited: frozenset[int]) -> str | None:
    """Why listing the aggregate's groups would cost more than reading them afterwards
    (None: it would not)."""
    # Read from the expression's text: a cost guess only, either way the lineage is the same.
    distinct = any("(distinct " in c.expr.sql.lower() for c in node.columns if isinstance(c.expr, ir.Expr))
    if not node.keys:
        return "a global aggregate would gather its whole input in one list, on one task"
    if id(node) in limited:
        return "a LIMIT or a HAVING above drops groups whose lists would be built for nothing"
    if distinct:
        return "a count(DISTINCT) would build its lists over each of its aggregation stages"
    if reach.listed:
        return "its lists would nest in the lists of the aggregate above"
    if reach.subquery:
        return "a scalar subquery's lists would have Spark compute its table as a job of its own"
    if joined_whole(node, reach, setting):
        return "over joins whose groups all reach the result, lists would carry every joined scan's rid through the shuffles"
    return None


def joined_whole(node: ir.Aggregate, reach: Reach, setting: Setting) -> bool:
    """Whether every group of an aggregate over joins of three or more scans reaches the
    result, and the driver could take them all: then DuckDB reads them beside the job.
    Listed, they make every joined scan read each row's position and carry it through
    every shuffle of the joins; DuckDB reads the same joins in-process, on the cycles
    Spark leaves idle between its stages.

    Fewer scans keep their lists: over one scan they add one column to it, which DuckDB
    would read all over again; over one join, one rid (or a join key naming the row)
    rides through one shuffle, less work than DuckDB reading both sides whole on the
    job's cores, unless the join scans more than `at_trace` rows, where the table is left
    to the traces that reach it (`store.later`) and nothing is read or carried at
    capture. So does an aggregate whose only join is a semi join (its witnesses are a
    table of their own, the lists hold the left side's rids alone), and one over another
    aggregate, whose groups its lists nest.

    >>> from ember.capture.policy.examples import group_by, join, scan
    >>> once = join(scan("t", "a", "b"), scan("u", "c"), "a", "c")
    >>> twice = join(once, scan("v", "d"), "b", "d")
    >>> joined_whole(group_by(twice, "a"), Reach(), Setting()), joined_whole(group_by(once, "a"), Reach(), Setting())
    (True, False)
    >>> joined_whole(group_by(once, "a"), Reach(), Setting(at_trace=5))  # it scans 6 rows
    True
    """
    grouped = any(isinstance(n, ir.Aggregate) for n in ir.walk(node.child))
    scans = listing_scans(node.child)
    traced = setting.at_trace is not None and input_rows(node.child) > setting.at_trace
    joins = scans > 2 or (scans == 2 and traced)
    return reach.every_row and joins and not grouped and bounded(node.child, setting.inline_rids)


def at_trace(node: ir.Aggregate, setting: Setting, compact: bool = False) -> bool:
    """Whether groups DuckDB reads whole beside the job may rather be read by the traces
    that reach them (`store.later`): a keyed table the driver can take whose input scans
    more than `at_trace` rows. At run time `sides.read_at_trace` leaves it so where its
    rows turn out to hold rids only and DuckDB reads them (a rollup's table, indexed from
    its expand's input, is never left so: `compact`).

    >>> from ember.capture.policy.examples import group_by, scan
    >>> past_two = Setting(at_trace=2)  # the scan holds 3 rows
    >>> at_trace(group_by(scan("t", "a"), "a"), past_two), at_trace(group_by(scan("t", "a")), past_two)
    (True, False)
    """
    return (
        setting.at_trace is not None
        and not (compact and rollup(node) is not None)
        and bool(node.keys)
        and bounded(node.child, setting.inline_rids)
        and input_rows(node.child) > setting.at_trace
    )


def listing_scans(plan: ir.Node) -> int:
    """The scans whose rids an aggregate over `plan` would list: not those under a semi or
    anti join's right side, whose rows are witnesses in a table of their own.

    >>> from ember.capture.policy.examples import join, scan
    >>> t, u = scan("t", "a"), scan("u", "c")
    >>> listing_scans(join(t, u, "a", "c")), listing_scans(join(t, u, "a", "c", kind="semi"))
    (2, 1)
    """
    if isinstance(plan, ir.Scan):
        return 1
    if isinstance(plan, ir.Join) and plan.kind in ("semi", "anti"):
        return listing_scans(plan.left)
    return sum(listing_scans(c) for c in plan.children)


def compact(plan: ir.Node, setting: Setting) -> bool:
    """Whether a rollup's groups may be indexed from its expand's input (`capture.rollup`):
    where every table comes back through the driver, where `store.index` resolves refs to
    a grouping set's leading keys (the executors index a table as it is)."""
    return bounded(plan, setting.inline_rids)
