"""Levels built by the executors (`store.spark_index`): with no lineage allowed through the
driver's result channel, every side table is written by the tasks and its level built
there in parts. Traces must equal the oracles exactly as the driver-built index does,
also after a part-writing task failed once, and through saved stores and Spark traces.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

import ember
from ember.capture import annotate, sides
from ember.store import spark_index
from ember.store.parts import Parts
from tests.oracle import rows as o
from tests.tpch.queries_sql import tpch_sql
from tests.tpch.test_tpch import SEED, check_lineage

PART_ROWS = 7  # tiny parts, so every level of these small tables has several
# TPC-H's levels hold up to tens of thousands of rows: parts of 7 made thousands per level,
# minutes of tiny tasks that show nothing more than tens of parts do
TPCH_PART_ROWS = 512


@pytest.fixture
def on_executors(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(annotate, "INLINE_RIDS", 0)
    monkeypatch.setattr(spark_index, "PART_ROWS", PART_ROWS)
    yield


def remote_levels(lin: ember.Lineage) -> list[int]:
    """Ids of the side tables whose columns the executors wrote."""
    return [i for i, lv in enumerate(lin._index.tables) if lv.columns() and all(isinstance(c, Parts) for c in lv.columns())]


G = [(k % 5, k, k * 3 % 7) for k in range(40)]  # (g, k, v)
H = [(g, f"h{g}") for g in (0, 1, 2, 3, 9)] + [(None, "hnull")]


@pytest.fixture(scope="module")
def views(spark: SparkSession) -> SparkSession:
    spark.createDataFrame(G, "g int, k int, v int").createOrReplaceTempView("si_g")
    spark.createDataFrame(H, "g int, name string").createOrReplaceTempView("si_h")
    return spark


def g_rows() -> list[o.Row]:
    return o.scan("si_g", G)


@pytest.mark.parametrize("strategy", ["inject", "defer"])
def test_an_aggregate_under_a_join(views: SparkSession, on_executors: None, strategy: str) -> None:
    df = views.sql(
        "SELECT h.name, s.total, s.n FROM si_h h JOIN "
        "(SELECT g, sum(v) AS total, count(*) AS n FROM si_g GROUP BY g) s ON h.g = s.g"
    )
    lin = ember.capture(df, strategy=strategy)
    groups = o.group(g_rows(), lambda v: (v[0],), lambda vs: (sum(x[2] for x in vs), len(vs)))
    names = o.scan("si_h", H)
    joined = o.join(names, groups, lambda x, y: x[0] is not None and x[0] == y[0])
    o.assert_same_lineage(lin, o.select(joined, lambda v: (v[1], v[3], v[4])))
    assert remote_levels(lin), "the aggregate's groups should be a level the executors built"
    column = lin._index.tables[remote_levels(lin)[0]].rids[0][1]
    assert isinstance(column, Parts) and len(column.metas) > 1  # several parts


def test_nested_aggregates_and_a_semi_join(views: SparkSession, on_executors: None) -> None:
    df = views.sql(
        "SELECT n, count(*) AS c FROM (SELECT g, count(*) AS n FROM si_g "
        "WHERE g IN (SELECT g FROM si_h WHERE name <> 'h3') GROUP BY g) GROUP BY n"
    )
    lin = ember.capture(df, strategy="inject")
    kept = o.semi(g_rows(), o.where(o.scan("si_h", H), lambda v: v[1] != "h3"), lambda x, y: x[0] == y[0])
    inner = o.group(kept, lambda v: (v[0],), lambda vs: (len(vs),))
    o.assert_same_lineage(lin, o.group(inner, lambda v: (v[1],), lambda vs: (len(vs),)))
    assert len(remote_levels(lin)) >= 2


@pytest.mark.parametrize("partitioned", [True, False])  # unpartitioned: one group, the frame still cut from it
def test_a_window_and_a_scalar_subquery(views: SparkSession, on_executors: None, partitioned: bool) -> None:
    df = views.sql(
        f"SELECT k, sum(v) OVER ({'PARTITION BY g ' if partitioned else ''}ORDER BY k"
        " ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS s FROM si_g WHERE v > (SELECT avg(v) FROM si_g)"
    )
    lin = ember.capture(df, strategy="inject")
    rows = g_rows()
    mean = sum(v[2] for v, _ in rows) / len(rows)
    everything = frozenset().union(*(lineage for _, lineage in rows))  # the scalar's lineage
    kept = [(v, lineage | everything) for v, lineage in rows if v[2] > mean]
    framed = o.window(kept, lambda v: (v[0],) if partitioned else (), lambda v: v[1], lambda i, n: (i - 1, i + 1),
                      lambda vs, i: sum(x[2] for x in vs))
    expected = o.select(framed, lambda v: (v[1], v[3]))
    o.assert_same_lineage(lin, expected)
    assert remote_levels(lin)


@pytest.mark.parametrize("n", [2, 4, 11, 13, 15, 16, 17, 18, 20, 21, 22])
def test_tpch_levels_built_by_the_executors(
    spark: SparkSession,
    tpch: Path,
    tpch_oracle: Callable[[int], pa.Table],
    table_rows: dict[str, int],
    on_executors: None,
    monkeypatch: pytest.MonkeyPatch,
    n: int,
) -> None:
    monkeypatch.setattr(spark_index, "PART_ROWS", TPCH_PART_ROWS)
    check_lineage(tpch_sql(spark, n), n, tpch_oracle(n), table_rows, random.Random(SEED + 300 + n), "inject")


def test_saved_and_traced_on_spark(spark: SparkSession, tpch: Path, tmp_path: Path, on_executors: None) -> None:
    lin = ember.capture(tpch_sql(spark, 18), strategy="inject")
    assert remote_levels(lin)
    lin.save(str(tmp_path / "q18"))
    loaded = ember.load(str(tmp_path / "q18"))
    assert remote_levels(loaded) == remote_levels(lin)
    oids = list(range(lin.output().num_rows))
    for name in lin.sources:
        assert np.array_equal(loaded.backward(oids=oids).ids(name), lin.backward(oids=oids).ids(name))
    trace = loaded.backward_distributed(spark, oids=oids[:3])
    local = lin.backward(oids=oids[:3])
    for name in lin.sources:
        assert sorted(r[0] for r in trace.ids(name).collect()) == local.ids(name).tolist()
    rids = lin.backward(oids=[0]).ids("lineitem")[:2]
    reached = loaded.forward_distributed(spark, "lineitem", ids=rids)
    assert sorted(r[0] for r in reached.collect()) == lin.forward("lineitem", ids=rids).ids().tolist()


def test_a_side_table_holding_lists_is_read_back(views: SparkSession, monkeypatch: pytest.MonkeyPatch) -> None:
    """A scalar subquery's rows carry its aggregate's lists; written by the executors (as
    if it could outgrow the driver), it is read back and indexed on the driver."""
    table = annotate._Rewriter.table

    def unbounded(rw: annotate._Rewriter, *args: Any, **kwargs: Any) -> int:
        tid = table(rw, *args, **kwargs)
        rw.tables[tid] = replace(rw.tables[tid], bounded=rw.tables[tid].inline)
        return tid

    monkeypatch.setattr(annotate._Rewriter, "table", unbounded)
    staged: list[bool] = []

    def spied(*args: Any, keep: bool = True) -> spark_index.Staged:
        staged.append(keep)
        return spark_index.stage(*args, keep=keep)

    monkeypatch.setattr(sides, "stage", spied)
    lin = ember.capture(views.sql("SELECT k FROM si_g WHERE v > (SELECT avg(v) FROM si_g)"), strategy="inject")
    assert staged == [False]  # written by the executors, read back: its rows hold lists
    rows = g_rows()
    mean = sum(v[2] for v, _ in rows) / len(rows)
    everything = frozenset().union(*(lineage for _, lineage in rows))
    o.assert_same_lineage(lin, [((v[1],), lineage | everything) for v, lineage in rows if v[2] > mean])
    assert not remote_levels(lin)
    assert any(t.why == "aggregate groups, listed in the result" for t in lin._index.tables)
