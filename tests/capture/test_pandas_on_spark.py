"""A pandas-on-Spark frame is a DataFrame underneath: capture takes it as it is; infer
refuses it in one line, since its default index numbers rows nondeterministically."""

from __future__ import annotations

import pandas as pd
import pytest
from pyspark.sql import SparkSession

import ember

ROWS = pd.DataFrame({"k": ["a", "b", "a", "c", "a"], "v": [1, 2, 3, 4, 5]})


def _counts() -> object:
    import pyspark.pandas as ps

    frame = ember.source(ps.from_pandas(ROWS), "rows")
    return frame[frame.v > 1].groupby("k", as_index=False).count().sort_values("k")


def test_a_pandas_on_spark_frame_is_captured(spark: SparkSession) -> None:
    lin = ember.capture(_counts())  # type: ignore[arg-type]
    out = lin.output().to_pandas()
    assert out.k.tolist() == ["a", "b", "c"]
    for oid, key in zip(out.ember_oid, out.k, strict=True):
        expected = ROWS.index[(ROWS.k == key) & (ROWS.v > 1)].tolist()  # row ids: the pandas frame's positions
        assert lin.backward(oids=[oid]).ids("rows").tolist() == expected


def test_infer_refuses_it_naming_the_fix(spark: SparkSession) -> None:
    with pytest.raises(ember.UnsupportedOperatorError, match=r"monotonically_increasing_id.*use ember\.capture$"):
        ember.infer(_counts())  # type: ignore[arg-type]
