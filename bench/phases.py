"""Where an Inject capture spends its time, per TPC-H query: a tuning aid, not a report.

    .venv/bin/python -m bench.phases --queries 2 4 20 --runs 3
    .venv/bin/python -m bench.phases --tpcds --queries 14 24 --runs 3   # TPC-DS (`make tpcds TPCDS_SF=1`)

Wraps the stages of `ember.capture(df, strategy="inject")` with timers for the duration
of the run (plan import, row numbering, annotation, Spark plan building, the jobs'
`toArrow`, side-table fetching, index building, the source checks) and prints, per
query, the plain job's and the capture's medians and each stage's median in ms, and how
many Spark DataFrames one capture builds (its job and each side table's). Stages
nest: `build` and `jobs` include the side tables' own builds and jobs, which `sides`
also counts. With `--lists`, each round also captures with every aggregate at the
result carrying its groups as lists (no groups read by DuckDB), the rule before
2026-11-25, and prints that capture's overhead beside.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

from pyspark.sql import DataFrame
from rich.console import Console

import ember
from bench.common import parser, settled, timed, tpch_session
from ember import tpcds, tpch

spent: defaultdict[str, float] = defaultdict(float)
calls: defaultdict[str, int] = defaultdict(int)


def _timer(label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def timed_call(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        calls[label] += 1
        try:
            return fn(*args, **kwargs)
        finally:
            spent[label] += time.perf_counter() - start

    return timed_call


def instrument() -> None:
    """Puts timers around the capture's stages (module attributes, as `capture` calls them)."""
    capture = importlib.import_module("ember.capture.capture")  # `ember.capture` is the function
    sides = importlib.import_module("ember.capture.sides")
    builder = importlib.import_module("ember.engines.spark.build").Builder
    stages = {
        "import": "import_plan", "number": "number_source", "annotate": "annotate",
        "index": "build_index", "check": "check_unchanged",
    }  # fmt: skip
    for label, name in stages.items():
        setattr(capture, name, _timer(label, getattr(capture, name)))
    sides.fetch = _timer("sides", sides.fetch)
    build = builder.dataframe

    def dataframe(self: Any, plan: Any) -> Any:
        df = _timer("build", build)(self, plan)
        df.toArrow = _timer("jobs", df.toArrow)
        return df

    builder.dataframe = dataframe


@contextlib.contextmanager
def all_listed() -> Iterator[None]:
    """Captures in which DuckDB reads no aggregate's groups: nothing is readable to it."""
    local_sides = importlib.import_module("ember.capture.local_sides")
    readable = local_sides.readable
    local_sides.readable = lambda *_, **__: False
    try:
        yield
    finally:
        local_sides.readable = readable


def measure(query: Callable[[], DataFrame], n: int, runs: int, lists: bool = False) -> str:
    plain, inject, listed, stages = [], [], [], []
    for round_ in range(runs + 1):  # round 0 warms up
        took, _ = timed(lambda: query().toArrow())
        spent.clear()
        calls.clear()
        captured, lin = timed(lambda: ember.capture(query(), strategy="inject"))
        settled(lin)
        stage, built = dict(spent), calls["build"]
        if lists:
            with all_listed():
                took_listed, lin = timed(lambda: ember.capture(query(), strategy="inject"))
            settled(lin)
        if round_:
            plain.append(took)
            inject.append(captured)
            stages.append(stage)
            listed += [took_listed] if lists else []
    mid = {k: statistics.median(s.get(k, 0.0) for s in stages) for k in stages[0]}
    p, i = statistics.median(plain), statistics.median(inject)
    parts = " ".join(f"{k} {v * 1000:.0f}" for k, v in mid.items())
    versus = f", all listed {statistics.median(listed) / p - 1:+.0%}" if lists else ""
    return f"Q{n}: plain {p * 1000:.0f} ms, inject {i * 1000:.0f} ms ({i / p - 1:+.0%}){versus}; {parts}; {built} DataFrames"


def main(argv: list[str] | None = None) -> int:
    options = parser(__doc__, runs=3)
    options.add_argument("--lists", action="store_true", help="also capture with every aggregate listed")
    options.add_argument("--tpcds", action="store_true", help="TPC-DS queries instead of TPC-H's")
    args = options.parse_args(argv)
    console = Console()
    if args.tpcds:
        spark = tpch.local_spark("ember-bench", **{"spark.driver.memory": "12g", "spark.sql.shuffle.partitions": "8"})
        data = tpcds.folder(args.scale)
        tpcds.register(spark, data)
        texts = tpcds.queries(data)
        queries = {n: functools.partial(spark.sql, texts[n]) for n in args.queries}
    else:
        spark, _ = tpch_session(console, args.scale)
        queries = {n: functools.partial(tpch.query, spark, n) for n in args.queries}
    instrument()
    for n, query in queries.items():
        console.print(measure(query, n, args.runs, args.lists))
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
