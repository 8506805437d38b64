"""The JVM boundary's two messages agree: an imported plan written as a plan-in message,
built on the JVM and read back through the plan-out reader is the same IR, for every node
the plan-in message builds itself and every expression the import makes, over the
operator suite's plans (`tests/capture/test_operators.py` calls `assert_round_trip`) and
Hypothesis-generated ones."""

from __future__ import annotations

import dataclasses

from hypothesis import HealthCheck, given, settings
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ember.engines.spark import catalyst, plan_in
from ember.engines.spark.jvm import Jvm
from ember.engines.spark.plan_import import Importer, import_plan
from ember.errors import UnsupportedOperatorError
from ember.plan import domains, ir
from tests.capture import test_generated_pipelines as generated

_BUILT_HERE = (ir.Join, ir.Aggregate, ir.Union)  # the message builds them anew without the import's handle


def unhandled(node: ir.Node) -> ir.Node:
    """`node` with the import's handles dropped where the message can build the node from
    its fields alone, so the round trip goes through the message's own operations."""
    node = ir.with_children(node, tuple(unhandled(c) for c in node.children))
    return dataclasses.replace(node, handle=None) if isinstance(node, _BUILT_HERE) else node


def assert_round_trip(df: DataFrame) -> None:
    """`df`'s imported IR comes back the same through both messages (ember refuses some
    plans at import: those have no IR to compare). The operator suite calls this for each
    of its plans."""
    jvm = Jvm(df.sparkSession)
    try:
        root, sources, _ = import_plan(jvm, df)
    except UnsupportedOperatorError:
        return
    names = {key: s.name for key, s in sources.items()}
    message = plan_in.message(unhandled(root), outside=lambda n: n.handle, unchanged=frozenset())
    again = domains.marked(Importer(names).node(catalyst.plan(jvm, plan_in.build(jvm, message))))
    assert again == root, ir.outline(again) + "\n--- imported:\n" + ir.outline(root)


def test_a_plan_of_every_built_node_comes_back_the_same(spark: SparkSession) -> None:
    a = spark.createDataFrame([(1, "x", 2.0), (2, "y", 3.0), (2, None, 1.0)], "k int, s string, v double")
    b = spark.createDataFrame([(2, 5), (3, 6)], "k int, w int")
    joined = a.join(b, "k", "left").where("v > 1.5 OR w IS NULL")
    grouped = joined.groupBy("k").agg(F.sum("v").alias("t"), F.countDistinct("s").alias("n"))
    df = grouped.unionByName(grouped.selectExpr("k + 1 AS k", "t", "n")).cube("k").count()
    assert_round_trip(df.selectExpr("*", "sum(count) OVER (PARTITION BY k ORDER BY count) AS w"))


@settings(settings.get_profile("spark-jobs"), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=generated.plans, t0=generated.table, t1=generated.table)
def test_generated_plans_come_back_the_same(spark: SparkSession, plan: generated.Plan, t0: generated.Table, t1: generated.Table) -> None:
    generated.register(spark, t0, t1)
    assert_round_trip(generated.spark_plan(spark, plan))
