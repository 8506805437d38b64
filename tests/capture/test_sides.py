"""Side tables hold only the groups the output reaches, and lists ride in the result."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import DataFrame, SparkSession

import ember
from ember.capture import annotate
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


@pytest.fixture
def no_result_lineage() -> Iterator[None]:
    """Every side table written by the executors, none through the result channel."""
    saved = annotate.INLINE_RIDS
    annotate.INLINE_RIDS = 0
    yield
    annotate.INLINE_RIDS = saved


def test_staged_side_tables_trace_the_same(views: SparkSession, no_result_lineage: None) -> None:
    df = views.sql("SELECT g.k, count(*) AS n FROM (SELECT k, sum(v) AS s FROM side_t GROUP BY k) g GROUP BY g.k")
    lin = ember.capture(df, strategy="inject")
    assert [t.why for t in lin._index.tables] == ["aggregate groups", "aggregate groups"]
    o.assert_same_lineage(lin, o.group(sums(), lambda v: (v[0],), lambda vs: (len(vs),)))
