"""A local SparkSession for the command line and the web page when none is active."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession


def local_spark(app: str, **conf: str) -> SparkSession:
    """A quiet local[2] session (the CLI, the page, the demo, the tests and the benchmarks); `conf` adds settings.

    UDF workers get this interpreter (its venv has pyarrow), not whatever `python3` is on PATH.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master("local[2]")
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
