"""Side tables hold only the groups the output reaches, and lists ride in the result."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession

import ember
from ember.capture.capture import DRIVER_RIDS
from ember.engines.spark import plan_in
from ember.engines.spark.build import Builder
from ember.errors import EmberError
from ember.store.parts import Parts
from tests.oracle import rows as o

# 40 groups of 5 rows; the probe table names two of them and one key with no group.
T = [(k % 40, k) for k in range(200)]
U = [(3, "a"), (17, "b"), (17, "c"), (99, "d")]


@pytest.fixture(scope="module")
def views(spark: SparkSession) -> SparkSession:
    spark.createDataFrame(T, "k int, v int").createOrReplaceTempView("side_t")
    spark.createDataFrame(U, "k int, w string").createOrReplaceTempView("side_u")
    return spark


def grouped_join(spark: SparkSession) -> DataFrame:
    return spark.sql(
        "SELECT u.w, g.s FROM side_u u JOIN (SELECT k, sum(v) AS s FROM side_t GROUP BY k) g ON u.k = g.k"
    )


def sums() -> list[o.Row]:
    """SELECT k, sum(v) FROM side_t GROUP BY k."""
    return o.group(o.scan("side_t", T), lambda v: (v[0],), lambda vs: (sum(v[1] for v in vs),))


def expected() -> list[o.Row]:
    joined = o.join(o.scan("side_u", U), sums(), lambda u, g: u[0] == g[0])
    return o.select(joined, lambda v: (v[1], v[3]))


def test_a_side_table_holds_only_the_groups_the_output_reaches(views: SparkSession) -> None:
    lin = ember.capture(grouped_join(views), strategy="inject")
    o.assert_same_lineage(lin, expected())
    (table,) = lin._index.tables
    assert table.rows == 10  # groups 3 and 17, five rows each: not the 200 rows of all 40 groups


def test_an_aggregate_at_the_top_needs_no_side_table_job(views: SparkSession) -> None:
    df = views.sql("SELECT k, sum(v) AS s FROM side_t GROUP BY k HAVING sum(v) > 500 ORDER BY k LIMIT 5")
    lin = ember.capture(df)
    assert lin.mode == "inject"  # auto injects: the groups come back as lists with the result
    kept = sorted((r for r in sums() if r[0][1] > 500), key=lambda r: r[0][0])[:5]
    o.assert_same_lineage(lin, kept)


def in_parts(lin: ember.Lineage) -> list[bool]:
    """Per index column of every side table: whether the executors wrote it (as parts)."""
    return [isinstance(c, Parts) for t in lin._index.tables for c in t.columns()]


@pytest.fixture(params=["lists", "staged"])
def carried(request: pytest.FixtureRequest, views: SparkSession) -> Iterator[str]:
    """Lineage through the result (as lists), or none through the driver (the session's
    `spark.ember.driverRids` at 0): every side table written and indexed by the executors."""
    if request.param == "staged":
        views.conf.set(DRIVER_RIDS, "0")
    yield request.param
    views.conf.unset(DRIVER_RIDS)


def test_an_aggregate_of_an_aggregate_traces_the_same_listed_or_staged(views: SparkSession, carried: str) -> None:
    df = views.sql("SELECT s % 3 AS m, count(*) AS n FROM (SELECT k, sum(v) AS s FROM side_t GROUP BY k) GROUP BY s % 3")
    lin = ember.capture(df, strategy="inject")
    listed = "aggregate groups, listed in the result"
    assert [t.why for t in lin._index.tables] == [listed if carried == "lists" else "aggregate groups"] * 2
    parts = in_parts(lin)
    assert parts and all(parts) == (carried == "staged")
    outer = o.group(sums(), lambda v: (v[1] % 3,), lambda vs: (len(vs),))
    o.assert_same_lineage(lin, outer)


def test_defer_keeps_the_driver_rids_the_session_had_at_capture(views: SparkSession) -> None:
    """Its lineage is built in the background, after the session may have changed."""
    df = views.sql("SELECT s % 3 AS m, count(*) AS n FROM (SELECT k, sum(v) AS s FROM side_t GROUP BY k) GROUP BY s % 3")
    views.conf.set(DRIVER_RIDS, "0")
    try:
        lin = ember.capture(df, strategy="defer")
    finally:
        views.conf.unset(DRIVER_RIDS)
    o.assert_same_lineage(lin, o.group(sums(), lambda v: (v[1] % 3,), lambda vs: (len(vs),)))
    parts = in_parts(lin)
    assert parts and all(parts)


@pytest.mark.parametrize("value", ["-1", "many"])
def test_a_driver_rids_setting_that_is_no_count_is_refused(views: SparkSession, value: str) -> None:
    views.conf.set(DRIVER_RIDS, value)
    try:
        with pytest.raises(EmberError, match="driverRids must be a count"):
            ember.capture(views.sql("SELECT k, sum(v) FROM side_t GROUP BY k"))
    finally:
        views.conf.unset(DRIVER_RIDS)


@pytest.mark.parametrize("bound", [150, 250])
def test_a_scalar_subquery_runs_beside_the_job(views: SparkSession, bound: int) -> None:
    """Its side table starts with the job; where no output row points at it (no row is
    over 250), its rows are dropped again."""
    df = views.sql(f"SELECT k, v FROM side_t WHERE v > {bound} - (SELECT max(v) FROM side_t) + 199")
    top = max(v for _, v in T)
    whole = frozenset(("side_t", i) for i in range(len(T)))
    expected = [(v, lin | whole) for v, lin in o.where(o.scan("side_t", T), lambda v: v[1] > bound - top + 199)]
    lin = ember.capture(df, strategy="inject")
    o.assert_same_lineage(lin, expected)
    (table,) = [t for t in lin._index.tables if t.why == "scalar subquery"]
    assert table.rows == (1 if expected else 0)  # its one row, which lists the aggregate's input


@pytest.mark.parametrize("stored", ["parquet", "memory"])
def test_a_table_beside_the_job_is_built_for_spark_only_where_duckdb_cannot_read_it(
    views: SparkSession, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, stored: str
) -> None:
    """A global aggregate joined to the rows (TPC-DS Q88 joins eight) has its one group read
    beside the job: by DuckDB from Parquet, with no Spark plan built for it (one was, ~20 ms
    each, before the job); from memory DuckDB cannot, and Spark computes it, built on the
    thread beside the job."""
    view = "side_t"
    if stored == "parquet":
        pq.write_table(pa.table({"k": [k for k, _ in T], "v": [v for _, v in T]}), tmp_path / "t.parquet")
        views.read.parquet(str(tmp_path / "t.parquet")).createOrReplaceTempView(view := "side_tp")
    built: list[int] = []
    build = Builder.dataframe
    monkeypatch.setattr(Builder, "dataframe", lambda self, node: built.append(1) or build(self, node))
    df = views.sql(f"SELECT t.k, t.v FROM {view} t CROSS JOIN (SELECT max(v) AS top FROM {view}) m WHERE t.v > m.top - 10")
    lin = ember.capture(df, strategy="inject")
    whole = frozenset((view, i) for i in range(len(T)))
    o.assert_same_lineage(lin, [(v, lin_ | whole) for v, lin_ in o.where(o.scan(view, T), lambda v: v[1] > max(v for _, v in T) - 10)])
    assert len(built) == (1 if stored == "parquet" else 2)  # the job's plan, and the table's from memory


def test_side_tables_that_run_together_are_built_in_one_message(views: SparkSession, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two aggregates joined to the rows, over in-memory tables DuckDB cannot read: their
    side tables run in one wave, built by one plan-in message of two roots (one py4j call)."""
    built: list[int] = []
    several = plan_in.dataframes
    monkeypatch.setattr(plan_in, "dataframes", lambda jvm, messages: built.append(len(messages)) or several(jvm, messages))
    df = views.sql(
        "SELECT u.w, g.s, h.n FROM side_u u JOIN (SELECT k, sum(v) AS s FROM side_t GROUP BY k) g ON u.k = g.k "
        "JOIN (SELECT k, count(*) AS n FROM side_t WHERE v > 50 GROUP BY k) h ON u.k = h.k"
    )
    lin = ember.capture(df, strategy="inject")
    counts = o.group(o.where(o.scan("side_t", T), lambda v: v[1] > 50), lambda v: (v[0],), lambda vs: (len(vs),))
    joined = o.join(o.join(o.scan("side_u", U), sums(), lambda u, g: u[0] == g[0]), counts, lambda x, h: x[0] == h[0])
    o.assert_same_lineage(lin, o.select(joined, lambda v: (v[1], v[3], v[5])))
    assert built == [2]
