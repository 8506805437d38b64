"""TPC-DS coverage and capture overhead: the 99 queries, each captured, against the plain job.

    make tpcds TPCDS_SF=1                                  # the data, once
    .venv/bin/python -m bench.tpcds --scale 1 --runs 3     # docs/benchmarks/tpcds.md
    .venv/bin/python -m bench.tpcds --scale 1 --queries 14 23 --runs 1

For each query: one warm-up of the plain job and of `ember.capture(df,
strategy="inject")`, then `--runs` rounds alternating the two, each on a fresh
DataFrame; a query Spark cannot run or ember refuses is recorded with its error and
the run goes on. Reported per query: medians, Inject's overhead against the plain job,
the output rows, the source rows in the whole output's lineage, and a one-row backward
trace's latency (ids). Correctness is the tests' (tests/tpcds, at sf 0.01, against a
DuckDB replay); this measures breadth and cost at scale. Writes the run's record and
tpcds.md as it goes (`bench.results`). Machines here are noisy: read ratios, not seconds.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console

import ember
from bench.common import Run, figure, numbers, parser, per_query, settled, timed, worst
from devkit import tpcds, tpch


def measure(run: Callable[[], object], capture: Callable[[], ember.Lineage], runs: int) -> dict[str, object]:
    times: dict[str, list[float]] = {"plain": [], "inject": []}
    lin = capture()  # the warm-up, kept for the traces
    settled(lin)
    run()
    for _ in range(runs):
        times["plain"].append(timed(run)[0])
        took, again = timed(capture)
        settled(again)
        times["inject"].append(took)
    outputs = lin.output().num_rows
    whole = lin.backward(oids=range(outputs))
    plain = statistics.median(times["plain"])
    return {
        "plain": plain,
        "inject": statistics.median(times["inject"]) / plain - 1,
        "outputs": outputs,
        "rids": sum(int(whole.ids(s).size) for s in whole.sources),
        "trace": statistics.median(timed(lambda: lin.backward(oids=[0]))[0] for _ in range(20)) if outputs else None,
    }


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__, runs=3)
    p.set_defaults(queries=list(range(1, 100)))
    args = p.parse_args(argv)
    run = Run("tpcds", args.out, argv)
    console = Console()
    data = tpcds.folder(args.scale)
    with console.status(f"TPC-DS SF{args.scale:g} data"):
        tpcds.ensure_data(data, args.scale)
    spark = tpch.local_spark("ember-bench", **{"spark.driver.memory": "12g", "spark.sql.shuffle.partitions": "8"})
    tpcds.register(spark, data)
    texts = tpcds.queries(data)

    def one(n: int) -> dict[str, object]:
        try:
            spark.sql(texts[n]).toArrow()
        except Exception as e:  # recorded; the run goes on
            return {"n": n, "error": f"Spark: {_first_line(e)}"}
        try:
            found = measure(
                lambda: spark.sql(texts[n]).toArrow(),
                lambda: ember.capture(spark.sql(texts[n]), strategy="inject"),
                args.runs,
            )
        except Exception as e:
            return {"n": n, "error": f"ember: {type(e).__name__}: {_first_line(e)}"}
        return {"n": n, **found}

    results = per_query(console, args.queries, one, lambda r: write_report(run, args, r, final=False))
    console.print(write_report(run, args, results).read_text())
    return 0


def _first_line(e: Exception) -> str:
    return (str(e).strip().splitlines() or [""])[0][:200]


def headline(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The figures the summary shows."""
    done = [r for r in results if "error" not in r]
    ours = [r for r in results if str(r.get("error", "")).startswith("ember")]
    runnable = len(results) - sum(1 for r in results if str(r.get("error", "")).startswith("Spark"))
    over = numbers(done, "inject")
    top, top_q = worst(done, "inject")
    traces = [1000 * t for t in numbers(done, "trace")]
    slowest, slowest_q = worst([r for r in done if r.get("trace") is not None], "trace")
    return [
        figure("captured", "Queries captured", f"{len(done)} of {len(results)}"),
        figure("ember_errors", "Spark-runnable queries ember could not capture", len(ours), note=f"of {runnable}"),
        figure("inject_median", "Inject overhead, median", statistics.median(over) if over else None, "%"),
        figure("inject_worst", "Inject overhead, worst", top, "%", note=top_q),
        figure("within_20", "Queries with Inject overhead ≤ 20 %", f"{sum(v <= 0.2 for v in over)} of {len(over)}"),
        figure("trace", "One-row backward trace, ids, median", statistics.median(traces) if traces else None, "ms", 1),
        figure("trace_worst", "One-row backward trace, ids, worst", slowest * 1000 if slowest is not None else None,
               "ms", note=slowest_q),
    ]


def write_report(run: Run, args: argparse.Namespace, results: list[dict[str, object]], final: bool = True) -> Path:
    done = [r for r in results if "error" not in r]
    overheads = sorted(float(r["inject"]) for r in done)  # type: ignore[arg-type]
    traces = sorted(float(r["trace"]) for r in done if r["trace"] is not None)  # type: ignore[arg-type]
    lines = [
        f"{args.runs} alternating runs after a warm-up; data: `make tpcds TPCDS_SF={args.scale:g}`.",
        "",
        f"Captured: {len(done)} of {len(results)} queries run.",
    ]
    if overheads:
        lines += [
            f"Inject overhead: median {statistics.median(overheads):+.0%}, worst {overheads[-1]:+.0%}; "
            f"one-row backward trace (ids): median {statistics.median(traces) * 1000:.1f} ms, worst {traces[-1] * 1000:.1f} ms."
            if traces
            else f"Inject overhead: median {statistics.median(overheads):+.0%}, worst {overheads[-1]:+.0%}.",
        ]
    lines += ["", "| query | plain s | inject | output rows | lineage rids | backward trace ms |", "|---|---|---|---|---|---|"]
    for r in results:
        if "error" in r:
            lines.append(f"| Q{r['n']} | {r['error']} | | | | |")
            continue
        trace = "" if r["trace"] is None else f"{float(r['trace']) * 1000:.1f}"  # type: ignore[arg-type]
        lines.append(
            f"| Q{r['n']} | {float(r['plain']):.2f} | {float(r['inject']):+.0%} | {r['outputs']:,} | {r['rids']:,} | {trace} |"  # type: ignore[arg-type]
        )
    title = f"TPC-DS at SF{args.scale:g}: coverage and Inject capture overhead"
    return run.write(title, lines, results, headline(results), args, final=final)  # type: ignore[arg-type]


if __name__ == "__main__":
    raise SystemExit(main())
