"""`ember.lineage` picks eager or lazy lineage; both answer alike."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

import ember
import ember.modes


def test_auto_infers_for_few_traces_and_captures_otherwise(spark: SparkSession) -> None:
    df = spark.createDataFrame([(1, "a"), (2, "b"), (1, "c")], "k int, v string").groupBy("k").count()
    lazy = ember.lineage(df, traces=1)
    eager = ember.lineage(df)
    assert isinstance(lazy, ember.InferredLineage) and isinstance(eager, ember.Lineage)
    assert isinstance(lazy, ember.AnyLineage) and isinstance(eager, ember.AnyLineage)
    assert isinstance(ember.lineage(df, mode="lazy", traces=100), ember.InferredLineage)
    assert isinstance(ember.lineage(df, traces=ember.modes.LAZY_UP_TO + 1), ember.Lineage)
    oid = lazy.output().column("k").to_pylist().index(1)
    eager_oid = eager.output().column("k").to_pylist().index(1)
    name = eager.sources[0]
    assert lazy.backward(oids=[oid]).ids(name).tolist() == eager.backward(oids=[eager_oid]).ids(name).tolist() == [0, 2]


def test_auto_captures_what_inference_refuses(spark: SparkSession) -> None:
    df = spark.createDataFrame([(1, 2), (1, 3), (2, 4)], "k int, v int")
    mapped = df.groupBy("k").applyInPandas(lambda pdf: pdf.head(1), "k int, v int")
    with pytest.raises(ember.UnsupportedOperatorError, match=r"ember\.infer cannot trace"):
        ember.lineage(mapped, mode="lazy")
    lin = ember.lineage(mapped, traces=1)
    assert isinstance(lin, ember.Lineage)
    assert lin.mode == "inject"  # not run twice: `head(1)` takes whichever row the shuffle put first
    oid = lin.output().column("k").to_pylist().index(1)
    assert lin.backward(oids=[oid]).ids(lin.sources[0]).tolist() == [0, 1]


def test_unknown_mode_is_refused(spark: SparkSession) -> None:
    with pytest.raises(ValueError, match="mode must be one of"):
        ember.lineage(spark.range(3), mode="fast")  # type: ignore[arg-type]
