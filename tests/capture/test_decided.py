"""Conditions an aggregate's group keys decide, left out of a read of wanted groups: a pure
function over the IR, checked here without Spark (and end to end in test_local)."""

from __future__ import annotations

from ember.capture.decided import matched_keys, without_decided
from ember.plan import ir
from tests.capture.test_annotate import scan

OKEY = ir.Attr(1, "o_okey", "int")
PRIO = ir.Attr(2, "o_prio", "string")
IKEY = ir.Attr(3, "i_okey", "int")
QTY = ir.Attr(4, "i_qty", "int")
SKEY = ir.Attr(5, "s_okey", "int")
KEY = ir.Attr(10, "key", "int")
RID = ir.Attr(11, "rid", "bigint")


def cond(text: str, *attrs: ir.Attr, deterministic: bool = True) -> ir.Expr:
    return ir.Expr(text, frozenset(a.id for a in attrs), deterministic=deterministic, dtype="boolean")


def column(a: ir.Attr) -> ir.Expr:
    return ir.Expr(a.name, frozenset({a.id}), dtype=a.dtype, column=a.id)


def semi(left: ir.Node, probe: ir.Attr, kind: str = "semi") -> ir.Join:
    """`left` rows whose `probe` is among the big orders (an aggregate over another scan)."""
    big = ir.Aggregate(scan("s", SKEY, QTY), keys=(column(SKEY),), columns=(ir.Named(column(SKEY), SKEY),))
    return ir.Join(kind, left, ir.Filter(big, cond=cond("big")), cond(f"{probe.name} = s_okey", probe, SKEY))


def groups(child: ir.Node, key: ir.Attr) -> ir.Project:
    """The group table of an aggregate keyed by `key`, as `capture.annotate` makes it."""
    return ir.Project(child, columns=(ir.Named(column(key), KEY), ir.Named(ir.ColumnRef(RID), RID)))


def with_items(orders: ir.Node, items: ir.Node, kind: str = "inner") -> ir.Join:
    return ir.Join(kind, orders, items, cond("o_okey = i_okey", OKEY, IKEY), equi=((OKEY.id, IKEY.id),))


def test_a_semi_join_on_the_group_key_is_left_out() -> None:
    orders = scan("o", OKEY, PRIO)
    plan = groups(semi(orders, OKEY), OKEY)
    assert without_decided(plan, (KEY,)) == groups(orders, OKEY)


def test_a_semi_join_on_a_column_an_inner_join_equates_with_the_key_is_left_out() -> None:
    # TPC-H Q18: grouped by the order, its items kept by a semi join on the item's order key.
    orders, items = scan("o", OKEY, PRIO), scan("i", IKEY, QTY)
    plan = groups(with_items(orders, semi(items, IKEY)), OKEY)
    assert without_decided(plan, (KEY,)) == groups(with_items(orders, items), OKEY)


def test_a_semi_join_on_another_column_stays() -> None:
    plan = groups(semi(scan("o", OKEY, PRIO), OKEY), PRIO)  # grouped by priority
    assert without_decided(plan, (KEY,)) == plan


def test_anti_joins_and_filters_on_the_key_are_left_out_others_stay() -> None:
    orders = scan("o", OKEY, PRIO)
    on_key = ir.Filter(semi(orders, OKEY, kind="anti"), cond("o_okey > 1", OKEY))
    mixed = ir.Filter(on_key, cond("o_okey > 1 AND o_prio = 'hi'", OKEY, PRIO))
    random = ir.Filter(mixed, cond("rand() > o_okey", OKEY, deterministic=False))
    out = without_decided(groups(random, OKEY), (KEY,))
    assert out == groups(ir.Filter(ir.Filter(orders, mixed.cond), random.cond), OKEY)


def test_nothing_below_an_outer_join_or_an_aggregate_is_left_out() -> None:
    outer = with_items(scan("o", OKEY, PRIO), semi(scan("i", IKEY, QTY), IKEY), kind="left")
    over_groups = ir.Aggregate(semi(scan("o", OKEY, PRIO), OKEY), keys=(column(OKEY),), columns=(ir.Named(column(OKEY), OKEY),))
    for plan in (groups(outer, OKEY), groups(over_groups, OKEY)):
        assert without_decided(plan, (KEY,)) == plan


def test_a_global_aggregate_keeps_its_conditions() -> None:
    # Its one group has a row even where no input row passed.
    plan = ir.Project(semi(scan("o", OKEY, PRIO), OKEY), columns=(ir.Named(ir.ColumnRef(RID), RID),))
    assert without_decided(plan, ()) == plan


NKEY = ir.Attr(6, "n_key", "int")
NNAME = ir.Attr(7, "n_name", "string")
ONATION = ir.Attr(8, "o_nation", "int")
KEYS = (ir.Attr(12, "k0", "int"), ir.Attr(13, "k1", "string"), ir.Attr(14, "k2", "string"))


def by_order(child: ir.Node) -> ir.Project:
    """TPC-H Q10's shape: grouped by the order's key, its priority and its nation's name."""
    keys = (column(OKEY), column(PRIO), column(NNAME))
    return ir.Project(child, columns=tuple(ir.Named(e, k) for e, k in zip(keys, KEYS, strict=True)))


def with_nation(orders: ir.Node, kind: str = "inner") -> ir.Join:
    nation = scan("n", NKEY, NNAME)
    return ir.Join(kind, orders, nation, cond("o_nation = n_key", ONATION, NKEY), equi=((ONATION.id, NKEY.id),))


UNIQUE = frozenset({("o", "o_okey"), ("n", "n_key")})


def test_a_unique_key_fixes_its_rows_columns_and_those_of_the_rows_it_joins() -> None:
    plan = by_order(with_nation(scan("o", OKEY, PRIO, ONATION)))
    assert matched_keys(plan, KEYS, UNIQUE) == (0,)
    assert matched_keys(plan, KEYS, frozenset({("n", "n_key")})) == (0, 1, 2)  # no unique order key
    assert matched_keys(plan, KEYS, frozenset({("o", "o_okey")})) == (0, 2)  # the nation row is not fixed


def test_keys_are_matched_where_a_left_join_or_an_expression_stands_between() -> None:
    outer = by_order(with_nation(scan("o", OKEY, PRIO, ONATION), kind="left"))
    assert matched_keys(outer, KEYS, UNIQUE) == (0, 1, 2)  # nothing below a left join is followed
    computed = ir.Project(
        scan("o", OKEY, PRIO), columns=(ir.Named(cond("o_okey + 1", OKEY), KEYS[0]), ir.Named(column(PRIO), KEYS[1]))
    )
    assert matched_keys(computed, KEYS[:2], UNIQUE) == (0, 1)
