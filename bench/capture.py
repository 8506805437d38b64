"""Capture overhead per strategy, a Perm-style baseline, lineage size and trace latency on
TPC-H, all against the plain PySpark job in the same run.

    .venv/bin/python -m bench.capture --scale 1 --runs 5          # all 22 queries
    .venv/bin/python -m bench.capture --scale 0.1 --queries 1 3 6

For each query: one warm-up of each variant, then at least `--runs` rounds alternating
the plain job (`df.toArrow()`), `ember.capture(df, strategy="inject")`,
`strategy="defer"` (the time until the user's result is back; the background capture is
then awaited and timed on its own) and, for the aggregate-heavy queries, the Perm-style
rewrite in `bench/perm.py`. A short query goes on with more rounds until its plain job
has run `--seconds` in all (at most `MAX_ROUNDS`): the same noise is a larger share of a
short job, and more runs narrow its medians. Each variant gets a fresh DataFrame (a
re-run DataFrame reuses its shuffle files). Reported: medians, overhead ratios against
the plain job (in wall time, and for Inject and Perm also in CPU seconds of the JVM and
Python summed, which vary less from run to run on a shared machine), lineage bytes
written (the saved store's index files) and per input byte, one-row trace latencies
(backward ids, with rows of sources with ≤ 1,000 rows in the trace — from the copy of
the rows it reaches a lineage makes after capture, and from the source —, forward; and
the first backward and forward trace after a capture, which read any side table left to
traces), the
time that copy takes (awaited after each capture, so it runs into no timed job), and the
same backward trace answered lazily: a re-run on Spark of the query filtered to that
output row, with rids carried. Writes the run's record, capture.md and capture.png
(`bench.results`). Machines here are noisy: read ratios, not seconds.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from rich.console import Console

import ember
from bench import perm
from bench.common import (
    CpuClock,
    Run,
    figure,
    input_bytes,
    median,
    ms_text,
    numbers,
    parser,
    per_query,
    settled,
    timed,
    tpch_session,
    worst,
)
from devkit import tpch

MAX_ROUNDS = 40


def with_rows_ms(lin: ember.Lineage) -> float:
    """Median ms of oid 0's backward trace with the rows of each source it reaches ≤ 1,000 of."""

    def fetch() -> object:
        t = lin.backward(oids=[0])
        return [t.rows(s) for s in t.sources if t.ids(s).size <= 1000]

    return 1000 * statistics.median(timed(fetch)[0] for _ in range(5)) if lin.output().num_rows else float("nan")


def traced_row(lin: ember.Lineage) -> tuple[str, int] | None:
    """A source row in oid 0's lineage (of its source with most rows there), for forward traces."""
    trace = lin.backward(oids=[0])
    source = max(trace.sources, key=lambda s: trace.ids(s).size, default=None)
    return None if source is None else (source, int(trace.ids(source)[0]))


def first_traces(capture: Callable[[], ember.Lineage], row: tuple[str, int] | None) -> tuple[float, float]:
    """Ms of the first backward (ids of oid 0) and the first forward (of `row`) trace, each
    on a capture of its own: a side table left to traces (`store.later`) is read then."""
    nan = float("nan")
    lin = capture()
    if lin.output().num_rows == 0:
        return nan, nan
    back = timed(lambda: lin.backward(oids=[0]))[0] * 1000
    if row is None:
        return back, nan
    lin = capture()
    return back, timed(lambda: lin.forward(row[0], ids=[row[1]]))[0] * 1000


def trace_latency(lin: ember.Lineage, repeat: int = 20) -> tuple[float, float, float]:
    """Median ms of: backward ids of oid 0, the same with rows (≤1000 of one source), forward of one rid."""
    if lin.output().num_rows == 0:
        return float("nan"), float("nan"), float("nan")
    ids = statistics.median(timed(lambda: lin.backward(oids=[0]))[0] for _ in range(repeat))
    row = traced_row(lin)
    if row is None:
        return ids * 1000, float("nan"), float("nan")
    fwd = statistics.median(timed(lambda: lin.forward(row[0], ids=[row[1]]))[0] for _ in range(repeat))
    return ids * 1000, with_rows_ms(lin), fwd * 1000


def lazy_trace_ms(spark: SparkSession, n: int, row: dict[str, object]) -> float:
    """The backward trace of one output row answered without stored lineage: re-run the
    query on Spark, filtered to that row's values, carrying rids."""
    df = tpch.query(spark, n)
    cond = [F.col(c).eqNullSafe(F.lit(v)) for c, v in row.items() if not isinstance(v, float)]
    filtered = df.filter(functools.reduce(lambda a, b: a & b, cond)) if cond else df
    took, _ = timed(lambda: ember.capture(filtered, strategy="inject").backward(oids=[0]))
    return took * 1000


def main(argv: list[str] | None = None) -> int:
    options = parser(__doc__, runs=5)
    options.add_argument("--seconds", type=float, default=10.0, help="plain job time a query's rounds add up to at least")
    args = options.parse_args(argv)
    run = Run("capture", args.out, argv)
    console = Console()
    spark, data = tpch_session(console, args.scale)
    perm.register(spark, data)
    results = per_query(console, args.queries, lambda n: measure(spark, n, args.runs, data, args.seconds))
    spark.stop()
    console.print(f"wrote {write_report(run, args, results)} and capture.png")
    return 0


def measure(spark: SparkSession, n: int, runs: int, data: Path, seconds: float = 0.0) -> dict[str, float]:
    clock = CpuClock(spark)

    def plain() -> object:
        return tpch.query(spark, n).toArrow()

    def inject() -> ember.Lineage:
        return ember.capture(tpch.query(spark, n), strategy="inject")

    deferred: list[ember.Lineage] = []

    def defer() -> ember.Lineage:
        lin = ember.capture(tpch.query(spark, n), strategy="defer")
        deferred.append(lin)
        return lin

    def baseline() -> object:
        return perm.perm_query(spark, n).toArrow()

    variants: dict[str, Callable[[], object]] = {"plain": plain, "inject": inject, "defer": defer}
    if n in perm.PERM:
        variants["perm"] = baseline
    times: dict[str, list[float]] = {k: [] for k in variants}
    cpu: dict[str, list[float]] = {k: [] for k in variants}
    build: list[float] = []
    held: list[float] = []
    round_ = 0
    while round_ <= runs or (sum(times["plain"]) < seconds and round_ <= MAX_ROUNDS):
        for name, job in variants.items():
            before = clock()
            took, result = timed(job)
            spent = clock() - before
            if name == "defer":
                build.append(timed(lambda: deferred[-1].backward(oids=[]))[0])
            waited = settled(result)
            if name == "inject":
                held.append(waited)
            if round_ > 0:  # round 0 warms up
                times[name].append(took)
                cpu[name].append(spent)
        round_ += 1
    med = {k: statistics.median(v) for k, v in times.items()}
    med_cpu = {k: statistics.median(v) for k, v in cpu.items()}
    lin = inject()
    settled(lin)
    with tempfile.TemporaryDirectory() as store:
        lin.save(store, overwrite=True)
        written = sum(f.stat().st_size for f in (Path(store) / "index").iterdir())
    back, rows, fwd = trace_latency(lin)
    def fresh() -> ember.Lineage:
        return ember.capture(tpch.query(spark, n), strategy="inject", keep_rows=0)

    first_back, first_fwd = first_traces(fresh, traced_row(lin) if lin.output().num_rows else None)
    cold = fresh()
    out = lin.output().drop_columns(["ember_oid"])
    lazy = lazy_trace_ms(spark, n, out.slice(0, 1).to_pylist()[0]) if out.num_rows else float("nan")
    nan = float("nan")
    return {
        "n": n,
        "runs": len(times["plain"]),
        **med,
        "inject_over": med["inject"] / med["plain"] - 1,
        "defer_over": med["defer"] / med["plain"] - 1,
        "defer_build": statistics.median(build[1:]),
        "held": statistics.median(held[1:]),
        "perm_over": med["perm"] / med["plain"] - 1 if "perm" in med else nan,
        "inject_cpu": med_cpu["inject"] / med_cpu["plain"] - 1,
        "perm_cpu": med_cpu["perm"] / med_cpu["plain"] - 1 if "perm" in med else nan,
        "bytes": written,
        "per_input": written / input_bytes(data, lin.sources),
        "back": back,
        "rows": rows,
        "rows_cold": with_rows_ms(cold),
        "fwd": fwd,
        "first_back": first_back,
        "first_fwd": first_fwd,
        "lazy": lazy,
    }


def perm_ratio(r: dict[str, Any]) -> tuple[bool, str]:
    """Whether the Perm-style overhead is at least twice Inject's on a query (ember under
    the plain job counts as met), and the ratio as printed."""
    perm_over, inject_over = r["perm_over"], r["inject_over"]
    if perm_over <= 0:
        return inject_over <= 0, "Perm-style under the plain job"
    if inject_over <= 0:
        return True, "ember under the plain job"
    return perm_over >= 2 * inject_over, f"{perm_over / inject_over:.1f}\u00d7"


def headline(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The figures the summary shows (every one over the queries measured)."""
    inject, inject_q = worst(results, "inject_over")
    defer, defer_q = worst(results, "defer_over")
    rows, rows_q = worst(results, "rows")
    cold, cold_q = worst(results, "rows_cold")
    first, first_q = worst(results, "first_back")
    per_input, per_input_q = worst(results, "per_input")
    heavy = [r for r in results if numbers([r], "perm_over") and numbers([r], "inject_over")]
    judged = [(r, *perm_ratio(r)) for r in heavy]
    missed = ", ".join(f"Q{r['n']} {ratio}" for r, met, ratio in judged if not met)
    back, lazy = median(results, "back"), median(results, "lazy")
    ready = numbers(results, "inject_over")
    return [
        figure("inject_median", "Inject overhead, median", median(results, "inject_over"), "%"),
        figure("inject_worst", "Inject overhead, worst", inject, "%", note=inject_q),
        figure("defer_median", "Defer overhead on the user's job, median", median(results, "defer_over"), "%"),
        figure("defer_worst", "Defer overhead on the user's job, worst", defer, "%", note=defer_q),
        figure("ready", "Lineage ready / plain job (Inject), median",
               statistics.median(1 + v for v in ready) if ready else None, "x", 2),
        figure("perm", "Perm-style overhead at least twice Inject's", f"{sum(met for _, met, _ in judged)} of {len(judged)}"
               if judged else None, note=f"missed: {missed}" if missed else None),
        figure("back", "One-row backward trace, ids, median", back, "ms", 1),
        figure("rows", "… with rows (from the lineage's copy), median", median(results, "rows"), "ms",
               note=f"worst {ms_text(rows)}, {rows_q}" if rows is not None else None),
        figure("rows_cold", "… with rows read from the source, median", median(results, "rows_cold"), "ms",
               note=f"worst {ms_text(cold)}, {cold_q}" if cold is not None else None),
        figure("first_back", "First backward trace after a capture, median", median(results, "first_back"), "ms", 1,
               note=f"worst {ms_text(first)}, {first_q}" if first is not None else None),
        figure("lazy", "Trace vs a lazy re-run on Spark (medians)", lazy / back if lazy and back else None, "x"),
        figure("per_input", "Lineage bytes per input byte, median", median(results, "per_input"), "%", 2,
               note=f"worst {per_input * 100:.2f} %, {per_input_q}" if per_input is not None else None),
    ]


def write_report(run: Run, args: argparse.Namespace, results: list[dict[str, Any]]) -> object:
    def finite(key: str) -> list[float]:
        return numbers(results, key)

    inj, dfr = finite("inject_over"), finite("defer_over")
    heavy = [r for r in results if r["perm_over"] == r["perm_over"]]
    lines = [
        f"Median of at least {args.runs} alternating runs after a warm-up, more for a short query until its "
        f"plain job has run {args.seconds:g} s (column *runs*). Overheads are against the plain job in the same run.",
        "",
        f"- Inject overhead: median {statistics.median(inj):.0%}, worst {max(inj):.0%}.",
        f"- Defer overhead on the user's job: median {statistics.median(dfr):.0%}, worst {max(dfr):.0%} "
        "(the background capture afterwards: column *defer build s*).",
        "- Perm-style baseline vs Inject on the aggregate-heavy queries: "
        + ", ".join(f"Q{int(r['n'])} {r['perm_over']:.0%} vs {r['inject_over']:.0%}" for r in heavy)
        + "; in CPU seconds (the JVM's and Python's, summed): "
        + ", ".join(f"Q{int(r['n'])} {r['perm_cpu']:.0%} vs {r['inject_cpu']:.0%}" for r in heavy)
        + ".",
        f"- One-row backward trace: ids median {statistics.median(finite('back')):.1f} ms, with rows median "
        f"{statistics.median(finite('rows')):.0f} ms (worst {max(finite('rows')):.0f} ms) once the lineage holds "
        f"its copy of the rows it reaches (made in the background after capture: column *copy ms*), "
        f"{statistics.median(finite('rows_cold')):.0f} ms (worst {max(finite('rows_cold')):.0f} ms) read from the "
        f"source (`keep_rows=0`); lazy re-run on Spark median {statistics.median(finite('lazy')):.0f} ms.",
        f"- The first trace after a capture (which reads a side table left to traces, `store.later`): backward "
        f"median {statistics.median(finite('first_back')):.1f} ms, worst {max(finite('first_back')):.0f} ms; "
        f"forward median {statistics.median(finite('first_fwd')):.1f} ms, worst {max(finite('first_fwd')):.0f} ms.",
        "",
        "| query | runs | plain s | inject | defer | defer build s | Perm-style | inject CPU | Perm-style CPU | lineage MB "
        "| per input byte | backward ids ms | with rows ms | copy ms | with rows from source ms | forward ms "
        "| first backward ms | first forward ms | lazy re-run ms |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        perm_cell, perm_cpu = (
            (f"{r['perm_over']:.0%}", f"{r['perm_cpu']:.0%}") if r["perm_over"] == r["perm_over"] else ("—", "—")
        )
        lines.append(
            f"| Q{int(r['n'])} | {int(r['runs'])} | {r['plain']:.2f} | {r['inject_over']:.0%} | {r['defer_over']:.0%} | "
            f"{r['defer_build']:.2f} | {perm_cell} | {r['inject_cpu']:.0%} | {perm_cpu} | {r['bytes'] / 1e6:.2f} | "
            f"{r['per_input']:.2%} | "
            f"{r['back']:.1f} | {r['rows']:.0f} | {r['held'] * 1000:.0f} | {r['rows_cold']:.0f} | {r['fwd']:.1f} | "
            f"{r['first_back']:.1f} | {r['first_fwd']:.1f} | {r['lazy']:.0f} |"
        )
    lines += ["", "![capture overhead per query](capture.png)"]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"Q{int(r['n'])}" for r in results]
    x = range(len(results))
    fig, ax = plt.subplots(figsize=(11, 4))
    ax.bar([i - 0.27 for i in x], [r["inject_over"] * 100 for r in results], 0.27, label="inject", color="#c0392b")
    ax.bar(list(x), [r["defer_over"] * 100 for r in results], 0.27, label="defer (user's job)", color="#2980b9")
    ax.bar([i + 0.27 for i in x], [(r["perm_over"] * 100 if r["perm_over"] == r["perm_over"] else 0) for r in results],
           0.27, label="Perm-style", color="#7f8c8d")
    ax.axhline(5, color="black", linestyle="--", linewidth=1, label="target: median 5 % (DESIGN.md)")
    ax.set_xticks(list(x), labels)
    ax.set_ylabel("overhead vs plain job (%)")
    ax.set_title(f"ember capture overhead, TPC-H SF{args.scale:g}, local[2]")
    ax.legend()
    fig.tight_layout()
    return run.write(
        f"Capture benchmark — TPC-H SF{args.scale:g}, local[2]", lines, results, headline(results), args, png=fig
    )


if __name__ == "__main__":
    raise SystemExit(main())
