"""LineageContext's refusals: RDD lineage needs a SparkContext, which a Spark Connect
session does not have, so a Connect session or DataFrame is refused in one line."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.connect.session import SparkSession as RemoteSession

import ember
from ember.errors import EmberError


def test_a_connect_session_is_refused(remote: RemoteSession) -> None:
    with pytest.raises(TypeError, match="a Spark Connect session does not have") as raised:
        ember.LineageContext(remote)  # type: ignore[arg-type]
    assert "\n" not in str(raised.value)


def test_a_connect_dataframe_is_refused(spark: SparkSession, remote: RemoteSession) -> None:
    lc = ember.LineageContext(spark.sparkContext)
    with pytest.raises(EmberError, match="a Spark Connect session does not have") as raised:
        lc.fromDataFrame(remote.range(3))
    assert "\n" not in str(raised.value)
