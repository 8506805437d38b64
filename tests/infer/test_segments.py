"""Where exact mode saves intermediates, over hand-built plans.

That traces through saved intermediates are the exact lineage is checked against the
DuckDB oracle by tests/infer/test_tpch.py (Q18 takes this path there) and against the
pure-Python oracle by tests/infer/test_saved.py."""

from __future__ import annotations

from ember.infer.exact import why_rerun
from ember.infer.pushdown import infer
from ember.infer.segments import saved_columns, split, wrap
from ember.plan import ir
from ember.plan.sources import SAVED
from tests.infer.test_exact import AK, AV, BK, BW, TOTAL, A, B, grouped, join
from tests.infer.test_pushdown import col, computed


def having(child: ir.Node) -> ir.Node:
    """`SELECT bk FROM b GROUP BY bk HAVING total > ...`: a filter over an aggregate."""
    agg = ir.Aggregate(child, keys=(col(BK),), columns=(ir.Named(col(BK), BK), ir.Named(computed(BW), TOTAL)))
    return ir.Project(ir.Filter(agg, cond=computed(TOTAL)), columns=(ir.Named(col(BK), BK),))


def test_a_filtered_aggregate_inside_a_semi_join_is_saved_and_both_pieces_are_exact() -> None:
    inner = having(B)
    plan = grouped(join(A, inner, (AK, BK), kind="semi"), AK)
    assert why_rerun(plan, infer(plan)) == "a filter sits above a join or projection"
    segment = split(plan)
    assert segment is not None
    (save,) = segment.saves
    assert save.node is inner and save.scan.source.kind == SAVED  # the projection above saves one column
    assert save.scan.output == save.node.output
    assert why_rerun(segment.plan, segment.inference) is None
    assert why_rerun(save.below.plan, save.below.inference) is None and save.below.saves == ()
    # the semi join reads the key; the aggregate below pins its group by it; the total is never read
    assert saved_columns(segment, save) == (BK,)


def test_a_plan_no_save_point_makes_exact_is_not_split() -> None:
    outer = grouped(join(A, B, (AK, BK), kind="full"), AK)
    assert split(outer) is None
    deep = grouped(join(A, having(B), (AK, BK), kind="semi"), AK)
    assert split(deep, depth=0) is None  # the save would need a level of nesting


def test_an_exact_plan_splits_into_itself() -> None:
    plan = grouped(join(A, B, (AK, BK)), AK)
    segment = split(plan)
    assert segment is not None and segment.saves == () and segment.plan is plan and not segment.evaluated


def test_a_filter_over_a_join_is_joined_in_process_without_saving() -> None:
    plan = grouped(ir.Filter(join(A, B, (AK, BK)), cond=computed(AV, BW)), AK)
    segment = split(plan)
    assert segment is not None and segment.saves == () and segment.evaluated


def test_wrap_caches_exactly_the_saved_subplans() -> None:
    inner = having(B)
    plan = ir.Project(join(A, inner, (AK, BK), kind="semi"), columns=(ir.Named(col(AV), AV),))
    wrapped = wrap(plan, {id(inner): (7, inner)})
    shared = [n for n in ir.walk(wrapped) if isinstance(n, ir.Shared)]
    assert len(shared) == 1 and shared[0].key == 7 and shared[0].child == inner
    assert wrap(plan, {}) is plan
