"""What ember accepts as a job: a Spark DataFrame, or a pandas-on-Spark one, which is a
Spark DataFrame underneath (its default index is not a column of the job's output)."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame


def spark_frame(df: Any) -> Any:
    """`df` itself, or a pandas-on-Spark frame's Spark DataFrame (`to_spark()`); anything
    else is returned as is, for the caller's own refusal.

    >>> spark_frame("not a frame")
    'not a frame'
    """
    if not isinstance(df, DataFrame) and type(df).__module__.startswith("pyspark.pandas"):
        to_spark = getattr(df, "to_spark", None)
        if callable(to_spark):
            return to_spark()
    return df
