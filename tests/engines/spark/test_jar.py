"""ember's Java helpers ship as one prebuilt jar, built from jvm/src, that loads with no JDK;
and the plans `Prepared` runs skip Spark's optimizer yet answer as Spark does."""

from __future__ import annotations

import importlib.util
from types import ModuleType

import pytest
from pyspark.sql import DataFrame, SparkSession

import ember
from ember.engines.spark import jar
from ember.engines.spark.jvm import Jvm
from ember.errors import EmberError
from tests.conftest import ROOT


def _build_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_jar", ROOT / "scripts" / "build_jar.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_shipped_jar_is_built_from_the_sources() -> None:
    facts = jar.build_facts()
    assert facts["sha256"] == _build_script().fingerprint(), "jvm/src changed: rebuild the jar with `make jar`"
    assert facts["java_release"] == 17 and jar.JAR.stat().st_size > 0


def test_the_helpers_load_with_no_jdk(spark: SparkSession, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setattr(jar, "_LOADERS", {})
    monkeypatch.setattr(jar, "_HELPERS", {})
    assert str(jar.helper(Jvm(spark), "Doubles").unscaled("0", 10, 2)) == "0"


def test_a_spark_outside_the_supported_releases_is_refused_at_first_use(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jar, "_LOADERS", {})
    monkeypatch.setattr(jar, "_HELPERS", {})
    monkeypatch.setattr(type(spark), "version", property(lambda _: "3.5.4"))
    with pytest.raises(EmberError, match=r"^ember supports Spark 4\.0 to 4\.3; this session runs Spark 3\.5\.4$"):
        ember.capture(spark.range(3))


def prepared(df: DataFrame) -> DataFrame:
    jvm = Jvm(df.sparkSession)
    return DataFrame(jar.helper(jvm, "Prepared").dataframe(jvm.jsession, Jvm.analyzed(df)), df.sparkSession)


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


def test_the_running_spark_gets_the_light_execution_its_query_execution_takes(spark: SparkSession) -> None:
    """`QueryExecution`'s constructor changed in 4.1 and 4.2: the jar holds one light execution
    per signature (jvm/shims), and `make test-spark40` runs this file on Spark 4.0 too."""
    major, minor = (int(p) for p in spark.version.split(".")[:2])
    expected = {(4, 0): "Light40", (4, 1): "Light41"}.get((major, minor), "Light")
    assert str(jar.helper(Jvm(spark), "Prepared").lightClass()) == expected
