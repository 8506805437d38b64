"""ember's Java helpers compile once per source and Spark version, and the plans `Prepared`
runs skip Spark's optimizer yet answer as Spark does."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession

from ember.engines.spark import javac
from ember.engines.spark.jvm import Jvm
from ember.errors import EmberError


def test_the_helpers_are_compiled_once_per_source_and_spark(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EMBER_CACHE", str(tmp_path))
    classpath = str(spark._jvm.java.lang.System.getProperty("java.class.path"))  # type: ignore[union-attr]
    jar = javac.compiled(classpath, spark.version)
    assert jar.is_relative_to(tmp_path) and jar.stat().st_size > 0
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    assert javac.compiled(classpath, spark.version) == jar  # cached: javac not needed again
    with pytest.raises(EmberError, match="javac"):
        javac.compiled(classpath, "another spark")


def test_an_unwritable_cache_is_named(spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    monkeypatch.setenv("EMBER_CACHE", str(blocked))
    with pytest.raises(EmberError, match="EMBER_CACHE"):
        javac.compiled("", spark.version)


def prepared(df: DataFrame) -> DataFrame:
    jvm = Jvm(df.sparkSession)
    return DataFrame(javac.helper(jvm, "Prepared").dataframe(jvm.jsession, Jvm.analyzed(df)), df.sparkSession)


def test_a_prepared_plan_is_not_optimized_again(spark: SparkSession) -> None:
    df = spark.range(10).selectExpr("id", "id * 2 AS twice").filter("1 = 1 AND id > 6")
    ours = prepared(df)
    assert sorted(ours.collect()) == sorted(df.collect())
    plans = [str(d._jdf.queryExecution().optimizedPlan().toString()) for d in (df, ours)]
    assert "(1 = 1)" not in plans[0] and "(1 = 1)" in plans[1]  # Spark folds it; ember's plan keeps it


def test_a_prepared_plan_gets_the_rules_spark_cannot_run_without(spark: SparkSession) -> None:
    """`nvl` is runtime-replaceable: it cannot run until the optimizer replaces it."""
    df = spark.createDataFrame([(1, None), (2, 5)], "a int, b int").selectExpr("a", "nvl(b, a) AS c")
    assert sorted(prepared(df).collect()) == sorted(df.collect())
