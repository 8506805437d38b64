"""Captured writes on TPC-H: `ember.capture(df, write=...)` against the plain write, and a
trace across the link to the job that reads the written files.

    .venv/bin/python -m bench.writes --scale 1 --runs 3

Each job is written both ways in alternating rounds (after one warm-up of each), into a
fresh folder every time: the plain `df.write...` and the capture with that write (the
job run once with its lineage, the files dealt to output rows). Then a second job reads
the captured write's folder and aggregates it; reported: its capture, and a one-row
backward trace from its output to TPC-H rows through the link (first call, which finds
the writer, and the median of 20). Writes the run's record and writes.md
(`bench.results`). Machines here are noisy: read ratios, not seconds.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from rich.console import Console

import ember
from bench.common import (
    Run,
    alternating,
    figure,
    median,
    ms_text,
    overhead_figures,
    parser,
    timed,
    tpch_session,
)

Writer = Callable[[Any, str], object]

# (name, the job, how it is written, the downstream job over the written folder, the TPC-H table traced to)
JOBS: list[tuple[str, Callable[[SparkSession], DataFrame], Writer, Callable[[DataFrame], DataFrame], str]] = [
    (
        "lineitem by ship mode",
        lambda s: s.table("lineitem").where("l_quantity > 10").select("l_orderkey", "l_linenumber", "l_shipmode", "l_extendedprice"),
        lambda w, p: w.partitionBy("l_shipmode").mode("overwrite").parquet(p),
        lambda d: d.groupBy("l_shipmode").agg(F.sum("l_extendedprice").alias("price")),
        "lineitem",
    ),
    (
        "revenue per order, by year",
        lambda s: s.sql(
            "SELECT o_orderkey, year(o_orderdate) AS year, sum(l_extendedprice * (1 - l_discount)) AS revenue "
            "FROM orders JOIN lineitem ON l_orderkey = o_orderkey GROUP BY o_orderkey, year(o_orderdate)"
        ),
        lambda w, p: w.partitionBy("year").mode("overwrite").parquet(p),
        lambda d: d.groupBy("year").agg(F.sum("revenue").alias("revenue")),
        "orders",
    ),
    (
        "customers as CSV",
        lambda s: s.table("customer").select("c_custkey", "c_name", "c_mktsegment", "c_acctbal"),
        lambda w, p: w.option("header", True).mode("overwrite").csv(p),
        lambda d: d.groupBy("c_mktsegment").count(),
        "customer",
    ),
]


def measure(spark: SparkSession, scratch: Path, n: int, runs: int) -> dict[str, Any]:
    name, job, write, downstream, table = JOBS[n]
    folder = str(scratch / f"job{n}")

    def plain() -> object:
        return write(job(spark).write, folder)

    def captured() -> object:
        return ember.capture(job(spark), write=lambda w: write(w, folder))

    def fresh(fn: Callable[[], object]) -> float:
        shutil.rmtree(folder, ignore_errors=True)
        return timed(fn)[0]

    medians = alternating({"plain": lambda: fresh(plain), "captured": lambda: fresh(captured)}, runs)
    shutil.rmtree(folder, ignore_errors=True)
    upstream = ember.capture(job(spark), write=lambda w: write(w, folder))
    read = spark.read.option("header", True).csv(folder) if "CSV" in name else spark.read.parquet(folder)
    after, lin = timed(lambda: ember.capture(downstream(read)))
    assert isinstance(lin, ember.Lineage)
    first, t = timed(lambda: lin.backward(oids=[0]))
    assert table in t.sources, f"the trace did not reach {table}: {t.sources}"  # type: ignore[attr-defined]
    oids = [i % lin.output().num_rows for i in range(20)]
    traces = [timed(lambda o=o: lin.backward(oids=[o]))[0] for o in oids]
    plain_s, captured_s = medians["plain"], medians["captured"]
    return {
        "job": name,
        "rows": upstream.output().num_rows,
        "files": len(upstream.written),
        "plain": plain_s,
        "captured": captured_s,
        "over": captured_s / plain_s - 1,
        "downstream": after,
        "trace_first": first,
        "trace": statistics.median(traces),
    }


def main(argv: list[str] | None = None) -> None:
    p = parser(__doc__, runs=3)
    p.set_defaults(queries=list(range(len(JOBS))))
    args = p.parse_args(argv)
    console = Console(stderr=True)
    run = Run("writes", args.out, argv)
    spark, _ = tpch_session(console, args.scale)
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for n in args.queries:
            with console.status(JOBS[n][0]):
                rows.append(measure(spark, Path(scratch), n, args.runs))
    spark.stop()
    headline = [
        *overhead_figures(rows, "Captured write over the plain write"),
        figure("trace_median", "One-row backward trace across the link, median", 1000 * (median(rows, "trace") or 0), "ms", 2),
    ]
    body = [
        f"TPC-H SF{args.scale:g}, `local[2]`; {args.runs} alternating rounds per job after a warm-up of each, "
        "each write into a fresh folder. *captured*: `ember.capture(df, write=...)`, the job run once with "
        "its lineage and each written row placed; *downstream*: the capture of a job over the written folder; "
        "traces are one output row of that job back to TPC-H rows, through the link.",
        "",
        "| job | rows written | files | plain | captured | overhead | downstream capture | trace, first | trace, median |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        *(
            f"| {r['job']} | {r['rows']:,} | {r['files']} | {r['plain']:.2f} s | {r['captured']:.2f} s | "
            f"{100 * r['over']:+.0f} % | {r['downstream']:.2f} s | {ms_text(1000 * r['trace_first'])} | {ms_text(1000 * r['trace'])} |"
            for r in rows
        ),
    ]
    page = run.write("Captured writes", body, rows, headline, args)
    console.print(f"wrote {page}")


if __name__ == "__main__":
    main()
