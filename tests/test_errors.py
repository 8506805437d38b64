"""Bad input gets a clear ember error naming the problem, and a refused plan runs nothing."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import ember
from ember.errors import (
    EmberError,
    IdOutOfRangeError,
    InvalidPredicateError,
    StaleSourceError,
    UnknownSourceError,
    UnsupportedOperatorError,
)


@pytest.fixture
def parquet_source(spark: SparkSession, tmp_path: Path) -> tuple[Path, DataFrame]:
    path = tmp_path / "scores.parquet"
    pq.write_table(pa.table({"k": [1, 2, 2, 3], "v": [10, 20, 30, 40]}), path)
    df = spark.read.parquet(str(path))
    df.createOrReplaceTempView("scores")
    return path, spark.sql("SELECT k, sum(v) AS total FROM scores GROUP BY k ORDER BY k")


@pytest.fixture
def lin(parquet_source: tuple[Path, DataFrame]) -> ember.Lineage:
    return ember.capture(parquet_source[1])


def test_unknown_source_names_the_known_ones(lin: ember.Lineage) -> None:
    with pytest.raises(UnknownSourceError, match=r"'nope'.*scores"):
        lin.forward("nope", ids=[0])
    trace = lin.backward(oids=[0])
    with pytest.raises(UnknownSourceError, match="nope"):
        trace.ids("nope")
    with pytest.raises(UnknownSourceError, match="nope"):
        trace.rows("nope")


@pytest.mark.parametrize("oid", [-1, 3, 10**9])
def test_oid_out_of_range(lin: ember.Lineage, oid: int) -> None:
    with pytest.raises(IdOutOfRangeError, match=rf"\[{oid}\].*0 to 2"):
        lin.backward(oids=[oid])


@pytest.mark.parametrize("rid", [-5, 4])
def test_rid_out_of_range(lin: ember.Lineage, rid: int) -> None:
    with pytest.raises(IdOutOfRangeError, match=rf"scores.*\[{rid}\].*0 to 3"):
        lin.forward("scores", ids=[rid])


def test_where_that_does_not_parse(lin: ember.Lineage) -> None:
    with pytest.raises(InvalidPredicateError, match="does not parse"):
        lin.backward(where="k = = 1")
    with pytest.raises(InvalidPredicateError, match="does not parse"):
        lin.forward("scores", where="v >= (")


def test_where_naming_no_column(lin: ember.Lineage) -> None:
    with pytest.raises(InvalidPredicateError, match="no_such_column"):
        lin.backward(where="no_such_column = 1")
    with pytest.raises(InvalidPredicateError, match="total"):
        lin.forward("scores", where="total > 3")  # an output column, not a source column


def test_where_answers_when_it_is_right(lin: ember.Lineage) -> None:
    assert lin.backward(where="k = 2").ids("scores").tolist() == [1, 2]
    assert lin.forward("scores", where="v >= 30").ids().tolist() == [1, 2]


def test_ids_and_where_are_exclusive(lin: ember.Lineage) -> None:
    with pytest.raises(TypeError):
        lin.backward(oids=[0], where="k = 1")
    with pytest.raises(TypeError):
        lin.backward()


def test_source_changed_on_disk_since_capture(parquet_source: tuple[Path, DataFrame], lin: ember.Lineage) -> None:
    path, _ = parquet_source
    trace = lin.backward(oids=[1])
    assert trace.rows("scores").column("v").to_pylist() == [20, 30]
    time.sleep(0.01)
    pq.write_table(pa.table({"k": [9, 9, 9, 9, 9], "v": [0, 0, 0, 0, 0]}), path)
    with pytest.raises(StaleSourceError, match=r"scores.*changed since capture"):
        trace.rows("scores")
    with pytest.raises(StaleSourceError):
        lin.forward("scores", where="v = 0")
    os.remove(path)
    with pytest.raises(StaleSourceError, match="gone"):
        trace.rows("scores")


@pytest.fixture
def job_group(spark: SparkSession) -> Iterator[str]:
    group = f"ember-refused-plan-{uuid.uuid4().hex}"  # Spark keeps a group's jobs: one per test
    spark.sparkContext.setJobGroup(group, "must stay empty")
    yield group
    spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]


def _untraceable(spark: SparkSession, marker: Path) -> DataFrame:
    """A job over a Python UDTF with a terminate(), which ember refuses; its eval() leaves
    `marker` behind, to show whether it ran."""

    class Touching:
        def eval(self, x: int) -> Iterator[tuple[int]]:
            marker.write_text("ran")
            yield (x,)

        def terminate(self) -> Iterator[tuple[int]]:
            yield (0,)

    spark.udtf.register("touching", F.udtf(Touching, returnType="y: int"))
    spark.createDataFrame([(1,), (2,)], "x int").createOrReplaceTempView("touched")
    return spark.sql("SELECT x, y FROM touched, LATERAL touching(x)")


def test_untraceable_operator_is_refused_before_any_job(spark: SparkSession, job_group: str, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    with pytest.raises(UnsupportedOperatorError, match="terminate"):
        ember.capture(_untraceable(spark, marker).filter("y >= 0"))
    assert not marker.exists()
    assert list(spark.sparkContext.statusTracker().getJobIdsForGroup(job_group)) == []


def test_every_error_is_an_ember_error() -> None:
    for cls in (IdOutOfRangeError, InvalidPredicateError, StaleSourceError, UnknownSourceError, UnsupportedOperatorError):
        assert issubclass(cls, EmberError)


def test_defer_reports_an_untraceable_operator_once_the_job_ran(spark: SparkSession) -> None:
    """Defer reads the plan while the job runs (docs: README, capture strategies)."""
    df = spark.sql("WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT n FROM r")
    with pytest.raises(UnsupportedOperatorError, match="recursive CTE"):
        ember.capture(df.filter("n > 1"), strategy="defer")


def test_what_a_second_run_would_draw_otherwise_is_refused_where_a_second_run_answers(
    spark: SparkSession, job_group: str
) -> None:
    """TABLESAMPLE's seed is drawn per run: a scalar subquery's lineage (its own job) and an
    exact `ember.infer` (a re-run over the traced rows) could not come from the run that
    made the result, so both are refused before any job; a superset ignores the sample."""
    spark.range(100).selectExpr("id", "id % 3 AS k").createOrReplaceTempView("drawn")
    sampled = "SELECT k, count(*) AS n FROM drawn TABLESAMPLE (50 PERCENT) GROUP BY k"
    with pytest.raises(UnsupportedOperatorError, match="scalar subquery that samples rows"):
        ember.capture(spark.sql(f"SELECT id, (SELECT max(n) FROM ({sampled})) AS m FROM drawn"))
    with pytest.raises(UnsupportedOperatorError, match="cannot trace a sample exactly"):
        ember.infer(spark.sql(sampled))
    assert list(spark.sparkContext.statusTracker().getJobIdsForGroup(job_group)) == []
    superset = ember.infer(spark.sql(sampled), exact=False)
    for oid, row in enumerate(superset.output().to_pylist()):
        assert superset.backward(oids=[oid]).ids("range").tolist() == list(range(row["k"], 100, 3))


def test_an_exact_infer_that_would_re_run_a_plan_reading_the_clock_is_refused(spark: SparkSession, job_group: str) -> None:
    """A re-run reads the clock anew, so the traced row is not found again (this failed,
    calling itself a bug); a plan whose traces need no re-run is traced."""
    stamped = spark.range(10).selectExpr("id", "current_timestamp() AS at")
    with pytest.raises(UnsupportedOperatorError, match="reads the clock"):
        ember.infer(stamped)
    assert list(spark.sparkContext.statusTracker().getJobIdsForGroup(job_group)) == []
    assert ember.infer(stamped, exact=False).backward(oids=[3]).ids("range").tolist() == [3]
    grouped = spark.range(10).selectExpr("id % 2 AS k", "current_date() AS d").groupBy("k").count()
    assert ember.infer(grouped).backward(oids=[0]).ids("range").size == 5
