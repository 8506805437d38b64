"""Which plans' pushed predicates are the exact lineage (no re-run), over hand-built plans.

That the accepted plans really answer exactly is checked against the DuckDB oracle by
tests/infer/test_tpch.py (Q1, Q3, Q4, Q6, Q8, Q10, Q12 and Q14 take this path there)."""

from __future__ import annotations

from ember.infer.exact import failing, why_rerun
from ember.infer.pushdown import infer
from ember.plan import ir
from tests.infer.test_pushdown import col, computed, scan


def attr(i: int, name: str) -> ir.Attr:
    return ir.Attr(i, name, "int")


AK, AV, BK, BW, CK, CX = (attr(i, n) for i, n in enumerate(["ak", "av", "bk", "bw", "ck", "cx"], start=1))
A, B, C = scan("a", AK, AV), scan("b", BK, BW), scan("c", CK, CX)
TOTAL = attr(50, "total")


def join(left: ir.Node, right: ir.Node, *pairs: tuple[ir.Attr, ir.Attr], theta: bool = False, kind: str = "inner") -> ir.Join:
    refs = frozenset(a.id for p in pairs for a in p)
    return ir.Join(kind, left, right, ir.Expr("cond", refs), equi=tuple((x.id, y.id) for x, y in pairs), theta=theta)


def grouped(child: ir.Node, *keys: ir.Attr) -> ir.Aggregate:
    return ir.Aggregate(
        child, keys=tuple(col(k) for k in keys), columns=(*(ir.Named(col(k), k) for k in keys), ir.Named(computed(AV), TOTAL))
    )


def reason(plan: ir.Node) -> str | None:
    return why_rerun(plan, infer(plan))


def test_a_group_over_a_tree_of_single_key_joins_needs_no_rerun() -> None:
    tree = join(join(ir.Filter(A, cond=computed(AV)), B, (AK, BK)), C, (BW, CK))
    assert reason(grouped(tree, AK)) is None
    having = ir.Filter(grouped(tree, AK), cond=computed(TOTAL))  # drops whole groups
    assert reason(ir.Project(having, columns=(ir.Named(col(TOTAL), TOTAL), ir.Named(col(AK), AK)))) is None
    assert reason(grouped(join(A, B, (AK, BK), kind="semi"))) is None  # a global aggregate pins nothing


def test_a_grouping_key_the_output_drops_forces_a_rerun() -> None:
    dropped = ir.Project(grouped(join(A, B, (AK, BK)), AK), columns=(ir.Named(col(TOTAL), TOTAL),))
    assert "does not reach the output" in (reason(dropped) or "")


def test_cycles_composite_keys_and_theta_conditions_force_a_rerun() -> None:
    composite = join(A, B, (AK, BK), (AV, BW))
    assert "one column equality" in (reason(grouped(composite, AK)) or "")
    cycle = join(join(A, B, (AK, BK)), C, (BW, CK), (AV, CX))
    assert "one column equality" in (reason(grouped(cycle, AK)) or "")
    theta = join(A, B, (AK, BK), theta=True)
    assert "one column equality" in (reason(grouped(theta, AK)) or "")


def test_other_operators_below_the_group_force_a_rerun() -> None:
    assert reason(grouped(join(A, B, (AK, BK), kind="left"), AK)) == "left join"
    assert reason(grouped(join(A, B, (AK, BK), kind="anti"), AK)) == "anti join"
    assert reason(grouped(grouped(A, AK), AK)) == "aggregate below the traced group"
    above_join = ir.Filter(join(A, B, (AK, BK)), cond=computed(AV, BW))
    assert reason(grouped(above_join, AK)) == "a filter sits above a join or projection"
    sub = ir.Filter(A, cond=ir.Expr("av > (subquery)", frozenset({AV.id}), subqueries=(B,)))
    assert reason(grouped(sub, AK)) == "Filter holds a subquery"


def test_without_aggregate_every_output_column_must_pin_a_scan() -> None:
    pairs = join(A, B, (AK, BK))
    kept = ir.Project(pairs, columns=(ir.Named(col(AK), AK), ir.Named(col(BW), BW)))
    assert reason(kept) is None
    mixed = ir.Project(pairs, columns=(ir.Named(col(AK), AK), ir.Named(computed(AV, BW), TOTAL)))
    assert "pin no source column" in (reason(mixed) or "")
    filtered_above = ir.Filter(kept, cond=computed(AK))
    assert reason(filtered_above) == "a filter sits above a join or projection"


def test_joined_in_process_any_condition_cycle_or_left_join_is_exact() -> None:
    def joined(plan: ir.Node) -> str | None:
        failure = failing(plan, infer(plan), evaluated=True)
        return None if failure is None else failure[0]

    cycle = join(join(A, B, (AK, BK)), C, (BW, CK), (AV, CX))
    above_join = ir.Filter(join(A, B, (AK, BK)), cond=computed(AV, BW))
    kinds = [join(A, B, (AK, BK), kind=k) for k in ("left", "anti")]
    for plan in (cycle, join(A, B, (AK, BK), theta=True), above_join, *kinds):
        assert reason(grouped(plan, AK)) is not None and joined(grouped(plan, AK)) is None
    assert joined(grouped(join(A, B, (AK, BK), kind="full"), AK)) == "full join"
    assert joined(grouped(grouped(A, AK), AK)) == "aggregate below the traced group"
    assert joined(grouped(grouped(A, AK))) is None  # below a global aggregate every row is lineage


def test_joined_in_process_scalar_subqueries_count_where_every_row_passes() -> None:
    def joined(plan: ir.Node) -> str | None:
        failure = failing(plan, infer(plan), evaluated=True)
        return None if failure is None else failure[0]

    scalar = ir.Expr("av > (subquery)", frozenset({AV.id}), subqueries=(grouped(B),))
    assert joined(grouped(ir.Filter(A, cond=scalar), AK)) is None
    inner_of_left = join(A, ir.Filter(B, cond=ir.Expr("bw > (subquery)", frozenset({BW.id}), subqueries=(grouped(C),))), (AK, BK), kind="left")
    assert joined(grouped(inner_of_left, AK)) == "Filter holds a subquery"  # padded rows never pass it
