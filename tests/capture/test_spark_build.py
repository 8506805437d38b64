"""Rebuilding imported plans on Spark (`capture.spark_build`), against answers worked by hand."""

from __future__ import annotations

from pyspark.sql import SparkSession

from ember.capture.spark_build import Builder
from ember.plan import ir
from ember.plan.jvm import Jvm
from ember.plan.spark_import import import_plan


def test_a_cached_subplan_answers_as_the_plan_does(spark: SparkSession) -> None:
    """Spark's cache manager optimizes a persisted plan again, and Spark 4.3 optimizing its
    own optimized plan folds the subquery's literal `0 AS k` into the null-aware anti join,
    which then excluded nothing: a cached NOT IN answered as if its subquery were empty."""
    spark.createDataFrame([(0, 5), (1, 6), (2, 7)], "k int, v int").createOrReplaceTempView("build_t")
    df = spark.sql(
        "SELECT k, v FROM build_t WHERE k NOT IN ("
        " SELECT k FROM (SELECT 0 AS k, count(*) AS n FROM (SELECT k FROM build_t GROUP BY k ORDER BY k LIMIT 1)))"
    )
    root, sources = import_plan(Jvm(spark), df)
    assert any(isinstance(n, ir.Limit) for n in ir.walk(root))  # the shape Spark mis-answers
    builder = Builder(Jvm(spark), sources)
    cached_before = _cached_rdds(spark)
    try:
        got = builder.dataframe(ir.Shared(root, key=1)).collect()
        again = builder.cached(1).collect()  # read back from the filled cache
        assert _cached_rdds(spark) == cached_before + 1
    finally:
        builder.release()
    assert sorted(map(tuple, got)) == sorted(map(tuple, again)) == [(1, 6), (2, 7)]
    assert _cached_rdds(spark) == cached_before  # nothing left cached


def _cached_rdds(spark: SparkSession) -> int:
    return int(spark.sparkContext._jsc.getPersistentRDDs().size())
