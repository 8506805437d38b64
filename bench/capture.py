"""Capture overhead and trace latency on TPC-H, against the plain PySpark job in the same run.

    .venv/bin/python -m bench.capture --scale 1 --runs 5          # all 22 queries
    .venv/bin/python -m bench.capture --scale 0.1 --queries 1 3 6

For each query: one warm-up of each, then `--runs` rounds alternating the plain job
(`df.toArrow()`) and `ember.capture(df)` (which also returns the output as Arrow);
medians, the capture/plain ratio, index bytes and bytes per input byte, and one-row
trace latencies (backward ids, backward with rows, forward). Writes a markdown table
and a PNG chart to docs/benchmarks/. Machines here are noisy: read ratios, not seconds.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
from datetime import date
from pathlib import Path

from rich.console import Console
from rich.progress import Progress

import ember
from bench.common import ROOT, input_bytes, timed
from ember import tpch


def trace_latency(lin: ember.Lineage, repeat: int = 20) -> tuple[float, float, float]:
    """Median ms of: backward ids of oid 0, the same with rows (≤1000 of one source), forward of one rid."""
    if lin.output().num_rows == 0:
        return float("nan"), float("nan"), float("nan")
    ids = statistics.median(timed(lambda: lin.backward(oids=[0]))[0] for _ in range(repeat))
    trace = lin.backward(oids=[0])
    source = max(trace.sources, key=lambda s: trace.ids(s).size, default=None)
    if source is None:
        return ids * 1000, float("nan"), float("nan")

    def with_rows() -> object:
        t = lin.backward(oids=[0])
        return [t.rows(s) for s in t.sources if t.ids(s).size <= 1000]

    rows = statistics.median(timed(with_rows)[0] for _ in range(5))
    rid = int(trace.ids(source)[0])
    fwd = statistics.median(timed(lambda: lin.forward(source, ids=[rid]))[0] for _ in range(repeat))
    return ids * 1000, rows * 1000, fwd * 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--queries", type=int, nargs="*", default=list(range(1, 23)))
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks")
    args = parser.parse_args(argv)
    console = Console()
    data = ROOT / "data" / "tpch" / f"sf{args.scale:g}"
    with console.status(f"TPC-H SF{args.scale:g} data"):
        tpch.ensure_data(data, args.scale)
    spark = tpch.local_spark(
        "ember-bench", **{"spark.driver.memory": "12g", "spark.sql.shuffle.partitions": "8"}
    )
    tpch.register(spark, data)
    results = []
    with Progress(console=console) as progress:
        task = progress.add_task("queries", total=len(args.queries))
        for n in args.queries:
            progress.update(task, description=f"Q{n}")
            # A fresh DataFrame per run: re-running one DataFrame reuses its shuffle files.
            def plain_job(n: int = n) -> object:
                return tpch.query(spark, n).toArrow()

            def capture_job(n: int = n) -> ember.Lineage:
                return ember.capture(tpch.query(spark, n))

            plain_job()
            capture_job()
            plain, capture = [], []
            lin = None
            for _ in range(args.runs):
                plain.append(timed(plain_job)[0])
                took, lin = timed(capture_job)
                capture.append(took)
            assert isinstance(lin, ember.Lineage)
            p, c = statistics.median(plain), statistics.median(capture)
            back, rows, fwd = trace_latency(lin)
            inbytes = input_bytes(data, lin.sources)
            results.append((n, p, c, c / p - 1, lin.index_bytes, lin.index_bytes / inbytes, back, rows, fwd))
            progress.advance(task)
    spark.stop()
    write_report(args, results)
    console.print(f"wrote {args.out / 'capture.md'} and capture.png")
    return 0


def write_report(args: argparse.Namespace, results: list[tuple]) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    overheads = [r[3] for r in results]
    lines = [
        f"# Capture benchmark — TPC-H SF{args.scale:g}, local[2]",
        "",
        f"{date.today()}, {platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}; "
        f"median of {args.runs} alternating runs after a warm-up; `python -m bench.capture --scale {args.scale:g}`.",
        "",
        f"Median overhead {statistics.median(overheads):.0%}, worst {max(overheads):.0%}.",
        "",
        "| query | plain s | capture s | overhead | index MB | index / input | backward ids ms | with rows ms | forward ms |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for n, p, c, over, nbytes, ratio, back, rows, fwd in results:
        lines.append(
            f"| Q{n} | {p:.2f} | {c:.2f} | {over:.0%} | {nbytes / 1e6:.1f} | {ratio:.1%} | "
            f"{back:.1f} | {rows:.1f} | {fwd:.1f} |"
        )
    (args.out / "capture.md").write_text("\n".join(lines) + "\n")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 4))
    ax.bar([f"Q{r[0]}" for r in results], [r[3] * 100 for r in results], color="#c0392b")
    ax.axhline(20, color="black", linestyle="--", linewidth=1, label="target median 20 %")
    ax.set_ylabel("capture overhead vs plain job (%)")
    ax.set_title(f"ember capture overhead, TPC-H SF{args.scale:g}, local[2]")
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.out / "capture.png", dpi=110)


if __name__ == "__main__":
    raise SystemExit(main())
