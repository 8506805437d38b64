"""The capture rewrite is a pure function over the IR: checked here without Spark."""

from __future__ import annotations

from ember.capture.annotate import RefSlot, RidSlot, annotate
from ember.plan import ir
from ember.plan.sources import Source

A = ir.Attr(1, "a", "int")
B = ir.Attr(2, "b", "int")
C = ir.Attr(3, "c", "int")


def scan(key: str, *attrs: ir.Attr) -> ir.Scan:
    return ir.Scan(Source(key, key, "memory", 3), attrs)


def ref(a: ir.Attr) -> ir.Expr:
    return ir.Expr(a.name, frozenset({a.id}), dtype=a.dtype)


def test_scan_gets_one_rid_slot_and_keeps_its_columns_first() -> None:
    out = annotate(scan("t", A, B))
    assert [type(s) for s in out.slots] == [RidSlot]
    assert out.plan.output[:2] == (A, B)
    assert out.tables == ()


def test_aggregate_keeps_lineage_normalized_in_a_side_table() -> None:
    agg = ir.Aggregate(scan("t", A, B), keys=(ref(A),), columns=(ir.Named(ref(A), A),))
    out = annotate(agg)
    (slot,) = out.slots
    assert isinstance(slot, RefSlot) and slot.table == 0 and len(slot.keys) == 1
    (table,) = out.tables
    assert [type(s) for s in table.slots] == [RidSlot]
    assert out.plan.output[0] == A


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
    assert out.tables[keyless[0].table].why == "scalar subquery"
