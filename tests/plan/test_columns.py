"""Column lineage over hand-built plans (no Spark): which source columns each output column reads."""

from __future__ import annotations

from ember.plan import ir
from ember.plan.columns import column_lineage
from tests.infer.test_pushdown import K2, A, B, K, V, W, attr, col, computed


def test_passing_renamed_and_computed_columns() -> None:
    renamed, total, const = attr(10, "kk"), attr(11, "t"), attr(12, "one")
    plan = ir.Project(
        ir.Filter(A, cond=computed(V)),  # a filter chooses rows: it adds no origin
        columns=(ir.Named(col(K), renamed), ir.Named(computed(K, V), total), ir.Named(ir.Expr("1", frozenset()), const)),
    )
    assert column_lineage(plan) == [("kk", [("a", "k")]), ("t", [("a", "k"), ("a", "v")]), ("one", [])]


def test_aggregates_joins_and_unions() -> None:
    n = attr(20, "n")
    joined = ir.Join("inner", A, B, cond=ir.Expr("k = k2", frozenset({K.id, K2.id})), equi=((K.id, K2.id),))
    agg = ir.Aggregate(joined, keys=(col(K),), columns=(ir.Named(col(K), K), ir.Named(computed(V, W), n)))
    assert column_lineage(agg) == [("k", [("a", "k")]), ("n", [("a", "v"), ("b", "w")])]
    out = attr(30, "u")
    union = ir.Union((ir.Project(A, columns=(ir.Named(col(V), V),)), ir.Project(B, columns=(ir.Named(col(W), W),))), (out,))
    assert column_lineage(union) == [("u", [("a", "v"), ("b", "w")])]


def test_a_grouped_map_column_comes_from_every_input_column() -> None:
    fn = ir.Expr("f(k, v)", frozenset({K.id, V.id}))
    mapped = ir.GroupMap((A, B), keys=((K,), (K2,)), function=fn, attrs=(attr(40, "out"),))
    assert column_lineage(mapped) == [("out", [("a", "k"), ("a", "v"), ("b", "k2"), ("b", "w")])]


def test_a_partition_map_column_comes_from_every_input_column() -> None:
    fn = ir.Expr("f(k, v)", frozenset({K.id, V.id}))
    mapped = ir.PartitionMap((A,), keys=((),), function=fn, attrs=(attr(40, "out"),))
    assert column_lineage(mapped) == [("out", [("a", "k"), ("a", "v")])]
