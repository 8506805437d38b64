"""Catalyst conditions translated for DuckDB select the same rows as Spark's own filter (listed
cases, and generated ones over values where the engines could part), and aggregate columns
compute the same values as Spark's own aggregate."""

from __future__ import annotations

import datetime
import decimal
import math
import random
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ember.engines import duck
from ember.engines.duck.sql import one_of, python_literal, sql
from ember.engines.spark import catalyst
from ember.engines.spark.jvm import Jvm
from ember.plan.trees import PlanTree, Tree

ROWS = 60


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("duck_scan") / "t.parquet"
    i = list(range(ROWS))
    pq.write_table(
        pa.table(
            {
                "n": pa.array([x if x % 11 else None for x in i], pa.int32()),
                "x": pa.array([x / 4 for x in i], pa.float64()),
                "price": pa.array([decimal.Decimal(x * 37 % 100) / 10 for x in i], pa.decimal128(12, 2)),
                "cost": pa.array([decimal.Decimal(x * 53 % 1000) / 100 if x % 9 else None for x in i], pa.decimal128(7, 2)),
                "day": pa.array([datetime.date(1994, 1, 1) + datetime.timedelta(days=40 * x) for x in i]),
                "s": pa.array([f"{'ab'[x % 2]}it'{x % 7}z" if x % 13 else None for x in i]),
                "g": pa.array([x % 4 for x in i], pa.int8()),
            }
        ),
        path,
    )
    return path


def optimized(df: DataFrame, kind: str) -> PlanTree:
    """The first node of `kind` in the optimized plan Spark runs for `df`."""
    found = first(df, kind)
    assert found is not None, kind
    return found


def first(df: DataFrame, kind: str) -> PlanTree | None:
    """The first node of `kind` down the optimized plan's first children, or None."""
    plan = catalyst.plan(Jvm(df.sparkSession), Jvm.optimized(df))
    while plan.kind != kind:
        if not plan.children:
            return None
        plan = plan.child
    return plan


def condition(df: DataFrame, where: str) -> Tree:
    """The optimized Catalyst condition Spark applies for `where` (InSet appears there)."""
    cond = optimized(df.filter(where), "Filter").expr("cond")
    assert cond is not None
    return cond


TRANSLATED = [
    "n = 7",
    "n < 20 AND x >= 2.5",
    "NOT (n > 30) OR n IS NULL",
    "n IS NOT NULL AND s IS NULL",
    "price > 3.5",
    "price = 1.10",
    "day <= date '1996-03-01'",
    "year(day) = 1997",
    "s = 'bit''3z'",
    "s < 'b'",
    "n IN (1, 2, 3, NULL)",
    "n IN (" + ", ".join(map(str, range(0, 40, 3))) + ")",  # many values: InSet
    "startswith(s, 'ait') OR endswith(s, '5z')",
    "contains(s, \"'4\")",
    "s LIKE 'a%t%z' OR s LIKE '_it_5%'",
    "n + 1 > 20 AND n - 3 < 30",
    "n * 2 < 30",
    "price * 2 > 7.5",
    "cast(n AS decimal(20, 2)) > 3.5",  # widening: exact in both
    "cast(n AS double) > x + 10",
    "substring(s, 5, 2) IN ('3z', '5z')",
    "cast(n AS bigint) * 1000000000 > 3",  # an integer widened: no overflow in either
    "NOT (n <=> n * 2)",  # null-safe: two nulls are equal
    "coalesce(n, price, 0.5) > 3",  # n cast to price's decimal
    "cast(n AS smallint) > 3",  # narrower: the same value where it fits (DuckDB fails where not)
    "shiftright(n, 1) & 3 = 1 OR n | 8 = 9",
    "cast(shiftright(cast(n AS bigint), 2) & 1 AS tinyint) = 1",  # Spark's grouping()
    "CASE WHEN n > 40 THEN 'big' WHEN n > 20 THEN 'mid' END = 'mid'",
    "CASE WHEN s IS NULL THEN -1 ELSE n END < 3",
    "n / 7 > 2.5 OR x / (g + 1) < 1",  # doubles: IEEE in both
    "(cost * 1.000) / cast(g + 1 AS decimal(10, 0)) > 1.2",  # decimals: TPC-DS Q34's dependants per vehicle
    "upper(s) LIKE 'BIT%' OR lower(upper(s)) = 'ait''5z'",  # ASCII text: TPC-DS Q24's countries
    "cast(x AS decimal(4, 1)) > 3 AND cast(x * 3 AS decimal(5, 2)) < 40",  # halves (x is i / 4): rounded by Spark's code
]


@pytest.mark.parametrize("where", TRANSLATED)
def test_translated_conditions_select_what_spark_selects(spark: SparkSession, table: Path, where: str) -> None:
    df = spark.read.parquet(str(table))
    translated = sql(condition(df, where))
    assert translated is not None, where
    want = sorted(r["n"] if r["n"] is not None else -1 for r in df.filter(where).select("n").collect())
    got = duck.connect().sql(f"SELECT coalesce(n, -1) AS n FROM read_parquet('{table}') WHERE {translated}").fetchall()
    assert sorted(r[0] for r in got) == want, (where, translated)
    assert want, f"{where} selects nothing: a weak case"


def test_the_case_of_text_that_is_not_ascii_is_left_to_spark(spark: SparkSession, varied: Path) -> None:
    # Spark upper-cases `ßx` to `SSX` (Java's rules), DuckDB to `ẞX`; a row holding text
    # that is not ASCII fails DuckDB's read, and its callers leave the work to Spark.
    df = spark.read.parquet(str(varied))
    assert [r[0] for r in df.where("s = 'ßx'").select(F.upper("s")).distinct().collect()] == ["SSX"]
    translated = sql(condition(df, "upper(s) = 'SSX'"))
    assert translated is not None
    with pytest.raises(duckdb.InvalidInputException, match="not ASCII"):
        duck.connect().sql(f"SELECT i FROM read_parquet('{varied}') WHERE {translated}").fetchall()


def test_a_narrowing_cast_that_overflows_fails_in_duckdb(spark: SparkSession, table: Path) -> None:
    # Where a value does not fit, Spark fails (ANSI) or wraps it; DuckDB fails, and its
    # callers leave the work to Spark: it never gives another value.
    translated = sql(condition(spark.read.parquet(str(table)), "cast(n * 10 AS tinyint) > 3"))
    assert translated is not None
    with pytest.raises(duckdb.ConversionException):
        duckdb.sql(f"SELECT n FROM read_parquet('{table}') WHERE {translated}").fetchall()


def test_a_division_by_zero_is_null_as_in_spark(spark: SparkSession, table: Path) -> None:
    # Spark's division by zero is null (ANSI off) or fails the job (ANSI on, this session's
    # default); DuckDB's would be an infinity, so the divisor is nulled there.
    spark.conf.set("spark.sql.ansi.enabled", "false")
    try:
        df = spark.read.parquet(str(table))
        where = "n / g IS NULL OR x / (g - 1) > 3 OR price / (g - 2) > 5"  # g is 0, 1 or 2 on three quarters of the rows
        translated = sql(condition(df, where))
        want = sorted(r["day"] for r in df.filter(where).collect())
    finally:
        spark.conf.unset("spark.sql.ansi.enabled")
    assert translated is not None
    got = duck.connect().sql(f"SELECT day FROM read_parquet('{table}') WHERE {translated}").fetchall()
    assert sorted(r[0] for r in got) == want and 0 < len(want) < ROWS


def test_averages_at_a_rounding_half_are_rounded_by_sparks_own_code(spark: SparkSession, tmp_path: Path) -> None:
    # Spark averages a decimal of at most 11 digits as a double over its unscaled longs and
    # casts that back from the double's text, half up. 32 cents with an odd sum average to
    # an exact half at the seventh decimal, which the double itself, and its product with
    # 10^6, may hold just below it (these sums: 0.0628125 is 62812.49999999999 * 10^-6):
    # DuckDB leaves such values to Spark's own code (`duck.spark_unscaled`).
    rng = random.Random(7)
    sums = [201, -210793, 421553, -827171, 843097, -1638417, 1654337, -1670253, 1686185, -1702101]
    cents = {g: [rng.randrange(-100_000, 100_000) for _ in range(31)] for g in range(100)}
    for g, total in enumerate(sums + [rng.randrange(-10**6, 10**6) | 1 for _ in range(len(cents) - len(sums))]):
        cents[g].append(total - sum(cents[g]))
    path = tmp_path / "halves.parquet"
    pq.write_table(
        pa.table({
            "g": [g for g, vs in cents.items() for _ in vs],
            "v": pa.array([decimal.Decimal(c).scaleb(-2) for vs in cents.values() for c in vs], pa.decimal128(7, 2)),
        }),
        path,
    )  # fmt: skip
    df = spark.read.parquet(str(path)).groupBy("g").agg(F.avg("v"))
    want = {r[0]: r[1] for r in df.collect()}
    node = optimized(df, "Aggregate")
    key, value = (sql(c, grouped=True) for c in node.exprs["list"])
    assert key is not None and value is not None
    got = dict(duck.connect().sql(f"SELECT {key}, {value} FROM read_parquet('{path}') GROUP BY {key}").fetchall())
    assert got == want
    cent = decimal.Decimal("0.000001")
    rounded = {g: decimal.Decimal(sum(vs) / 32 / 100).quantize(cent, decimal.ROUND_HALF_UP) for g, vs in cents.items()}
    assert rounded != want, "no average where the double's own digits round otherwise: a weak case"


def test_what_spark_casts_to_no_decimal_fails_in_duckdb(spark: SparkSession, varied: Path, tmp_path: Path) -> None:
    # Spark's cast gives null, or fails (ANSI), for NaN, an infinity or a value past the
    # type; an average of integers whose magnitudes pass 2^53 Spark sums inexactly. DuckDB
    # fails each, and its callers leave the work to Spark.
    (cast,) = optimized(spark.read.parquet(str(varied)).select(F.expr("cast(x AS decimal(6, 1))")), "Project").exprs["list"]
    path = tmp_path / "wide.parquet"
    pq.write_table(pa.table({"g": [1, 1, 1], "b": pa.array([2**52, 1, 2**52], pa.int64())}), path)
    node = optimized(spark.read.parquet(str(path)).groupBy("g").agg(F.avg("b")), "Aggregate")
    average = sql(node.exprs["list"][1], grouped=True)
    for query in (f"SELECT {sql(cast)} FROM read_parquet('{varied}')", f"SELECT {average} FROM read_parquet('{path}') GROUP BY g"):
        with pytest.raises(duckdb.Error, match="left to Spark"):
            duck.connect().sql(query).fetchall()


ROUNDED = [
    "d / 16", "-d / 16",  # half-way cases: Spark rounds them away from zero
    "d / h", "h / d", "h / 3", "(d * 1.000) / cast(n AS decimal(10, 0))", "cast(b AS decimal(20, 0)) / 7", "d / 0.7",
    "cast(d AS decimal(10, 1))", "cast(-d AS decimal(10, 1))", "cast(h AS decimal(30, 2))", "cast(d / 7 AS decimal(38, 3))",
]  # fmt: skip


@pytest.mark.parametrize("value", ROUNDED)
def test_decimal_values_are_rounded_as_spark_rounds(spark: SparkSession, varied: Path, value: str) -> None:
    df = spark.read.parquet(str(varied)).where("n <> 0 AND d <> 0").select("i", F.expr(value).alias("q"))
    (column,) = (c for c in optimized(df, "Project").exprs["list"] if c.name == "q")
    translated = sql(column)
    assert translated is not None and column.dtype is not None and column.dtype.startswith("decimal"), value
    rows = duck.connect().sql(f"SELECT i, {translated} FROM read_parquet('{varied}') WHERE n <> 0 AND d <> 0").fetchall()
    want = sorted(tuple(r) for r in df.collect())
    assert sorted(rows) == want and len(want) > 10, value


def test_a_decimal_quotient_is_cut_then_rounded_as_spark_does(spark: SparkSession, tmp_path: Path) -> None:
    # Spark 4 cuts the quotient to 39 significant digits, then rounds it half up to the
    # type's scale: 1.000000499...9|5 (thirty nines, then a 5 as the 39th digit) is
    # 1.000000; rounding it half up to 38 digits first (Spark 3's context) gives 1.000001.
    big = ["10000005000000000000000000000001", "-10000005000000000000000000000001", "7"]
    path = tmp_path / "q.parquet"
    pq.write_table(
        pa.table({"a": pa.array([decimal.Decimal(v) for v in big], pa.decimal128(38, 0)),
                  "b": pa.array([decimal.Decimal("10000000000000000000000000000001")] * 2 + [decimal.Decimal(3)], pa.decimal128(38, 0))}),
        path,
    )  # fmt: skip
    df = spark.read.parquet(str(path)).select((F.col("a") / F.col("b")).alias("q"))
    value = sql(optimized(df, "Project").exprs["list"][0])
    want = [r["q"] for r in df.collect()]
    assert want[:2] == [decimal.Decimal("1.000000"), decimal.Decimal("-1.000000")]
    assert [r[0] for r in duck.connect().sql(f"SELECT {value} FROM read_parquet('{path}')").fetchall()] == want


_scales = st.integers(1, 20).flatmap(lambda p: st.tuples(st.just(p), st.integers(0, p)))


@settings(settings.get_profile("spark-jobs"), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(types=st.tuples(_scales, _scales), seed=st.integers(0, 2**32 - 1))
def test_generated_decimal_quotients_are_spark_quotients(spark: SparkSession, tmp_path: Path, types: tuple, seed: int) -> None:
    """Quotients of decimals of any two types (most computed in DuckDB's 128-bit integers,
    the widest by `duck.spark_divide`), over values that include half-way ties, zero
    divisors and nulls, are the values Spark computes."""
    (pa_, sa), (pb, sb) = types
    rng = random.Random(seed)
    tie = [2, -2, 8, -16, 32]  # x / 2^k ends in a 5 more often than not: a half-way case at some scale

    def value(p: int, scale: int, divisors: bool) -> decimal.Decimal | None:
        unscaled = rng.choice([rng.randrange(-(10**p) + 1, 10**p), rng.randrange(-9, 10), *(t for t in tie if divisors and abs(t) < 10**p)])
        return None if rng.random() < 0.05 else decimal.Decimal(unscaled).scaleb(-scale)

    path = tmp_path / f"q{seed}.parquet"
    a = [value(pa_, sa, False) for _ in range(40)]
    b = [value(pb, sb, True) for _ in range(40)]
    pq.write_table(pa.table({"i": pa.array(range(40), pa.int32()), "a": pa.array(a, pa.decimal128(pa_, sa)), "b": pa.array(b, pa.decimal128(pb, sb))}), path)
    spark.conf.set("spark.sql.ansi.enabled", "false")  # a zero divisor gives null, as in DuckDB's translation
    try:
        df = spark.read.parquet(str(path)).select("i", (F.col("a") / F.col("b")).alias("q"))
        want = sorted(tuple(r) for r in df.collect())
        (column,) = (c for c in optimized(df, "Project").exprs["list"] if c.name == "q")
    finally:
        spark.conf.unset("spark.sql.ansi.enabled")
    translated = sql(column)
    assert translated is not None
    event("in SQL" if "spark_divide" not in translated else "by spark_divide")
    try:
        got = duck.connect().sql(f"SELECT i, {translated} FROM read_parquet('{path}')").fetchall()
    except duckdb.Error:  # past the result's type: the work goes back to Spark, whose value is null
        event("overflow")
        assert any(q is None and a[i] is not None and b[i] for i, q in want), (types, translated)
        return
    assert sorted(got) == want, (types, translated)


def test_quotients_of_narrow_decimals_are_computed_in_sql(spark: SparkSession, varied: Path) -> None:
    # A Python function costs ~2 µs a row; quotients whose operands fit 128 bits do without it.
    df = spark.read.parquet(str(varied))
    for value, python in [("d / 16", False), ("d / 0.7", False), ("avg(d)", False), ("h / 3", True)]:
        node = optimized(df.agg(F.expr(value).alias("q")), "Aggregate") if value.startswith("avg") else None
        column = node.exprs["list"][0] if node else next(c for c in optimized(df.select(F.expr(value).alias("q")), "Project").exprs["list"])
        translated = sql(column, grouped=node is not None)
        assert translated is not None and ("spark_divide" in translated) == python, value


@pytest.mark.parametrize("op", ["AND", "OR"])
def test_a_chain_of_ands_or_ors_reads_alike_however_it_nests(spark: SparkSession, table: Path, op: str) -> None:
    # Spark's optimizer nests a plan's conjuncts one way or the other (TPC-DS Q47's three
    # reads of one view); their queries must read alike to be run once.
    df = spark.read.parquet(str(table))
    left, right = (sql(condition(df, where)) for where in (f"n < 20 {op} (x > 1 {op} g = 1)", f"(n < 20 {op} x > 1) {op} g = 1"))
    assert left is not None and left == right


@pytest.mark.parametrize(
    "where", ["length(s) > 6", "s LIKE 'a\\\\%'", "price div 2 > 3", "rand() > 0.5", "cast(price AS int) > 3", "cast(x AS float) > 3",
     "shiftright(n, 33) = 0", "shiftright(n, g) = 0",  # Java masks the shift: only literals within the width
     "substring(s, -2, 2) = '3z'", "substring(s, 0, 2) = 'ai'"]
)
def test_anything_else_stays_on_spark(spark: SparkSession, table: Path, where: str) -> None:
    assert sql(condition(spark.read.parquet(str(table)), where)) is None


GROUPED = [
    "sum(n)", "count(s)", "count(*)", "min(price)", "max(day)", "max(s)", "count(DISTINCT s)", "sum(price) * 0.5 + 1",
    "sum(cost)", "sum(DISTINCT cost)", "sum(cost) - sum(price)",  # a decimal of few digits: Spark sums its unscaled longs
    "avg(price)", "avg(DISTINCT price)",  # a decimal's sum divided by its count, as Spark divides decimals
    "avg(n)", "avg(DISTINCT g)", "avg(cost)",  # integers' sum as a double; a decimal of few digits: its unscaled longs'
]  # fmt: skip


@pytest.mark.parametrize("column", GROUPED)
def test_aggregate_columns_compute_what_spark_computes(spark: SparkSession, table: Path, column: str) -> None:
    df = spark.read.parquet(str(table)).groupBy("g").agg(F.expr(column).alias("v"))
    node = optimized(df, "Aggregate")
    keys = [sql(k) for k in node.exprs["keys"]]
    values = [sql(c, grouped=True) for c in node.exprs["list"]]
    assert None not in keys and None not in values and len(values) == 2, (column, keys, values)
    got = duck.connect().sql(f"SELECT {', '.join(map(str, values))} FROM read_parquet('{table}') GROUP BY {', '.join(map(str, keys))}")
    assert sorted(got.fetchall(), key=repr) == sorted((tuple(r) for r in df.collect()), key=repr), (column, values)


@pytest.mark.parametrize(
    "column", ["avg(x)", "sum(n) FILTER (WHERE n > 3)", "collect_list(n)", "first(n)", "count(n, s)"]
)  # avg(x): a double's sum depends on the order rows come in
def test_other_aggregates_stay_on_spark(spark: SparkSession, table: Path, column: str) -> None:
    node = optimized(spark.read.parquet(str(table)).groupBy("s").agg(F.expr(column)), "Aggregate")
    assert any(sql(c, grouped=True) is None for c in node.exprs["list"])


def test_an_aggregate_translates_only_where_it_is_computed(spark: SparkSession, table: Path) -> None:
    node = optimized(spark.read.parquet(str(table)).groupBy("s").agg(F.sum("price")), "Aggregate")
    column = next(c for c in node.exprs["list"] if "sum" in c.text)
    assert sql(column) is None and sql(column, window="PARTITION BY s") is not None and sql(column, grouped=True) is not None


WINDOWED = [
    "rank() OVER (PARTITION BY g ORDER BY n DESC)",
    "dense_rank() OVER (PARTITION BY g ORDER BY s, price DESC)",  # nulls first ascending, last descending
    "rank() OVER (ORDER BY g)",
    "sum(n) OVER (PARTITION BY g)",
    "sum(cost) OVER (PARTITION BY g ORDER BY price)",  # a RANGE frame: peers together; Spark sums unscaled longs
    "count(*) OVER (PARTITION BY s ORDER BY g RANGE BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING)",
    "max(price) OVER (PARTITION BY g ORDER BY n ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)",
    "avg(price) OVER (PARTITION BY s)",
    "avg(n) OVER (PARTITION BY g)",
    "avg(cost) OVER (PARTITION BY g ORDER BY price)",  # a RANGE frame; Spark averages the unscaled longs as a double
]


def window_columns(df: DataFrame) -> list[Tree]:
    return list(optimized(df, "Window").exprs["list"])


@pytest.mark.parametrize("column", WINDOWED)
def test_window_columns_compute_what_spark_computes(spark: SparkSession, table: Path, column: str) -> None:
    # Each row is told apart by its day; the functions' values do not depend on how either
    # engine orders the rows that tie (g and price repeat, n and s hold nulls).
    df = spark.read.parquet(str(table)).select("day", F.expr(column).alias("v"))
    (value,) = (sql(c) for c in window_columns(df))
    assert value is not None, column
    got = duck.connect().sql(f"SELECT day, {value} FROM read_parquet('{table}')").fetchall()
    assert sorted(got) == sorted(tuple(r) for r in df.collect()), (column, value)


@pytest.mark.parametrize(
    "column",
    ["row_number() OVER (PARTITION BY g ORDER BY n)", "ntile(2) OVER (ORDER BY n)", "lag(n) OVER (ORDER BY day)",
     "sum(n) OVER (PARTITION BY g ORDER BY n ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)",  # ties in either order
     "avg(x) OVER (PARTITION BY g)", "rank() OVER (ORDER BY x)", "max(n) OVER (PARTITION BY x)",  # floating keys
     "sum(n) OVER (ORDER BY n RANGE BETWEEN 2 PRECEDING AND CURRENT ROW)", "percent_rank() OVER (ORDER BY n)"],
)  # fmt: skip
def test_other_window_columns_stay_on_spark(spark: SparkSession, table: Path, column: str) -> None:
    df = spark.read.parquet(str(table)).select("day", F.expr(column).alias("v"))
    assert [sql(c) for c in window_columns(df)] == [None]


UNTIED = [
    "row_number() OVER (PARTITION BY g ORDER BY day)",
    "sum(n) OVER (PARTITION BY g ORDER BY day ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)",
    "sum(cost) OVER (PARTITION BY g ORDER BY day DESC ROWS BETWEEN 2 PRECEDING AND 1 FOLLOWING)",  # unscaled longs
    "max(s) OVER (ORDER BY day ROWS BETWEEN CURRENT ROW AND 3 FOLLOWING)",
    "count(n) OVER (PARTITION BY s ORDER BY day ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING)",
]


@pytest.mark.parametrize("column", UNTIED)
def test_untied_window_columns_compute_what_spark_computes(spark: SparkSession, table: Path, column: str) -> None:
    # Ordered by the day, which no two rows share: row numbers and ROWS frames are then the
    # same in both engines, and translate where the window is known untied (`capture.untie`).
    df = spark.read.parquet(str(table)).select("day", F.expr(column).alias("v"))
    (window,) = window_columns(df)
    value = sql(window, untied=True)
    assert value is not None and sql(window) is None, column
    got = duck.connect().sql(f"SELECT day, {value} FROM read_parquet('{table}')").fetchall()
    assert sorted(got) == sorted(tuple(r) for r in df.collect()), (column, value)


@pytest.mark.parametrize(
    "column",
    ["avg(n) OVER (ORDER BY day ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)",  # a double, summed in another order
     "sum(x) OVER (ORDER BY day ROWS BETWEEN 1 PRECEDING AND CURRENT ROW)",
     "lag(n) OVER (ORDER BY day)",
     "sum(n) OVER (ORDER BY n RANGE BETWEEN 2 PRECEDING AND CURRENT ROW)"],  # compared by value
)  # fmt: skip
def test_other_untied_window_columns_stay_on_spark(spark: SparkSession, table: Path, column: str) -> None:
    df = spark.read.parquet(str(table)).select("day", F.expr(column).alias("v"))
    assert [sql(c, untied=True) for c in window_columns(df)] == [None]


def test_traced_values_become_exact_literals() -> None:
    con = duckdb.connect()
    for value in (7, 0.1, 1e300, "it's", True, decimal.Decimal("12.50"), datetime.date(1998, 9, 2)):
        literal = python_literal(value)
        assert literal is not None
        assert con.execute(f"SELECT {literal} = ?", [value]).fetchall() == [(True,)], value
    assert python_literal(float("nan")) is None and python_literal(datetime.datetime(2020, 1, 1)) is None


def test_rows_equal_to_one_of_the_traced_rows_null_matching_null() -> None:
    con = duckdb.connect()
    values = [(1, "a"), (1, None), (2, "b"), (None, None), (3, "it's")]
    con.execute("CREATE TABLE t (n INTEGER, s VARCHAR)")
    con.executemany("INSERT INTO t VALUES (?, ?)", values)
    traced = [(1, None), (None, None), (3, "it's")]
    where = one_of([[('"n"', n), ('"s"', text)] for n, text in traced])
    assert where is not None
    assert sorted(con.sql(f"SELECT n, s FROM t WHERE {where}").fetchall(), key=repr) == sorted(traced, key=repr)
    assert one_of([]) == "FALSE" and one_of([[]]) == "(TRUE)"
    assert one_of([[('"n"', float("nan"))]]) is None and one_of([[(None, 1)]]) is None


# --- generated conditions -----------------------------------------------------------------

_WORDS = ["ab", "a_b", "a%b", "é", "ßx", "ab'c", "", "Ab", "b", "aé_"]


@pytest.fixture(scope="module")
def varied(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Values where the engines could part: nulls, negatives, NaN, -0.0, non-ASCII text,
    text holding LIKE's wildcards, and decimals whose products Spark rounds."""
    path = tmp_path_factory.mktemp("duck_varied") / "t.parquet"
    i = list(range(40))
    doubles = [float("nan"), -0.0, 0.0, 1.5, -2.25, None, 1e308, 3.0]
    pq.write_table(
        pa.table(
            {
                "i": pa.array(i, pa.int32()),
                "n": pa.array([(x * 7) % 13 - 6 if x % 9 else None for x in i], pa.int32()),
                "b": pa.array([(x - 20) * 50_000 for x in i], pa.int64()),
                "x": pa.array([doubles[x % len(doubles)] for x in i], pa.float64()),
                "d": pa.array([decimal.Decimal(x * 37 % 100 - 50) / 8 if x % 7 else None for x in i], pa.decimal128(12, 3)),
                "h": pa.array([decimal.Decimal(x * 7919 % 1000).scaleb(-10) * 10_007 for x in i], pa.decimal128(38, 10)),
                "s": pa.array([_WORDS[x % len(_WORDS)] + ("z" * (x % 3)) if x % 11 else None for x in i]),
                "day": pa.array([datetime.date(1994, 1, 1) + datetime.timedelta(days=97 * x) for x in i]),
            }
        ),
        path,
    )
    return path


def _text_literal(words: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return words.map(lambda w: "'" + w.replace("'", "''") + "'")


_integer = st.recursive(
    st.sampled_from(["n", "b", "cast(n AS bigint)", "-3", "0", "7", "null"]),
    lambda inner: st.tuples(inner, st.sampled_from(["+", "-", "*"]), inner).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
    max_leaves=3,
)
_exact = st.sampled_from(["d", "h", "cast(n AS decimal(20, 2))", "2.5", "-0.125", "cast(h AS decimal(12, 1))"])
_decimal = st.one_of(_exact, st.tuples(_exact, st.sampled_from(["+", "-", "*", "/"]), _exact).map(lambda t: f"({t[0]} {t[1]} {t[2]})"))
_double = st.one_of(
    st.sampled_from(["x", "cast(n AS double)", "1.5", "-0.0", "cast('NaN' AS double)"]),
    st.tuples(st.sampled_from(["x", "cast(n AS double)"]), st.sampled_from(["+", "*"]), st.sampled_from(["x", "0.5"])).map(
        lambda t: f"({t[0]} {t[1]} {t[2]})"
    ),
)
_compare = st.sampled_from(["=", "<", "<=", ">", ">=", "<>", "<=>"])
_text = st.sampled_from(["s", "substring(s, 1, 2)", "substring(s, 2, 1)"])
_word = st.sampled_from([*_WORDS, "a", "z", "éz"])
_pattern = st.lists(st.sampled_from(["a", "b", "é", "%", "_", "z"]), min_size=1, max_size=4).map("".join)
_atom = st.one_of(
    st.tuples(_integer, _compare, _integer).map(" ".join),
    st.tuples(_decimal, _compare, _decimal).map(" ".join),
    st.tuples(_double, _compare, _double).map(" ".join),
    st.tuples(_text, _compare, _text_literal(_word)).map(" ".join),
    st.tuples(_text, _text_literal(_pattern)).map(lambda t: f"{t[0]} LIKE {t[1]}"),
    st.tuples(st.sampled_from(["startswith", "endswith", "contains"]), _text, _text_literal(_word)).map(
        lambda t: f"{t[0]}({t[1]}, {t[2]})"
    ),
    st.tuples(st.sampled_from(["n", "s", "x", "d"]), st.sampled_from(["IS NULL", "IS NOT NULL"])).map(" ".join),
    st.tuples(_decimal, _compare, st.sampled_from(["coalesce(d, 0.0)", "coalesce(d, h)"])).map(" ".join),
    st.lists(st.sampled_from(["-6", "0", "3", "null"]), min_size=1, max_size=3).map(lambda v: f"n IN ({', '.join(v)})"),
    st.tuples(st.sampled_from(["year(day) = 1997", "day <= date '1996-03-01'", "year(day) > 2000"])).map(lambda t: t[0]),
)
_conditions = st.recursive(
    _atom,
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(["AND", "OR"]), inner).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        inner.map(lambda c: f"NOT ({c})"),
    ),
    max_leaves=3,
)


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=_conditions)
def test_generated_conditions_select_what_spark_selects(spark: SparkSession, varied: Path, where: str) -> None:
    """Whatever translates selects in DuckDB the rows Spark's filter selects."""
    df = spark.read.parquet(str(varied))
    try:
        want = sorted(r["i"] for r in df.filter(where).select("i").collect())
    except Exception as e:  # an overflow under ANSI rules: Spark's job fails, nothing is read
        event(f"Spark fails: {type(e).__name__} {str(e)[:60]}")
        assume(False)
    node = first(df.filter(where), "Filter")
    cond = None if node is None else node.expr("cond")
    if cond is None:  # folded by the optimizer (`n < n`: false, or no filter at all)
        event("folded")
        return
    translated = sql(cond)
    event("translated" if translated is not None else "stays on Spark")
    if translated is None:
        return
    try:
        got = duck.connect().sql(f"SELECT i FROM read_parquet('{varied}') WHERE {translated}").fetchall()
    except duckdb.Error:  # the side table falls back to Spark
        event("DuckDB error")
        return
    assert sorted(r[0] for r in got) == want, (where, translated)


@pytest.mark.parametrize(
    ("where", "exact"),
    [
        ("cast(n AS decimal(20, 2)) = (h * h)", False),  # two decimal(38,10): Spark keeps 6 decimals
        ("h + d > 0.5", False),  # decimal(38,10) + decimal(12,3): Spark keeps 9
        ("d * d > 1", True),  # decimal(12,3) squared: decimal(25,6), exact
        ("d - cast(n AS decimal(20, 2)) < 0.5", True),
    ],
)
def test_rounded_decimal_arithmetic_stays_on_spark(spark: SparkSession, varied: Path, where: str, exact: bool) -> None:
    assert (sql(condition(spark.read.parquet(str(varied)), where)) is not None) == exact


def _same_value(a: object, b: object) -> bool:
    """Equal, with doubles summed in another order allowed their last bits (and -0.0 is 0.0)."""
    if isinstance(a, float) and isinstance(b, float):
        return (a != a and b != b) or math.isclose(a, b, rel_tol=1e-12, abs_tol=0.0)
    return a == b


_numbers = ["n", "b", "x", "d", "h", "(n * 3 - b)", "(d * d)", "(h + h)", "(x + 1.5)"]
_grouped = st.one_of(
    st.sampled_from(_numbers).map(lambda m: f"sum({m})"),
    st.tuples(st.sampled_from(["min", "max", "count"]), st.sampled_from([*_numbers, "s", "day"])).map(lambda t: f"{t[0]}({t[1]})"),
    st.sampled_from([*_numbers, "s", "day"]).map(lambda m: f"count(DISTINCT {m})"),
    st.sampled_from(["d", "h", "(d * d)", "(h + h)", "(d / 3)"]).map(lambda m: f"avg({m})"),  # decimals: divided as Spark does
    st.sampled_from(["n", "b", "cast(n AS decimal(7, 2))", "cast(d AS decimal(8, 3))"]).map(lambda m: f"avg({m})"),  # as doubles
)


@settings(settings.get_profile("spark-jobs"), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.sampled_from(["n", "s", "d", "day"]), columns=st.lists(_grouped, min_size=1, max_size=3))
def test_generated_aggregates_compute_what_spark_computes(spark: SparkSession, varied: Path, key: str, columns: list[str]) -> None:
    """Whatever translates of an aggregate's keys and columns computes in DuckDB what Spark's
    own aggregate computes, group by group."""
    df = spark.read.parquet(str(varied)).groupBy(F.expr(key).alias("g")).agg(*(F.expr(c) for c in columns))
    want = sorted((tuple(r) for r in df.collect()), key=repr)
    node = optimized(df, "Aggregate")
    keys = [sql(k) for k in node.exprs["keys"]]
    values = [sql(c, grouped=True) for c in node.exprs["list"]]
    event("translated" if None not in keys and None not in values else "stays on Spark")
    if None in keys or None in values:
        return
    try:
        got = duck.connect().sql(f"SELECT {', '.join(map(str, values))} FROM read_parquet('{varied}') GROUP BY {', '.join(map(str, keys))}")
        rows = sorted(got.fetchall(), key=repr)
    except duckdb.Error:
        event("DuckDB error")  # an overflow, say: the side table falls back to Spark
        return
    assert len(rows) == len(want), (columns, values)
    for g, w in zip(rows, want, strict=True):
        assert all(_same_value(a, b) for a, b in zip(g, w, strict=True)), (columns, values, g, w)
