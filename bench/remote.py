"""Side tables indexed by the executors vs on the driver, on TPC-H.

    .venv/bin/python -m bench.remote --scale 1 --runs 3
    .venv/bin/python -m bench.remote --scale 0.1 --queries 2 18 21 --runs 1

Per query, alternating in one process: the plain job, ember's capture as it ships
(lineage under `annotate.INLINE_RIDS` rids comes back through the driver's result
channel and is indexed there), and the capture with nothing allowed through the driver
(`spark.ember.driverRids` = 0: every side table is written, sorted and indexed by the executors as
parts, `store.spark_index`). Reports the medians after a warm-up and overheads against
the plain job, how many side-table rows each capture brought to the driver (rows of
levels not built as parts), the index bytes of each saved, and one-row backward traces (ids) on the
parts-built index: the first one (opens the parts it touches) and the median of 20.
Traces of both captures are compared on those rows (they must be equal).
Writes the run's record and remote.md as it goes (`bench.results`). Machines here are
noisy: read ratios, not milliseconds.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from pyspark.sql import DataFrame, SparkSession
from rich.console import Console

import ember
from bench.common import (
    Run,
    figure,
    median,
    ms_text,
    parser,
    per_query,
    settled,
    timed,
    tpch_session,
    worst,
)
from devkit import tpch
from ember.capture.capture import DRIVER_RIDS
from ember.store.parts import Parts


def driver_rows(lin: ember.Lineage) -> int:
    """Side-table rows indexed on the driver (every level not built as parts)."""
    return sum(lv.rows for lv in lin._index.tables if not any(isinstance(c, Parts) for c in lv.columns()))


def saved_index_bytes(lin: ember.Lineage) -> int:
    """Bytes of the index files in a saved store (parts included)."""
    with tempfile.TemporaryDirectory() as tmp:
        lin.save(f"{tmp}/s", keep_rows=0)
        return sum(f.stat().st_size for f in Path(tmp, "s", "index").rglob("*") if f.is_file())


def remote_levels(lin: ember.Lineage) -> int:
    return sum(1 for lv in lin._index.tables if any(isinstance(c, Parts) for c in lv.columns()))


def capture_remote(df: DataFrame) -> ember.Lineage:
    df.sparkSession.conf.set(DRIVER_RIDS, "0")
    try:
        return ember.capture(df, strategy="inject")
    finally:
        df.sparkSession.conf.unset(DRIVER_RIDS)


def measure(spark: SparkSession, n: int, runs: int) -> dict[str, float]:
    def job() -> DataFrame:
        return tpch.query(spark, n)

    modes: dict[str, Callable[[], object]] = {
        "plain": lambda: job().toArrow(),
        "driver": lambda: ember.capture(job(), strategy="inject"),
        "remote": lambda: capture_remote(job()),
    }
    times: dict[str, list[float]] = {m: [] for m in modes}
    last: dict[str, object] = {}
    for i in range(runs + 1):
        for name, fn in modes.items():
            t, last[name] = timed(fn)
            settled(last[name])
            if i:
                times[name].append(t)
    local, remote = last["driver"], last["remote"]
    assert isinstance(local, ember.Lineage) and isinstance(remote, ember.Lineage)
    plain = statistics.median(times["plain"])
    row = {m: statistics.median(ts) for m, ts in times.items()}
    row |= {
        "driver_over": row["driver"] / plain - 1,
        "remote_over": row["remote"] / plain - 1,
        "driver_rows": driver_rows(local),
        "remote_rows": driver_rows(remote),
        "levels": remote_levels(remote),
        "driver_bytes": saved_index_bytes(local),
        "remote_bytes": saved_index_bytes(remote),
    }
    fresh = capture_remote(job())
    oids = sorted({int(x) for x in np.linspace(0, fresh.output().num_rows - 1, min(20, fresh.output().num_rows))})
    if oids:
        row["first"] = timed(lambda: fresh.backward(oids=[oids[0]]))[0]
        row["trace"] = statistics.median(timed(lambda o=o: fresh.backward(oids=[o]))[0] for o in oids)
        for o in oids:
            a, b = fresh.backward(oids=[o]), local.backward(oids=[o])
            for s in fresh.sources:
                if not np.array_equal(a.ids(s), b.ids(s)):
                    raise AssertionError(f"Q{n} oid {o} {s}: parts-built lineage differs from the driver-built one")
    else:
        row["first"] = row["trace"] = float("nan")
    return row


def main(argv: list[str] | None = None) -> int:
    args = parser(__doc__, runs=3).parse_args(argv)
    run = Run("remote", args.out, argv)
    console = Console()
    spark, _ = tpch_session(console, args.scale)
    results = per_query(
        console, args.queries, lambda n: (n, measure(spark, n, args.runs)), lambda r: write_report(run, args, r, final=False)
    )
    spark.stop()
    console.print(f"wrote {write_report(run, args, results)}")
    return 0


def headline(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The figures the summary shows."""
    slowest, slowest_q = worst(rows, "trace")
    driver, driver_q = worst(rows, "driver_rows")
    return [
        figure("driver_median", "Capture overhead, side tables indexed on the driver, median",
               median(rows, "driver_over"), "%"),
        figure("remote_median", "Capture overhead, side tables indexed by the executors, median",
               median(rows, "remote_over"), "%"),
        figure("first", "First trace on the parts-built index, median",
               1000 * v if (v := median(rows, "first")) is not None else None, "ms", 1),
        figure("trace", "One-row backward trace, ids, parts-built index, median",
               1000 * v if (v := median(rows, "trace")) is not None else None, "ms", 1,
               note=f"worst {ms_text(slowest * 1000)}, {slowest_q}" if slowest is not None else None),
        figure("driver_rows", "Most side-table rows through the driver (driver path)", driver, note=driver_q),
    ]


def write_report(
    run: Run, args: argparse.Namespace, results: list[tuple[int, dict[str, float]]], final: bool = True
) -> Path:
    def med(key: str) -> float:
        return statistics.median(r[key] for _, r in results if r[key] == r[key])

    lines = [
        f"Local[2]; medians of {args.runs} alternating runs after a warm-up. *driver*: ember as it ships (lineage under 32 M rids indexed on the "
        "driver); *executors*: nothing through the driver (`spark.ember.driverRids` = 0), every side table indexed by the "
        "executors as parts. Rows to driver = side-table rows indexed on the driver.",
        "",
        f"Median overhead: driver {med('driver_over'):+.0%}, executors {med('remote_over'):+.0%}. "
        f"One-row backward (ids) on the parts-built index: first {med('first') * 1000:.1f} ms, "
        f"then median {med('trace') * 1000:.1f} ms (worst {max(r['trace'] for _, r in results if r['trace'] == r['trace']) * 1000:.1f} ms).",
        "",
        "| query | plain s | driver s | executors s | driver overhead | executors overhead | rows to driver (driver / executors) "
        "| levels built as parts | index MB saved (driver / executors) | first trace ms | trace ms |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n, r in results:
        lines.append(
            f"| Q{n} | {r['plain']:.2f} | {r['driver']:.2f} | {r['remote']:.2f} | {r['driver_over']:+.0%} | "
            f"{r['remote_over']:+.0%} | {r['driver_rows']:,.0f} / {r['remote_rows']:,.0f} | {r['levels']:.0f} | "
            f"{r['driver_bytes'] / 1e6:.2f} / {r['remote_bytes'] / 1e6:.2f} | {r['first'] * 1000:.1f} | {r['trace'] * 1000:.1f} |"
        )
    rows = [{"n": n, **r} for n, r in results]
    title = f"Side tables indexed by the executors — TPC-H SF{args.scale:g}"
    return run.write(title, lines, rows, headline(rows), args, final=final)


if __name__ == "__main__":
    raise SystemExit(main())
