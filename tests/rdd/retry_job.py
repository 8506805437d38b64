"""Run by test_storage.py in its own process, on master local[2,4] (4 attempts per task):
the log program once cleanly and once with tasks that fail on their first attempt, in
the map-side (combiner) stage and in the reduce-side (reducer) stage. Prints, as JSON,
for both runs: the results, the ids and records at every step back, and the input lines
of two reports; and the table folder of a context it never clears.

    python -m tests.rdd.retry_job LOG MARKER_DIR
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from pyspark import SparkContext, TaskContext
from pyspark.sql import SparkSession

from ember.rdd import LineageContext
from tests.rdd.logs import DSCR, errors_of


class FailOnce:
    """Raises on the first attempt of one partition's task, leaving a marker file."""

    def __init__(self, marker: Path, partition: int) -> None:
        self.marker = marker
        self.partition = partition

    def __call__(self, value: Any) -> Any:
        ctx = TaskContext.get()
        if ctx is not None and ctx.attemptNumber() == 0 and ctx.partitionId() == self.partition:
            self.marker.touch()
            raise RuntimeError("injected failure of a first attempt")
        return value


def traces(sc: SparkContext, path: str, flaky: Path | None) -> dict[str, Any]:
    lc = LineageContext(sc)  # a fresh context numbers its capture points from 0 again
    map_side = FailOnce(flaky / "map", 1) if flaky else (lambda v: v)
    reduce_side = FailOnce(flaky / "reduce", 0) if flaky else (lambda v: v)
    counts = errors_of(lc.textFile(path, 4)).map(lambda line: (line.split("\t")[1], 1))
    counts = counts.mapValues(map_side).reduceByKey(lambda a, b: a + b)
    reports = counts.map(reduce_side).map(lambda kv: (DSCR[kv[0]], kv[1]))
    out: dict[str, list[Any]] = {"results": sorted(reports.collect())}
    lineage = reports.getLineage()
    for level in ("reducer", "combiner", "input"):
        lineage = lineage.goBack()
        out[level] = sorted(lineage.collectWithIds())
    for report in out["results"][:2]:
        trace = reports.filter(lambda kv, r=report: kv == r).getLineage().goBackAll()
        out[repr(report)] = sorted(trace.collect())
    lc.clear()
    return out


def main(path: str, markers: Path) -> None:
    spark = (
        SparkSession.builder.master("local[2,4]")
        .appName("ember-rdd-retry")
        .config("spark.ui.enabled", "false")
        .config("spark.pyspark.python", sys.executable)
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("FATAL")
    clean = traces(spark.sparkContext, path, None)
    retried = traces(spark.sparkContext, path, markers)
    left = LineageContext(spark.sparkContext)  # never cleared: its files go at exit
    errors_of(left.textFile(path, 2)).map(lambda line: (line, 1)).reduceByKey(lambda a, b: a + b).count()
    print(json.dumps({"clean": clean, "retried": retried, "left": left._folder, "filed": os.path.isdir(left._folder)}))
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
