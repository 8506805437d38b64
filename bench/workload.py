"""What workload-aware capture saves: data skipping and group-by push-down on TPC-H.

    .venv/bin/python -m bench.workload --scale 1

For each case (a TPC-H query and the lineage questions its workload declares), in one
process: capture without and with the workload (median of --runs, alternating, fresh
DataFrames), the bytes of the groupings it adds (saved store, `groups/`), and per output
row the latency of the declared question answered from the workload's groupings vs
answered the unoptimised way (source scan for `source_where`, rows fetched and
aggregated in DuckDB for a consuming query). Writes the run's record and workload.md as it
goes (`bench.results`).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress

import ember
from bench.common import Run, figure, median, parser, settled, timed, tpch_session, worst
from devkit import tpch

MONTHLY = "SELECT date_trunc('month', l_shipdate) AS month, count(*) AS n, sum(l_extendedprice) AS revenue FROM lineitem GROUP BY month"


@dataclass(frozen=True)
class Case:
    name: str
    query: int
    workload: ember.Workload
    source_where: str | None = None  # a data-skipping trace on lineitem
    consuming: str | None = None  # a group-by push-down query on lineitem


CASES = (
    Case("Q1 skip by ship mode", 1, ember.Workload(partition_by={"lineitem": "l_shipmode"}), source_where="l_shipmode = 'AIR'"),
    Case("Q1 monthly drill-down", 1, ember.Workload(queries=(MONTHLY,)), consuming=MONTHLY),
    Case("Q3 skip by ship date", 3, ember.Workload(partition_by={"lineitem": "l_shipdate"}), source_where="l_shipdate < DATE '1995-03-20'"),
    Case("Q10 monthly drill-down", 10, ember.Workload(queries=(MONTHLY,)), consuming=MONTHLY),
)


def ask(lin: ember.Lineage, case: Case, oid: int) -> object:
    if case.source_where is not None:
        return lin.backward(oids=[oid], source_where={"lineitem": case.source_where}).ids("lineitem")
    assert case.consuming is not None
    return lin.backward(oids=[oid]).query(case.consuming).output()


def grouping_bytes(lin: ember.Lineage) -> int:
    folder = Path(tempfile.mkdtemp(prefix="ember-bench-"))
    try:
        lin.save(str(folder / "s"))
        return sum(p.stat().st_size for p in (folder / "s" / "groups").iterdir())
    finally:
        shutil.rmtree(folder)


def measure(spark: object, case: Case, runs: int, traces: int) -> dict[str, float]:
    plain_s, with_s = [], []
    plain = optimized = None
    for _ in range(runs):
        t, plain = timed(lambda: ember.capture(tpch.query(spark, case.query), strategy="inject"))
        settled(plain)
        plain_s.append(t)
        t, optimized = timed(lambda: ember.capture(tpch.query(spark, case.query), strategy="inject", workload=case.workload))
        settled(optimized)
        with_s.append(t)
    assert isinstance(plain, ember.Lineage) and isinstance(optimized, ember.Lineage)
    oids = range(min(traces, optimized.output().num_rows))
    fast = [timed(lambda o=o: ask(optimized, case, o))[0] for o in oids]
    slow = [timed(lambda o=o: ask(plain, case, o))[0] for o in oids]
    return {
        "capture": statistics.median(plain_s),
        "capture_w": statistics.median(with_s),
        "bytes": grouping_bytes(optimized),
        "index": optimized.index_bytes,
        "fast": 1000 * statistics.median(fast),
        "slow": 1000 * statistics.median(slow),
    }


def headline(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The figures the summary shows."""
    gains = [dict(r, gain=r["slow"] / max(r["fast"], 1e-9), cost=r["capture_w"] / r["capture"] - 1) for r in rows]
    least, least_case = worst([dict(r, gain=-r["gain"]) for r in gains], "gain", lambda r: r["case"])
    top, top_case = worst(gains, "cost", lambda r: r["case"])
    return [
        figure("speedup_median", "Answer with the workload's groupings vs without, median speed-up",
               median(gains, "gain"), "x"),
        figure("speedup_least", "… least speed-up", -least if least is not None else None, "x", note=least_case),
        figure("cost_worst", "Capture with the workload vs without, worst", top, "%", note=top_case),
    ]


def write_report(run: Run, args: argparse.Namespace, rows: dict[str, dict[str, float]], final: bool = True) -> Path:
    lines = [
        f"Capture: median of {args.runs} runs (inject, index built); trace: median over the first {args.traces} "
        "output rows. Unoptimised = the same question on a capture without the workload (source scan for "
        "`source_where`; rows fetched and aggregated by DuckDB for a consuming query).",
        "",
        "| case | capture s | with workload s | groupings KB | index MB | answer ms (workload) | answer ms (unoptimised) | speed-up |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, r in rows.items():
        lines.append(
            f"| {name} | {r['capture']:.2f} | {r['capture_w']:.2f} | {r['bytes'] / 1e3:.1f} | {r['index'] / 1e6:.2f} "
            f"| {r['fast']:.1f} | {r['slow']:.1f} | {r['slow'] / max(r['fast'], 1e-9):.0f}x |"
        )
    table = [{"case": name, **r} for name, r in rows.items()]
    title = f"Workload-aware capture — TPC-H SF{args.scale:g}"
    return run.write(title, lines, table, headline(table), args, final=final)


def main(argv: list[str] | None = None) -> None:
    p = parser(__doc__, runs=3)
    p.add_argument("--traces", type=int, default=4)
    args = p.parse_args(argv)
    run = Run("workload", args.out, argv)
    console = Console()
    spark, _ = tpch_session(console, args.scale)
    rows: dict[str, dict[str, float]] = {}
    with Progress(console=console) as progress:
        task = progress.add_task("cases", total=len(CASES))
        for case in CASES:
            progress.update(task, description=case.name)
            rows[case.name] = measure(spark, case, args.runs, args.traces)
            write_report(run, args, rows, final=False)
            progress.advance(task)
    console.print(f"wrote {write_report(run, args, rows)}")


if __name__ == "__main__":
    main()
