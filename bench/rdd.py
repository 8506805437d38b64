"""Titian's capture benchmark for `ember.rdd`: word count and grep over generated Zipf text,
plain PySpark against `LineageContext`, plus one-record trace latencies.

    .venv/bin/python -m bench.rdd                          # 8, 32 and 128 MB, 5 runs
    .venv/bin/python -m bench.rdd --sizes 256 1024 2048 --runs 5

Text: lines of 5-15 words drawn from an 8,000-term vocabulary with Zipf(1.1) frequencies
(as in the paper), generated once under data/rdd/. For each size and workload: one warm-up
of each variant, then `--runs` rounds alternating the plain program and the tracked one
(a fresh LineageContext each time, its tables dropped afterwards); medians, and the ratio
of the medians. Traces, on the last tracked word count: backward from the count of a
word of rank 100 to its input lines, and forward from one input line (by its id) to the
counts of its words. Grep's backward trace goes from one matching line to itself. Writes
the run's record and rdd.md (`bench.results`). Machines here are shared and noisy: read
ratios, not seconds.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from operator import add
from pathlib import Path
from typing import Any

import numpy as np
from pyspark import SparkContext
from rich.console import Console

from bench.common import ROOT, Run, figure, median, timed, worst
from devkit import tpch
from ember.rdd import LineageContext

VOCABULARY = 8000
RARE = "w5000"  # grep's pattern: about 0.01 % of the words


def ensure_text(size_mb: int) -> Path:
    path = ROOT / "data" / "rdd" / f"zipf-{size_mb}mb.txt"
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(size_mb)
    words = np.array([f"w{i}" for i in range(VOCABULARY)])
    tmp = path.with_suffix(".part")
    with tmp.open("w") as f:
        while f.tell() < size_mb << 20:
            ranks = (rng.zipf(1.1, 200_000) - 1) % VOCABULARY
            lengths = rng.integers(5, 16, 20_000)
            cuts = np.cumsum(lengths)
            line_words = np.split(words[ranks[: cuts[-1]]], cuts[:-1])
            f.write("\n".join(" ".join(ws) for ws in line_words) + "\n")
    tmp.rename(path)
    return path


def word_count(lines: Any) -> Any:
    return lines.flatMap(str.split).map(lambda w: (w, 1)).reduceByKey(add)


def grep(lines: Any) -> Any:
    return lines.filter(lambda line: f" {RARE} " in line)


WORKLOADS: dict[str, Callable[[Any], Any]] = {"word count": word_count, "grep": grep}


def lineage_mb(sc: SparkContext) -> float:
    """Memory plus disk of the cached capture points (tables and the records kept with them)."""
    infos = sc._jsc.sc().getRDDStorageInfo()
    return sum(i.memSize() + i.diskSize() for i in infos) / 1e6


def measure(sc: SparkContext, path: Path, name: str, runs: int, partitions: int) -> dict[str, Any]:
    program = WORKLOADS[name]
    plain_times, tracked_times = [], []
    for i in range(runs + 1):  # round 0 is the warm-up
        plain, _ = timed(lambda: program(sc.textFile(str(path), partitions)).collect())
        lc = LineageContext(sc)
        out = program(lc.textFile(str(path), partitions))
        tracked, _ = timed(out.collect)
        if i:
            plain_times.append(plain)
            tracked_times.append(tracked)
        if i < runs:
            lc.clear()
    row: dict[str, Any] = {
        "plain": statistics.median(plain_times),
        "tracked": statistics.median(tracked_times),
        "lineage_mb": lineage_mb(sc),
    }
    row["ratio"] = row["tracked"] / row["plain"]
    if name == "word count":
        one = out.filter(lambda kv: kv[0] == "w100")
        row["back"], lines = timed(lambda: one.getLineage().goBackAll().count())
        row["traced"] = lines
        first = one.getLineage().goBackAll().ids().first()
        row["fwd"], reached = timed(lambda: lc.lineage([first]).goNextAll(target=out).count())
        row["reached"] = reached
    else:
        match = out.getLineage().ids().first()
        row["back"], traced = timed(lambda: lc.lineage([match]).goBackAll().count())
        row["traced"], row["fwd"], row["reached"] = traced, float("nan"), 0
    lc.clear()
    return row


def headline(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The figures the summary shows (traces at the largest size measured)."""
    over = [dict(r, over=r["ratio"] - 1) for r in rows]
    top, top_at = worst(over, "over", lambda r: f"{r['workload']}, {r['mb']} MB")
    counts = [r for r in rows if r["workload"] == "word count"]
    big = max(counts, key=lambda r: r["mb"]) if counts else None
    return [
        figure("overhead_median", "Capture overhead (tracked / plain), median", median(over, "over"), "%"),
        figure("overhead_worst", "Capture overhead, worst", top, "%", note=top_at),
        figure("back", "Word count backward trace, largest input", big["back"] if big else None, "s", 2,
               note=f"{big['mb']} MB, {big['traced']:,} lines" if big else None),
        figure("fwd", "Word count forward trace, largest input", big["fwd"] if big else None, "s", 2,
               note=f"{big['mb']} MB" if big else None),
        figure("cache", "Lineage cache, largest word count", big["lineage_mb"] if big else None, "MB",
               note=f"{big['mb']} MB of text" if big else None),
    ]


def write_report(run: Run, args: argparse.Namespace, results: list[dict[str, Any]]) -> Path:
    ratios = [r["ratio"] for r in results]
    lines = [
        f"Median of {args.runs} alternating runs after a warm-up, local[2].",
        "",
        f"- Capture overhead (tracked / plain, ratio of medians): median "
        f"{statistics.median(ratios) - 1:.0%}, worst {max(ratios) - 1:.0%}; target ≤ 30 %.",
        "- Backward: word count from the count of `w100` to all its input lines; grep from one "
        "output line to its input line. Forward: from one input line (by id) to the counts of "
        "its words. Target ≤ 2 s.",
        "",
        "| workload | MB | plain s | tracked s | overhead | lineage cache MB | backward s "
        "(records) | forward s (records) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        fwd = "—" if r["fwd"] != r["fwd"] else f"{r['fwd']:.2f} ({r['reached']})"
        lines.append(
            f"| {r['workload']} | {r['mb']} | {r['plain']:.2f} | {r['tracked']:.2f} | "
            f"{r['ratio'] - 1:+.0%} | {r['lineage_mb']:.1f} | {r['back']:.2f} ({r['traced']}) | {fwd} |"
        )
    if args.notes:
        lines += ["", args.notes.read_text()]
    return run.write("RDD lineage benchmark (Titian workloads)", lines, results, headline(results), args)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", type=int, nargs="+", default=[8, 32, 128], help="input sizes in MB")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=list(WORKLOADS))
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks", help="results folder (history/, pages)")
    p.add_argument("--notes", type=Path, help="markdown appended to the report (shortfalls)")
    args = p.parse_args(argv)
    run = Run("rdd", args.out, argv)
    console = Console()
    spark = tpch.local_spark("ember-bench-rdd", **{"spark.driver.memory": "8g"})
    sc = spark.sparkContext
    results = []
    for mb in args.sizes:
        with console.status(f"{mb} MB of Zipf text"):
            path = ensure_text(mb)
        partitions = max(2, mb // 32)
        for name in args.workloads:
            with console.status(f"{name}, {mb} MB"):
                row = measure(sc, path, name, args.runs, partitions)
            row.update(workload=name, mb=mb)
            console.print(row)
            results.append(row)
    spark.stop()
    console.print(f"wrote {write_report(run, args, results)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
