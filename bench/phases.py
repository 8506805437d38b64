"""Where an Inject capture spends its time, per TPC-H (or TPC-DS) query: a tuning aid.

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
2026-11-25, and prints that capture's overhead beside. Writes the run's record and
phases.md (`bench.results`): point `--out` elsewhere for a tuning run you do not want
recorded.
"""

from __future__ import annotations

import argparse
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
from bench.common import Run, figure, median, parser, settled, timed, tpch_session
from devkit import tpcds, tpch

spent: defaultdict[str, float] = defaultdict(float)
calls: defaultdict[str, int] = defaultdict(int)


_inside: defaultdict[str, int] = defaultdict(int)  # per stage: timed calls under way (a call inside one counts once)


def _timer(label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def timed_call(*args: Any, **kwargs: Any) -> Any:
        if _inside[label]:
            return fn(*args, **kwargs)
        start = time.perf_counter()
        calls[label] += 1
        _inside[label] += 1
        try:
            return fn(*args, **kwargs)
        finally:
            _inside[label] -= 1
            spent[label] += time.perf_counter() - start

    return timed_call


def instrument() -> None:
    """Puts timers around the capture's stages (module attributes, as `capture` calls them)."""
    capture = importlib.import_module("ember.capture.capture")  # `ember.capture` is the function
    engine = importlib.import_module("ember.engines.spark.engine")  # what capture reads and numbers through
    sides = importlib.import_module("ember.capture.sides")
    builder = importlib.import_module("ember.engines.spark.build").Builder
    for module, label, name in (
        (engine, "import", "imported"), (engine, "number", "numbered"), (capture, "annotate", "annotate"),
        (capture, "index", "build_index"), (capture, "check", "check_unchanged"),
    ):  # fmt: skip
        setattr(module, name, _timer(label, getattr(module, name)))
    sides.fetch = _timer("sides", sides.fetch)
    build, several = builder.dataframe, builder.dataframes

    def timed_jobs(df: Any) -> Any:
        df.toArrow = _timer("jobs", df.toArrow)
        return df

    def dataframe(self: Any, plan: Any) -> Any:
        return timed_jobs(_timer("build", build)(self, plan))

    def dataframes(self: Any, tables: Any) -> Any:  # a wave of side tables, built together (or apart: timed once)
        made = _timer("build", several)(self, tables)
        calls["build"] += len(made) - 1  # the DataFrames it built (none: every table read by DuckDB)
        return [df if hasattr(df.toArrow, "__wrapped__") else timed_jobs(df) for df in made]

    builder.dataframe, builder.dataframes = dataframe, dataframes


@contextlib.contextmanager
def all_listed() -> Iterator[None]:
    """Captures in which DuckDB reads no aggregate's groups: nothing is readable to it."""
    local_reads = importlib.import_module("ember.capture.local.reads")
    readable = local_reads.readable
    local_reads.readable = lambda *_, **__: False
    try:
        yield
    finally:
        local_reads.readable = readable


STAGES = ("import", "number", "annotate", "build", "jobs", "sides", "index", "check")


def measure(query: Callable[[], DataFrame], n: int, runs: int, lists: bool = False) -> dict[str, Any]:
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
    return {
        "n": n,
        "plain": p,
        "inject": i,
        "overhead": i / p - 1,
        "listed": statistics.median(listed) / p - 1 if lists else None,
        "stages": mid,
        "fixed": mid.get("import", 0.0) + mid.get("build", 0.0),
        "dataframes": built,
    }


def line(r: dict[str, Any]) -> str:
    parts = " ".join(f"{k} {v * 1000:.0f}" for k, v in r["stages"].items())
    versus = f", all listed {r['listed']:+.0%}" if r["listed"] is not None else ""
    return (
        f"Q{r['n']}: plain {r['plain'] * 1000:.0f} ms, inject {r['inject'] * 1000:.0f} ms ({r['overhead']:+.0%}){versus}; "
        f"{parts}; {r['dataframes']} DataFrames"
    )


def headline(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The figures the summary shows."""
    fixed = median(rows, "fixed")
    return [
        figure("fixed", "Fixed per-capture cost (plan import + building the rewritten plan), median",
               fixed * 1000 if fixed is not None else None, "ms"),
        figure("overhead", "Inject overhead, median over the queries run", median(rows, "overhead"), "%"),
    ]


def write_report(run: Run, args: argparse.Namespace, rows: list[dict[str, Any]], final: bool = True) -> object:
    bench = "TPC-DS" if args.tpcds else "TPC-H"
    lines = [
        f"{bench} SF{args.scale:g}; medians of {args.runs} runs after a warm-up, ms. Stages nest: *build* and *jobs* "
        "include the side tables' own builds and jobs, which *sides* also counts. *fixed* = import + build.",
        "",
        "| query | plain | inject | overhead | " + ("all listed | " if args.lists else "")
        + " | ".join(STAGES) + " | fixed | DataFrames |",
        "|---|---|---|---|" + ("---|" if args.lists else "") + "---|" * (len(STAGES) + 2),
    ]
    for r in rows:
        listed = f"{r['listed']:+.0%} | " if args.lists and r["listed"] is not None else ("| " if args.lists else "")
        stages = " | ".join(f"{r['stages'].get(k, 0.0) * 1000:.0f}" for k in STAGES)
        lines.append(
            f"| Q{r['n']} | {r['plain'] * 1000:.0f} | {r['inject'] * 1000:.0f} | {r['overhead']:+.0%} | {listed}"
            f"{stages} | {r['fixed'] * 1000:.0f} | {r['dataframes']} |"
        )
    title = f"Where an Inject capture spends its time — {bench} SF{args.scale:g}"
    return run.write(title, lines, rows, headline(rows), args, final=final)


def main(argv: list[str] | None = None) -> int:
    options = parser(__doc__, runs=3)
    options.add_argument("--lists", action="store_true", help="also capture with every aggregate listed")
    options.add_argument("--tpcds", action="store_true", help="TPC-DS queries instead of TPC-H's")
    args = options.parse_args(argv)
    run = Run("phases", args.out, argv)
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
    rows = []
    for n, query in queries.items():
        rows.append(measure(query, n, args.runs, args.lists))
        console.print(line(rows[-1]))
        write_report(run, args, rows, final=False)
    spark.stop()
    console.print(f"wrote {write_report(run, args, rows)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
