"""One focused test per row of DESIGN.md's semantics table, against the pure-Python oracle.

Each test also checks the oracle's values against Spark's own result, so an oracle
mistake shows up as such, and `assert_same_lineage` checks both directions.
"""

from __future__ import annotations

import datetime
import decimal
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, Observation, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.window import Window

import ember
from ember.capture import sides
from ember.engines.spark.frames import functions_of, is_connect
from ember.engines.spark.jvm import Jvm
from ember.engines.spark.plan_import import import_plan
from ember.plan import ir
from tests.engines.spark.test_round_trip import assert_round_trip
from tests.oracle import rows as o

A = [(1, "x"), (2, "y"), (2, "y"), (3, None)]
B = [(2, "p"), (3, "q"), (4, "r"), (2, "s")]
W = [(1, 1, 10), (1, 2, 20), (1, 3, 30), (1, 4, 40), (2, 1, 50), (2, 3, 60)]
C = [(1, 10, 20), (2, 30, 40)]


@pytest.fixture(scope="module")
def views(spark: SparkSession) -> SparkSession:
    spark.createDataFrame(A, "k int, v string").createOrReplaceTempView("a")
    spark.createDataFrame(B, "k int, w string").createOrReplaceTempView("b")
    spark.createDataFrame(W, "g int, o int, v int").createOrReplaceTempView("w")
    spark.createDataFrame(C, "id int, c1 int, c2 int").createOrReplaceTempView("c")
    return spark


def a() -> list[o.Row]:
    return o.scan("a", A)


def b() -> list[o.Row]:
    return o.scan("b", B)


SCALAR_PANDAS, GROUPED_AGG_PANDAS = 200, 202  # PythonEvalType


def pandas_udf_of(df: DataFrame, dtype: str, eval_type: int) -> Callable[[Callable[..., Any]], Any]:
    """PySpark's `pandas_udf` of `df`'s session kind: PySpark's own makes classic ones in a
    process that holds a classic session (Connect's takes the eval type its hints give)."""
    if not is_connect(df):
        return F.pandas_udf(dtype)  # type: ignore[call-overload,no-any-return]
    from pyspark.sql.connect.udf import _create_udf

    return lambda f: _create_udf(f, dtype, eval_type)


def window_of(df: DataFrame) -> Any:
    """PySpark's `Window` of `df`'s session kind (as `functions_of`)."""
    if is_connect(df):
        from pyspark.sql.connect.window import Window as RemoteWindow

        return RemoteWindow
    return Window


def check(df: DataFrame, expected: list[o.Row]) -> ember.Lineage:
    """Oracle values = Spark's values; ember's lineage = oracle's (both strategies and lazy
    inference, exact and superset); the result is the job's. Over Spark Connect
    (tests/capture/test_connect.py) all but the py4j round trip, which is a classic
    session's."""
    classic = not is_connect(df)
    if classic:
        assert_round_trip(df)  # the JVM boundary's two messages agree on this plan
    # Defer's output is the user's job's own result (its lineage is captured afterwards): the
    # plain run the oracle's values and Inject's output are checked against, with no other run
    deferred = ember.capture(df, strategy="defer")
    plain = sorted(repr(v) for v in o.value_rows(deferred.output().drop_columns(["ember_oid"])))
    assert plain == sorted(repr(v) for v, _ in expected), "the oracle disagrees with Spark on values"
    o.assert_same_lineage(deferred, expected)
    lin = ember.capture(df, strategy="inject")
    got = sorted(repr(v) for v in o.value_rows(lin.output().drop_columns(["ember_oid"])))
    assert got == plain, "capture (inject) changed the job's result"
    o.assert_same_lineage(lin, expected)
    for exact in (True, False):
        o.assert_inferred(ember.infer(df, exact=exact), expected)
    return lin


def test_filter_project_computed_columns(views: SparkSession) -> None:
    check(views.sql("SELECT k, k * 10 AS k10 FROM a WHERE k > 1"),
          o.select(o.where(a(), lambda v: v[0] > 1), lambda v: (v[0], v[0] * 10)))


def test_python_udf_and_pandas_udf(views: SparkSession) -> None:
    fn = functions_of(views.table("a"))
    double = fn.udf(lambda x: x * 2, "int")

    @pandas_udf_of(views.table("a"), "int", SCALAR_PANDAS)
    def plus_one(s: pd.Series) -> pd.Series:
        return s + 1

    df = views.table("a").select("k", double("k").alias("d"), plus_one("k").alias("p")).filter("d > 2")
    check(df, o.where(o.select(a(), lambda v: (v[0], v[0] * 2, v[0] + 1)), lambda v: v[1] > 2))


def test_pandas_aggregate_udfs(views: SparkSession) -> None:
    """A pandas UDAF: Spark runs no other aggregate function beside it, so its groups are
    never carried as lists (Spark refused the job: INVALID_PANDAS_UDF_PLACEMENT)."""

    @pandas_udf_of(views.table("w"), "int", GROUPED_AGG_PANDAS)
    def spread(v: pd.Series) -> int:
        return int(v.max() - v.min())

    w = o.scan("w", W)
    check(views.table("w").groupBy("g").agg(spread("v").alias("s")),
          o.group(w, lambda v: (v[0],), lambda vs: (max(x[2] for x in vs) - min(x[2] for x in vs),)))
    check(views.table("w").agg(spread("o").alias("s")), o.group(w, lambda v: (), lambda vs: (3,), global_=True))


def test_pandas_window_udfs_over_bounded_frames(views: SparkSession) -> None:
    """A pandas UDAF over a bounded frame: the frame counts the rewrite adds are SQL window
    functions, which Spark runs in a window node of their own (it refused one node holding
    both: "Found different window function type")."""

    @pandas_udf_of(views.table("w"), "int", GROUPED_AGG_PANDAS)
    def total(v: pd.Series) -> int:
        return int(v.sum())

    rows = window_of(views.table("w")).partitionBy("g").orderBy("o").rowsBetween(-1, 0)
    check(views.table("w").withColumn("t", total("v").over(rows)),
          o.window(o.scan("w", W), lambda v: (v[0],), lambda v: v[1], lambda i, n: (i - 1, i + 1),
                   lambda fs, i: sum(x[2] for x in fs)))


def test_sort(views: SparkSession) -> None:
    check(views.sql("SELECT k, v FROM a ORDER BY k DESC"), a())


def test_limit_and_top_k(views: SparkSession) -> None:
    lin = check(views.sql("SELECT k, w FROM b ORDER BY w LIMIT 2"), b()[:2])
    assert lin.output().column("w").to_pylist() == ["p", "q"]
    check(views.sql("SELECT k FROM b LIMIT 0"), [])


def test_inner_cross_theta_joins(views: SparkSession) -> None:
    check(views.sql("SELECT a.k, b.w FROM a JOIN b ON a.k = b.k"),
          o.select(o.join(a(), b(), lambda x, y: x[0] == y[0]), lambda v: (v[0], v[3])))
    check(views.sql("SELECT a.k, b.w FROM a CROSS JOIN b"),
          o.select(o.join(a(), b(), lambda x, y: True), lambda v: (v[0], v[3])))
    check(views.sql("SELECT a.k, b.k FROM a JOIN b ON a.k < b.k"),
          o.select(o.join(a(), b(), lambda x, y: x[0] < y[0]), lambda v: (v[0], v[2])))


@pytest.mark.parametrize("kind", ["left", "right", "full"])
def test_outer_joins(views: SparkSession, kind: str) -> None:
    joined = o.join(a(), b(), lambda x, y: x[0] == y[0], kind, lw=2, rw=2)
    check(views.sql(f"SELECT a.k, a.v, b.k, b.w FROM a {kind} JOIN b ON a.k = b.k"), joined)


def test_an_outer_join_spark_could_drop_still_gives_its_matched_rows(views: SparkSession) -> None:
    """Spark removes a left join whose right side is unique on the key and unread above it;
    the rows it matched are lineage all the same."""
    per_key = o.group(b(), lambda v: (v[0],), lambda vs: (len(vs),))
    joined = o.join(a(), per_key, lambda x, y: x[0] == y[0], "left", rw=2)
    expected = o.group(joined, lambda v: (v[0],), lambda vs: (len(vs),))
    sql = "SELECT a.k, count(*) FROM a LEFT JOIN (SELECT k, count(*) AS n FROM b GROUP BY k) c ON a.k = c.k GROUP BY a.k"
    check(views.sql(sql), expected)


def test_semi_joins_exists_and_in(views: SparkSession) -> None:
    expected = o.semi(a(), b(), lambda x, y: x[0] == y[0])
    check(views.sql("SELECT * FROM a WHERE EXISTS (SELECT 1 FROM b WHERE b.k = a.k)"), expected)
    check(views.sql("SELECT * FROM a WHERE k IN (SELECT k FROM b)"), expected)
    check(views.sql("SELECT * FROM a WHERE EXISTS (SELECT 1 FROM b WHERE b.k > 3)"),
          o.semi(a(), b(), lambda x, y: y[0] > 3))


def test_anti_joins_not_exists_and_not_in(views: SparkSession) -> None:
    expected = o.anti(a(), b(), lambda x, y: x[0] == y[0])
    check(views.sql("SELECT * FROM a WHERE NOT EXISTS (SELECT 1 FROM b WHERE b.k = a.k)"), expected)
    check(views.sql("SELECT * FROM a WHERE k NOT IN (SELECT k FROM b)"), expected)


def test_grouped_aggregate_with_having(views: SparkSession) -> None:
    check(views.sql("SELECT k, count(*) AS n FROM a GROUP BY k HAVING count(*) > 1"),
          o.where(o.group(a(), lambda v: (v[0],), lambda vs: (len(vs),)), lambda v: v[1] > 1))


def test_global_aggregate_also_over_no_rows(views: SparkSession) -> None:
    check(views.sql("SELECT sum(k) AS s FROM a"), o.group(a(), lambda v: (), lambda vs: (sum(x[0] for x in vs),)))
    check(views.sql("SELECT count(*) AS n FROM a WHERE k > 10"),
          o.group(o.where(a(), lambda v: v[0] > 10), lambda v: (), lambda vs: (len(vs),), global_=True))


def test_aggregates_spark_would_merge_keep_their_own_rows(views: SparkSession) -> None:
    """Spark merges aggregates over one relation into one (`MergeSubplans`), a filter
    becoming its column's FILTER clause; ember reads them unmerged."""
    def count(rows: list[o.Row]) -> list[o.Row]:
        return o.group(rows, lambda v: (), lambda vs: (len(vs),), global_=True)

    check(views.sql("SELECT count(*) AS n FROM a UNION ALL SELECT count(*) AS n FROM a WHERE k > 1"),
          count(a()) + count(o.where(a(), lambda v: v[0] > 1)))
    ends = o.where(a(), lambda v: v[0] != 2)  # k > 2 or k < 2: rows 0 and 3, not the two k = 2
    check(views.sql("SELECT (SELECT count(*) FROM a WHERE k > 2) AS n, (SELECT count(*) FROM a WHERE k < 2) AS m"),
          [((1, 1), frozenset().union(*(lin for _, lin in ends)))])


def test_distinct_and_count_distinct(views: SparkSession) -> None:
    check(views.sql("SELECT DISTINCT k, v FROM a"), o.distinct(a()))
    check(views.sql("SELECT count(DISTINCT k) AS n, count(DISTINCT v) AS m FROM a"),
          o.group(a(), lambda v: (), lambda vs: (len({x[0] for x in vs}), len({x[1] for x in vs} - {None}))))


def test_scalar_subqueries(views: SparkSession) -> None:
    top = o.group(b(), lambda v: (), lambda vs: (max(x[0] for x in vs),))[0]
    check(views.sql("SELECT k FROM a WHERE k + 2 > (SELECT max(k) FROM b)"),
          [(v[:1], lin | top[1]) for v, lin in a() if v[0] + 2 > top[0][0]])
    # correlated: each a row with the lineage of its own count over b
    expected = [((v[0], sum(1 for w, _ in b() if w[0] == v[0])),
                 lin.union(*(bl for w, bl in b() if w[0] == v[0]))) for v, lin in a()]
    check(views.sql("SELECT k, (SELECT count(*) FROM b WHERE b.k = a.k) AS n FROM a"), expected)
    # correlated on `>`: Spark joins the inner rows with the distinct outer values (a domain),
    # which are no lineage: each a row gets the b rows it counted, not the a rows equal to it
    expected = [((v[0], sum(1 for w, _ in b() if w[0] > v[0])),
                 lin.union(*(bl for w, bl in b() if w[0] > v[0]))) for v, lin in a()]
    check(views.sql("SELECT k, (SELECT count(*) FROM b WHERE b.k > a.k) AS n FROM a"), expected)
    # the same with the outer value a Python UDF's: Spark evaluates it again over its copy of a
    plus = functions_of(views.table("a")).udf(lambda x: x + 1, "int")
    views.table("a").select("k", plus("k").alias("u")).createOrReplaceTempView("au")
    expected = [((v[0], sum(1 for w, _ in b() if w[0] > v[0] + 1)),
                 lin.union(*(bl for w, bl in b() if w[0] > v[0] + 1))) for v, lin in a()]
    check(views.sql("SELECT k, (SELECT count(*) FROM b WHERE b.k > au.u) AS n FROM au"), expected)
    # a domain inside an uncorrelated scalar's own plan: the scalar is b's first row by w
    # (2, 'p') with its count of the a rows above 2; b's other row of k 2 is no lineage
    first = b()[0]
    above = [(v, lin) for v, lin in a() if v[0] > first[0][0]]
    scalar = first[1].union(*(lin for _, lin in above))
    nested = ("SELECT k FROM a WHERE k >= (SELECT n FROM (SELECT b.k, b.w, "
              "(SELECT count(*) FROM a WHERE a.k > b.k) AS n FROM b) ORDER BY w LIMIT 1)")
    check(views.sql(nested), [(v[:1], lin | scalar) for v, lin in a() if v[0] >= len(above)])
    # a scalar column nothing reads is used by no row: Spark prunes it, and ember adds nothing
    dropped = "SELECT k FROM (SELECT k, (SELECT count(*) FROM b WHERE b.k = a.k) AS n, (SELECT max(k) FROM b) AS m FROM a)"
    check(views.sql(dropped), o.select(a(), lambda v: (v[0],)))


@pytest.mark.parametrize(
    ("second", "merged"), [("max(k) FROM b", True), ("count(*) FROM b WHERE k > 3", False)], ids=["same rows", "fewer rows"]
)
def test_scalar_subqueries_merge_only_over_the_same_rows(views: SparkSession, second: str, merged: bool) -> None:
    # Spark computes subqueries over the same rows in one (`MergeSubplans`: TPC-DS Q9's
    # buckets). Over fewer rows (a filter the other lacks) they stay apart, each value
    # keeping its own rows, where Spark's plain job merges them (the filter becomes a
    # FILTER clause) and the merged group would be every row.
    df = views.sql(f"SELECT 1 AS s, (SELECT count(*) FROM b) AS n UNION ALL SELECT 2, (SELECT {second})")
    plan, _, _ = import_plan(Jvm(views), df)
    made = [s for n in ir.walk(plan) for e in n.expressions() for s in e.subqueries]
    assert len(made) == 2 and (made[0] == made[1]) == merged
    over = b() if merged else o.where(b(), lambda v: v[0] > 3)
    value = max(v[0] for v, _ in over) if merged else len(over)
    whole = frozenset().union(*(lin for _, lin in b()))
    check(df, [((1, len(b())), whole), ((2, value), frozenset().union(*(lin for _, lin in over)))])


def test_union_all_and_distinct(views: SparkSession) -> None:
    ks = o.select(a(), lambda v: (v[0],)) + o.select(b(), lambda v: (v[0],))
    check(views.sql("SELECT k FROM a UNION ALL SELECT k FROM b"), ks)
    check(views.sql("SELECT k FROM a UNION SELECT k FROM b"), o.distinct(ks))


@pytest.mark.parametrize("op", ["intersect", "except"])
@pytest.mark.parametrize("all_", [False, True])
def test_intersect_and_except(views: SparkSession, op: str, all_: bool) -> None:
    sql = f"SELECT k FROM a {op.upper()} {'ALL' if all_ else ''} SELECT k FROM b"
    check(views.sql(sql), o.set_op(o.select(a(), lambda v: (v[0],)), o.select(b(), lambda v: (v[0],)), op, all_))


def test_except_all_against_an_aggregate(views: SparkSession) -> None:
    """Spark's EXCEPT ALL rewrite tags the right side's rows `-1 AS vcol`; the optimizer
    pushes that tag below limits and sorts and merges it into an aggregate, and those rows
    are still no lineage."""
    counted = o.group(b(), lambda v: (v[0],), lambda vs: (len(vs),))
    check(views.sql("SELECT k, 2L AS n FROM a EXCEPT ALL SELECT k, count(*) AS n FROM b GROUP BY k"),
          o.set_op(o.select(a(), lambda v: (v[0], 2)), counted, "except", True))  # b's (2, 2) removes one a row
    first = sorted(counted, key=lambda r: r[0][0])[:1]  # the tag goes below the limit and the sort too
    check(views.sql("SELECT k, 2L AS n FROM a EXCEPT ALL (SELECT k, count(*) AS n FROM b GROUP BY k ORDER BY k LIMIT 1)"),
          o.set_op(o.select(a(), lambda v: (v[0], 2)), first, "except", True))


def test_window_functions(views: SparkSession) -> None:
    w = o.scan("w", W)
    part, order = (lambda v: (v[0],)), (lambda v: v[1])
    check(views.sql("SELECT *, row_number() OVER (PARTITION BY g ORDER BY o) AS r FROM w"),
          o.window(w, part, order, lambda i, n: (0, n), lambda rows, i: i + 1))
    check(views.sql("SELECT *, sum(v) OVER (PARTITION BY g ORDER BY o) AS s FROM w"),
          o.window(w, part, order, lambda i, n: (0, i + 1), lambda rows, i: sum(r[2] for r in rows)))
    check(views.sql("SELECT *, sum(v) OVER (PARTITION BY g ORDER BY o ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) AS s FROM w"),
          o.window(w, part, order, lambda i, n: (i - 1, i + 2), lambda rows, i: sum(r[2] for r in rows)))
    check(views.sql("SELECT *, sum(v) OVER (ORDER BY g, o ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS s FROM w"),
          o.window(w, lambda v: (), lambda v: v[:2], lambda i, n: (i - 1, i + 1), lambda rows, i: sum(r[2] for r in rows)))
    check(views.sql("SELECT *, lag(v) OVER (PARTITION BY g ORDER BY o) AS l FROM w"),
          o.window(w, part, order, lambda i, n: (i - 1, i), lambda rows, i: rows[0][2] if rows else None))
    check(views.sql("SELECT *, sum(v) OVER (PARTITION BY g) AS s FROM w"),
          o.window(w, part, order, lambda i, n: (0, n), lambda rows, i: sum(r[2] for r in rows)))
    # a window column nothing reads is used by no row: Spark prunes the window, ember adds nothing
    check(views.sql("SELECT g, o FROM (SELECT *, sum(v) OVER (PARTITION BY g) AS s FROM w)"),
          o.select(w, lambda v: v[:2]))


_RANGED = [
    (i, i % 3, (i * 7) % 13 / 2 if i % 11 else None, datetime.date(2024, 1, 1) + datetime.timedelta(days=(i * 5) % 17),
     datetime.datetime(2024, 1, 1) + datetime.timedelta(hours=(i * 7) % 30))
    for i in range(40)
]


@pytest.mark.parametrize(
    ("order", "lo", "hi", "frame"),
    [
        ("x", -1.5, 0.5, "x RANGE BETWEEN 1.5 PRECEDING AND 0.5 FOLLOWING"),
        ("x", -1.0, 1.0, "x DESC RANGE BETWEEN 1.0 PRECEDING AND 1.0 FOLLOWING"),
        ("x", 0.5, None, "x RANGE BETWEEN 0.5 FOLLOWING AND UNBOUNDED FOLLOWING"),
        ("x", None, -0.5, "x DESC RANGE BETWEEN UNBOUNDED PRECEDING AND 0.5 PRECEDING"),
        ("d", -3, 0, "d RANGE BETWEEN INTERVAL 3 DAYS PRECEDING AND CURRENT ROW"),
        ("ts", -5, 2, "ts RANGE BETWEEN INTERVAL 5 HOURS PRECEDING AND INTERVAL 2 HOURS FOLLOWING"),
    ],
)
def test_range_frames_with_value_offsets(
    spark: SparkSession, order: str, lo: float | None, hi: float | None, frame: str
) -> None:
    """A RANGE frame whose offsets are values of the ORDER BY column's own type (a double,
    an interval of a date or timestamp): the row and the rows whose value lies within them.
    The oracle is the frame's definition over the rows."""
    schema = "id int, k int, x double, d date, ts timestamp"
    spark.createDataFrame(_RANGED, schema).createOrReplaceTempView("ranged")
    query = f"SELECT id, count(*) OVER (PARTITION BY k ORDER BY {frame}) AS n FROM ranged"
    lin = ember.capture(spark.sql(query), strategy="inject")
    values = {r[0]: _ordered_by(r, order) for r in _RANGED}
    sign = -1 if "DESC" in frame else 1
    for oid, out in enumerate(lin.output().to_pylist()):
        me = _RANGED[out["id"]]
        framed = [r[0] for r in _RANGED if r[1] == me[1] and _within(values[me[0]], values[r[0]], sign, lo, hi)]
        assert out["n"] == len(framed)
        assert lin.backward(oids=[oid]).ids("ranged").tolist() == sorted({*framed, me[0]})  # and the row itself


def _ordered_by(row: tuple[Any, ...], order: str) -> float | None:
    """A row's ORDER BY value in the frame's units (days for a date, hours for a timestamp)."""
    v = row[{"x": 2, "d": 3, "ts": 4}[order]]
    if v is None or order == "x":
        return v  # type: ignore[no-any-return]
    moment = v if order == "ts" else datetime.datetime.combine(v, datetime.time())
    return (moment - datetime.datetime(2024, 1, 1)).total_seconds() / (3600 if order == "ts" else 86400)


def _within(mine: float | None, theirs: float | None, sign: int, lo: float | None, hi: float | None) -> bool:
    """Spark's RANGE frame (None: unbounded): nulls sort first ascending, last descending,
    and are each other's peers; a null row's value offsets stop at its peers."""
    nulls_first = sign == 1
    if mine is None:
        return theirs is None or ((hi is None) if nulls_first else (lo is None))
    if theirs is None:
        return (lo is None) if nulls_first else (hi is None)
    step = sign * (theirs - mine)
    return (lo is None or lo <= step) and (hi is None or step <= hi)


def test_a_window_over_a_sample_drawn_anew_each_run(spark: SparkSession) -> None:
    """A rank's lineage is its whole partition, which the side-table job must see as the
    job drew it (TABLESAMPLE draws its seed per run): the oracle is the output itself."""
    spark.range(300).selectExpr("id", "id % 4 AS k", "(id * 7) % 11 AS x").createOrReplaceTempView("drawn")
    query = "SELECT id, k, rank() OVER (PARTITION BY k ORDER BY x) AS r FROM drawn TABLESAMPLE (40 PERCENT)"
    lin = ember.capture(spark.sql(query), strategy="inject")
    out = lin.output().to_pylist()
    assert 0 < len(out) < 300
    for oid, row in enumerate(out):
        want = sorted(r["id"] for r in out if r["k"] == row["k"])
        assert lin.backward(oids=[oid]).ids("range").tolist() == want


def test_explode_and_posexplode(views: SparkSession) -> None:
    check(views.sql("SELECT k, explode(array(1, 2)) AS e FROM a"),
          [((*v[:1], e), lin) for v, lin in a() for e in (1, 2)])
    check(views.sql("SELECT k, posexplode(array(7, 8)) FROM a"),
          [((*v[:1], i, e), lin) for v, lin in a() for i, e in enumerate((7, 8))])


def test_python_udtfs_called_per_row(views: SparkSession) -> None:
    """A Python UDTF over each row's values (LATERAL) or over a TABLE argument, row by row
    or in Arrow batches: each row its eval() yields has the lineage of the row it was
    called for (Spark keeps a LATERAL call's row beside its output; a TABLE call's not)."""

    class Repeat:
        def eval(self, k: int) -> Iterator[tuple[int]]:
            yield from ((i,) for i in range(k if k > 1 else 0))

    class Tens:
        def eval(self, row: Row) -> Iterator[tuple[int, str]]:
            if row["k"] > 1:
                yield row["k"] * 10, row["v"]

    repeated = [((v[0], i), lin) for v, lin in a() for i in range(v[0] if v[0] > 1 else 0)]
    udtf = functions_of(views.table("a")).udtf
    for arrow in (False, True):  # declared deterministic, so defer may run them again
        views.udtf.register("repeat_k", udtf(Repeat, returnType="i: int", useArrow=arrow).asDeterministic())
        check(views.sql("SELECT k, i FROM a, LATERAL repeat_k(k)"), repeated)
        views.udtf.register("tens", udtf(Tens, returnType="k10: int, v: string", useArrow=arrow).asDeterministic())
        check(views.sql("SELECT * FROM tens(TABLE(a))"), [((v[0] * 10, v[1]), lin) for v, lin in a() if v[0] > 1])
    views.udtf.register("repeat_k", udtf(Repeat, returnType="i: int"))  # as UDTFs are by default
    o.assert_same_lineage(ember.capture(views.sql("SELECT k, i FROM a, LATERAL repeat_k(k)")), repeated)  # injected


def _grouped_map(rows: list[o.Row], key: Any, f: Any) -> list[o.Row]:
    """The oracle of a grouped map: `f`'s rows for a group, each with the group's lineage."""
    groups = o.group(rows, key, lambda vs: (vs,))
    return [(out, lin) for (*_, vs), lin in groups for out in f(vs)]


def test_grouped_map_in_pandas_and_arrow(views: SparkSession) -> None:
    """`applyInPandas` / `applyInArrow`: the function sees its group's rows as one table and
    returns any rows, so each row it returns has the whole group's lineage; groups whose
    key is null, or that return no rows, included; the key handed back as it went in."""

    def top(pdf: pd.DataFrame) -> pd.DataFrame:  # the group's largest value, if over 10
        best = pdf.nlargest(1, "v")
        return best[best.v > 10][["v"]]

    def ranked(key: tuple[Any, ...], pdf: pd.DataFrame) -> pd.DataFrame:  # one row per value, by rank
        return pd.DataFrame({0: [key[0]] * len(pdf), 1: pdf.v.rank(method="first").astype("int64").tolist()})

    def ranks(key: tuple[Any, ...], frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:  # iterator form
        for pdf in frames:
            yield pd.DataFrame({"g": [key[0]] * len(pdf), "big": (pdf.v > 20).tolist()})

    def firsts(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield batch.select(["o"]).slice(0, 0)  # nothing: its group has no rows in the result

    def spread(table: pa.Table) -> pa.Table:
        values = table.column("v").to_pylist()
        return pa.table({"g": table.column("g")[:1], "spread": pa.array([max(values) - min(values)], pa.int32())})

    rows = o.scan("wn", [*W, (None, 9, 5)])
    views.createDataFrame([*W, (None, 9, 5)], "g int, o int, v int").createOrReplaceTempView("wn")
    df = views.table("wn")
    cases = [
        (df.groupBy("g").applyInPandas(top, "v int"),
         _grouped_map(rows, lambda v: (v[0],), lambda vs: [(max(x[2] for x in vs),)] if max(x[2] for x in vs) > 10 else [])),
        (df.filter("o > 1").groupBy(functions_of(df).expr("o % 2").alias("odd"), "g").applyInPandas(ranked, "odd int, rank long"),
         _grouped_map(o.where(rows, lambda v: v[1] > 1), lambda v: (v[1] % 2, v[0]),
                      lambda vs: [(vs[0][1] % 2, i + 1) for i in range(len(vs))])),
        (df.groupBy("g").applyInArrow(spread, "g int, spread int"),
         _grouped_map(rows, lambda v: (v[0],), lambda vs: [(vs[0][0], max(x[2] for x in vs) - min(x[2] for x in vs))])),
        *([] if views.version.startswith("4.0.") else [  # the iterator forms came with Spark 4.1
            (df.groupBy("g").applyInPandas(ranks, "g int, big boolean"),
             _grouped_map(rows, lambda v: (v[0],), lambda vs: [(vs[0][0], v > 20) for _, _, v in vs])),
            (df.groupBy("g").applyInArrow(firsts, "o int"), []),
        ]),
        # over a limit, which capture caches (its rows could differ in a second run): the
        # function still gets the input's own columns, not the slots beside them
        (df.orderBy("o").limit(5).groupBy("g").applyInPandas(lambda pdf: pdf.assign(v=pdf.v * 2), "g int, o int, v int"),
         _grouped_map(o.where(rows, lambda v: v[1] <= 3), lambda v: (v[0],), lambda vs: [(g, o_, v * 2) for g, o_, v in vs])),
    ]
    for job, expected in cases:
        plain = sorted(repr(tuple(r)) for r in job.collect())
        assert plain == sorted(repr(v) for v, _ in expected), "the oracle disagrees with Spark on values"
        for strategy in ("defer", "inject"):
            lin = ember.capture(job, strategy=strategy)
            assert lin.output().column_names == [*job.columns, "ember_oid"]
            o.assert_same_lineage(lin, expected)
        with pytest.raises(ember.UnsupportedOperatorError, match=r"ember\.infer cannot trace .*applyIn"):
            ember.infer(job)


def test_partition_map_in_pandas_and_arrow(views: SparkSession) -> None:
    """`mapInPandas` / `mapInArrow`: the function sees its partition's rows as an iterator
    and returns any rows, so each row it returns has the whole partition's lineage. The
    oracle is the function's own view: each row it returns lists the `o` of every row its
    partition held (an empty partition's rows, none), and those rows are its lineage."""
    pm = [(i % 3, i, i * 10) for i in range(24)]
    views.createDataFrame(pm, "g int, o int, v int").createOrReplaceTempView("pm")
    rows = {v[1]: lin for v, lin in o.scan("pm", pm)}

    def tagged(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:  # every row, read whole first
        pdfs = list(frames)
        if pdfs:
            whole = pd.concat(pdfs)
            part = ",".join(map(str, sorted(whole.o.tolist())))
            yield pd.DataFrame({"o": whole.o, "w": whole.v * 2, "part": part})

    def summary(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:  # a row per partition, empty too
        os = [x for b in batches for x in b.column("o").to_pylist()]
        yield pa.RecordBatch.from_pydict({"n": pa.array([len(os)], pa.int64()), "part": [",".join(map(str, sorted(os)))]})

    table = views.table("pm")
    fn = functions_of(table)
    sums = table.groupBy("g").agg(fn.sum("v").alias("v"), fn.max("o").alias("o"))
    cases = [
        (table.repartition(4, "g").mapInPandas(tagged, "o int, w long, part string"), rows),
        (table.filter("o % 5 <> 0").repartition(3, "g").mapInArrow(summary, "n long, part string"), rows),
        (table.repartition(2, "g").mapInPandas(tagged, "o int, w long, part string").select("o", "part")
         .union(table.repartition(3, "o").mapInPandas(tagged, "o int, w long, part string").select("o", "part")), rows),
        # under an aggregate: a partition's rows are one group (a side table, under a HAVING)
        (table.repartition(3, "g").mapInArrow(summary, "n long, part string").groupBy("part").agg(fn.sum("n").alias("n"))
         .where("n >= 0"), rows),
        # over an aggregate: a group's row stands for its rows
        (sums.repartition(2, "g").mapInPandas(tagged, "o int, w long, part string"),
         {max(v[1] for v in pm if v[0] == g): frozenset().union(*(rows[v[1]] for v in pm if v[0] == g)) for g in range(3)}),
    ]
    for job, lineage_of in cases:
        lin = ember.capture(job)
        assert lin.mode == "inject"
        got = o.value_rows(lin.output().drop_columns(["ember_oid"]))
        assert sorted(map(repr, got)) == sorted(repr(tuple(r)) for r in job.collect())
        at = job.columns.index("part")
        expected = [(r, frozenset().union(*(lineage_of[int(x)] for x in r[at].split(",") if x))) for r in got]
        assert any(not lin for _, lin in expected) == ("n" in job.columns), "an empty partition's row, only where made"
        o.assert_same_lineage(lin, expected)
        with pytest.raises(ember.EmberError, match="strategy='inject'"):
            ember.capture(job, strategy="defer")
        with pytest.raises(ember.UnsupportedOperatorError, match=r"ember\.infer cannot trace a partition map"):
            ember.infer(job)

    # inside a scalar subquery too: a second run could cut its partitions otherwise
    table.repartition(2, "g").mapInPandas(tagged, "o int, w long, part string").createOrReplaceTempView("mapped")
    nested = views.sql("SELECT o FROM pm WHERE o < (SELECT max(o) - 3 FROM mapped)")
    with pytest.raises(ember.EmberError, match="strategy='inject'"):
        ember.capture(nested, strategy="defer")
    assert ember.capture(nested).mode == "inject"

    # A function that stops reading still saw its partition (the rest is read for it): the
    # partitions are those the reporting function lists over the same repartition.
    def first(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        yield next(frames, pd.DataFrame({"o": []}))[["o"]].head(1)

    parts = {r.o: r.part for r in table.repartition(4, "g").mapInPandas(tagged, "o int, w long, part string").collect()}
    views.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "2")  # a partition in several batches
    try:
        lin = ember.capture(table.repartition(4, "g").mapInPandas(first, "o int"))
    finally:
        views.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    expected = [((x,), frozenset().union(*(rows[int(y)] for y in parts[x].split(",")))) for (x,) in
                o.value_rows(lin.output().drop_columns(["ember_oid"]))]
    assert len(expected) == len({*parts.values()})
    o.assert_same_lineage(lin, expected)


def test_a_partition_map_whose_output_spark_stops_reading_is_captured_again_over_a_cached_input(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under a LIMIT, Spark stops reading a task's output early, so the wrapped function
    never ends and never reports the partition: capture notices and runs again over a
    cached input, whose partitions a side-table job lists. `spark.range` cuts its rows
    into equal, consecutive partitions: that is the oracle."""
    unreported: list[str] = []
    reported = sides._reported

    def watched(*args: Any) -> pa.Table:
        try:
            return reported(*args)
        except sides.Unreported:
            unreported.append("x")
            raise

    monkeypatch.setattr(sides, "_reported", watched)

    def chunks(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for pdf in frames:
            for i in range(0, len(pdf), 50):
                yield pdf.iloc[i : i + 50]

    n = 40_000
    job = spark.range(0, n, numPartitions=2).mapInPandas(chunks, "id long").limit(3)
    lin = ember.capture(job)
    assert unreported and lin.output().column("id").to_pylist() == [0, 1, 2]
    assert lin.backward(oids=[1]).ids("range").tolist() == list(range(n // 2))
    assert lin.forward("range", ids=[n // 2 - 1]).ids().tolist() == [0, 1, 2]
    assert lin.forward("range", ids=[n // 2]).ids().tolist() == []


def test_cogrouped_map_in_pandas_and_arrow(views: SparkSession) -> None:
    """`cogroup().applyInPandas` / `applyInArrow`: the function sees a key's groups of both
    inputs, either possibly empty, so each row it returns has both groups' lineage."""

    def joined(key: tuple[Any, ...], left: pd.DataFrame, right: pd.DataFrame) -> pd.DataFrame:
        return pd.DataFrame({"k": [key[0]], "n": [len(left) * 10 + len(right)]})

    def tagged(left: pa.Table, right: pa.Table) -> pa.Table:  # the left rows, each with the right's count
        return left.select(["k"]).append_column("n", pa.array([right.num_rows] * left.num_rows, pa.int64()))

    def both(f: Any) -> list[o.Row]:  # every key of either side, with its groups' rows
        keys = {v[0] for v, _ in a() + b()}
        return [(out, lin) for key in keys
                for out, lin in f(key, [r for r in a() if r[0][0] == key], [r for r in b() if r[0][0] == key])]

    def union(*groups: list[o.Row]) -> o.Lin:
        return frozenset().union(*(lin for g in groups for _, lin in g))

    cogrouped = views.table("a").groupBy("k").cogroup(views.table("b").groupBy("k"))
    cases = [
        (cogrouped.applyInPandas(joined, "k int, n long"),
         both(lambda key, ls, rs: [((key, len(ls) * 10 + len(rs)), union(ls, rs))])),
        (cogrouped.applyInArrow(tagged, "k int, n long"),
         both(lambda key, ls, rs: [((key, len(rs)), union(ls, rs)) for _ in ls])),
    ]
    for job, expected in cases:
        plain = sorted(repr(tuple(r)) for r in job.collect())
        assert plain == sorted(repr(v) for v, _ in expected), "the oracle disagrees with Spark on values"
        for strategy in ("defer", "inject"):
            o.assert_same_lineage(ember.capture(job, strategy=strategy), expected)


def test_grouped_map_keys_of_every_kind_come_back(spark: SparkSession) -> None:
    """The wrapper hands each group's keys back through pandas or Arrow: timestamps,
    decimals, strings and dates, null or not, must come back equal to the keys Spark
    grouped by, or the rows lose their group."""
    rows = [
        (datetime.datetime(2024, 1, 1, 10), decimal.Decimal("1.50"), "a", datetime.date(2024, 1, 1), 1),
        (datetime.datetime(2024, 1, 1, 10), decimal.Decimal("1.50"), "a", datetime.date(2024, 1, 1), 2),
        (None, None, None, None, 3),
        (None, None, None, None, 4),
        (datetime.datetime(1999, 12, 31, 23, 59, 59, 123456), decimal.Decimal("-2.25"), "b", datetime.date(1900, 1, 1), 5),
    ]
    df = spark.createDataFrame(rows, "t timestamp, d decimal(10,2), s string, dt date, v int")
    grouped = df.groupBy("t", "d", "s", "dt")
    jobs = [
        grouped.applyInPandas(lambda pdf: pd.DataFrame({"v": pdf.v.tolist()}), "v int"),  # a row per row
        grouped.applyInArrow(lambda t: t.select(["v"]).slice(0, 1), "v int"),  # one row per group
    ]
    for job in jobs:
        lin = ember.capture(job, strategy="inject")
        for oid, v in enumerate(lin.output().column("v").to_pylist()):  # v 1, 2 | 3, 4 | 5: rids 0, 1 | 2, 3 | 4
            assert lin.backward(oids=[oid]).ids(lin.sources[0]).tolist() == [[0, 1], [2, 3], [4]][(v - 1) // 2]


@pytest.mark.filterwarnings("ignore:If `index_col` is not specified")  # the default index is the point
def test_pandas_on_spark_default_index(spark: SparkSession, tmp_path: Path) -> None:
    """pandas-on-Spark numbers a read's rows (its default index) in the order Spark reads
    them (the larger file first): kept through a filter, a sort and a head, each row still
    has the one row it came from."""
    import pyspark.pandas as ps

    if spark.version.startswith("4.0."):  # its pandas-on-Spark refuses ANSI mode (Spark's default) unless told
        ps.set_option("compute.fail_on_ansi_mode", False)
    values = [5, 1, 7, 2, 9, 4, 6]  # rids in path order
    for n, rows in enumerate((values[:3], values[3:])):
        pq.write_table(pa.table({"k": [r % 3 for r in rows], "v": rows}), tmp_path / f"part-{n}.parquet")
    psdf = ps.read_parquet(str(tmp_path))
    job = psdf[psdf.v > 1].sort_values("v").head(4).to_spark(index_col="idx")
    plain = [tuple(r) for r in job.collect()]
    assert [v for *_, v in plain] == [2, 4, 5, 6]
    for strategy in ("inject", "auto"):  # (its sort reads monotonically_increasing_id: defer refuses)
        lin = ember.capture(job, strategy=strategy)
        out = lin.output().to_pylist()
        assert [(r["idx"], r["k"], r["v"]) for r in out] == plain  # the job's numbers, as it ran alone
        for oid, row in enumerate(out):
            assert lin.backward(oids=[oid]).ids(lin.sources[0]).tolist() == [values.index(row["v"])]
    assert lin.mode == "inject"  # auto: a second run could number the rows otherwise
    numbered = psdf[psdf.v > 1].to_spark(index_col="idx")
    with pytest.raises(ember.UnsupportedOperatorError, match="numbers them otherwise"):
        ember.infer(numbered)
    deferred = ember.capture(numbered, strategy="defer")  # no shuffle: a second run numbers rows alike
    for oid, row in enumerate(deferred.output().to_pylist()):
        assert deferred.backward(oids=[oid]).ids(deferred.sources[0]).tolist() == [values.index(row["v"])]


def test_observed_metrics(views: SparkSession) -> None:
    """`df.observe` counts rows as they pass: each row passes on as it came."""
    fn = functions_of(views.table("a"))
    if is_connect(views.table("a")):
        from pyspark.sql.connect.observation import Observation as RemoteObservation

        seen: Any = RemoteObservation("seen")
    else:
        seen = Observation("seen")
    df = views.table("a").observe(seen, fn.count(fn.lit(1)).alias("n")).filter("k > 1")
    check(df, o.where(a(), lambda v: v[0] > 1))
    assert seen.get == {"n": 4}  # every row of `a` counted once
    check(views.table("a").observe("named", fn.max("k")).select("v"), o.select(a(), lambda v: (v[1],)))


def test_pivot(views: SparkSession) -> None:
    def counts(vs: list[o.Values]) -> o.Values:
        return tuple(sum(1 for x in vs if x[1] == c) or None for c in ("x", "y"))

    check(views.table("a").groupBy("k").pivot("v", ["x", "y"]).count(), o.group(a(), lambda v: (v[0],), counts))


def test_unpivot(views: SparkSession) -> None:
    expected = [((v[0], col, val), lin) for v, lin in o.scan("c", C) for col, val in (("c1", v[1]), ("c2", v[2]))]
    check(views.sql("SELECT * FROM c UNPIVOT (val FOR col IN (c1, c2))"), expected)
    check(views.table("c").unpivot("id", ["c1", "c2"], "col", "val"), expected)


def test_self_join_and_a_table_read_twice_are_one_source(views: SparkSession) -> None:
    lin = check(views.sql("SELECT x.k, y.v FROM a x JOIN a y ON x.k = y.k"),
                o.select(o.join(a(), a(), lambda x, y: x[0] == y[0]), lambda v: (v[0], v[3])))
    assert lin.sources == ["a"]
    lin = check(views.sql("SELECT k FROM a WHERE k = 1 UNION ALL SELECT k FROM a WHERE k = 3"),
                o.select(o.where(a(), lambda v: v[0] in (1, 3)), lambda v: (v[0],)))
    assert lin.sources == ["a"]


def test_parquet_rids_follow_sorted_paths(spark: SparkSession, tmp_path: Path) -> None:
    folder = tmp_path / "parts"
    folder.mkdir()
    pq.write_table(pa.table({"x": [20, 21, 22]}), folder / "b.parquet")  # written first, sorts second
    pq.write_table(pa.table({"x": [10, 11]}), folder / "a.parquet")
    df = spark.read.parquet(str(folder))
    check(df.filter("x % 2 = 0"), o.where(o.scan("parts", [(10,), (11,), (20,), (21,), (22,)]), lambda v: v[0] % 2 == 0))


def test_rows_tagged_with_their_file(spark: SparkSession, tmp_path: Path) -> None:
    """`input_file_name()`, which Spark calls nondeterministic, gives a row read from a file
    that file's name in any run: Defer and exact inference may run the plan again."""
    folder = tmp_path / "tagged"
    folder.mkdir()
    for name, ks in (("a", range(4)), ("b", range(4, 7))):
        pq.write_table(pa.table({"k": pa.array(list(ks), pa.int32())}), folder / f"{name}.parquet")
    read = spark.read.parquet(str(folder))
    fn = functions_of(read)
    df = read.select("k", fn.regexp_extract(fn.input_file_name(), r"(\w)\.parquet$", 1).alias("f")).filter("k % 2 = 0")
    check(df, o.select(o.where(o.scan("tagged", [(k,) for k in range(7)]), lambda v: v[0] % 2 == 0),
                       lambda v: (v[0], "a" if v[0] < 4 else "b")))


def test_csv_and_json_sources(spark: SparkSession, tmp_path: Path) -> None:
    csv = tmp_path / "people.csv"
    csv.write_text("name,age\n" + "".join(f"p{i},{i % 5}\n" for i in range(12)))
    df = spark.read.option("header", True).option("inferSchema", True).csv(str(csv))
    rows = [(f"p{i}", i % 5) for i in range(12)]
    check(df.groupBy("age").count(), o.group(o.scan("people", rows), lambda v: (v[1],), lambda vs: (len(vs),)))
    js = tmp_path / "events.json"
    js.write_text("".join(json.dumps({"id": i, "kind": "ab"[i % 2]}) + "\n" for i in range(7)))
    df = spark.read.json(str(js)).filter("kind = 'b'")
    check(df, o.where(o.scan("events", [(i, "ab"[i % 2]) for i in range(7)]), lambda v: v[1] == "b"))
