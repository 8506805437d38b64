"""`make demo`: generate small TPC-H data, capture a few queries, print traces."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa

TPCH_TABLES = ("region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem")


def ensure_tpch(path: Path, scale: float) -> None:
    """Writes TPC-H Parquet (one file per table) with tpchgen-cli unless it is already there."""
    if all((path / f"{t}.parquet").exists() for t in TPCH_TABLES):
        return
    exe = shutil.which("tpchgen-cli") or str(Path(sys.executable).with_name("tpchgen-cli"))
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [exe, "parquet", "-s", str(scale), "--output-dir", str(path)],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ember-demo", description=__doc__)
    parser.add_argument("--scale", type=float, default=0.01)
    parser.add_argument("--data", type=Path, default=Path("data/tpch/sf0.01"))
    parser.add_argument("--generate-only", action="store_true")
    args = parser.parse_args(argv)
    ensure_tpch(args.data, args.scale)
    if args.generate_only:
        return 0
    run_demo(args.data)
    return 0


DEMO_QUERIES = {
    "TPC-H Q1 (pricing summary)": """
        SELECT l_returnflag, l_linestatus, sum(l_quantity) AS sum_qty,
               sum(l_extendedprice * (1 - l_discount)) AS sum_disc_price, count(*) AS count_order
        FROM lineitem WHERE l_shipdate <= date '1998-12-01' - interval '90' day
        GROUP BY l_returnflag, l_linestatus ORDER BY l_returnflag, l_linestatus""",
    "TPC-H Q3 (shipping priority)": """
        SELECT l_orderkey, sum(l_extendedprice * (1 - l_discount)) AS revenue, o_orderdate, o_shippriority
        FROM customer, orders, lineitem
        WHERE c_mktsegment = 'BUILDING' AND c_custkey = o_custkey AND l_orderkey = o_orderkey
          AND o_orderdate < date '1995-03-15' AND l_shipdate > date '1995-03-15'
        GROUP BY l_orderkey, o_orderdate, o_shippriority
        ORDER BY revenue DESC, o_orderdate LIMIT 10""",
    "TPC-H Q4 (order priority, EXISTS)": """
        SELECT o_orderpriority, count(*) AS order_count FROM orders
        WHERE o_orderdate >= date '1993-07-01' AND o_orderdate < date '1993-07-01' + interval '3' month
          AND EXISTS (SELECT * FROM lineitem WHERE l_orderkey = o_orderkey AND l_commitdate < l_receiptdate)
        GROUP BY o_orderpriority ORDER BY o_orderpriority""",
}


def run_demo(data: Path) -> None:
    from pyspark.sql import SparkSession
    from rich.console import Console
    from rich.table import Table

    import ember

    console = Console()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    with console.status("starting a local Spark session"):
        spark = (
            SparkSession.builder.master("local[2]")
            .appName("ember-demo")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "4")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        for table in TPCH_TABLES:
            spark.read.parquet(str(data / f"{table}.parquet")).createOrReplaceTempView(table)
    for title, sql in DEMO_QUERIES.items():
        with console.status(f"capturing {title}"):
            started = time.perf_counter()
            lin = ember.capture(spark.sql(sql))
            took = time.perf_counter() - started
        out = lin.output()
        console.rule(f"{title}: {out.num_rows} rows, captured in {took:.1f} s")
        console.print(_table(Table, out.slice(0, 5), "output (first rows)"))
        started = time.perf_counter()
        trace = lin.backward(oids=[0])
        ms = (time.perf_counter() - started) * 1000
        counts = ", ".join(f"{name}: {trace.ids(name).size} rows" for name in trace.sources)
        console.print(f"backward trace of output row 0 ({ms:.1f} ms): {counts}")
        first = trace.sources[-1]
        console.print(_table(Table, trace.rows(first).slice(0, 3), f"{first} rows behind output row 0"))
        rid = int(trace.ids(first)[0])
        started = time.perf_counter()
        reached = lin.forward(first, ids=[rid])
        ms = (time.perf_counter() - started) * 1000
        console.print(f"forward trace of {first} row {rid} ({ms:.1f} ms): output rows {reached.ids().tolist()}")
    spark.stop()


def _table(table_cls: type, data: pa.Table, title: str) -> object:
    names = data.column_names
    if len(names) > 6:  # keep the table readable: the first columns and the id
        data = data.select([*range(5), len(names) - 1])
    table = table_cls(title=title)
    for name in data.column_names:
        table.add_column(name, no_wrap=True, overflow="ellipsis", max_width=24)
    for row in data.to_pylist():
        table.add_row(*(str(v) for v in row.values()))
    return table


if __name__ == "__main__":
    raise SystemExit(main())
