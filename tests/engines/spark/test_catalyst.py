"""Catalyst trees read in one round trip say what Spark's own objects say, over py4j one
call at a time, and their handles are those objects; the plan-out message holds what the
import reads beside the plan."""

from __future__ import annotations

import datetime
import decimal
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession

from ember.engines.spark import catalyst
from ember.engines.spark.jvm import Jvm, class_name, iterate
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
    tree = catalyst.message(jvm, joined).plan
    assert tree is not None
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
    views = catalyst.message(jvm, df).views
    assert [(name, leaf.kind) for name, leaf in views] == [("catalyst_t", "LogicalRelation")]
    assert views[0][1].facts["fmt"] == "ParquetFileFormat" and views[0][1].handle is None
    assert sorted(leaf.kind for leaf in catalyst.leaves(jvm, Jvm.analyzed(df))) == ["LogicalRelation", "Range"]


def test_the_message_says_streaming_and_clock(spark: SparkSession) -> None:
    jvm = Jvm(spark)
    streaming = catalyst.message(jvm, spark.readStream.format("rate").load())
    assert streaming.streaming and streaming.plan is None
    clocked = catalyst.message(jvm, spark.range(2).selectExpr("id", "current_timestamp() AS t"))
    plain = catalyst.message(jvm, spark.range(2).selectExpr("id + 1 AS j"))
    assert (clocked.clock, plain.clock) == (True, False) and not plain.streaming


def test_file_scans_carry_their_files_and_options(spark: SparkSession, tmp_path: Path) -> None:
    spark.range(4).repartition(2).write.csv(str(tmp_path / "c"), header=True)
    df = spark.read.option("header", "true").option("mode", "PERMISSIVE").csv(str(tmp_path / "c"))
    leaf = catalyst.message(Jvm(spark), df).plan
    while leaf is not None and leaf.children:
        leaf = leaf.child
    assert leaf is not None and leaf.kind == "LogicalRelation"
    assert {k.lower(): v for k, v in leaf.facts["options"].items()}["mode"] == "PERMISSIVE"
    on_disk = {p.name: p.stat() for p in (tmp_path / "c").glob("*.csv")}
    listed = {Path(uri).name: (size, mtime) for uri, size, mtime in leaf.facts["files"]}
    assert listed == {n: (st.st_size, st.st_mtime_ns // 1_000_000) for n, st in on_disk.items()}
    bare = leaf.facts["bare"]  # the scan without `_metadata`, which text numbering reads
    assert class_name(bare) == "LogicalRelation" and "_metadata" not in str(bare.output().toString())


def test_a_node_ember_passes_through_says_how_spark_prints_it(spark: SparkSession) -> None:
    tree = catalyst.message(Jvm(spark), spark.range(9).repartition(3)).plan
    assert tree is not None and tree.kind == "Repartition" and tree.facts["s"].startswith("Repartition 3")


def test_a_window_frames_value_bounds_come_with_handles(spark: SparkSession) -> None:
    df = spark.range(5).selectExpr("id", "sum(id) OVER (ORDER BY CAST(id AS DOUBLE) RANGE BETWEEN 1.5 PRECEDING AND CURRENT ROW) AS s")
    window = catalyst.message(Jvm(spark), df).plan
    while window is not None and window.kind != "Window":
        window = window.child
    assert window is not None
    frame = subtrees(window.exprs["list"][0])
    (spec,) = (e for e in frame if e.kind == "SpecifiedWindowFrame")
    lower = spec.children[0]
    assert lower.handle is not None and str(lower.handle.toString()) == lower.text


def test_runtime_filters_are_left_out(spark: SparkSession, tmp_path: Path) -> None:
    """Bloom filters only skip rows a join drops anyway: the conditions ember reads have
    none, where the plan Spark runs has one."""
    spark.range(2000).selectExpr("id", "id % 7 AS k").write.parquet(str(tmp_path / "big"))
    spark.range(50).selectExpr("id AS k", "id % 3 AS f").write.parquet(str(tmp_path / "small"))
    settings = {
        "spark.sql.optimizer.runtime.bloomFilter.enabled": "true",
        "spark.sql.optimizer.runtime.bloomFilter.applicationSideScanSizeThreshold": "1",
        "spark.sql.autoBroadcastJoinThreshold": "-1",
    }
    before = {k: spark.conf.get(k, None) for k in settings}
    for k, v in settings.items():
        spark.conf.set(k, v)
    try:
        big, small = spark.read.parquet(str(tmp_path / "big")), spark.read.parquet(str(tmp_path / "small"))
        df = big.join(small.where("f = 1"), "k")
        assert "might_contain" in str(Jvm.optimized(df).toString())
        tree = catalyst.message(Jvm(spark), df).plan
        assert tree is not None
        assert not any("might_contain" in e.text for n in nodes(tree) for e in exprs(n))
        # a node ember leaves whole is the optimized plan's own: its runtime filters stay
        assert any("might_contain" in str(n.handle.toString()) for n in nodes(tree) if n.kind == "Filter")
    finally:
        for k, v in before.items():
            spark.conf.unset(k) if v is None else spark.conf.set(k, v)
