"""`make demo`: generate small TPC-H data, capture a few queries, print traces."""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from devkit import tpch
from ember.engines.spark.session import local_spark

if TYPE_CHECKING:
    from rich.console import Console

    from ember.query.lineage import Lineage


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ember-demo", description=__doc__)
    parser.add_argument("--scale", type=float, default=0.01)
    parser.add_argument("--data", type=Path, default=Path("data/tpch/sf0.01"))
    parser.add_argument("--generate-only", action="store_true")
    args = parser.parse_args(argv)
    tpch.ensure_data(args.data, args.scale)
    if args.generate_only:
        return 0
    run_demo(args.data)
    return 0


DEMO_QUERIES = {1: "pricing summary", 3: "shipping priority", 4: "order priority, EXISTS", 22: "global sales"}


def run_demo(data: Path) -> None:
    from rich.console import Console
    from rich.table import Table

    import ember

    console = Console()
    with console.status("starting a local Spark session"):
        spark = local_spark("ember-demo")
        tpch.register(spark, data)
    for n, what in DEMO_QUERIES.items():
        title = f"TPC-H Q{n} ({what})"
        with console.status(f"capturing {title}"):
            started = time.perf_counter()
            lin = ember.capture(tpch.query(spark, n))
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
        _store_round_trip(console, lin)
    spark.stop()


def _store_round_trip(console: Console, lin: Lineage) -> None:
    """Saves the lineage, loads it back and traces again, as a later session would."""
    import ember

    with tempfile.TemporaryDirectory() as folder:
        store = Path(folder) / "lineage"
        lin.save(str(store))
        size = sum(f.stat().st_size for f in (store / "index").iterdir())
        started = time.perf_counter()
        trace = ember.load(str(store)).backward(oids=[0])
        ms = (time.perf_counter() - started) * 1000
        console.print(f"saved store: {size / 1024:.0f} KiB of index; load + backward trace of row 0: {ms:.1f} ms "
                      f"({', '.join(f'{n}: {trace.ids(n).size}' for n in trace.sources)})")


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
