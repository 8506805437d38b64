"""Exact traces joined in-process and through saved intermediates equal the pure-Python
oracle, with no re-run.

Tiny tables built here; every output row is traced backward. The plans are the shapes
where cutting candidates across joins is not exact: a theta condition, a cycle, a
correlated scalar subquery (a left join to a saved aggregate under a filter), and an IN
subquery over a grouped HAVING, once at the top and once nested inside another."""

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
