"""Rebuilding imported plans on Spark (`engines.spark.build`), against answers worked by hand."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import ember
from ember.engines.spark import plan_in
from ember.engines.spark.build import Builder
from ember.engines.spark.jvm import JObj, Jvm, iterate
from ember.engines.spark.plan_import import import_plan
from ember.plan import ir
from tests.oracle import rows as o


def test_a_cached_subplan_answers_as_the_plan_does(spark: SparkSession) -> None:
    """Spark's cache manager optimizes a persisted plan again, and Spark 4.3 optimizing its
    own optimized plan folds the subquery's literal `0 AS k` into the null-aware anti join,
    which then excluded nothing: a cached NOT IN answered as if its subquery were empty."""
    spark.createDataFrame([(0, 5), (1, 6), (2, 7)], "k int, v int").createOrReplaceTempView("build_t")
    df = spark.sql(
        "SELECT k, v FROM build_t WHERE k NOT IN ("
        " SELECT k FROM (SELECT 0 AS k, count(*) AS n FROM (SELECT k FROM build_t GROUP BY k ORDER BY k LIMIT 1)))"
    )
    root, sources, _ = import_plan(Jvm(spark), df)
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


def _grouped_join(spark: SparkSession) -> DataFrame:
    left = spark.createDataFrame([(1, "a"), (2, "b"), (3, "a")], "k int, g string")
    right = spark.createDataFrame([(1, 10), (1, 11), (3, 30)], "k int, v int")
    return left.join(right, "k").groupBy("g").agg(F.sum("v").alias("s"), F.count("*").alias("n"))


def _same_object(spark: SparkSession, a: JObj, b: JObj) -> bool:
    identity = spark.sparkContext._jvm.java.lang.System.identityHashCode  # type: ignore[union-attr]
    return bool(identity(a) == identity(b))


def test_a_subtree_the_rewrite_left_as_imported_is_spark_s_own_node(spark: SparkSession) -> None:
    root, sources, _ = import_plan(Jvm(spark), _grouped_join(spark))
    assert isinstance(root, ir.Aggregate)
    built = Builder(Jvm(spark), sources, imported=root).build(root)
    assert _same_object(spark, built, root.handle)
    rebuilt = Builder(Jvm(spark), sources).build(root)  # nothing known to be unchanged
    assert not _same_object(spark, rebuilt, root.handle)


def test_a_node_the_rewrite_made_again_is_built_from_its_own_ir(spark: SparkSession) -> None:
    """Identity, not a handle, says a node is unchanged: a node the rewrite made with
    `dataclasses.replace` keeps its import's handle but not its columns."""
    jvm = Jvm(spark)
    root, sources, _ = import_plan(jvm, _grouped_join(spark))
    assert isinstance(root, ir.Aggregate)
    fewer = replace(root, columns=root.columns[:2])
    builder = Builder(jvm, sources, imported=root)
    df = builder.dataframe(fewer)
    assert df.columns == ["g", "s"]
    assert [tuple(r) for r in df.collect()] == [("a", 51)]
    joins = [n for n in ir.walk(root) if isinstance(n, ir.Join)]
    assert len(joins) == 1
    assert any(_same_object(spark, p, joins[0].handle) for p in _plan_nodes(builder.build(fewer)))


def _plan_nodes(plan: JObj) -> list[JObj]:
    return [plan, *(n for c in iterate(plan.children()) for n in _plan_nodes(c))]


@pytest.mark.parametrize("strategy", ["inject", "defer"])
def test_a_capture_runs_the_subtrees_it_left_alone_as_spark_optimized_them(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, strategy: str
) -> None:
    """A count over a join has its joined rows read by DuckDB beside the job, so the job's
    join is the import's own node, not one built again from its inputs up."""
    left, right = [(1, "a"), (2, "b"), (3, "a")], [(1, 10), (1, 11), (3, 30)]
    pq.write_table(pa.table({"k": [k for k, _ in left], "g": [g for _, g in left]}), tmp_path / "l.parquet")
    pq.write_table(pa.table({"k": [k for k, _ in right], "v": [v for _, v in right]}), tmp_path / "r.parquet")
    sent: list[plan_in.Message] = []
    send = plan_in.build

    def spied(jvm: Jvm, message: plan_in.Message) -> JObj:
        sent.append(message)
        return send(jvm, message)

    monkeypatch.setattr(plan_in, "build", spied)
    lt, rt = (spark.read.parquet(str(tmp_path / f"{n}.parquet")) for n in ("l", "r"))
    lin = ember.capture(lt.join(rt, "k").agg(F.count("*").alias("n")), strategy=strategy)
    joined = o.join(o.scan("l", left), o.scan("r", right), lambda a, b: a[0] == b[0])
    o.assert_same_lineage(lin, o.group(joined, lambda v: (), lambda vs: (len(vs),)))
    # the job's message: the count over the import's join, used whole (its inputs never sent)
    (job,) = [m.body["root"] for m in sent if m.body["root"]["op"] == "aggregate"]
    (kid,) = job["kids"]
    while kid["op"] == "project":  # Spark's column pruning above the join (projections have no handle)
        (kid,) = kid["kids"]
    assert kid["op"] == "plan" and "kids" not in kid
