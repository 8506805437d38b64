"""Catalyst trees read in one round trip say what Spark's own objects say, over py4j one
call at a time, and their handles are those objects."""

from __future__ import annotations

import datetime
import decimal
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession

from ember.engines.spark import catalyst
from ember.engines.spark.jvm import Jvm, class_name, iterate
from ember.engines.spark.plan_import import optimized_plan
from ember.plan.trees import OPAQUE, PlanTree, Tree


def nodes(p: PlanTree) -> list[PlanTree]:
    return [p, *(n for c in p.children for n in nodes(c))]


def exprs(p: PlanTree) -> list[Tree]:
    held = [e for es in p.exprs.values() for e in es] + [e for row in p.projections for e in row]
    return [x for e in held for x in subtrees(e)]


def subtrees(e: Tree) -> list[Tree]:
    return [e, *(x for c in e.children for x in subtrees(c))]


@pytest.fixture()
def joined(spark: SparkSession) -> DataFrame:
    a = spark.createDataFrame([(1, "x\n\"y\" é"), (2, None)], "k int, s string")
    b = spark.createDataFrame([(1, decimal.Decimal("2.50"))], "k int, d decimal(9,2)")
    return (
        a.join(b, "k", "left")
        .where("s IS NULL OR s <> 'q\\n\"r\" é'")
        .groupBy("k")
        .agg({"d": "sum", "s": "max"})
        .orderBy("k")
    )


def test_nodes_and_expressions_say_what_spark_says(spark: SparkSession, joined: DataFrame) -> None:
    jvm = Jvm(spark)
    tree = catalyst.plan(jvm, optimized_plan(jvm, joined))
    found = nodes(tree)
    assert {"Sort", "Aggregate", "Join", "Filter", "LogicalRDD"} <= {n.kind for n in found}
    for n in found:
        assert n.handle is not None and class_name(n.handle) == n.kind
        output = list(iterate(n.handle.output()))
        assert [a.id for a in n.output] == [int(a.exprId().id()) for a in output]
        assert [(a.name, a.dtype, a.nullable) for a in n.output] == [
            (str(a.name()), str(a.dataType().simpleString()), bool(a.nullable())) for a in output
        ]
    for e in (e for n in found for e in exprs(n)):
        if e.handle is not None:  # the expressions a node holds
            assert str(e.handle.toString()) == e.text and class_name(e.handle).rstrip("$") == e.kind
            assert e.refs == {int(a.exprId().id()) for a in iterate(e.handle.references().toSeq())}
    texts = {e.text for n in found for e in exprs(n)}
    assert any('q\n"r" é' in t for t in texts)  # JSON-escaped in the JVM, unescaped here


LITERALS = [
    ("CAST(2.50 AS DECIMAL(9,2))", decimal.Decimal("2.50"), "decimal(9,2)"),
    ("DATE '1998-09-02'", (datetime.date(1998, 9, 2) - datetime.date(1970, 1, 1)).days, "date"),
    ("'it''s \"q\" \\\\ é'", "it's \"q\" \\ é", "string"),
    ("CAST(0.1 AS DOUBLE)", 0.1, "double"),
    ("CAST(NULL AS INT)", None, "int"),
    ("X'0102'", OPAQUE, "binary"),
    ("true", True, "boolean"),
    ("12345678901L", 12345678901, "bigint"),
]


@pytest.mark.parametrize(("literal", "value", "dtype"), LITERALS)
def test_literal_values_arrive_exactly(spark: SparkSession, literal: str, value: object, dtype: str) -> None:
    df = spark.range(1).selectExpr(f"{literal} AS v")
    project = catalyst.plan(Jvm(spark), Jvm.optimized(df))  # casts of literals folded
    assert project.kind == "Project"
    alias = project.exprs["list"][0]
    lit = alias.children[0]
    assert (lit.kind, lit.dtype, alias.name) == ("Literal", dtype, "v")
    assert lit.value is value if value is OPAQUE or value is None else lit.value == value


def test_one_expression_comes_with_its_handle(spark: SparkSession) -> None:
    jvm = Jvm(spark)
    cond = Jvm.analyzed(spark.range(5).where("id IN (1, 2) AND id > 0")).condition()
    tree = catalyst.expression(jvm, cond)
    assert tree.kind == "And" and [c.kind for c in tree.children] == ["In", "GreaterThan"]
    assert tree.handle is not None and str(tree.handle.toString()) == tree.text == str(cond.toString())


def test_views_and_leaves(spark: SparkSession, tmp_path: Path) -> None:
    spark.range(3).write.parquet(str(tmp_path / "t"))
    spark.read.parquet(str(tmp_path / "t")).createOrReplaceTempView("catalyst_t")
    df = spark.sql("SELECT * FROM catalyst_t JOIN (SELECT id AS j FROM range(2)) ON id = j")
    jvm = Jvm(spark)
    views = catalyst.views(jvm, Jvm.analyzed(df))
    assert [(name, leaf.kind) for name, leaf in views] == [("catalyst_t", "LogicalRelation")]
    assert views[0][1].facts["fmt"] == "ParquetFileFormat" and views[0][1].handle is None
    assert sorted(leaf.kind for leaf in catalyst.leaves(jvm, Jvm.analyzed(df))) == ["LogicalRelation", "Range"]
