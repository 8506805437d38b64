"""Exact traces joined in-process and through saved intermediates equal the pure-Python
oracle, with no re-run.

Tiny tables built here; every output row is traced backward. The plans are the shapes
where cutting candidates across joins is not exact: a theta condition, a cycle, a
correlated scalar subquery (a left join to a saved aggregate under a filter), NOT IN and
NOT EXISTS (anti joins, with a null on the inner side), uncorrelated scalar subqueries
(added to a global count's lineage only where a counted row used one),
a count of counts over a left join (a saved aggregate widened by its dropped key), an
IN subquery over a grouped HAVING, once at the top and once nested inside another, a
LIMIT over a group-by saved on either side of an anti join, and LIMITs over groups the
output does not tell apart (the key projected away: saved widened with it)."""

from __future__ import annotations

from collections import defaultdict

import pytest
from pyspark.sql import DataFrame, SparkSession

import ember
from ember.infer.lineage import InferredLineage
from tests.oracle import rows as o

ORDERS = [(1, 10), (2, 10), (3, 20), (4, 30), (5, 30), (6, 10)]  # (key, customer)
LINES = [(1, 5), (1, 7), (2, 1), (3, 9), (3, 4), (4, 2), (5, 6), (5, 6), (6, 50)]  # (order key, quantity)
BIG = [(10,), (30,), (40,)]  # customers


@pytest.fixture(scope="module")
def views(spark: SparkSession) -> SparkSession:
    spark.createDataFrame(ORDERS, "ok int, cust int").createOrReplaceTempView("s_orders")
    spark.createDataFrame(LINES, "lk int, qty int").createOrReplaceTempView("s_lines")
    spark.createDataFrame(BIG, "c int").createOrReplaceTempView("s_big")
    return spark


def heavy(threshold: float, agg: str = "sum") -> list[o.Row]:
    """`SELECT lk FROM s_lines GROUP BY lk HAVING <agg>(qty) > threshold` (sum or avg)."""
    def value(vs: list[o.Values]) -> o.Values:
        total = sum(x[1] for x in vs)
        return (total if agg == "sum" else total / len(vs),)

    grouped = o.group(o.scan("s_lines", LINES), lambda v: (v[0],), value)
    return o.select(o.where(grouped, lambda v: v[1] > threshold), lambda v: (v[0],))


def traced_exactly(
    df: DataFrame, expected: list[o.Row], monkeypatch: pytest.MonkeyPatch, path: str = "saved intermediates"
) -> InferredLineage:
    """Every output row's exact trace equals the oracle's (set semantics), without a re-run."""
    lin = ember.infer(df)
    assert lin.exact_path == path
    assert bool(lin.saved) == (path == "saved intermediates")

    def no_rerun(*_: object) -> None:
        raise AssertionError("a trace through saved intermediates re-ran the job")

    monkeypatch.setattr(InferredLineage, "_rerun", no_rerun)
    merged: dict[str, set[tuple[str, int]]] = defaultdict(set)
    for values, lineage in expected:
        merged[repr(values)] |= lineage
    outputs = o.value_rows(lin.output().drop_columns(["ember_oid"]))
    assert outputs, "nothing to trace"
    assert sorted(map(repr, outputs)) == sorted(repr(v) for v, _ in expected)
    for oid, values in enumerate(outputs):
        got = {(s, int(r)) for s in lin.sources for r in lin.backward(oids=[oid]).ids(s)}
        assert got == merged[repr(values)], (oid, values)
    source, rid = min(merged[repr(outputs[0])])  # forward from one lineage row, also in-process
    reached = [oid for oid, values in enumerate(outputs) if (source, rid) in merged[repr(values)]]
    assert lin.forward(source, ids=[rid]).ids().tolist() == reached, (source, rid)
    return lin


# An average of integers DuckDB computes as Spark does (their exact sum as a double); one of
# doubles it would sum in another order, so it goes through the saved aggregate.
AVERAGES = [("sum(qty)", "joined"), ("avg(qty)", "joined"), ("avg(double(qty))", "saved intermediates")]


@pytest.mark.parametrize(("agg", "path"), AVERAGES)
def test_an_in_subquery_over_a_having(views: SparkSession, monkeypatch: pytest.MonkeyPatch, agg: str, path: str) -> None:
    """A sum or an average of integers is joined in-process beside its group's rows; an
    average of doubles is saved, projected to the key the semi join reads."""
    sql = f"SELECT cust, count(*) AS n FROM s_orders WHERE ok IN (SELECT lk FROM s_lines GROUP BY lk HAVING {agg} > 4) GROUP BY cust"
    kept = o.semi(o.scan("s_orders", ORDERS), heavy(4, agg[:3]), lambda x, y: x[0] == y[0])
    expected = o.group(kept, lambda v: (v[1],), lambda vs: (len(vs),))
    lin = traced_exactly(views.sql(sql), expected, monkeypatch, path)
    if path == "saved intermediates":
        assert [t.column_names for t in lin.saved.values()] == [["lk"]]  # projected: the averages are never read
        assert "saved intermediates" in lin.explain()


def test_a_saved_intermediate_nested_inside_another(views: SparkSession, monkeypatch: pytest.MonkeyPatch) -> None:
    inner = "SELECT lk FROM s_lines GROUP BY lk HAVING avg(double(qty)) > 4"
    middle = f"SELECT cust FROM s_orders WHERE ok IN ({inner}) GROUP BY cust HAVING avg(double(ok)) > 2"
    sql = f"SELECT c FROM s_big WHERE c IN ({middle})"
    orders = o.semi(o.scan("s_orders", ORDERS), heavy(4, "avg"), lambda x, y: x[0] == y[0])
    averages = o.group(orders, lambda v: (v[1],), lambda vs: (sum(x[0] for x in vs) / len(vs),))
    customers = o.where(averages, lambda v: v[1] > 2)
    expected = o.semi(o.scan("s_big", BIG), customers, lambda x, y: x[0] == y[0])
    lin = traced_exactly(views.sql(sql), expected, monkeypatch)
    assert len(lin.saved) == 2  # one inside the other


def orders() -> list[o.Row]:
    return o.scan("s_orders", ORDERS)


def lines() -> list[o.Row]:
    return o.scan("s_lines", LINES)


def test_a_theta_join_is_joined_in_process(views: SparkSession, monkeypatch: pytest.MonkeyPatch) -> None:
    sql = "SELECT o.cust, count(*) AS n FROM s_orders o JOIN s_lines l ON o.ok = l.lk AND l.qty > o.ok GROUP BY o.cust"
    pairs = o.join(orders(), lines(), lambda x, y: x[0] == y[0] and y[1] > x[0])
    traced_exactly(views.sql(sql), o.group(pairs, lambda v: (v[1],), lambda vs: (len(vs),)), monkeypatch, "joined")


def test_a_cycle_of_joins_is_joined_in_process(views: SparkSession, monkeypatch: pytest.MonkeyPatch) -> None:
    sql = (
        "SELECT b.c, sum(l.qty) AS q FROM s_orders o, s_lines l, s_big b "
        "WHERE o.ok = l.lk AND o.cust = b.c AND l.qty < b.c - 25 GROUP BY b.c"
    )
    pairs = o.join(orders(), lines(), lambda x, y: x[0] == y[0])
    triples = o.join(pairs, o.scan("s_big", BIG), lambda x, y: x[1] == y[0] and x[3] < y[0] - 25)
    expected = o.group(triples, lambda v: (v[4],), lambda vs: (sum(v[3] for v in vs),))
    traced_exactly(views.sql(sql), expected, monkeypatch, "joined")


@pytest.mark.parametrize(("agg", "path"), [("max(qty)", "joined"), *AVERAGES[1:]])
def test_a_correlated_scalar_subquery(views: SparkSession, monkeypatch: pytest.MonkeyPatch, agg: str, path: str) -> None:
    """A left join to an aggregate under a filter: a max or an average of integers is joined
    beside its group's rows, an average of doubles goes through the saved aggregate."""
    sql = f"SELECT l.lk, count(*) AS n FROM s_lines l WHERE l.qty >= (SELECT {agg} FROM s_lines m WHERE m.lk = l.lk) GROUP BY l.lk"

    def value(vs: list[o.Values]) -> o.Values:
        qty = [x[1] for x in vs]
        return (max(qty) if agg.startswith("max") else sum(qty) / len(qty),)

    per_key = o.group(lines(), lambda v: (v[0],), value)
    kept = o.where(o.join(lines(), per_key, lambda x, y: x[0] == y[0], "left", rw=2), lambda v: v[3] is not None and v[1] >= v[3])
    traced_exactly(views.sql(sql), o.group(kept, lambda v: (v[0],), lambda vs: (len(vs),)), monkeypatch, path)


@pytest.mark.parametrize("agg", ["sum", "max"])
def test_a_correlated_aggregate_of_groups(views: SparkSession, monkeypatch: pytest.MonkeyPatch, agg: str) -> None:
    """TPC-DS Q1's shape: each order's total against its customer's total of order totals.
    Joined in-process, a group's values stand beside each of its rows, so an aggregate of
    the groups would count a group once per row: only a max (blind to repeats) is joined;
    a sum goes through the saved groups."""
    totals = "SELECT o.cust, o.ok, sum(l.qty) AS q FROM s_orders o JOIN s_lines l ON o.ok = l.lk GROUP BY o.cust, o.ok"
    sql = f"WITH t AS ({totals}) SELECT a.ok FROM t a WHERE a.q > (SELECT {agg}(b.q) * 0.6 FROM t b WHERE b.cust = a.cust)"
    per_order = o.group(o.join(orders(), lines(), lambda x, y: x[0] == y[0]), lambda v: (v[1], v[0]), lambda vs: (sum(v[3] for v in vs),))
    per_cust = o.group(per_order, lambda v: (v[0],), lambda vs: ((sum if agg == "sum" else max)(v[2] for v in vs),))
    kept = o.where(o.join(per_order, per_cust, lambda x, y: x[0] == y[0], "left", rw=2), lambda v: v[2] > v[4] * 0.6)
    traced_exactly(views.sql(sql), o.select(kept, lambda v: (v[1],)), monkeypatch, "joined" if agg == "max" else "saved intermediates")


def test_not_in_and_not_exists_are_joined_in_process(views: SparkSession, monkeypatch: pytest.MonkeyPatch) -> None:
    big = o.scan("s_big", BIG)
    sql = "SELECT cust, count(*) AS n FROM s_orders WHERE cust NOT IN (SELECT c FROM s_big WHERE c > 20) GROUP BY cust"
    kept = o.anti(orders(), o.where(big, lambda v: v[0] > 20), lambda x, y: x[1] == y[0])
    traced_exactly(views.sql(sql), o.group(kept, lambda v: (v[1],), lambda vs: (len(vs),)), monkeypatch, "joined")
    sql = "SELECT lk, sum(qty) AS q FROM s_lines l WHERE NOT EXISTS (SELECT 1 FROM s_orders o WHERE o.ok = l.lk AND o.cust > 10) GROUP BY lk"
    kept = o.anti(lines(), orders(), lambda x, y: x[0] == y[0] and y[1] > 10)
    traced_exactly(views.sql(sql), o.group(kept, lambda v: (v[0],), lambda vs: (sum(x[1] for x in vs),)), monkeypatch, "joined")


def test_not_in_drops_a_null_outer_key_that_not_exists_keeps(spark: SparkSession, monkeypatch: pytest.MonkeyPatch) -> None:
    data = [(1, 5), (2, 6), (None, 7)]
    spark.createDataFrame(data, "k int, v int").createOrReplaceTempView("s_nullable")
    rows = o.scan("s_nullable", data)
    inner = "SELECT v FROM s_nullable WHERE v = 6"
    sql = f"SELECT s.k, sum(s.v) AS t FROM s_nullable s WHERE s.k NOT IN ({inner}) GROUP BY s.k"
    kept = o.where(rows, lambda v: v[0] is not None and v[0] != 6)  # null NOT IN {6} is null: dropped
    traced_exactly(spark.sql(sql), o.group(kept, lambda v: (v[0],), lambda vs: (sum(x[1] for x in vs),)), monkeypatch, "joined")
    sql = f"SELECT s.k, sum(s.v) AS t FROM s_nullable s WHERE NOT EXISTS (SELECT 1 FROM ({inner}) i WHERE i.v = s.k) GROUP BY s.k"
    kept = o.where(rows, lambda v: v[0] != 6)
    traced_exactly(spark.sql(sql), o.group(kept, lambda v: (v[0],), lambda vs: (sum(x[1] for x in vs),)), monkeypatch, "joined")


def test_uncorrelated_scalar_subqueries_add_their_whole_lineage(views: SparkSession, monkeypatch: pytest.MonkeyPatch) -> None:
    everything = {("s_lines", i) for i in range(len(LINES))}
    sql = "SELECT lk, sum(qty) AS q FROM s_lines GROUP BY lk HAVING sum(qty) > (SELECT avg(qty) FROM s_lines)"
    grouped = o.group(lines(), lambda v: (v[0],), lambda vs: (sum(x[1] for x in vs),))
    average = sum(q for _, q in LINES) / len(LINES)
    expected = [(v, lin | everything) for v, lin in grouped if v[1] > average]
    traced_exactly(views.sql(sql), expected, monkeypatch, "joined")
    sql = "SELECT ok, cust FROM s_orders WHERE cust > (SELECT min(c) FROM s_big)"
    scalar = {("s_big", i) for i in range(len(BIG))}
    expected = [(v, lin | scalar) for v, lin in orders() if v[1] > min(c for (c,) in BIG)]
    traced_exactly(views.sql(sql), expected, monkeypatch, "joined")


def test_a_scalar_no_counted_row_used_adds_nothing(views: SparkSession, monkeypatch: pytest.MonkeyPatch) -> None:
    """A global count's one row: the scalar its filter tests rows against is its lineage only
    where a counted row passed that filter."""
    scalar = {("s_big", i) for i in range(len(BIG))}
    sql = "SELECT count(*) AS n FROM s_orders WHERE cust > (SELECT min(c) FROM s_big)"
    passed = [lin for v, lin in orders() if v[1] > min(c for (c,) in BIG)]
    traced_exactly(views.sql(sql), [((len(passed),), frozenset().union(scalar, *passed))], monkeypatch, "joined")
    lin = ember.infer(views.sql("SELECT count(*) AS n FROM s_orders WHERE cust > (SELECT max(c) FROM s_big)"))
    assert lin.exact_path == "joined" and o.value_rows(lin.output().drop_columns(["ember_oid"])) == [(0,)]
    assert lin.backward(oids=[0]).sources == []  # no order passed: the scalar is no count's lineage
    assert lin.forward("s_big", ids=[0]).ids().tolist() == []


@pytest.mark.parametrize(("agg", "path"), [("count(o.ok)", "joined"), ("avg(o.ok)", "joined"), ("avg(double(o.ok))", "saved intermediates")])
def test_an_aggregate_of_aggregates_over_a_left_join(
    views: SparkSession, monkeypatch: pytest.MonkeyPatch, agg: str, path: str
) -> None:
    """Q13's shape: a count is joined in-process (window) and the traced group compared there
    (nothing else pins it), and so is an average of integers; an average of doubles is
    saved, widened by the grouping key it drops."""
    sql = (
        f"SELECT n, count(*) AS customers FROM (SELECT b.c, {agg} AS n FROM s_big b "
        "LEFT JOIN s_orders o ON o.cust = b.c GROUP BY b.c) GROUP BY n"
    )
    pairs = o.join(o.scan("s_big", BIG), orders(), lambda x, y: x[0] == y[1], "left", rw=2)

    def value(vs: list[o.Values]) -> o.Values:
        keys = [v[1] for v in vs if v[1] is not None]
        return (len(keys),) if agg.startswith("count") else ((sum(keys) / len(keys)) if keys else None,)

    expected = o.group(o.group(pairs, lambda v: (v[0],), value), lambda v: (v[1],), lambda vs: (len(vs),))
    lin = traced_exactly(views.sql(sql), expected, monkeypatch, path)
    if path == "saved intermediates":
        (saved,) = lin.saved.values()
        assert "c" in saved.column_names  # the key the inner aggregate dropped


def first_customers(n: int) -> list[o.Row]:
    """`SELECT cust, count(*) FROM s_orders GROUP BY cust ORDER BY cust LIMIT n`."""
    return sorted(o.group(orders(), lambda v: (v[1],), lambda vs: (len(vs),)), key=lambda r: r[0][0])[:n]


def test_a_limit_over_a_group_by_under_a_join(views: SparkSession, monkeypatch: pytest.MonkeyPatch) -> None:
    """The saved rows of `ORDER BY ... LIMIT` over a group-by are traced with the limit lifted,
    as at the plan's top: each pins its group (not every row below the limit)."""
    top = views.table("s_orders").groupBy("cust").count().orderBy("cust").limit(2)
    df = top.join(views.table("s_big"), top.cust == views.table("s_big").c, "left_anti")
    expected = o.anti(first_customers(2), o.scan("s_big", BIG), lambda x, y: x[0] == y[0])
    traced_exactly(df, expected, monkeypatch)


def test_a_limit_saved_under_an_anti_join(views: SparkSession, monkeypatch: pytest.MonkeyPatch) -> None:
    """A saved intermediate on an anti join's inner side holds no lineage: nothing is traced below it."""
    top = views.table("s_orders").groupBy("cust").count().orderBy("cust").limit(1)
    df = views.table("s_big").join(top, views.table("s_big").c == top.cust, "left_anti")
    expected = o.anti(o.scan("s_big", BIG), first_customers(1), lambda x, y: x[0] == y[0])
    traced_exactly(df, expected, monkeypatch)


def first_line_groups(n: int) -> list[o.Row]:
    """`SELECT lk, count(*) FROM s_lines GROUP BY lk ORDER BY lk LIMIT n`."""
    grouped = o.group(o.scan("s_lines", LINES), lambda v: (v[0],), lambda vs: (len(vs),))
    return sorted(grouped, key=lambda r: r[0][0])[:n]


def test_a_limit_over_groups_its_output_does_not_tell_apart(views: SparkSession, monkeypatch: pytest.MonkeyPatch) -> None:
    """`ORDER BY lk LIMIT 1` with `lk` projected away: the groups it cut (lk 3 and 5) count 2
    rows too, and must not be traced with the kept one; the job saves its output with the key."""
    df = views.sql("SELECT count(*) AS n FROM s_lines GROUP BY lk ORDER BY lk LIMIT 1")
    traced_exactly(df, o.select(first_line_groups(1), lambda v: (v[1],)), monkeypatch)


def test_a_count_of_the_first_groups(views: SparkSession, monkeypatch: pytest.MonkeyPatch) -> None:
    """A global count over a LIMIT whose projection keeps no column: the saved limit is widened
    with the groups' key, so its rows still pin their groups."""
    df = views.sql("SELECT count(*) AS n FROM (SELECT lk FROM s_lines GROUP BY lk ORDER BY lk LIMIT 2)")
    expected = o.group(first_line_groups(2), lambda v: (), lambda vs: (len(vs),), global_=True)
    traced_exactly(df, expected, monkeypatch)


def test_the_first_rows_with_their_sort_key_projected_away(views: SparkSession, monkeypatch: pytest.MonkeyPatch) -> None:
    """The customers of the two last orders: customer 10's earlier orders, cut by the limit,
    show the same value and must not be traced with the kept one."""
    df = views.sql("SELECT cust FROM s_orders ORDER BY ok DESC LIMIT 2")
    last = sorted(orders(), key=lambda r: -r[0][0])[:2]
    lin = traced_exactly(df, o.select(last, lambda v: (v[1],)), monkeypatch)
    assert lin.forward("s_orders", ids=[0]).ids().tolist() == []  # order 1: a candidate, cut
