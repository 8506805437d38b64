"""The placement policy (`capture.policy`): pure decisions over tiny IR plans, no Spark."""

from __future__ import annotations

import pytest

from ember.capture.annotate import annotate
from ember.capture.policy import Placement, Setting, computed_again, place
from ember.capture.policy.aggregate import at_trace, joined_whole, listing_scans, place_aggregate
from ember.capture.policy.examples import (
    attr,
    everything,
    group_by,
    having,
    join,
    limit,
    ref,
    scan,
    sort,
)
from ember.capture.policy.grouped import may_report, place_inputs
from ember.capture.policy.reach import Reach, keeps_every_row, limited
from ember.plan import ir
from ember.plan.workload import Workload


def kinds(plan: ir.Node, **setting: object) -> dict[tuple[int, ...], str]:
    return {site: p.kind for site, p in place(plan, Setting(**setting)).aggregates.items()}  # type: ignore[arg-type]


def nothing(_: ir.Node) -> bool:
    return False


T = scan("t", "a", "b")
ONCE = join(scan("t", "a", "b"), scan("u", "c"), "a", "c")
TWICE = join(ONCE, scan("v", "d"), "b", "d")


def test_groups_reaching_the_result_one_for_one_are_listed() -> None:
    assert kinds(group_by(T, "a")) == {(): "list"}
    assert kinds(sort(group_by(T, "a"))) == {(0,): "list"}
    nested = group_by(group_by(T, "a", "b"), "a")
    assert kinds(nested) == {(): "list", (0,): "list"}  # nested in the outer lists: DuckDB reads nothing


@pytest.mark.parametrize(
    ("plan", "setting", "why"),
    [
        (join(group_by(T, "a"), scan("u", "c"), "a", "c"), {}, "one for one"),
        (group_by(T, "a"), {"inline_rids": 2}, "driver"),
        (group_by(T, "a"), {"inline_rids": 0}, "driver"),
    ],
    ids=["under a join", "too many rows", "nothing through the driver"],
)
def test_groups_a_list_cannot_carry_are_a_side_table_spark_computes(plan: ir.Node, setting: dict, why: str) -> None:
    (placed,) = place(plan, Setting(**setting)).aggregates.values()
    assert placed.kind == "spark" and why in placed.why


def test_a_pandas_udaf_lists_nothing() -> None:
    udaf = ir.Aggregate(T, keys=(ref("a"),), columns=(ir.Named(ref("a"), attr("a")),), python=True)
    assert kinds(udaf) == {(): "spark"}


@pytest.mark.parametrize(
    ("plan", "site", "kind", "why"),
    [
        (limit(group_by(T, "a")), (0,), "duck_after", "LIMIT"),
        (having(group_by(T, "a")), (0,), "duck_after", "HAVING"),
        (group_by(T, "a", distinct=True), (), "duck_beside", "DISTINCT"),
        (group_by(T), (), "duck_beside", "global"),
        (group_by(TWICE, "a"), (), "duck_beside", "joins"),
        (group_by(group_by(T, "a", "b"), "a"), (0,), "duck_beside", "nest"),
        (ir.Limit(group_by(T, "a"), kind="Offset"), (0,), "list", "one for one"),  # an offset keeps its groups
    ],
    ids=["limit", "having", "distinct count", "global", "joins", "nested", "offset"],
)
def test_groups_costly_to_list_are_read_by_duckdb(plan: ir.Node, site: tuple[int, ...], kind: str, why: str) -> None:
    placed = place(plan, Setting(local=everything)).aggregates[site]
    assert (placed.kind, placed.site) == (kind, site) and why in placed.why
    assert place(plan, Setting(local=nothing)).aggregates[site].kind == "list"  # DuckDB cannot read it
    assert place(plan, Setting()).aggregates[site].kind == "list"


def test_duckdb_reads_no_input_a_workload_where_cuts() -> None:
    assert kinds(group_by(T, distinct=True), local=everything, workload=Workload(where={"t": "a > 1"})) == {(): "list"}


def test_groups_that_all_reach_the_result_not_one_for_one_are_read_whole_beside_the_job() -> None:
    full = ir.Join("full", group_by(T, "a"), scan("u", "c"), ir.Expr("a = c", frozenset({attr("a").id, attr("c").id})))
    assert kinds(full, local=everything) == {(0,): "duck_beside"}
    inner = ir.Join("inner", group_by(T, "a"), scan("u", "c"), full.cond)
    assert kinds(inner, local=everything) == {(0,): "spark"}  # the join may drop groups


def test_a_scalar_subquerys_aggregate_is_read_by_duckdb() -> None:
    sub = group_by(scan("s", "c"), "c")
    plan = ir.Filter(T, cond=ir.Expr("a > scalar-subquery", frozenset({attr("a").id}), subqueries=(sub,)))
    (placed,) = place(plan, Setting(local=everything)).aggregates.values()
    assert placed.site == (~0,) and placed.kind == "duck_after" and "scalar subquery" in placed.why
    assert kinds(plan) == {(~0,): "list"}


def test_no_placement_for_an_aggregate_whose_rows_carry_no_lineage() -> None:
    domain = ir.Aggregate(group_by(T, "a"), keys=(ref("a"),), columns=(ir.Named(ref("a"), attr("a")),), domain=True)
    assert kinds(domain) == {}  # nor for the aggregates below it


def test_groups_past_at_trace_scanned_rows_are_left_to_traces() -> None:
    assert kinds(group_by(ONCE, "a"), local=everything) == {(): "list"}  # one join: one rid through one shuffle
    assert kinds(group_by(ONCE, "a"), local=everything, at_trace=6) == {(): "list"}  # it scans 3 + 3 rows
    assert kinds(group_by(ONCE, "a"), local=everything, at_trace=5) == {(): "at_trace"}
    assert kinds(group_by(TWICE, "a"), local=everything, at_trace=9) == {(): "duck_beside"}
    assert kinds(group_by(TWICE, "a"), local=everything, at_trace=8) == {(): "at_trace"}
    assert not at_trace(group_by(TWICE), Setting(at_trace=0))  # a global aggregate's table has no keys
    assert not at_trace(group_by(TWICE, "a"), Setting(at_trace=0, inline_rids=8))  # past the driver's bound


def test_joined_whole_counts_the_scans_lists_would_carry() -> None:
    semi = join(ONCE, scan("v", "d"), "b", "d", kind="semi")
    assert listing_scans(TWICE) == 3 and listing_scans(semi) == 2  # a semi join's witnesses are a table of their own
    assert joined_whole(group_by(TWICE, "a"), Reach(), Setting())
    assert not joined_whole(group_by(TWICE, "a"), Reach(every_row=False), Setting())
    assert not joined_whole(group_by(group_by(TWICE, "a", "b"), "a"), Reach(), Setting())  # lists nest the inner's
    assert not joined_whole(group_by(TWICE, "a"), Reach(), Setting(inline_rids=8))  # the driver could not take them


def test_the_placement_says_why() -> None:
    placed = place_aggregate(group_by(T, "a"), (1,), Reach(), Setting(), frozenset())
    assert placed == Placement((1,), "list", placed.why) and "list" in placed.why
    assert placed.listed and not placed.read_after and not placed.whole


def test_reach_follows_the_operators_above() -> None:
    assert keeps_every_row(sort(T)) and not keeps_every_row(having(T)) and not keeps_every_row(ir.Passthrough(T, kind="sample"))
    g = group_by(T, "a")
    assert limited(sort(limit(sort(g)))) == {id(g)} and limited(join(limit(g), T, "a", "a")) == set()
    assert Reach().below(ONCE) == Reach(one_for_one=False, every_row=False)
    assert Reach(listed=True).in_subquery() == Reach(every_row=False, listed=True, subquery=True)


def test_a_join_names_by_key_the_scans_whose_equated_column_is_unique() -> None:
    orders, customers = scan("o", "ok", "ck", kind="parquet"), scan("c", "ck2", kind="parquet")
    lines = scan("l", "ok2", kind="parquet")
    top = join(join(lines, orders, "ok2", "ok"), customers, "ck", "ck2")
    unique = frozenset({("o", "ok"), ("c", "ck2"), ("o", "ck")})
    placed = place(top, Setting(keyed=unique))
    # The top join claims first: orders by its custkey there (unique here), customers by theirs.
    assert {site: [(k.scan.source.name, k.column) for k in ks] for site, ks in placed.keyed.items()} == {
        (): [("o", "ck"), ("c", "ck2")],
    }
    assert placed.unnamed == {id(orders), id(customers)}
    assert place(top, Setting()).keyed == {}  # nothing known unique
    where = Workload(where={"o": "ok > 1", "c": "ck2 > 1"})  # their rids must be null outside the predicate
    assert place(top, Setting(keyed=unique, workload=where)).keyed == {}


def test_no_key_names_a_row_inside_an_input_duckdb_reads() -> None:
    orders, customers = scan("o", "ck", kind="parquet"), scan("c", "ck2", kind="parquet")
    plan = group_by(join(orders, customers, "ck", "ck2"), distinct=True)
    unique = frozenset({("c", "ck2")})
    assert place(plan, Setting(keyed=unique)).keyed  # listed: the key rides instead of the rid
    assert not place(plan, Setting(keyed=unique, local=everything)).keyed  # read by DuckDB: a rid costs nothing


def test_a_semi_join_on_a_unique_column_has_its_witness_named_by_key() -> None:
    semi = join(scan("l", "a"), scan("r", "b", kind="parquet"), "a", "b", kind="semi")
    placed = place(semi, Setting(keyed=frozenset({("r", "b")})))
    assert [(k.column, k.attr.name) for k in placed.witnesses.values()] == [("b", "a")]
    assert place(semi, Setting()).witnesses == {}


def test_a_grouped_maps_inputs_are_read_by_duckdb_where_it_reads_them_again() -> None:
    a = attr("a")
    mapped = ir.GroupMap((T, limit(T)), keys=((a,), (a,)), function=ref("f"), attrs=())
    assert [p.kind for p in place_inputs(mapped, (4,), Setting(local=everything))] == ["duck_after", "spark"]
    assert [p.site for p in place_inputs(mapped, (4,), Setting())] == [(4, 0), (4, 1)]
    assert [p.kind for p in place(mapped, Setting(local=everything)).grouped[()]] == ["duck_after", "spark"]


def test_a_partition_map_reports_its_rids_where_they_come_back_through_the_driver() -> None:
    mapped = ir.PartitionMap((T,), keys=((),), function=ref("f"), attrs=())
    assert may_report(mapped, Setting()) and place(mapped, Setting()).reports == {()}
    assert not may_report(mapped, Setting(reported=False)) and not may_report(mapped, Setting(inline_rids=2))


def test_a_side_table_computes_again_what_a_second_run_gives_alike() -> None:
    assert computed_again(ONCE, Setting())  # scans and joins: cheaper to repeat than to cache whole
    assert not computed_again(limit(T), Setting())  # a limit among ties could keep other rows
    assert not computed_again(group_by(T, "a"), Setting())  # Spark would aggregate again
    assert computed_again(group_by(T, "a"), Setting(local=everything))  # DuckDB does
    assert not computed_again(group_by(T, "a"), Setting(local=everything, inline_rids=2))


@pytest.mark.parametrize(
    "plan",
    [
        limit(group_by(T, "a")),
        group_by(group_by(T, "a", "b"), "a"),
        sort(group_by(TWICE, "a")),
        join(group_by(T, "a"), scan("u", "c"), "a", "c"),
        group_by(ONCE, "a"),
    ],
    ids=["limit", "nested", "joins", "under a join", "one join"],
)
def test_the_rewrite_makes_each_aggregates_table_where_the_policy_placed_it(plan: ir.Node) -> None:
    setting = Setting(local=everything, at_trace=5)
    placed = [p for p in place(plan, setting).aggregates.values()]
    out = annotate(plan, local=everything, at_trace=5)
    groups = [t for t in out.tables if t.why.startswith("aggregate groups")]
    assert [(t.inline, t.local, t.whole) for t in groups][::-1] == [(p.listed, p.read_after, p.whole) for p in placed]
