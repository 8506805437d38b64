"""Domain aggregates (the outer values Spark joins a decorrelated subquery with): a pure
function over the IR, checked here without Spark (and end to end in
tests/capture/test_operators.py::test_scalar_subqueries)."""

from __future__ import annotations

from ember.plan import ir
from ember.plan.domains import marked
from tests.capture.test_annotate import scan
from tests.capture.test_decided import column, cond

K, V = ir.Attr(1, "k", "int"), ir.Attr(2, "v", "int")  # the outer relation
BV = ir.Attr(3, "v", "int")  # the inner one
DV = ir.Attr(4, "v", "int")  # the domain's alias of the outer `v`
N = ir.Attr(5, "n", "bigint")


def counted(domain: ir.Node) -> ir.Aggregate:
    """`count(*)` of inner rows per domain value, over the domain joined with `b.v > v'`."""
    joined = ir.Join("inner", domain, scan("b", BV), cond("v > v", BV, DV), theta=True)
    count = ir.Expr("count(1)", frozenset(), dtype="bigint")
    return ir.Aggregate(joined, keys=(column(DV),), columns=(ir.Named(count, N), ir.Named(column(DV), DV)))


def joined_back(outer: ir.Node, domain: ir.Node) -> ir.Join:
    return ir.Join("left", outer, counted(domain), cond("v <=> v", DV, V), equi=((V.id, DV.id),))


def distinct(child: ir.Node, key: ir.Attr, alias: ir.Attr) -> ir.Aggregate:
    return ir.Aggregate(child, keys=(column(key),), columns=(ir.Named(column(key), alias),))


def domains(plan: ir.Node) -> list[ir.Aggregate]:
    return [n for n in ir.walk(plan) if isinstance(n, ir.Aggregate) and n.domain]


def test_the_outer_values_joined_back_on_their_own_ids_are_a_domain() -> None:
    outer = scan("a", K, V)
    plan = marked(joined_back(outer, distinct(outer, V, DV)))  # the domain reads the outer plan itself
    assert [d.columns[0].attr for d in domains(plan)] == [DV]
    assert plan.left is outer  # the outer rows themselves stay lineage


def test_distinct_values_of_another_relation_are_no_domain() -> None:
    # a user's own `SELECT DISTINCT v AS v' FROM a` joined to `a` again: the second read has its own ids
    again = ir.Attr(6, "k", "int"), ir.Attr(7, "v", "int")
    plan = joined_back(scan("a", K, V), distinct(scan("a", *again), again[1], DV))
    assert marked(plan) is plan


def test_an_aggregate_that_computes_a_value_is_no_domain() -> None:
    outer = scan("a", K, V)
    total = ir.Expr("max(v)", frozenset({V.id}), dtype="int")
    computed = ir.Aggregate(outer, keys=(column(V),), columns=(ir.Named(column(V), DV), ir.Named(total, ir.Attr(8, "m", "int"))))
    plan = joined_back(outer, computed)
    assert marked(plan) is plan


def test_a_computed_value_evaluated_again_on_a_copy_is_a_domain() -> None:
    # `(SELECT count(*) FROM b WHERE b.v > a.u)` with `u` a Python UDF of `a.v`: Spark evaluates
    # the UDF again over its copy of `a` (same scan ids), under new ids on each side
    u1, u2, grouped = ir.Attr(9, "u", "int"), ir.Attr(10, "u", "int"), ir.Attr(11, "u", "int")
    udf = ir.Expr("udf(v)", frozenset({V.id}), dtype="int")
    outer = ir.Project(scan("a", K, V), columns=(ir.Named(column(K), K), ir.Named(udf, u1)))
    copy = ir.Project(scan("a", K, V), columns=(ir.Named(udf, u2),))
    domain = distinct(copy, u2, grouped)
    values = ir.Project(domain, columns=(ir.Named(column(grouped), DV),))
    plan = marked(ir.Join("left", outer, counted(values), cond("u <=> v", u1, DV), equi=((u1.id, DV.id),)))
    assert [d.columns[0].attr for d in domains(plan)] == [grouped]  # not the count's own aggregate
