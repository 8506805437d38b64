"""py4j helpers: each answers what the JVM would, in fewer round trips."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession
from pyspark.sql.dataframe import DataFrame

import ember
from ember.engines.spark.jvm import Jvm, class_name
from ember.errors import EmberError


def test_class_name_is_the_simple_name(spark: SparkSession) -> None:
    df = spark.range(3).join(spark.range(2), "id")
    plan = Jvm.analyzed(df)
    join = plan.child()  # a join USING a column is a projection over the join
    objects = [plan, join.joinType(), join, Jvm(spark).jsession]
    for obj in objects:
        assert class_name(obj) == str(obj.getClass().getSimpleName())
    assert [class_name(o) for o in objects[:2]] == ["Project", "Inner$"]


def test_only_a_classic_dataframe_is_taken() -> None:
    with pytest.raises(TypeError, match=r"ember.capture takes a PySpark DataFrame, not pyarrow.lib.Table"):
        ember.capture(pa.table({"k": [1]}))  # type: ignore[arg-type]
    # A DataFrame of neither kind (the abstract parent's subclass) is refused by name; a
    # Spark Connect one is taken (tests/capture/test_connect.py).
    other = type("DataFrame", (DataFrame,), {"__module__": "elsewhere"})
    with pytest.raises(EmberError, match=r"ember.source needs a DataFrame of a classic SparkSession or of a Spark Connect one"):
        ember.source(object.__new__(other), "t", key=["k"])
