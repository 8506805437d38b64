"""What ember accepts as a job: a Spark DataFrame, or a pandas-on-Spark one, which is a
Spark DataFrame underneath (its default index is not a column of the job's output)."""

from __future__ import annotations

from types import ModuleType
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


def is_connect(obj: object) -> bool:
    """Whether `obj` is of Spark Connect's client (a session or a DataFrame), known without
    importing the client, which needs packages a classic install may lack.

    >>> is_connect("not a frame")
    False
    """
    return type(obj).__module__.startswith("pyspark.sql.connect.")


def functions_of(df: DataFrame) -> ModuleType:
    """PySpark's functions that make columns of `df`'s kind: a process may hold a classic
    session and a Connect one, and PySpark's own `functions` makes the classic kind there."""
    if is_connect(df):
        from pyspark.sql.connect import functions as connect_functions

        return connect_functions
    from pyspark.sql import functions

    return functions
