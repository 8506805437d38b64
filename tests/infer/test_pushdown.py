"""The push-down rules, over hand-built plans (no Spark): which output columns pin which scan columns."""

from __future__ import annotations

from ember.infer.pushdown import Binding, infer, lift_limits, origins
from ember.plan import ir
from ember.plan.sources import Source


def attr(i: int, name: str) -> ir.Attr:
    return ir.Attr(i, name, "int")


def scan(name: str, *attrs: ir.Attr) -> ir.Scan:
    return ir.Scan(Source(name, name, "memory", 0), attrs)


def col(a: ir.Attr) -> ir.Expr:
    return ir.Expr(a.name, frozenset({a.id}), column=a.id)


def computed(*reads: ir.Attr) -> ir.Expr:
    return ir.Expr("f(...)", frozenset(a.id for a in reads))


K, V, K2, W = attr(1, "k"), attr(2, "v"), attr(3, "k2"), attr(4, "w")
A = scan("a", K, V)
B = scan("b", K2, W)


def pins(plan: ir.Node) -> dict[str, set[tuple[str, int, bool]]]:
    """Source name → {(scan column, output column, padded)}; untraced scans marked by '!'."""
    out: dict[str, set[tuple[str, int, bool]]] = {}
    for sp in infer(plan).scans:
        name = sp.scan.source.name + ("" if sp.traced else "!")
        out.setdefault(name, set()).update((_side(b), b.column, b.padded) for b in sp.bindings)
    return out


def _side(b: Binding) -> str:
    return b.attr.name if b.attr is not None else f"expr {b.expr.sql if b.expr else ''}"


def test_projection_passes_renamed_columns_and_computed_ones_as_residual_predicates() -> None:
    renamed, total, noise = attr(10, "kk"), attr(11, "t"), attr(12, "r")
    rand = ir.Expr("rand()", frozenset({V.id}), deterministic=False)
    plan = ir.Project(A, columns=(ir.Named(col(K), renamed), ir.Named(computed(K, V), total), ir.Named(rand, noise)))
    assert pins(plan) == {"a": {("k", 0, False), ("expr f(...)", 1, False)}}
    assert infer(plan).stops == ("Project: r",)


def test_computed_grouping_keys_push_and_residuals_stop_where_their_columns_do() -> None:
    year, n = attr(20, "y"), attr(21, "n")
    key = ir.Expr("year(k)", frozenset({K.id}))
    agg = ir.Aggregate(A, keys=(key,), columns=(ir.Named(ir.Expr("year(k) AS y", key.refs), year), ir.Named(computed(V), n)))
    assert pins(agg) == {"a": {("expr year(k) AS y", 0, False)}}
    renamed = attr(22, "k_again")
    above = ir.Project(ir.Project(A, columns=(ir.Named(col(K), renamed),)), columns=(ir.Named(computed(renamed), year),))
    assert pins(above) == {"a": set()}  # its column was renamed below: no substitution


def test_filter_conditions_stay_with_their_scan() -> None:
    cond = computed(V)
    (sp,) = infer(ir.Filter(A, cond=cond)).scans
    assert sp.filters == (cond,)
    assert {b.attr.name for b in sp.bindings} == {"k", "v"}


def test_aggregate_passes_grouping_columns_only() -> None:
    n = attr(12, "n")
    plan = ir.Aggregate(A, keys=(col(K),), columns=(ir.Named(col(K), K), ir.Named(computed(V), n)))
    assert pins(plan) == {"a": {("k", 0, False)}}
    global_agg = ir.Aggregate(A, keys=(), columns=(ir.Named(computed(V), n),))
    assert pins(global_agg) == {"a": set()}


def test_inner_join_carries_values_across_equated_columns() -> None:
    join = ir.Join("inner", A, B, computed(K, K2), equi=((K.id, K2.id),))
    plan = ir.Project(join, columns=(ir.Named(col(K), K), ir.Named(col(W), W)))
    assert pins(plan) == {"a": {("k", 0, False)}, "b": {("k2", 0, True), ("w", 1, False)}}


def test_outer_join_padded_side_says_nothing_when_null() -> None:
    join = ir.Join("left", A, B, computed(K, K2), equi=((K.id, K2.id),))
    got = pins(join)
    assert got["a"] == {("k", 0, False), ("v", 1, False), ("k", 2, True)}  # a matched b.k2 equals a.k
    assert got["b"] == {("k2", 0, True), ("k2", 2, True), ("w", 3, True)}


def test_semi_join_pins_witnesses_by_key_and_anti_join_inner_side_has_no_lineage() -> None:
    semi = ir.Join("semi", A, B, computed(K, K2), equi=((K.id, K2.id),))
    assert pins(semi) == {"a": {("k", 0, False), ("v", 1, False)}, "b": {("k2", 0, True)}}
    anti = ir.Join("anti", A, B, computed(K, K2), equi=((K.id, K2.id),))
    assert "b!" in pins(anti)


def test_window_passes_partition_columns_only() -> None:
    r = attr(13, "r")
    plan = ir.Window(A, columns=(ir.Named(computed(V), r),), partition=(col(K),), order=(col(V),))
    assert pins(plan) == {"a": {("k", 0, False)}}


def test_union_passes_columns_by_position() -> None:
    u = attr(14, "u")
    left = ir.Project(A, columns=(ir.Named(col(K), K),))
    right = ir.Project(B, columns=(ir.Named(col(K2), K2),))
    assert pins(ir.Union((left, right), (u,))) == {"a": {("k", 0, False)}, "b": {("k2", 0, False)}}


def test_limits_are_lifted_on_top_and_stop_push_down_below_a_combining_operator() -> None:
    both = (ir.Named(col(V), V), ir.Named(col(K), K))
    assert lift_limits(ir.Limit(ir.Project(ir.Limit(A), columns=both))) == ir.Project(A, columns=both)
    inner = ir.Join("inner", ir.Limit(A), B, computed(K, K2), equi=((K.id, K2.id),))
    assert pins(inner)["a"] == set()


def test_limits_stay_where_the_output_does_not_tell_rows_apart() -> None:
    """A row the limit cut could show the kept row's `k` (exact mode keeps the limit; a
    superset lifts it); a GROUP BY's rows are told apart by its keys alone."""
    top = ir.Limit(ir.Project(A, columns=(ir.Named(col(K), K),)))
    assert lift_limits(top) is top
    assert lift_limits(top, exact=False) == ir.Project(A, columns=(ir.Named(col(K), K),))
    grouped = ir.Aggregate(A, keys=(col(K),), columns=(ir.Named(col(K), K), ir.Named(computed(V), attr(17, "n"))))
    keyed = ir.Limit(ir.Project(grouped, columns=(ir.Named(col(K), K),)))
    assert lift_limits(keyed) == ir.Project(grouped, columns=(ir.Named(col(K), K),))
    counted = ir.Limit(ir.Project(grouped, columns=(ir.Named(ir.ColumnRef(attr(17, "n")), attr(17, "n")),)))
    assert lift_limits(counted) is counted


def test_scalar_subquery_scans_are_unconstrained() -> None:
    sub = ir.Aggregate(B, keys=(), columns=(ir.Named(computed(W), attr(15, "m")),))
    cond = ir.Expr("k > scalar-subquery", frozenset({K.id}), subqueries=(sub,))
    assert pins(ir.Filter(A, cond=cond)) == {"a": {("k", 0, False), ("v", 1, False)}, "b": set()}


def test_origins_follow_a_join_key_to_its_scan_columns() -> None:
    grouped = ir.Aggregate(B, keys=(col(K2),), columns=(ir.Named(col(K2), K2), ir.Named(computed(W), attr(16, "s"))))
    assert origins(grouped, K2.id) == ((id(B), K2),)
    assert origins(grouped, 16) == ()
    assert Binding(0, K2, True).padded
