"""Plan import: source identity and naming, the plan ember reads, the session left as found."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession

import ember
from ember.engines.spark.jvm import Jvm
from ember.engines.spark.plan_import import import_plan
from ember.plan import ir


def _parquet(tmp_path: Path, name: str, n: int) -> str:
    path = tmp_path / name
    path.mkdir()
    pq.write_table(pa.table({"x": list(range(n))}), path / "part-0.parquet")
    return str(path)


def test_a_self_join_reads_one_source(spark: SparkSession, tmp_path: Path) -> None:
    df = spark.read.parquet(_parquet(tmp_path, "events", 4))
    joined = df.alias("a").join(df.alias("b"), "x")
    _, sources, _ = import_plan(Jvm(spark), joined)
    assert [s.name for s in sources.values()] == ["events"]


def test_sources_are_named_by_view_then_stem_then_explicitly(spark: SparkSession, tmp_path: Path) -> None:
    path = _parquet(tmp_path, "clicks", 3)
    spark.read.parquet(path).createOrReplaceTempView("clicks_view")
    _, sources, _ = import_plan(Jvm(spark), spark.sql("SELECT * FROM clicks_view"))
    assert [s.name for s in sources.values()] == ["clicks_view"]
    _, sources, _ = import_plan(Jvm(spark), spark.read.parquet(path))
    assert [s.name for s in sources.values()] == ["clicks"]
    named = ember.source(spark.createDataFrame([(1,)], "y int"), "tiny")
    _, sources, _ = import_plan(Jvm(spark), named)
    assert [s.name for s in sources.values()] == ["tiny"]


def test_a_name_given_in_one_session_does_not_rename_another_sessions_source(spark: SparkSession, tmp_path: Path) -> None:
    path = _parquet(tmp_path, "visits", 3)
    other = spark.newSession()
    ember.source(other.read.parquet(path), "other_name")
    _, sources, _ = import_plan(Jvm(spark), spark.read.parquet(path))
    assert [s.name for s in sources.values()] == ["visits"]
    _, sources, _ = import_plan(Jvm(other), other.read.parquet(path))
    assert [s.name for s in sources.values()] == ["other_name"]


def test_a_view_right_over_another_takes_the_inner_ones_name(spark: SparkSession, tmp_path: Path) -> None:
    spark.read.parquet(_parquet(tmp_path, "orders", 3)).createOrReplaceTempView("orders_view")
    spark.table("orders_view").select("x").createOrReplaceTempView("recent_orders")
    spark.sql("SELECT * FROM orders_view").createOrReplaceTempView("all_orders")
    for query in ("SELECT * FROM recent_orders", "SELECT * FROM all_orders", "SELECT * FROM orders_view"):
        _, sources, _ = import_plan(Jvm(spark), spark.sql(query))
        assert [s.name for s in sources.values()] == ["orders_view"], query
    spark.table("orders_view").filter("x > 0").createOrReplaceTempView("some_orders")  # a query: no name
    _, sources, _ = import_plan(Jvm(spark), spark.table("some_orders"))
    assert [s.name for s in sources.values()] == ["orders_view"]


def test_sql_and_dataframe_api_give_the_same_operators(spark: SparkSession, tmp_path: Path) -> None:
    spark.read.parquet(_parquet(tmp_path, "nums", 5)).createOrReplaceTempView("nums")
    by_sql, _, _ = import_plan(Jvm(spark), spark.sql("SELECT x % 2 AS p, count(*) AS c FROM nums WHERE x > 1 GROUP BY x % 2"))
    t = spark.table("nums")
    by_api, _, _ = import_plan(
        Jvm(spark), t.filter(t.x > 1).groupBy((t.x % 2).alias("p")).count().withColumnRenamed("count", "c")
    )
    kinds = [[type(n).__name__ for n in ir.walk(p)] for p in (by_sql, by_api)]
    assert kinds[0] == kinds[1]


def test_capture_leaves_the_optimizer_settings_as_it_found_them(spark: SparkSession) -> None:
    key = "spark.sql.optimizer.excludedRules"
    before = spark.conf.get(key, None)
    ember.capture(spark.createDataFrame([(1,), (2,)], "v int").filter("v > 1"))
    assert spark.conf.get(key, None) == before


def test_the_import_adds_embers_excluded_rules_to_the_users_own(spark: SparkSession) -> None:
    key = "spark.sql.optimizer.excludedRules"
    rules = "org.apache.spark.sql.catalyst.optimizer.CombineFilters,org.apache.spark.sql.catalyst.optimizer.PushDownPredicates"
    twice = spark.range(10).selectExpr("id AS a", "id * 2 AS b").filter("a > 1").filter("b > 1")
    merged, _, _ = import_plan(Jvm(spark), twice)
    assert [type(n).__name__ for n in ir.walk(merged)].count("Filter") == 1
    spark.conf.set(key, rules)
    try:
        kept, _, _ = import_plan(Jvm(spark), twice)
        assert spark.conf.get(key) == rules
    finally:
        spark.conf.unset(key)
    assert [type(n).__name__ for n in ir.walk(kept)].count("Filter") == 2


def test_window_functions_whose_values_ties_do_not_change_are_marked(spark: SparkSession) -> None:
    """A rank gives tied rows one value and an order-blind aggregate over the whole
    partition or a RANGE frame takes peers together: a second run gives the same values,
    so the window is `repeatable` (read again rather than cached). A row number, a lag, a
    first value, an ntile or a ROWS frame's sum may tell tied rows apart."""
    spark.createDataFrame([(1, 2, 3.0)], "g int, o int, v double").createOrReplaceTempView("tied")
    over = "OVER (PARTITION BY g ORDER BY o"
    tie_free = {
        "rank()": True, "dense_rank()": True, "percent_rank()": True, "cume_dist()": True,
        "avg(v) OVER (PARTITION BY g)": True, "sum(v)": True, "max(v) RANGE BETWEEN 1 PRECEDING AND 1 FOLLOWING": True,
        "row_number()": False, "ntile(2)": False, "lag(v)": False, "first(v)": False,
        "sum(v) ROWS BETWEEN 1 PRECEDING AND CURRENT ROW": False,
        "count(v) ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING": True,
    }  # fmt: skip
    for i, fn in enumerate(tie_free):
        call, _, frame = fn.partition(")")
        column = fn if "OVER" in fn else f"{call}) {over} {frame.strip()})"
        plan, _, _ = import_plan(Jvm(spark), spark.sql(f"SELECT g, {column} AS w{i} FROM tied"))
        (window,) = [n for n in ir.walk(plan) if isinstance(n, ir.Window)]
        assert window.tie_free is tie_free[fn], fn
        assert ir.repeatable(plan) is tie_free[fn], fn
