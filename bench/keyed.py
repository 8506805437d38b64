"""Keyed sources on TPC-H: jobs over tables read from PostgreSQL over JDBC, captured with
their keys declared, against the plain job.

    .venv/bin/python -m bench.keyed --scale 1 --runs 3

A throwaway PostgreSQL server (`devkit.postgres`, loopback) is loaded with TPC-H's
customer and orders tables. Each job runs plain (`toArrow`) and captured in alternating
rounds after one warm-up of each; the capture's cost includes its numbering job (one read
of the key columns). Then one-row backward traces (keys) and a forward trace by key are
timed (median of 20). Writes the run's record and keyed.md (`bench.results`). Machines
here are noisy: read ratios, not seconds.
"""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
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
from devkit.postgres import JDBC_JAR, Postgres

TABLES = {"customer": "c_custkey", "orders": "o_orderkey"}

# (name, the job over the JDBC views `pg_customer` and `pg_orders`, the keyed source traced)
JOBS: list[tuple[str, Callable[[SparkSession], DataFrame], str]] = [
    ("customers by segment", lambda s: s.sql("SELECT c_mktsegment, count(*) AS n, sum(c_acctbal) AS bal FROM pg_customer GROUP BY c_mktsegment"), "customer"),
    (
        "orders per nation (JDBC ⋈ JDBC)",
        lambda s: s.sql(
            "SELECT c_nationkey, count(*) AS n, sum(o_totalprice) AS price FROM pg_orders JOIN pg_customer "
            "ON o_custkey = c_custkey WHERE o_orderstatus = 'F' GROUP BY c_nationkey"
        ),
        "orders",
    ),
    (
        "lineitem ⋈ orders (Parquet ⋈ JDBC)",
        lambda s: s.sql(
            "SELECT o_orderpriority, sum(l_extendedprice) AS price FROM lineitem JOIN pg_orders ON l_orderkey = o_orderkey "
            "WHERE l_shipmode = 'AIR' GROUP BY o_orderpriority"
        ),
        "orders",
    ),
]


def load(pg: Postgres, data: Path) -> None:
    """TPC-H's customer and orders into PostgreSQL, by COPY, with their primary keys."""
    with pg.connect() as con:
        for table in TABLES:
            arrow = pq.read_table(data / f"{table}.parquet")
            columns = ", ".join(f"{f.name} {_sql_type(f.type)}" for f in arrow.schema)
            con.execute(f"CREATE TABLE {table} ({columns}, PRIMARY KEY ({TABLES[table]}))")
            with con.cursor() as cur, cur.copy(f"COPY {table} FROM STDIN") as copy:
                for row in arrow.to_pylist():
                    copy.write_row(list(row.values()))


def _sql_type(t: pa.DataType) -> str:
    if pa.types.is_integer(t):
        return "bigint"
    if pa.types.is_floating(t):
        return "double precision"
    if pa.types.is_date(t):
        return "date"
    if pa.types.is_decimal(t):
        return f"numeric({t.precision}, {t.scale})"
    return "text"


def measure(spark: SparkSession, n: int, runs: int) -> dict[str, Any]:
    name, job, traced = JOBS[n]

    def plain() -> object:
        return job(spark).toArrow()

    def captured() -> object:
        return ember.capture(job(spark))

    medians = alternating({"plain": lambda: timed(plain)[0], "captured": lambda: timed(captured)[0]}, runs)
    lin = ember.capture(job(spark))
    out = lin.output().num_rows
    backward = [timed(lambda o=o: lin.backward(oids=[o % out]).keys(traced))[0] for o in range(20)]
    some = lin.backward(oids=[0]).keys(traced).slice(0, 1)
    forward = [timed(lambda: lin.forward(traced, keys=some))[0] for _ in range(20)]
    plain_s, captured_s = medians["plain"], medians["captured"]
    return {
        "job": name,
        "rows": out,
        "plain": plain_s,
        "captured": captured_s,
        "over": captured_s / plain_s - 1,
        "backward": statistics.median(backward),
        "forward": statistics.median(forward),
    }


def main(argv: list[str] | None = None) -> None:
    p = parser(__doc__, runs=3)
    p.set_defaults(queries=list(range(len(JOBS))))
    args = p.parse_args(argv)
    console = Console(stderr=True)
    run = Run("keyed", args.out, argv)
    spark, data = tpch_session(console, args.scale, **{"spark.jars": JDBC_JAR})
    rows = []
    with tempfile.TemporaryDirectory() as scratch, Postgres(Path(scratch)) as pg:
        with console.status("loading PostgreSQL"):
            load(pg, data)
        for table, key in TABLES.items():
            df = spark.read.format("jdbc").options(**pg.jdbc_options(), dbtable=table).load()
            ember.source(df, table, key=[key])
            df.createOrReplaceTempView(f"pg_{table}")
        for n in args.queries:
            with console.status(JOBS[n][0]):
                rows.append(measure(spark, n, args.runs))
    spark.stop()
    headline = [
        *overhead_figures(rows, "Capture over the plain job"),
        figure("backward_median", "One-row backward trace (keys), median", 1000 * (median(rows, "backward") or 0), "ms", 2),
    ]
    body = [
        f"TPC-H SF{args.scale:g}, `local[2]`, customer and orders read from PostgreSQL over JDBC (one "
        f"partition each), keyed by their primary keys; {args.runs} alternating rounds per job after a "
        "warm-up of each. *captured*: `ember.capture(df)`, including the numbering job that reads the key "
        "columns; traces: one output row back to the keyed source's keys, and one key forward.",
        "",
        "| job | output rows | plain | captured | overhead | backward trace | forward trace |",
        "|---|---:|---:|---:|---:|---:|---:|",
        *(
            f"| {r['job']} | {r['rows']:,} | {r['plain']:.2f} s | {r['captured']:.2f} s | {100 * r['over']:+.0f} % | "
            f"{ms_text(1000 * r['backward'])} | {ms_text(1000 * r['forward'])} |"
            for r in rows
        ),
    ]
    page = run.write("Keyed sources (JDBC)", body, rows, headline, args)
    console.print(f"wrote {page}")


if __name__ == "__main__":
    main()
