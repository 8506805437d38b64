"""TPC-DS coverage and capture overhead: the 99 queries, each captured, against the plain job.

    make tpcds TPCDS_SF=1                                  # the data, once (~20 s)
    .venv/bin/python -m bench.tpcds --scale 1 --runs 3     # docs/benchmarks/tpcds.md (~1 h)
    .venv/bin/python -m bench.tpcds --scale 1 --queries 14 23 --runs 1

For each query: one warm-up of the plain job and of `ember.capture(df,
strategy="inject")`, then `--runs` rounds alternating the two, each on a fresh
DataFrame; a query Spark cannot run or ember refuses is recorded with its error and
the run goes on. Reported per query: medians, Inject's overhead against the plain job,
the output rows, the source rows in the whole output's lineage, and a one-row backward
trace's latency (ids). Correctness is the tests' (tests/tpcds, at sf 0.01, against a
DuckDB replay); this measures breadth and cost at scale. Machines here are noisy: read
ratios, not seconds.
"""

from __future__ import annotations

import platform
import statistics
from collections.abc import Callable
from datetime import date
from pathlib import Path

from rich.console import Console

import ember
from bench.common import parser, per_query, settled, timed, write_markdown
from ember import tpcds, tpch


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

    per_query(console, args.queries, one, lambda r: write_report(args.out, args.scale, args.runs, r))
    console.print((args.out / "tpcds.md").read_text())
    return 0


def _first_line(e: Exception) -> str:
    return (str(e).strip().splitlines() or [""])[0][:200]


def write_report(out: Path, scale: float, runs: int, results: list[dict[str, object]]) -> None:
    done = [r for r in results if "error" not in r]
    overheads = sorted(float(r["inject"]) for r in done)  # type: ignore[arg-type]
    traces = sorted(float(r["trace"]) for r in done if r["trace"] is not None)  # type: ignore[arg-type]
    lines = [
        f"# TPC-DS at SF{scale:g}: coverage and Inject capture overhead",
        "",
        f"{date.today()}, {platform.node()}, {platform.machine()}, {runs} alternating runs after a warm-up "
        f"(`python -m bench.tpcds --scale {scale:g} --runs {runs}`; data: `make tpcds TPCDS_SF={scale:g}`).",
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
    write_markdown(out, "tpcds.md", lines)


if __name__ == "__main__":
    raise SystemExit(main())
