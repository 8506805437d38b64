"""Workload-aware capture: pruning by source and selection push-down, against the full
capture and DuckDB over the source file."""

from __future__ import annotations

import sys
from pathlib import Path

import duckdb
import pytest
from pyspark.sql import SparkSession

import ember
from devkit import tpch as tpch_queries


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


Q1_ROWS = "l_shipdate <= DATE '1998-12-01' - INTERVAL 90 DAY AND l_returnflag = ? AND l_linestatus = ?"
MONTHLY = "SELECT date_trunc('month', l_shipdate) AS m, count(*) AS n, sum(l_quantity) AS q FROM lineitem GROUP BY m"


def _q1_lineage(tpch: Path, row: dict[str, object], extra: str = "TRUE") -> str:
    """DuckDB over the file: Q1's output row `row` comes from the rows of its group."""
    return (
        f"SELECT file_row_number AS ember_rid, * FROM read_parquet('{tpch / 'lineitem.parquet'}', file_row_number = true) "
        f"WHERE {Q1_ROWS.replace('?', repr(row['l_returnflag']), 1).replace('?', repr(row['l_linestatus']), 1)} AND ({extra})"
    )


@pytest.mark.parametrize("strategy", ["inject", "defer"])
def test_data_skipping_reads_only_the_asked_partitions(
    spark: SparkSession, tpch: Path, strategy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    workload = ember.Workload(partition_by={"lineitem": "l_shipmode"})
    lin = ember.capture(tpch_queries.query(spark, 1), strategy=strategy, workload=workload)
    rows = lin.output().to_pylist()
    asked = {
        "l_shipmode IN ('AIR', 'MAIL')": "l_shipmode IN ('AIR', 'MAIL')",
        "l_shipmode = 'RAIL'": "l_shipmode = 'RAIL'",
        "l_quantity > 45": "l_quantity > 45",  # not the partition column: read from the source
    }
    for pred, oracle in asked.items():
        for row in rows:
            want = [r[0] for r in duckdb.sql(f"SELECT ember_rid FROM ({_q1_lineage(tpch, row, oracle)}) ORDER BY 1").fetchall()]
            got = lin.backward(oids=[row["ember_oid"]], source_where={"lineitem": pred}).ids("lineitem")
            assert got.tolist() == want, (pred, row)
    both = lin.backward(oids=[0, 1], source_where={"lineitem": "l_shipmode = 'RAIL'"}).ids("lineitem")
    assert set(both.tolist()) == set(lin.backward(oids=[0], source_where={"lineitem": "l_shipmode = 'RAIL'"}).ids("lineitem").tolist()) | set(
        lin.backward(oids=[1], source_where={"lineitem": "l_shipmode = 'RAIL'"}).ids("lineitem").tolist()
    )

    def no_scan(*args: object) -> None:
        raise AssertionError("a partitioned trace read the source")

    monkeypatch.setattr(sys.modules["ember.query.lineage"], "chosen_rids", no_scan)  # `ember.lineage` is also a function
    assert lin.backward(oids=[0], source_where={"lineitem": "l_shipmode = 'AIR'"}).ids("lineitem").size > 0
    with pytest.raises(AssertionError, match="read the source"):
        lin.backward(oids=[0], source_where={"lineitem": "l_quantity > 45"})


def test_group_by_push_down_answers_without_the_source(
    spark: SparkSession, tpch: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lin = ember.capture(tpch_queries.query(spark, 1), strategy="defer", workload=ember.Workload(queries=(MONTHLY,)))
    lin.save(str(tmp_path / "q1"))
    loaded = ember.load(str(tmp_path / "q1"))

    def no_fetch(*args: object) -> None:
        raise AssertionError("a pushed-down query fetched source rows")

    monkeypatch.setattr("ember.query.trace.read_rows", no_fetch)
    for row in lin.output().to_pylist():
        oracle = duckdb.sql(
            f"SELECT date_trunc('month', l_shipdate) AS m, count(*) AS n, sum(l_quantity) AS q, "
            f"list(ember_rid ORDER BY ember_rid) AS rids FROM ({_q1_lineage(tpch, row)}) GROUP BY m ORDER BY m"
        ).fetchall()
        for source in (lin, loaded):
            answer = source.backward(oids=[row["ember_oid"]]).query("select date_trunc('month', l_shipdate) as m, count(*) as n,\n sum(l_quantity) as q from lineitem group by m")
            got = sorted(
                (r["m"], r["n"], r["q"], answer.backward(oids=[r["ember_oid"]]).ids("lineitem").tolist())
                for r in answer.output().to_pylist()
            )
            assert got == [tuple(r) for r in oracle]
    with pytest.raises(AssertionError, match="fetched source rows"):  # not the declared query: asked the slow way
        lin.backward(oids=[0]).query("SELECT count(*) FROM lineitem")


def test_workload_queries_that_cannot_be_pushed_down_are_refused_before_running(spark: SparkSession, tpch: Path) -> None:
    q1 = tpch_queries.query(spark, 1)
    for bad in (
        MONTHLY + " ORDER BY m",
        "SELECT l_orderkey FROM lineitem WHERE l_quantity > 3",
        "SELECT count(*) FROM orders",
        "SELECT no_such_col, count(*) FROM lineitem GROUP BY 1",
    ):
        with pytest.raises(ember.InvalidPredicateError):
            ember.capture(q1, workload=ember.Workload(queries=(bad,)))
    with pytest.raises(ember.InvalidPredicateError):
        ember.capture(q1, workload=ember.Workload(partition_by={"lineitem": "no_such_col"}))


@pytest.mark.parametrize("strategy", ["inject", "defer"])
def test_a_workload_over_an_in_memory_source(spark: SparkSession, strategy: str) -> None:
    """Selection push-down and data skipping on a DataFrame built in memory (its rows are
    collected only by the capture: the push-down is resolved against them, the partition
    query checked over none of them)."""
    rows = [(1, "a"), (2, "b"), (1, "c"), (None, "d")]
    df = ember.source(spark.createDataFrame(rows, "k int, s string"), "mem").groupBy("k").count()
    out = ember.capture(df, strategy=strategy, workload=ember.Workload(where={"mem": "s <> 'a'"}))
    for oid, row in enumerate(out.output().to_pylist()):
        want = [i for i, (k, s) in enumerate(rows) if k == row["k"] and s != "a"]
        assert out.backward(oids=[oid]).ids("mem").tolist() == want
    out = ember.capture(df, strategy=strategy, workload=ember.Workload(partition_by={"mem": "s"}))
    for oid, row in enumerate(out.output().to_pylist()):
        want = [i for i, (k, s) in enumerate(rows) if k == row["k"] and s in ("c", "d")]
        assert out.backward(oids=[oid], source_where={"mem": "s IN ('c', 'd')"}).ids("mem").tolist() == want
