"""What tracing the pandas function API costs: grouped, cogrouped and partition maps on TPC-H.

    .venv/bin/python -m bench.grouped_map --scale 1 --runs 5

For each case, in one process: one warm-up of each variant, then `--runs` rounds
alternating the plain job (`df.toArrow()`), `ember.capture(df, strategy="inject")` and
`strategy="defer"` (the time until the user's result is back; the background capture is
then awaited and timed on its own; defer refuses a partition map), each on a fresh
DataFrame. Reported: medians, the
overhead against the plain job, the rids the lineage holds and one-row backward trace
latency (ids). Writes the run's record and grouped_map.md (`bench.results`). Machines
here are noisy: read ratios, not seconds.
"""

from __future__ import annotations

import functools
import statistics
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from rich.console import Console

import ember
from bench.common import Run, figure, median, parser, settled, timed, tpch_session, worst


def _summary(pdf: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({"orders": [len(pdf)], "total": [float(pdf.o_totalprice.sum())]})


def _latest(key: tuple[object, ...], pdf: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({"clerk": [key[0]], "latest": [pdf.o_orderdate.max()]})


def _revenue(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    for pdf in frames:
        price = pdf.l_extendedprice.astype(float) * (1 - pdf.l_discount.astype(float))
        yield price.groupby(pdf.l_returnflag).sum().rename("revenue").rename_axis("flag").reset_index()


def _scored(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        score = pc.divide(pc.cast(batch.column("o_totalprice"), pa.float64()), 1000.0)
        yield pa.RecordBatch.from_arrays([batch.column("o_orderkey"), score], ["o_orderkey", "score"])


def _pairs(key: tuple[object, ...], customers: pd.DataFrame, suppliers: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({"nation": [key[0]], "customers": [len(customers)], "suppliers": [len(suppliers)]})


@dataclass(frozen=True)
class Case:
    name: str
    job: Callable[[SparkSession], DataFrame]
    defer: bool = True  # defer refuses a partition map


CASES = (
    Case("orders per priority (5 groups of 300 K)", lambda s: s.table("orders").groupBy("o_orderpriority").applyInPandas(
        _summary, "orders long, total double")),
    Case("latest order per clerk (1,000 groups)", lambda s: s.table("orders").groupBy("o_clerk").applyInPandas(
        _latest, "clerk string, latest date")),
    Case("customers and suppliers per nation (cogroup, 25 keys)", lambda s: s.table("customer").groupBy("c_nationkey").cogroup(
        s.table("supplier").groupBy("s_nationkey")).applyInPandas(_pairs, "nation long, customers long, suppliers long")),
    Case("revenue per flag per batch (mapInPandas over lineitem, 6 M rows)", lambda s: s.table("lineitem").select(
        "l_returnflag", "l_extendedprice", "l_discount").mapInPandas(_revenue, "flag string, revenue double"), defer=False),
    Case("orders scored row by row (mapInArrow, 1.5 M rows out)", lambda s: s.table("orders").select(
        "o_orderkey", "o_totalprice").mapInArrow(_scored, "o_orderkey long, score double"), defer=False),
)


def measure(spark: SparkSession, case: Case, runs: int) -> dict[str, object]:
    def inject() -> ember.Lineage:
        return ember.capture(case.job(spark), strategy="inject")

    def defer() -> ember.Lineage:
        return ember.capture(case.job(spark), strategy="defer")

    variants: dict[str, Callable[[], object]] = {"plain": lambda: case.job(spark).toArrow(), "inject": inject}
    if case.defer:
        variants["defer"] = defer
    times: dict[str, list[float]] = {k: [] for k in variants}
    settle: list[float] = []
    for round_ in range(runs + 1):  # round 0 warms up
        for name, run in variants.items():
            seconds, result = timed(run)
            if round_:
                times[name].append(seconds)
            if name == "defer" and round_:
                settle.append(timed(functools.partial(result.backward, oids=[0]))[0])  # type: ignore[attr-defined]
            settled(result)  # the copy of reached rows, outside the timings
    lin = inject()
    rids = sum(int(lin.backward(oids=range(lin.output().num_rows)).ids(s).size) for s in lin.sources)
    trace = statistics.median(timed(lambda: lin.backward(oids=[0]))[0] for _ in range(20))
    plain = statistics.median(times["plain"])
    return {
        "case": case.name,
        "plain": plain,
        "inject": statistics.median(times["inject"]) / plain - 1,
        "defer": statistics.median(times["defer"]) / plain - 1 if settle else None,
        "settle": statistics.median(settle) if settle else None,
        "rids": rids,
        "trace": trace,
    }


def headline(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The figures the summary shows."""
    def name(r: dict[str, Any]) -> str:
        return str(r["case"]).split(" (")[0]

    top, top_case = worst(rows, "inject", name)
    slowest, slowest_case = worst(rows, "trace", name)
    return [
        figure("inject_median", "Inject overhead, median over the cases", median(rows, "inject"), "%"),
        figure("inject_worst", "Inject overhead, worst", top, "%", note=top_case),
        figure("defer_median", "Defer overhead on the user's job, median (grouped maps)", median(rows, "defer"), "%"),
        figure("trace_worst", "One-row backward trace, ids, worst", slowest * 1000 if slowest is not None else None,
               "ms", 1, note=slowest_case),
    ]


def main(argv: list[str] | None = None) -> int:
    args = parser(__doc__, runs=5).parse_args(argv)
    run = Run("grouped_map", args.out, argv)
    console = Console()
    spark, _ = tpch_session(console, args.scale)
    results = []
    for case in CASES:
        with console.status(case.name):
            results.append(measure(spark, case, args.runs))
    lines = [
        f"{args.runs} alternating runs after a warm-up.",
        "",
        "| case | plain s | inject | defer (job) | defer capture after, s | lineage rids | backward trace ms |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['case']} | {r['plain']:.2f} | {r['inject']:+.0%} | "
        + (f"{r['defer']:+.0%} | {r['settle']:.2f}" if r["defer"] is not None else "refused | ")
        + f" | {r['rids']:,} | {float(r['trace']) * 1000:.1f} |"  # type: ignore[arg-type]
        for r in results
    ]
    title = f"Grouped and partition maps: capture overhead at SF{args.scale:g}"
    page = run.write(title, lines, results, headline(results), args)
    console.print("\n".join(lines))
    console.print(f"wrote {page}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
