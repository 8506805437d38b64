"""Helpers shared by the benchmark scripts. Results are written by `Run` (bench/results.py):
a record per run in `<out>/history/<bench>.jsonl`, the latest run's page, the summary."""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from pyspark.sql import SparkSession
from rich.console import Console
from rich.progress import Progress

import ember
from bench.results import ROOT, Run, figure, median, ms_text, numbers, overhead_figures, worst
from devkit import tpch

__all__ = ["ROOT", "CpuClock", "Run", "figure", "median", "ms_text", "numbers", "overhead_figures", "worst"]
T = TypeVar("T")


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def alternating(ways: dict[str, Callable[[], float]], runs: int) -> dict[str, float]:
    """Each way's median seconds over `runs` alternating rounds, after one warm-up of each
    (these machines are noisy: alternating spreads the noise over all ways alike). A way
    returns the seconds it took."""
    for way in ways.values():
        way()
    times: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(runs):
        for name, way in ways.items():
            times[name].append(way())
    return {name: statistics.median(t) for name, t in times.items()}


def settled(result: object) -> float:
    """Seconds spent waiting out what a capture goes on with after returning (a deferred
    index, the copy of the rows it reaches), so that work does not run into the next
    timed job."""
    start = time.perf_counter()
    while isinstance(result, ember.Lineage) and not result.ready:
        time.sleep(0.002)
    return time.perf_counter() - start


class CpuClock:
    """CPU seconds spent by both processes a local PySpark job runs in: the JVM's (from
    /proc, Linux only) and this Python's, DuckDB's threads included. On a 2-core machine
    shared with other work, CPU varies far less from run to run than wall time, so it
    tells small overheads apart where wall-clock medians cannot."""

    def __init__(self, spark: SparkSession) -> None:
        pid = spark._jvm.java.lang.ProcessHandle.current().pid()  # type: ignore[union-attr]
        self._stat = Path(f"/proc/{pid}/stat")
        self._tick = os.sysconf("SC_CLK_TCK")

    def __call__(self) -> float:
        fields = self._stat.read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / self._tick + time.process_time()


def input_bytes(data: Path, tables: list[str]) -> int:
    return sum((data / f"{t}.parquet").stat().st_size for t in tables)


def parser(doc: str | None, runs: int | None = None) -> argparse.ArgumentParser:
    """The options every TPC-H benchmark takes (and `--runs`, defaulting to `runs`, for
    those that repeat their jobs)."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scale", type=float, default=1.0)
    p.add_argument("--queries", type=int, nargs="*", default=list(range(1, 23)))
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks", help="results folder (history/, pages)")
    if runs is not None:
        p.add_argument("--runs", type=int, default=runs)
    return p


def tpch_session(console: Console, scale: float, memory: str = "12g", **conf: str) -> tuple[SparkSession, Path]:
    """TPC-H data at `scale` (generated once) registered in a local benchmark session
    (`conf`: more settings)."""
    data = ROOT / "data" / "tpch" / f"sf{scale:g}"
    with console.status(f"TPC-H SF{scale:g} data"):
        tpch.ensure_data(data, scale)
    spark = tpch.local_spark("ember-bench", **{"spark.driver.memory": memory, "spark.sql.shuffle.partitions": "8", **conf})
    tpch.register(spark, data)
    return spark, data


def per_query(
    console: Console, queries: list[int], measure: Callable[[int], T], done: Callable[[list[T]], None] | None = None
) -> list[T]:
    """`measure(n)` for each query, with a progress bar; `done` sees the results so far
    after each (a long run can write its report as it goes)."""
    results: list[T] = []
    with Progress(console=console) as progress:
        task = progress.add_task("queries", total=len(queries))
        for n in queries:
            progress.update(task, description=f"Q{n}")
            results.append(measure(n))
            if done is not None:
                done(results)
            progress.advance(task)
    return results
