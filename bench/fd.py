"""FD profiling: ember's lineage-based profiler vs a plain PySpark implementation.

    .venv/bin/python -m bench.fd                 # 2M rows

Generated addresses (zip → city → state, zip → areacode) with violations injected into a
small share of rows. Both sides produce the same bipartite graph for each FD — violating
lhs value, rhs value, rids of the rows behind it — and the script checks they agree.
Plain: per FD, group by lhs with a distinct count of rhs, keep the violations, join back
to the table and collect (lhs, rhs, row index). ember: `FDProfiler.prepare` captures one
grouping over all the FDs' columns, then every FD is checked in-process from its index.
Runs alternate; the medians and their ratio are from the same run. Writes the run's record
and fd.md (`bench.results`).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from rich.console import Console
from rich.table import Table

from bench.common import ROOT, Run, figure
from devkit import tpch
from ember.apps import FDProfiler

FDS = [(["zip"], ["city"]), (["zip"], ["state"]), (["city"], ["state"]), (["zip"], ["areacode"]), (["areacode"], ["state"])]
Graph = set[tuple[Any, ...]]


def generate(path: Path, rows: int, bad: float, seed: int = 11) -> None:
    """Addresses where zip determines city, areacode and state, except in `bad` of the rows."""
    rng = np.random.default_rng(seed)
    zips = rows // 50
    z = rng.integers(0, zips, rows)
    city = z // 4
    area = z // 2
    state = city % 50
    for col, wrong in ((city, zips // 4), (area, zips // 2), (state, 50)):
        hit = rng.random(rows) < bad / 3
        col[hit] = rng.integers(0, wrong, int(hit.sum()))
    table = pa.table({
        "zip": pa.array([f"{v:06d}" for v in z]),
        "city": pa.array([f"city{v}" for v in city]),
        "state": pa.array([f"S{v:02d}" for v in state]),
        "areacode": pa.array(area),
        "street": pa.array(rng.integers(0, 1000, rows)),
    })
    pq.write_table(table, path, row_group_size=1 << 20)


def plain(df: DataFrame) -> dict[int, Graph]:
    """Per FD: group, count distinct, join back, collect the graph's edges."""
    numbered = df.select("*", F.col("_metadata.row_index").alias("rid"))
    graphs = {}
    for i, (lhs, rhs) in enumerate(FDS):
        bad = numbered.groupBy(*lhs).agg(F.count_distinct(F.struct(*rhs)).alias("n")).filter("n > 1")
        bad = bad.select(*[F.col(c).alias(f"bad_{c}") for c in lhs])
        edges = numbered.join(bad, [F.col(c).eqNullSafe(F.col(f"bad_{c}")) for c in lhs]).select(*lhs, *rhs, "rid")
        graphs[i] = {tuple(r) for r in edges.collect()}
    return graphs


def ember_fd(df: DataFrame) -> tuple[dict[int, Graph], float]:
    """The profiler's graphs, and the seconds the in-process checks took after the capture."""
    profiler = FDProfiler(df)
    profiler.prepare(FDS)
    graphs = {}
    start = time.perf_counter()
    found_all = [profiler.violations(lhs, rhs) for lhs, rhs in FDS]
    checks = time.perf_counter() - start
    for i, found in enumerate(found_all):
        graphs[i] = {tuple(r.values()) for r in found.edges("addresses").to_pylist()}
    return graphs, checks


def headline(med: dict[str, float]) -> list[dict[str, Any]]:
    """The figures the summary shows (medians over the runs)."""
    return [
        figure("plain", "Plain PySpark, all FDs", med["plain"], "s", 1),
        figure("ember", "ember (one captured grouping, FDs in-process)", med["ember"], "s", 1),
        figure("ratio", "ember / plain", med["ember"] / med["plain"], "x", 2),
        figure("checks", "In-process checks after the capture", med["checks"], "s", 2),
    ]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--bad", type=float, default=0.001, help="share of rows with an injected violation")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks", help="results folder (history/, pages)")
    a = p.parse_args(argv)
    run = Run("fd", a.out, argv)
    console = Console()
    spark = tpch.local_spark("ember-bench-fd", **{"spark.driver.memory": "8g"})
    with tempfile.TemporaryDirectory(prefix="ember-fd-") as tmp:
        path = Path(tmp) / "addresses.parquet"
        generate(path, a.rows, a.bad)
        df = spark.read.parquet(str(path))
        times: dict[str, list[float]] = {"plain": [], "ember": [], "checks": []}
        sizes: dict[int, int] = {}
        want: dict[int, Graph] = {}
        for k in range(a.runs):
            start = time.perf_counter()
            want = plain(df)
            t_plain = time.perf_counter() - start
            got, checks = ember_fd(df)
            t_ember = time.perf_counter() - start - t_plain
            assert got == want, "ember's graphs differ from the plain implementation's"
            sizes = {i: len({e[: len(FDS[i][0])] for e in g}) for i, g in want.items()}
            times["plain"].append(t_plain)
            times["ember"].append(t_ember)
            times["checks"].append(checks)
            console.print(f"run {k + 1}: plain {t_plain:.1f} s, ember {t_ember:.1f} s (checks {checks:.2f} s)")
    med = {k: statistics.median(v) for k, v in times.items()}
    table = Table(title=f"FD profiling, {a.rows:,} rows, {len(FDS)} FDs")
    for col in ("FD", "violating lhs values", "edges (rows)"):
        table.add_column(col)
    edges = {i: len(g) for i, g in want.items()}
    for i, (lhs, rhs) in enumerate(FDS):
        table.add_row(f"{','.join(lhs)} → {','.join(rhs)}", str(sizes[i]), str(edges[i]))
    console.print(table)
    ratio = med["ember"] / med["plain"]
    console.print(f"median: plain {med['plain']:.1f} s, ember {med['ember']:.1f} s (ratio {ratio:.2f}), in-process checks {med['checks']:.2f} s")
    rows_md = [f"| {','.join(lhs)} → {','.join(rhs)} | {sizes[i]} | {edges[i]} |" for i, (lhs, rhs) in enumerate(FDS)]
    body = f"""Local[2] Spark; read the ratio, not the seconds. Generated addresses ({a.rows:,} rows;
zip → city → state, zip → areacode) with violations injected into {a.bad:.1%} of the rows; both
implementations return the same bipartite graph (checked in the run): per violating lhs value, each
rhs value and the row ids behind it.

| FD | violating lhs values | edges (rows) |
|---|---|---|
{chr(10).join(rows_md)}

| implementation | median time for all {len(FDS)} FDs |
|---|---|
| plain PySpark: per FD group by lhs, count distinct rhs, join back, collect | {med['plain']:.1f} s |
| ember: one captured grouping over the FDs' columns, then each FD in-process | {med['ember']:.1f} s |
| of which the {len(FDS)} in-process checks after the capture | {med['checks']:.2f} s |
| ratio ember / plain | {ratio:.2f} |

Runs: plain {', '.join(f'{t:.1f}' for t in times['plain'])} s; ember {', '.join(f'{t:.1f}' for t in times['ember'])} s.

Where the time goes: the plain implementation scans the table twice per FD (the grouping and
the join back), {len(FDS) * 2} scans in all; ember runs one captured grouping over all the FDs' columns
(a scan plus the capture's side-table job), then answers each FD in-process from that index
(Smoke §6.5: the grouping's indexes are the violation graph, reused across FDs). The in-process
part is one backward trace per (lhs, rhs) pair of a violation, so it grows with the number of
violating pairs, not with the table."""
    rows = [
        {"fd": f"{','.join(lhs)} → {','.join(rhs)}", "violating": sizes[i], "edges": edges[i]}
        for i, (lhs, rhs) in enumerate(FDS)
    ]
    page = run.write("FD profiling benchmark", body.splitlines(), rows, headline(med), a, extra={"runs": times})
    console.print(f"wrote {page}")


if __name__ == "__main__":
    main()
