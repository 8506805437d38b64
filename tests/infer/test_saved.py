"""Exact traces joined in-process and through saved intermediates equal the pure-Python
oracle, with no re-run.

Tiny tables built here; every output row is traced backward. The plans are the shapes
where cutting candidates across joins is not exact: a theta condition, a cycle, a
correlated scalar subquery (a left join to a saved aggregate under a filter), NOT IN and
NOT EXISTS (anti joins, with a null on the inner side), uncorrelated scalar subqueries,
a count of counts over a left join (a saved aggregate widened by its dropped key), and an
IN subquery over a grouped HAVING, once at the top and once nested inside another."""

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


def heavy(threshold: int) -> list[o.Row]:
    """`SELECT lk FROM s_lines GROUP BY lk HAVING sum(qty) > threshold`."""
    grouped = o.group(o.scan("s_lines", LINES), lambda v: (v[0],), lambda vs: (sum(x[1] for x in vs),))
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
    return lin


def test_an_in_subquery_over_a_having_is_saved_and_traced_through(views: SparkSession, monkeypatch: pytest.MonkeyPatch) -> None:
    sql = "SELECT cust, count(*) AS n FROM s_orders WHERE ok IN (SELECT lk FROM s_lines GROUP BY lk HAVING sum(qty) > 8) GROUP BY cust"
    kept = o.semi(o.scan("s_orders", ORDERS), heavy(8), lambda x, y: x[0] == y[0])
    expected = o.group(kept, lambda v: (v[1],), lambda vs: (len(vs),))
    lin = traced_exactly(views.sql(sql), expected, monkeypatch)
    assert [t.column_names for t in lin.saved.values()] == [["lk"]]  # projected: the sums are never read
    assert "saved intermediates" in lin.explain()


def test_a_saved_intermediate_nested_inside_another(views: SparkSession, monkeypatch: pytest.MonkeyPatch) -> None:
    inner = "SELECT lk FROM s_lines GROUP BY lk HAVING sum(qty) > 5"
    middle = f"SELECT cust FROM s_orders WHERE ok IN ({inner}) GROUP BY cust HAVING count(*) > 1"
    sql = f"SELECT c FROM s_big WHERE c IN ({middle})"
    orders = o.semi(o.scan("s_orders", ORDERS), heavy(5), lambda x, y: x[0] == y[0])
    customers = o.where(o.group(orders, lambda v: (v[1],), lambda vs: (len(vs),)), lambda v: v[1] > 1)
    expected = o.semi(o.scan("s_big", BIG), customers, lambda x, y: x[0] == y[0])
    traced_exactly(views.sql(sql), expected, monkeypatch)


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


def test_a_correlated_scalar_subquery_goes_through_its_saved_aggregate(
    views: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    sql = "SELECT l.lk, count(*) AS n FROM s_lines l WHERE l.qty >= (SELECT max(qty) FROM s_lines m WHERE m.lk = l.lk) GROUP BY l.lk"
    maxes = o.group(lines(), lambda v: (v[0],), lambda vs: (max(x[1] for x in vs),))
    kept = o.where(o.join(lines(), maxes, lambda x, y: x[0] == y[0], "left", rw=2), lambda v: v[3] is not None and v[1] >= v[3])
    traced_exactly(views.sql(sql), o.group(kept, lambda v: (v[0],), lambda vs: (len(vs),)), monkeypatch)


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


def test_a_count_of_counts_saves_its_inner_aggregate_with_the_key(views: SparkSession, monkeypatch: pytest.MonkeyPatch) -> None:
    sql = (
        "SELECT n, count(*) AS customers FROM (SELECT b.c, count(o.ok) AS n FROM s_big b "
        "LEFT JOIN s_orders o ON o.cust = b.c GROUP BY b.c) GROUP BY n"
    )
    pairs = o.join(o.scan("s_big", BIG), orders(), lambda x, y: x[0] == y[1], "left", rw=2)
    counts = o.group(pairs, lambda v: (v[0],), lambda vs: (sum(1 for v in vs if v[1] is not None),))
    expected = o.group(counts, lambda v: (v[1],), lambda vs: (len(vs),))
    lin = traced_exactly(views.sql(sql), expected, monkeypatch)
    (saved,) = lin.saved.values()
    assert "c" in saved.column_names  # the key the inner aggregate dropped
