"""Traces as Spark jobs over a saved store equal the in-process traces, both directions."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import ember
from devkit import tpch as tpch_queries
from ember.query import distributed


@pytest.fixture(params=["broadcast", "joined"])
def marks(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Forward marks broadcast to the next level's tasks, or kept on the cluster and range
    joined (as when a level has too many); small stretches, so a level takes several tasks."""
    monkeypatch.setattr(distributed, "CHUNK", 1000)
    if request.param == "joined":
        monkeypatch.setattr(distributed, "MAX_MARKS", 0)
    return str(request.param)


@pytest.mark.parametrize("n", [3, 18, 1])
def test_distributed_backward_equals_in_process(
    spark: SparkSession, tpch: Path, tmp_path: Path, n: int, marks: str
) -> None:
    lin = ember.capture(tpch_queries.query(spark, n))
    lin.save(str(tmp_path / "store"))
    oids = list(range(min(3, lin.output().num_rows)))
    local = lin.backward(oids=oids)
    remote = lin.backward_distributed(spark, oids=oids)
    assert set(local.sources) <= set(remote.sources)
    for name in lin.sources:
        got = sorted(r[0] for r in remote.ids(name).collect())
        assert got == local.ids(name).tolist(), name
    name = max(local.sources, key=lambda s: local.ids(s).size)
    rows = remote.rows(name).orderBy("ember_rid").toArrow()
    assert rows.column("ember_rid").to_pylist() == local.ids(name).tolist()
    assert rows.drop_columns(["ember_rid"]).to_pylist()[:20] == local.rows(name).drop_columns(["ember_rid"]).to_pylist()[:20]
    for source in lin.sources:
        picks = [*local.ids(source)[:3].tolist(), 0, lin._sources[source].rows - 1]
        got = sorted(r[0] for r in lin.forward_distributed(spark, source, ids=picks).collect())
        assert got == lin.forward(source, ids=picks).ids().tolist(), source


def test_distributed_backward_needs_a_saved_store(spark: SparkSession) -> None:
    lin = ember.capture(spark.range(5))
    with pytest.raises(ember.EmberError, match="save"):
        lin.backward_distributed(spark, oids=[0])
    with pytest.raises(ember.EmberError, match="save"):
        lin.forward_distributed(spark, "range", ids=[0])
