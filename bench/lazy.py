"""Lazy lineage (`ember.infer`) on TPC-H: job overhead, trace latency per mode, false positives.

Per query, in one process: the plain job and the job under `ember.infer` alternate
(`--runs` times after a warm-up); then a few sampled output rows are traced backward in
exact mode, iterative superset mode and naive superset mode, and compared with eager
capture's trace and with the naive lazy answer (re-running the whole annotated job,
timed as an `ember.capture` run). False-positive rates are the superset rows outside the
exact lineage, over all sources. Writes the run's record and lazy.md as it goes
(`bench.results`).

    python -m bench.lazy --scale 1
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from rich.console import Console

import ember
from bench.common import (
    Run,
    figure,
    median,
    numbers,
    parser,
    per_query,
    settled,
    timed,
    tpch_session,
    worst,
)
from devkit import tpch
from ember.engines.spark.jvm import Jvm
from ember.engines.spark.plan_import import import_plan
from ember.infer.pushdown import infer as push_down
from ember.infer.pushdown import lift_limits
from ember.infer.segments import split


def ms(seconds: float) -> float:
    return seconds * 1000


def fpr(superset: ember.Trace, exact: ember.Trace, sources: list[str]) -> float:
    total = sum(superset.ids(s).size for s in sources)
    extra = total - sum(exact.ids(s).size for s in sources)
    return extra / total if total else 0.0


def inference_only(spark: SparkSession, df: DataFrame) -> object:
    """What `ember.infer` works out before any job: plan import, push-down, save points."""
    plan = lift_limits(import_plan(Jvm(spark), df)[0])
    return push_down(plan), split(plan)


def measure(spark: SparkSession, n: int, runs: int, traces: int) -> dict[str, object]:
    def fresh() -> DataFrame:
        """A new DataFrame per run: re-running one would reuse its finished shuffle stages."""
        return tpch.query(spark, n)

    fresh().toArrow()
    plain, job = [], []
    for _ in range(runs):
        plain.append(timed(lambda: fresh().toArrow())[0])
        job.append(timed(lambda: ember.infer(fresh()))[0])
    t_infer, _ = timed(lambda: inference_only(spark, fresh()))
    df = fresh()
    exact = ember.infer(df)
    iterative = ember.infer(df, exact=False)
    naive = ember.infer(df, exact=False, iterative=False)
    rerun, eager = timed(lambda: ember.capture(fresh(), strategy="inject"))
    settled(eager)
    assert isinstance(eager, ember.Lineage)
    rows = exact.output().num_rows
    oids = sorted({0, rows // 2, rows - 1})[:traces] if rows else []
    lat: dict[str, list[float]] = {"exact": [], "iterative": [], "naive": [], "eager": []}
    fprs: dict[str, list[float]] = {"iterative": [], "naive": []}
    for oid in oids:
        t_exact, tr_exact = timed(lambda o=oid: exact.backward(oids=[o]))
        t_iter, tr_iter = timed(lambda o=oid: iterative.backward(oids=[o]))
        t_naive, tr_naive = timed(lambda o=oid: naive.backward(oids=[o]))
        t_eager, _ = timed(lambda o=oid: eager.backward(oids=[o]))
        for key, t in (("exact", t_exact), ("iterative", t_iter), ("naive", t_naive), ("eager", t_eager)):
            lat[key].append(t)
        assert isinstance(tr_exact, ember.Trace)
        fprs["iterative"].append(fpr(tr_iter, tr_exact, exact.sources))  # type: ignore[arg-type]
        fprs["naive"].append(fpr(tr_naive, tr_exact, exact.sources))  # type: ignore[arg-type]
    med = statistics.median
    return {
        "plain": med(plain),
        "job": med(job),
        "rerun": rerun,
        "inference": t_infer,
        **{f"t_{k}": med(v) if v else float("nan") for k, v in lat.items()},
        **{f"fpr_{k}": statistics.mean(v) if v else 0.0 for k, v in fprs.items()},
        "explain": exact.explain(),
        "path": exact.exact_path,
        "saved": sum(t.nbytes for t in exact.saved.values()),
    }


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__, runs=3)
    p.add_argument("--traces", type=int, default=3)
    args = p.parse_args(argv)
    run = Run("lazy", args.out, argv)
    console = Console()
    spark, _ = tpch_session(console, args.scale)
    # The report is written after every query, so a long run shows its progress.
    results = per_query(
        console,
        args.queries,
        lambda n: (n, measure(spark, n, args.runs, args.traces)),
        lambda r: write_report(run, args, r, final=False),
    )
    spark.stop()
    console.print(f"wrote {write_report(run, args, results)}")
    return 0


def headline(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The figures the summary shows."""
    over = [dict(r, over=r["job"] / r["plain"] - 1) for r in rows if numbers([r], "job") and numbers([r], "plain")]
    slower = [dict(r, slower=r["rerun"] / r["t_exact"]) for r in rows if numbers([r], "rerun") and numbers([r], "t_exact")
              and r["t_exact"] > 0]
    top, top_q = worst(over, "over")
    exact, exact_q = worst(rows, "t_exact")
    ratios = numbers(slower, "slower")
    fpr = {k: numbers(rows, f"fpr_{k}") for k in ("naive", "iterative")}
    return [
        figure("overhead_mean", "Job overhead of `infer`, mean", statistics.mean(numbers(over, "over")) if over else None,
               "%", 1),
        figure("overhead_worst", "Job overhead of `infer`, worst", top, "%", note=top_q),
        figure("exact_median", "Exact backward trace, median", median(rows, "t_exact"), "s", 2,
               note=f"worst {exact:.2f} s, {exact_q}" if exact is not None else None),
        figure("rerun_ratio", "Naive lazy answer (whole re-run) / exact trace, median",
               statistics.median(ratios) if ratios else None, "x", 1,
               note=f"under 10\u00d7 on {sum(v < 10 for v in ratios)} of {len(ratios)}" if ratios else None),
        figure("fpr_naive", "False positives, naive superset, mean", statistics.mean(fpr["naive"]) if fpr["naive"] else None,
               "%", 1),
        figure("fpr_iterative", "False positives, iterative superset, mean",
               statistics.mean(fpr["iterative"]) if fpr["iterative"] else None, "%", 1),
    ]


def write_report(
    run: Run, args: argparse.Namespace, results: list[tuple[int, dict[str, object]]], final: bool = True
) -> object:
    def col(key: str) -> list[float]:
        return [float(r[key]) for _, r in results if float(r[key]) == float(r[key])]  # type: ignore[arg-type]

    over = [float(r["job"]) / float(r["plain"]) - 1 for _, r in results]  # type: ignore[arg-type]
    speedup = [float(r["rerun"]) / float(r["t_exact"]) for _, r in results if float(r["t_exact"]) > 0]  # type: ignore[arg-type]
    slower = [f"Q{n} {float(r['rerun']) / float(r['t_exact']):.1f}x" for n, r in results  # type: ignore[arg-type]
              if float(r["t_exact"]) > 0 and float(r["rerun"]) / float(r["t_exact"]) < 10]  # type: ignore[arg-type]
    lines = [
        f"{args.runs} alternating runs, {args.traces} traced rows per query. An exact trace is the pushed predicates cut across joins "
        "where the plan makes that exact (path \"predicates\", `ember/infer/exact.py`); else those candidates "
        "joined in-process (\"joined\", `ember/infer/block.py`), through intermediates the job saved where "
        "the plan needs them (\"saved intermediates\", `ember/infer/segments.py`; the job then runs rebuilt "
        "with them cached); else a restricted re-run on Spark (\"re-run\"). Only saving jobs change.",
        "",
        f"Job overhead of `infer` (plan import, inference, saving): mean {statistics.mean(over):.1%}, "
        f"median {statistics.median(over):.1%}, worst {max(over):.1%}. Exact backward trace: mean "
        f"{statistics.mean(col('t_exact')):.2f} s, median {statistics.median(col('t_exact')):.2f} s; the naive "
        f"lazy answer (re-running the whole annotated job) is {statistics.median(speedup):.1f}x slower at the "
        f"median, {statistics.geometric_mean(speedup):.1f}x geometric mean; under 10x: {', '.join(slower) or 'none'}. "
        f"False positives: naive mean {statistics.mean(col('fpr_naive')):.1%}, "
        f"iterative mean {statistics.mean(col('fpr_iterative')):.1%}.",
        "",
        "| query | plain s | infer job s | overhead | inference ms | exact path | saved KB | exact trace s | iterative s "
        "| naive s | eager trace ms | whole re-run s | naive FPR | iterative FPR |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n, r in results:
        f = {k: float(v) for k, v in r.items() if k not in ("explain", "path")}  # type: ignore[arg-type]
        lines.append(
            f"| Q{n} | {f['plain']:.2f} | {f['job']:.2f} | {f['job'] / f['plain'] - 1:.0%} | {ms(f['inference']):.0f} | {r['path']} | "
            f"{f['saved'] / 1024:.1f} | {f['t_exact']:.2f} | "
            f"{f['t_iterative']:.2f} | {f['t_naive']:.2f} | {ms(f['t_eager']):.1f} | {f['rerun']:.2f} | "
            f"{f['fpr_naive']:.0%} | {f['fpr_iterative']:.0%} |"
        )
    lines += ["", "## What inference pins, per query", ""]
    for n, r in results:
        lines += [f"**Q{n}**", "", "```", str(r["explain"]), "```", ""]
    rows = [{"n": n, **r} for n, r in results]
    return run.write(f"Lazy lineage (`ember.infer`) — TPC-H SF{args.scale:g}", lines, rows, headline(rows), args, final=final)


if __name__ == "__main__":
    raise SystemExit(main())
