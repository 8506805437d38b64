"""Inject and Defer give the same lineage; Defer matches rows by value and notices changed sources."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

import ember
from ember import progress
from ember.capture.align import match_rows
from ember.pools import pool


def by_values(lin: ember.Lineage) -> list[tuple[str, dict[str, list[int]]]]:
    out = []
    for oid, row in enumerate(lin.output().drop_columns(["ember_oid"]).to_pylist()):
        trace = lin.backward(oids=[oid])
        out.append((repr(row), {s: trace.ids(s).tolist() for s in lin.sources}))
    return sorted(out)


@pytest.fixture(scope="module")
def sales(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("strategies") / "sales.parquet"
    n = 500
    pq.write_table(pa.table({"shop": np.arange(n) % 7, "amount": (np.arange(n) * 13) % 97 / 4}), path, row_group_size=100)
    return path


def test_auto_injects_without_side_table_jobs_and_defers_with_them(spark: SparkSession, sales: Path) -> None:
    df = spark.read.parquet(str(sales))
    assert ember.capture(df.filter("amount > 3")).mode == "inject"
    assert ember.capture(df.groupBy("shop").count()).mode == "inject"  # its groups come back as lists
    top = df.groupBy("shop").count().orderBy("shop").limit(2)
    assert ember.capture(top).mode == "inject"  # its two groups are read by DuckDB after the job
    grouped = df.groupBy("shop").count()
    assert ember.capture(df.join(grouped, "shop")).mode == "defer"  # the groups are a side-table job
    with pytest.raises(ValueError, match="strategy"):
        ember.capture(df, strategy="eager")


def test_defer_equals_inject(spark: SparkSession, sales: Path) -> None:
    df = spark.read.parquet(str(sales))
    query = df.filter("amount > 2").groupBy("shop").agg({"amount": "sum"})
    injected = ember.capture(query, strategy="inject")
    deferred = ember.capture(query, strategy="defer")
    assert deferred.mode == "defer"
    assert by_values(deferred) == by_values(injected)
    rid = int(injected.backward(oids=[0]).ids("sales")[0])
    want = injected.output().take([int(o) for o in injected.forward("sales", ids=[rid]).ids()])
    got = deferred.output().take([int(o) for o in deferred.forward("sales", ids=[rid]).ids()])
    assert sorted(map(repr, got.drop_columns(["ember_oid"]).to_pylist())) == sorted(
        map(repr, want.drop_columns(["ember_oid"]).to_pylist())
    )


def test_defer_refuses_a_source_changed_before_it_ran(spark: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"k": [1, 1, 2], "v": [1, 2, 3]}), path)
    gate = threading.Event()
    pool("defer").submit(gate.wait)  # hold the deferred capture back (one worker)
    lin = ember.capture(spark.read.parquet(str(path)).groupBy("k").count(), strategy="defer")
    assert not lin.ready
    pq.write_table(pa.table({"k": [5, 5, 5, 6], "v": [1, 2, 3, 4]}), path)
    gate.set()
    with pytest.raises(ember.StaleSourceError):
        lin.backward(oids=[0])


def test_rows_are_matched_by_value_with_duplicates_in_order() -> None:
    user = pa.table({"k": [1, 2, 1, None], "s": ["a", "b", "a", "c"], "x": [0.1, 0.2, 0.3, 0.4]})
    captured = pa.table({"k": [None, 1, 2, 1], "s": ["c", "a", "b", "a"], "x": [0.4, 0.1000001, 0.2, 0.3]})
    assert match_rows(user, captured).tolist() == [1, 2, 3, 0]
    with pytest.raises(ember.EmberError, match="other rows"):
        match_rows(user, captured.set_column(0, "k", pa.array([None, 1, 3, 1])))
    with pytest.raises(ember.EmberError, match="returned 3 rows"):
        match_rows(user, captured.slice(0, 3))


def test_a_sample_drawn_anew_each_run_is_injected_and_refused_by_defer(spark: SparkSession) -> None:
    """Defer runs the plan again for its lineage; TABLESAMPLE draws its seed per run."""
    spark.range(200).selectExpr("id", "id % 3 AS k").createOrReplaceTempView("drawn")
    spark.createDataFrame([(1, 0), (2, 1), (9, 2)], "id long, k long").createOrReplaceTempView("keys")
    query = "SELECT id, k FROM drawn TABLESAMPLE (50 PERCENT) WHERE k IN (SELECT k FROM keys WHERE id > 1)"
    lin = ember.capture(spark.sql(query))  # a semi join's witnesses: a side-table job
    assert lin.mode == "inject"
    assert 0 < lin.output().num_rows < 133
    for oid, row in enumerate(lin.output().to_pylist()):
        trace = lin.backward(oids=[oid])
        assert trace.ids("range").tolist() == [row["id"]]
        assert trace.ids("keys").tolist() == [row["k"]]
    with pytest.raises(ember.EmberError, match="strategy='inject'"):
        ember.capture(spark.sql(query), strategy="defer")


@pytest.mark.parametrize("clock", ["current_timestamp()", "current_date()", "now()"])
def test_a_plan_reading_the_clock_is_injected_and_refused_by_defer(spark: SparkSession, sales: Path, clock: str) -> None:
    """Spark folds the clock into each optimization's own time, so Defer's second run would
    compute other rows than the job (the default strategy used to pick it and then fail)."""
    df = spark.read.parquet(str(sales))
    query = df.join(df.groupBy("shop").count(), "shop").selectExpr("shop", "count", f"{clock} AS at")
    lin = ember.capture(query)  # its groups are a side-table job: with no clock, auto defers
    assert lin.mode == "inject"
    for oid, row in enumerate(lin.output().to_pylist()[:20]):
        assert lin.backward(oids=[oid]).ids("sales").tolist() == list(range(row["shop"], 500, 7))  # its shop's group
    with pytest.raises(ember.EmberError, match="strategy='inject'"):
        ember.capture(query, strategy="defer")


def test_a_long_capture_names_its_phases_when_asked(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Captures past `progress.AFTER` seconds (here 0) name their phases with progress=True;
    progress=False keeps them quiet."""
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"k": [1, 1, 2], "v": [1, 2, 3]}), path)
    df = spark.read.parquet(str(path))
    monkeypatch.setattr(progress, "AFTER", 0)
    ember.capture(df.groupBy("k").count(), strategy="inject", progress=True)
    said = capsys.readouterr().err
    for phase in ("ember: capture: ", "the job, with its lineage", "building the lineage index", "lineage ready"):
        assert phase in said, said
    ember.capture(df.groupBy("k").count(), strategy="defer", progress=True).wait()
    assert "lineage is built in the background" in capsys.readouterr().err
    ember.capture(df.groupBy("k").count(), strategy="inject", progress=False)
    assert "ember:" not in capsys.readouterr().err
