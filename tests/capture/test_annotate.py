"""The capture rewrite is a pure function over the IR: checked here without Spark."""

from __future__ import annotations

from ember.capture.annotate import annotate
from ember.plan import ir
from ember.plan.slots import ListSlot, RefSlot, RidSlot
from ember.plan.sources import Source

A = ir.Attr(1, "a", "int")
B = ir.Attr(2, "b", "int")
C = ir.Attr(3, "c", "int")
D = ir.Attr(4, "d", "int")


def scan(key: str, *attrs: ir.Attr) -> ir.Scan:
    return ir.Scan(Source(key, key, "memory", 3), attrs)


def ref(a: ir.Attr) -> ir.Expr:
    return ir.Expr(a.name, frozenset({a.id}), dtype=a.dtype)


def test_scan_gets_one_rid_slot_and_keeps_its_columns_first() -> None:
    out = annotate(scan("t", A, B))
    assert [type(s) for s in out.slots] == [RidSlot]
    assert out.plan.output[:2] == (A, B)
    assert out.tables == ()


def group_by_a(child: ir.Node) -> ir.Aggregate:
    return ir.Aggregate(child, keys=(ref(A),), columns=(ir.Named(ref(A), A),))


def test_aggregate_keeps_lineage_normalized_in_a_side_table() -> None:
    agg = group_by_a(scan("t", A, B))
    joined = ir.Join("inner", agg, scan("u", C), ir.Expr("a = c", frozenset({A.id, C.id})))
    out = annotate(joined)
    ref_slot, rid = out.slots
    assert isinstance(ref_slot, RefSlot) and ref_slot.table == 0 and len(ref_slot.keys) == 1
    assert isinstance(rid, RidSlot) and rid.source == "u"
    (table,) = out.tables
    assert [type(s) for s in table.slots] == [RidSlot] and not table.inline
    assert out.plan.output[0] == A


def test_aggregate_reaching_the_result_carries_its_groups_in_a_list() -> None:
    top = ir.Limit(ir.Filter(group_by_a(scan("t", A, B)), cond=ref(A)))
    out = annotate(top)
    (slot,) = out.slots
    assert isinstance(slot, ListSlot) and slot.attr in out.plan.output
    (table,) = out.tables
    assert table.inline and [type(s) for s in table.slots] == [RidSlot]
    assert not any(isinstance(n, ir.Shared) for n in ir.walk(out.plan))  # nothing cached: no second job


def test_an_aggregate_under_a_listed_aggregate_is_listed_inside_its_lists() -> None:
    nested = annotate(ir.Aggregate(group_by_a(scan("t", A, B)), keys=(), columns=(ir.Named(ref(A), A),)))
    inner, outer = nested.tables
    assert inner.inline and outer.inline
    (holder,) = outer.slots
    assert isinstance(holder, ListSlot) and holder.table == inner.id


def test_lists_stop_where_a_row_could_be_copied_or_the_groups_are_too_big() -> None:
    cond = ir.Expr("a = c", frozenset({A.id, C.id}))
    under_join = ir.Join("inner", group_by_a(scan("t", A, B)), scan("u", C), cond)
    copied = annotate(ir.Aggregate(under_join, keys=(), columns=(ir.Named(ref(A), A),)))
    assert [t.inline for t in copied.tables] == [False, True]  # a group row meets many u rows
    big = annotate(group_by_a(scan("t", A, B)), inline_rids=2)  # the scan holds 3 rows
    assert isinstance(big.slots[0], RefSlot) and not big.tables[0].inline


def distinct_count_by_a() -> ir.Aggregate:
    distinct = ir.Expr("count(distinct b#2)", frozenset({B.id}), dtype="bigint")
    return ir.Aggregate(scan("t", A, B), keys=(ref(A),), columns=(ir.Named(ref(A), A), ir.Named(distinct, C)))


def test_groups_a_limit_or_a_distinct_count_would_list_are_read_after_the_job() -> None:
    readable: list[ir.Node] = []

    def local(child: ir.Node) -> bool:
        readable.append(child)
        return True

    counted = distinct_count_by_a()
    limited = ir.Limit(group_by_a(scan("t", A, B)), kind="GlobalLimit")
    having = ir.Filter(group_by_a(scan("t", A, B)), cond=ref(A))
    for plan in (counted, limited, having):
        out = annotate(plan, local=local)
        (slot,) = out.slots
        assert isinstance(slot, RefSlot) and [(t.inline, t.local) for t in out.tables] == [(False, True)]
    assert len(readable) == 3  # asked of each aggregate's input
    for plan in (ir.Limit(group_by_a(scan("t", A, B)), kind="Offset"), group_by_a(scan("t", A, B))):
        assert annotate(plan, local=local).tables[0].inline  # nothing cut: lists cost less
    assert annotate(counted).tables[0].inline  # nothing DuckDB can read
    assert annotate(counted, local=lambda _: False).tables[0].inline


def test_groups_read_after_the_job_are_read_whole_where_every_group_reaches_the_result() -> None:
    counted = distinct_count_by_a()
    nested = group_by_a(group_by_a(scan("t", A, B)))
    dropping = group_by_a(ir.Filter(group_by_a(scan("t", A, B)), cond=ref(A)))
    whole = {
        "distinct count": (counted, True),
        "sorted": (ir.Passthrough(counted, kind="sort"), True),
        "under a listing aggregate": (nested, True),
        "under a limit": (ir.Limit(group_by_a(scan("t", A, B)), kind="GlobalLimit"), False),
        "under a filter, under a listing aggregate": (dropping, False),
        "sampled": (ir.Passthrough(counted, kind="sample"), False),
        "under a UDTF, which may drop rows": (ir.Passthrough(counted, kind="python udtf"), False),
    }
    for why, (plan, expected) in whole.items():
        read_after = [t for t in annotate(plan, local=lambda _: True).tables if t.local and t.keys]
        assert [t.whole for t in read_after] == [expected], why


def test_the_groups_of_joins_that_all_reach_the_result_are_read_beside_the_job() -> None:
    once = ir.Join("inner", scan("t", A, B), scan("u", C), ir.Expr("a = c", frozenset({A.id, C.id})))
    joined = ir.Join("inner", once, scan("v", D), ir.Expr("b = d", frozenset({B.id, D.id})))
    out = annotate(ir.Passthrough(group_by_a(joined), kind="sort"), local=lambda _: True)
    (slot,) = out.slots
    (table,) = out.tables
    assert isinstance(slot, RefSlot) and table.local and table.whole and not table.inline
    assert not any(isinstance(n, ir.Numbered) for n in ir.walk(out.plan))  # the job reads no rids
    semi = ir.Join("semi", once, scan("v", D), ir.Expr("b = d", frozenset({B.id, D.id})))
    # One scan's rids, or one join's; the semi join's left side's; or lists nest the inner's.
    for listed in (scan("t", A, B), once, semi, group_by_a(joined)):
        out = annotate(group_by_a(listed), local=lambda _: True)
        assert out.tables[-1].inline and isinstance(out.slots[0], ListSlot)
    sampled = annotate(ir.Passthrough(group_by_a(joined), kind="sample"), local=lambda _: True)
    assert [(t.inline, t.local) for t in sampled.tables] == [(True, False)]  # not every group reaches it
    unreadable = annotate(group_by_a(joined), local=lambda _: False)
    assert [(t.inline, t.local) for t in unreadable.tables] == [(True, False)]
    big = annotate(group_by_a(joined), local=lambda _: True, inline_rids=5)  # 9 rows: too many to take
    assert [(t.inline, t.local) for t in big.tables] == [(False, False)]


def test_one_joins_groups_are_read_whole_only_where_traces_would_read_them() -> None:
    """Over one join, lists carry less than DuckDB reads beside the job; past `at_trace`
    scanned rows the table is left to traces and the job carries nothing."""
    once = ir.Join("inner", scan("t", A, B), scan("u", C), ir.Expr("a = c", frozenset({A.id, C.id})))
    for at_trace, read in ((None, False), (6, False), (5, True), (0, True)):  # the join scans 3 + 3 rows
        out = annotate(group_by_a(once), local=lambda _: True, at_trace=at_trace)
        (table,) = out.tables
        assert (table.local, table.whole, table.inline) == (read, read, not read), at_trace
        assert any(isinstance(n, ir.Numbered) for n in ir.walk(out.plan)) is not read, at_trace
    alone = annotate(group_by_a(scan("t", A, B)), local=lambda _: True, at_trace=0)  # one scan: one column more
    assert [(t.inline, t.local) for t in alone.tables] == [(True, False)]
    sampled = annotate(ir.Passthrough(group_by_a(once), kind="sample"), local=lambda _: True, at_trace=0)
    assert [(t.inline, t.local) for t in sampled.tables] == [(True, False)]  # not every group reaches it


def test_union_of_aggregates_gives_each_its_own_list() -> None:
    union = ir.Union((group_by_a(scan("l", A)), group_by_a(scan("r", A))), (A,))
    out = annotate(union)
    first, second = out.slots
    assert isinstance(first, ListSlot) and isinstance(second, ListSlot) and first.attr != second.attr
    assert [t.inline for t in out.tables] == [True, True]


def test_anti_join_passes_only_the_outer_rows_lineage() -> None:
    join = ir.Join("anti", scan("l", A), scan("r", B), ref(B))
    out = annotate(join)
    assert [s.source for s in out.slots if isinstance(s, RidSlot)] == ["l"]


def test_semi_join_refers_to_witnesses_keyed_by_the_probe_columns() -> None:
    cond = ir.Expr("a = b", frozenset({A.id, B.id}))
    out = annotate(ir.Join("semi", scan("l", A), scan("r", B), cond))
    rid, witness = out.slots
    assert isinstance(rid, RidSlot) and isinstance(witness, RefSlot)
    assert len(witness.keys) == 1 and out.tables[0].why == "semi join witnesses"


def test_union_pads_each_side_with_nulls_for_the_other_sides_slots() -> None:
    union = ir.Union((scan("l", A), scan("r", B)), (A,))
    out = annotate(union)
    assert [s.source for s in out.slots if isinstance(s, RidSlot)] == ["l", "r"]
    assert isinstance(out.plan, ir.Union)
    for side in out.plan.inputs:
        assert len(side.output) == 3


def test_scalar_subquery_lineage_is_a_keyless_reference() -> None:
    sub = ir.Aggregate(scan("s", C), keys=(), columns=(ir.Named(ref(C), C),))
    cond = ir.Expr("a > scalar-subquery", frozenset({A.id}), subqueries=(sub,))
    out = annotate(ir.Filter(scan("t", A), cond=cond))
    keyless = [s for s in out.slots if isinstance(s, RefSlot) and not s.keys]
    assert len(keyless) == 1
    subquery = out.tables[keyless[0].table]
    assert subquery.why == "scalar subquery" and not subquery.inline  # reached by reference
    (groups,) = subquery.slots  # its aggregate's rows ride in the subquery's own result
    assert isinstance(groups, ListSlot) and out.tables[groups.table].inline


def test_a_scalar_subquery_over_a_global_aggregate_read_after_points_at_its_groups() -> None:
    sub = ir.Project(ir.Aggregate(scan("s", C), keys=(), columns=(ir.Named(ref(C), C),)), columns=(ir.Named(ref(C), C),))
    cond = ir.Expr("a > scalar-subquery", frozenset({A.id}), subqueries=(sub,))
    out = annotate(ir.Filter(scan("t", A), cond=cond), local=lambda _: True)
    (groups,) = out.tables  # no table of the subquery's one row
    assert groups.local and not groups.keys and groups.why == "aggregate groups"
    assert [s.table for s in out.slots if isinstance(s, RefSlot)] == [groups.id]


def grouped_map(*inputs: tuple[ir.Node, ir.Attr]) -> ir.GroupMap:
    return ir.GroupMap(
        tuple(n for n, _ in inputs), keys=tuple((k,) for _, k in inputs), function=ref(A), attrs=(ir.Attr(9, "out", "int"),)
    )


def test_a_grouped_map_refers_to_each_inputs_groups_by_the_keys_its_function_hands_back() -> None:
    t, u = scan("t", A, B), scan("u", C, D)
    out = annotate(ir.Limit(grouped_map((t, A), (u, C)), kind="GlobalLimit"))
    left, right = out.slots
    assert isinstance(left, RefSlot) and isinstance(right, RefSlot)
    assert [t.why for t in out.tables] == ["grouped map groups"] * 2 and (left.table, right.table) == (0, 1)
    assert not set(left.attrs) & set(right.attrs)  # each ref its own columns, the same key values
    (job,) = [n for n in ir.walk(out.plan) if isinstance(n, ir.GroupMap)]
    assert job.attrs[0].name == "out" and job.attrs[1:] == left.keys  # the wrapped function's key column
    assert [c.output for c in job.inputs] == [(A, B), (C, D)]  # the function sees its inputs' own columns
    assert [[type(s) for s in table.slots] for table in out.tables] == [[RidSlot], [RidSlot]]


def test_a_grouped_maps_groups_are_read_after_the_job_where_duckdb_can() -> None:
    t = scan("t", A, B)
    assert [tb.local for tb in annotate(grouped_map((t, A)), local=lambda _: True).tables] == [True]
    assert [tb.local for tb in annotate(grouped_map((t, A))).tables] == [False]
    cut = ir.Limit(t, kind="GlobalLimit")  # another run could keep other rows: the job's are cached
    out = annotate(grouped_map((cut, A)), local=lambda _: True)
    assert [tb.local for tb in out.tables] == [False] and isinstance(out.tables[0].plan.children[0], ir.Shared)


def test_a_partition_map_refers_to_its_partitions_by_the_number_its_function_hands_back() -> None:
    t = scan("t", A, B)
    mapped = ir.PartitionMap((t,), keys=((),), function=ref(A), attrs=(ir.Attr(9, "out", "int"),))
    for reported in (True, False):
        out = annotate(mapped, local=lambda _: True, reported=reported)
        (slot,) = out.slots
        (table,) = out.tables
        assert isinstance(slot, RefSlot) and table.why == "partition map partitions" and not table.local
        assert table.reported == reported
        (job,) = [n for n in ir.walk(out.plan) if isinstance(n, ir.PartitionMap)]
        assert job.attrs[0].name == "out" and job.attrs[1:] == slot.keys  # the wrapped function's number column
        (given,) = job.inputs
        assert given.output[:2] == (A, B)  # the input's own columns first
        if reported:  # then its rids, which the function reports itself: no cache, no second job
            assert job.reports == table.id and given.output[2:] == tuple(a for s in table.slots for a in s.attrs)
            assert not any(isinstance(n, ir.Shared) for n in ir.walk(out.plan))
        else:  # then its partition's number; the job and the side table read one cached input
            assert job.reports is None and isinstance(given, ir.Project)
            assert isinstance(given.columns[-1].expr, ir.PartitionId)
            assert isinstance(given.child, ir.Shared) and table.plan.children == (given.child,)


def ranked(child: ir.Node, tie_free: bool, out: ir.Attr) -> ir.Window:
    """A window numbering rows per `a` by `b`: a rank (tie-free) or a row number."""
    frame = ir.Frame("rows", "unbounded", "current", whole=True, tie_free=tie_free)
    fn = ir.Expr("rank()" if tie_free else "row_number()", frozenset({B.id}), dtype="int")
    return ir.Window(child, columns=(ir.Named(fn, out),), frames=(frame,), partition=(ref(A),), order=(ref(B),))


def test_a_window_over_windows_whose_values_ties_do_not_change_is_not_cached() -> None:
    """A whole-partition window's table reads its partitions again after the job unless a
    second run could give other values: a row number below it can (it is cached, the
    table reads the cache), a rank cannot (an average over ranks, cached, would keep the
    job from sharing the ranks' shuffle with other reads of them)."""
    whole = ir.Frame("rows", "unbounded", "unbounded", tie_free=True)
    for tie_free in (True, False):
        below = ranked(scan("t", A, B), tie_free, C)
        top = ir.Window(below, columns=(ir.Named(ir.Expr("sum(c)", frozenset({C.id}), dtype="bigint"), D),),
                        frames=(whole,), partition=(ref(A),))  # fmt: skip
        assert ir.repeatable(below) is tie_free
        out = annotate(top)
        assert any(isinstance(n, ir.Shared) for n in ir.walk(out.plan)) is not tie_free
        assert [t.why for t in out.tables] == ["window partitions"] * 2
