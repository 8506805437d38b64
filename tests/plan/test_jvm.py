"""py4j helpers: each answers what the JVM would, in fewer round trips."""

from __future__ import annotations

from pyspark.sql import SparkSession

from ember.plan.jvm import Jvm, class_name


def test_class_name_is_the_simple_name(spark: SparkSession) -> None:
    df = spark.range(3).join(spark.range(2), "id")
    plan = Jvm.analyzed(df)
    join = plan.child()  # a join USING a column is a projection over the join
    objects = [plan, join.joinType(), join, Jvm(spark).jsession]
    for obj in objects:
        assert class_name(obj) == str(obj.getClass().getSimpleName())
    assert [class_name(o) for o in objects[:2]] == ["Project", "Inner$"]
