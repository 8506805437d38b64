"""Workload-aware capture: pruning by source and selection push-down, against the full
capture and DuckDB over the source file."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from pyspark.sql import SparkSession

import ember
from ember import tpch as tpch_queries


def test_pruned_sources_are_left_out(spark: SparkSession, tpch: Path) -> None:
    full = ember.capture(tpch_queries.query(spark, 3), strategy="inject")
    pruned = ember.capture(tpch_queries.query(spark, 3), strategy="inject", workload=ember.Workload(sources=("lineitem",)))
    assert pruned.sources == ["lineitem"]
    assert pruned.output().equals(full.output())
    for oid in range(pruned.output().num_rows):
        assert pruned.backward(oids=[oid]).ids("lineitem").tolist() == full.backward(oids=[oid]).ids("lineitem").tolist()
    assert pruned.index_bytes < full.index_bytes
    with pytest.raises(ember.UnknownSourceError):
        pruned.backward(oids=[0]).ids("orders")


def test_no_side_table_for_an_aggregate_over_pruned_sources(spark: SparkSession, tpch: Path) -> None:
    counts = spark.sql("SELECT o_custkey, count(*) AS n FROM orders GROUP BY o_custkey")
    df = spark.table("customer").join(counts, spark.table("customer").c_custkey == counts.o_custkey)
    lin = ember.capture(df, strategy="inject", workload=ember.Workload(sources=("customer",)))
    assert lin._index.tables == ()
    rid = lin.backward(oids=[0]).ids("customer").tolist()
    assert len(rid) == 1


def test_selection_push_down_keeps_only_matching_rows(spark: SparkSession, tpch: Path) -> None:
    where = "l_quantity > 45"
    full = ember.capture(tpch_queries.query(spark, 1), strategy="inject")
    lin = ember.capture(tpch_queries.query(spark, 1), strategy="inject", workload=ember.Workload(where={"lineitem": where}))
    matching = {
        r[0]
        for r in duckdb.sql(
            f"SELECT file_row_number FROM read_parquet('{tpch / 'lineitem.parquet'}', file_row_number = true) WHERE {where}"
        ).fetchall()
    }
    for oid in range(lin.output().num_rows):
        want = [r for r in full.backward(oids=[oid]).ids("lineitem").tolist() if r in matching]
        assert lin.backward(oids=[oid]).ids("lineitem").tolist() == want
    outside = min(set(range(1000)) - matching)
    assert lin.forward("lineitem", ids=[outside]).ids().tolist() == []


def test_bad_workloads_are_refused_before_running(spark: SparkSession, tpch: Path) -> None:
    with pytest.raises(ember.UnknownSourceError, match="workload"):
        ember.capture(tpch_queries.query(spark, 1), workload=ember.Workload(sources=("orders",)))
    with pytest.raises(ember.InvalidPredicateError):
        ember.capture(tpch_queries.query(spark, 1), workload=ember.Workload(where={"lineitem": "no_such_col > 1"}))
