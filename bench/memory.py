"""Driver memory on lineage bigger than the driver: capture, save and trace with a small driver.

    .venv/bin/python -m bench.memory                          # every case, a 1g driver
    .venv/bin/python -m bench.memory --cases range --rows 100000000

Each case runs in a process of its own (`--child`), on local[2] with `spark.driver.memory`
set small (`--driver-memory`): the plain job, an Inject capture, `lin.save`, then, on the
store loaded back, one output row traced backward (ids) and one source row forward. It
reports the times, the lineage's size in row ids and the store's bytes, and the peak
resident memory (VmHWM, reset before each phase through /proc/<pid>/clear_refs, Linux
only) of the driver's JVM and of the Python process, per phase, with the JVM heap's peak
use (the sum of its pools' peaks, an upper bound). Cases:

- `q1`: TPC-H Q1 at `--scale` (its four groups hold nearly all lineitem rows), ember's
  default `spark.ember.driverRids` (the lineage is read by DuckDB in the Python process);
- `q1-executors`: the same with `spark.ember.driverRids` at `--driver-rids`, so the
  executors build it as parts in the capture's scratch folder;
- `range`: `spark.range(--rows)` grouped into 8 groups, `spark.ember.driverRids` at
  `--driver-rids`: 8 bytes of rids per row, far more than the driver's heap.

Writes the run's record and memory.md (`bench.results`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from rich.console import Console

import ember
from bench.common import ROOT, Run, figure, settled, timed
from devkit import tpch
from ember.capture.capture import DRIVER_RIDS

CASES = ("q1", "q1-executors", "range")
GROUPS = 8
PHASES = ("plain", "capture", "save", "trace")


def jvm_pid(spark: SparkSession) -> int:
    return int(spark._jvm.java.lang.ProcessHandle.current().pid())  # type: ignore[union-attr]


def rss_peak(pid: int | str) -> int:
    """The peak resident set of a process since its last reset (VmHWM), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmHWM for process {pid}")


def reset_rss_peak(pid: int | str) -> None:
    """Starts VmHWM again from the current resident set (Linux 4.0 and later)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


class Peaks:
    """Peak memory per phase: the driver JVM's and this process's resident sets, and the
    JVM heap's use (each heap pool's peak, summed: at least the true peak)."""

    def __init__(self, spark: SparkSession) -> None:
        self.jvm = spark._jvm
        self.pid = jvm_pid(spark)
        self.seen: dict[str, dict[str, int]] = {}

    def _pools(self) -> list[Any]:
        factory = self.jvm.java.lang.management.ManagementFactory  # type: ignore[union-attr]
        heap = self.jvm.java.lang.management.MemoryType.HEAP  # type: ignore[union-attr]
        return [p for p in factory.getMemoryPoolMXBeans() if p.getType().equals(heap)]

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        for pool in self._pools():
            pool.resetPeakUsage()
        reset_rss_peak(self.pid)
        reset_rss_peak("self")
        yield
        self.seen[name] = {
            "jvm_rss": rss_peak(self.pid),
            "jvm_heap": sum(int(p.getPeakUsage().getUsed()) for p in self._pools()),
            "python_rss": rss_peak("self"),
        }


def query(spark: SparkSession, case: str, rows: int) -> Callable[[], DataFrame]:
    if case == "range":
        data = spark.range(0, rows, 1, 8)
        return lambda: data.groupBy((F.col("id") % GROUPS).alias("g")).agg(F.count("*").alias("n")).orderBy("g")
    return lambda: tpch.query(spark, 1)


def child(case: str, args: argparse.Namespace) -> dict[str, Any]:
    """One case, measured in this (fresh) process."""
    conf = {"spark.driver.memory": args.driver_memory, "spark.sql.shuffle.partitions": "8"}
    spark = tpch.local_spark("ember-bench-memory", **conf)
    if case.startswith("q1"):
        tpch.register(spark, args.data or ROOT / "data" / "tpch" / f"sf{args.scale:g}")
    if case != "q1":
        spark.conf.set(DRIVER_RIDS, str(args.driver_rids))
    job = query(spark, case, args.rows)
    peaks = Peaks(spark)
    row: dict[str, Any] = {"case": case}
    with peaks.phase("plain"):
        row["plain"], _ = timed(lambda: job().toArrow())
    with peaks.phase("capture"):
        start = time.perf_counter()
        lin = ember.capture(job(), strategy="inject")
        settled(lin)
        row["capture"] = time.perf_counter() - start
    with tempfile.TemporaryDirectory(dir=args.scratch) as tmp:
        store = f"{tmp}/store"
        with peaks.phase("save"):
            start = time.perf_counter()
            lin.save(store)
            row["save"] = time.perf_counter() - start
        row["store_bytes"] = sum(f.stat().st_size for f in Path(store).rglob("*") if f.is_file())
        del lin
        with peaks.phase("trace"):
            start = time.perf_counter()
            loaded = ember.load(store, spark)
            source = loaded.sources[0]
            back = loaded.backward(oids=[0]).ids(source)
            row["forward_oids"] = loaded.forward(source, ids=[int(back[-1])]).ids().tolist()
            row["trace"] = time.perf_counter() - start
        index = loaded._index
        row["lineage_rids"] = sum(lv.rows * len(lv.rids) for lv in (index.output, *index.tables))
        row["backward_rids"] = int(back.size)
        row["parts"] = index.built_remotely
    row["peaks"] = peaks.seen
    spark.stop()
    return row


def run_case(case: str, args: argparse.Namespace, console: Console) -> dict[str, Any]:
    """`case` in a fresh process (its own driver JVM of `--driver-memory`)."""
    argv = [sys.executable, "-m", "bench.memory", "--child", case, "--driver-memory", args.driver_memory,
            "--scale", f"{args.scale:g}", "--rows", str(args.rows), "--driver-rids", str(args.driver_rids)]
    if args.scratch:
        argv += ["--scratch", args.scratch]
    if args.data:
        argv += ["--data", str(args.data)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with console.status(f"{case}"):
        start = time.perf_counter()
        done = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        return {"case": case, "error": failure(done.stderr), "wall": None}
    row: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    row["wall"] = time.perf_counter() - start
    return row


def failure(stderr: str) -> str:
    """What a failed case ended with: the last line naming an error (Python's last traceback
    line, or the JVM's deepest "Caused by:"), not the stack under it."""
    named = [line.strip() for line in stderr.splitlines() if re.match(r"\s*(Caused by: )?[\w.$]+(Error|Exception)\b", line)]
    return named[-1] if named else (stderr.strip().splitlines() or ["(no output)"])[-1]


def peak(row: dict[str, Any], key: str) -> int:
    """A case's peak of `key` over its phases."""
    return max(int(p[key]) for p in row["peaks"].values())


def described(case: str, args: argparse.Namespace) -> str:
    if case == "q1":
        return f"TPC-H Q1 SF{args.scale:g}, default driverRids"
    if case == "q1-executors":
        return f"TPC-H Q1 SF{args.scale:g}, driverRids {args.driver_rids:,}"
    return f"range({args.rows:,}) in {GROUPS} groups, driverRids {args.driver_rids:,}"


def mb(value: float) -> str:
    return f"{value / 2**20:,.0f}"


def headline(rows: list[dict[str, Any]], args: argparse.Namespace) -> list[dict[str, Any]]:
    """The figures the summary shows: the biggest lineage captured and the driver's peaks on it."""
    done = [r for r in rows if "error" not in r]
    big = max(done, key=lambda r: r["lineage_rids"], default=None)
    failed = [r["case"] for r in rows if "error" in r]
    return [
        figure("lineage_gb", f"Largest lineage captured, saved and traced with a {args.driver_memory} driver",
               big["lineage_rids"] * 8 / 2**30 if big else None, "GB", 1,
               note=f"{big['lineage_rids']:,} rids, {big['case']}" if big else None),
        figure("jvm_peak", "Driver JVM peak resident memory on it", peak(big, "jvm_rss") / 2**20 if big else None, "MB"),
        figure("python_peak", "Python process peak resident memory on it",
               peak(big, "python_rss") / 2**20 if big else None, "MB"),
        figure("failed", "Cases that failed", ", ".join(failed) if failed else "none"),
    ]


def write_report(run: Run, args: argparse.Namespace, rows: list[dict[str, Any]], final: bool = True) -> Path:
    lines = [
        f"local[2], `spark.driver.memory={args.driver_memory}`, one process per case, one run each. Times in seconds; "
        "*lineage* is the captured lineage in row ids (8 bytes each as int64), *store* the saved store's bytes. Peaks "
        "are resident memory (VmHWM) per phase, reset at the start of each: the driver JVM's, its heap's use (each "
        "heap pool's peak, summed) and the Python process's. *trace*: `ember.load` of the store, one output row "
        "backward (ids) and one source row forward.",
        "",
        "| case | plain s | capture s | save s | trace s | lineage rids | lineage GB | store MB | built by "
        "| JVM peak MB | JVM heap peak MB | Python peak MB |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"| {described(r['case'], args)} | failed: {r['error']} |" + " |" * 10)
            continue
        lines.append(
            f"| {described(r['case'], args)} | {r['plain']:.1f} | {r['capture']:.1f} | {r['save']:.1f} | "
            f"{r['trace']:.1f} | {r['lineage_rids']:,} | {r['lineage_rids'] * 8 / 2**30:.2f} | "
            f"{r['store_bytes'] / 2**20:,.0f} | {'executors' if r['parts'] else 'driver'} | {mb(peak(r, 'jvm_rss'))} | "
            f"{mb(peak(r, 'jvm_heap'))} | {mb(peak(r, 'python_rss'))} |"
        )
    lines += ["", "Peaks per phase, MB (JVM resident / JVM heap / Python resident):", "",
              "| case | " + " | ".join(PHASES) + " |", "|---|" + "---|" * len(PHASES)]
    for r in rows:
        if "error" not in r:
            cells = [
                " / ".join(mb(r["peaks"][p][k]) for k in ("jvm_rss", "jvm_heap", "python_rss")) for p in PHASES
            ]
            lines.append(f"| {described(r['case'], args)} | " + " | ".join(cells) + " |")
    title = f"Driver memory on lineage bigger than the driver ({args.driver_memory} driver)"
    return run.write(title, lines, rows, headline(rows, args), args, final=final)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", nargs="*", choices=CASES, default=list(CASES))
    p.add_argument("--driver-memory", default="1g")
    p.add_argument("--scale", type=float, default=1.0, help="TPC-H scale of the q1 cases")
    p.add_argument("--data", type=Path, default=None, help="TPC-H folder of the q1 cases (default: data/tpch/sf<scale>)")
    p.add_argument("--rows", type=int, default=80_000_000, help="rows of the range case")
    p.add_argument("--driver-rids", type=int, default=100_000, help="spark.ember.driverRids where a case forces it")
    p.add_argument("--scratch", default=None, help="folder for the stores (default: the system's temporary folder)")
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks", help="results folder (history/, pages)")
    p.add_argument("--child", choices=CASES, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args)))
        return 0
    run = Run("memory", args.out, argv)
    console = Console()
    rows: list[dict[str, Any]] = []
    for case in args.cases:
        rows.append(run_case(case, args, console))
        console.print(rows[-1])
        write_report(run, args, rows, final=False)
    console.print(f"wrote {write_report(run, args, rows)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
