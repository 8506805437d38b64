"""Capture over Spark Connect against the same capture on a classic session, on TPC-H.

    .venv/bin/python -m bench.connect --scale 1 --runs 3          # all 22 queries
    .venv/bin/python -m bench.connect --scale 0.1 --queries 1 3 6

A Connect server with ember's plugin (`devkit.connect.server`, local[2], on loopback)
runs beside a classic local[2] session in this process, with the same settings (6g
drivers: two of them fit a 24 GB machine beside other work). Per
query, after a warm-up, `--runs` rounds alternate four jobs: the plain job on the
classic session, `ember.capture(..., strategy="inject")` there, then the same two over
Connect (the plain job is `df.toArrow()` over Connect). Reported: medians, each path's
Inject overhead against its own plain job, what Connect adds to the plain job and to the
capture, and one-row trace latencies (backward ids, forward) of both lineages, which
are answered in this process either way. Only one path's jobs run at a time, but both
JVMs share the machine's cores: read ratios, not seconds.

Each round also infers the query on both paths (`ember.infer`: the job runs untouched,
the plan is read; against the path's plain job), and after the rounds an exact one-row
backward trace of each inferred lineage is timed, alternating (lazy traces read the
sources, and re-run the job where the plan needs it).

A third capture per round, over Connect with `spark.ember.sourceReads=spark`, measures
a client that cannot read the server's files (`engines.spark.served`): its side tables
are the server's jobs and traced rows come through a Spark job (`served` columns; the
one-row trace with rows is where that shows).
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.connect.session import SparkSession as RemoteSession
from rich.console import Console

import ember
from bench.capture import trace_latency
from bench.common import Run, figure, median, parser, per_query, settled, timed, tpch_session, worst
from devkit import connect, tpch
from ember.engines.spark.served import READS

MEMORY = "6g"
SETTINGS = {"spark.sql.shuffle.partitions": "8", "spark.driver.memory": MEMORY}


def main(argv: list[str] | None = None) -> int:
    args = parser(__doc__, runs=3).parse_args(argv)
    run = Run("connect", args.out, argv)
    console = Console()
    spark, data = tpch_session(console, args.scale, MEMORY)
    with tempfile.TemporaryDirectory() as scratch, connect.server(Path(scratch) / "server.log", **SETTINGS) as url:
        remote = RemoteSession.builder.remote(url).getOrCreate()
        tpch.register(remote, data)  # type: ignore[arg-type]
        results = per_query(console, args.queries, lambda n: measure(spark, remote, n, args.runs))
        remote.stop()
    spark.stop()
    console.print(f"wrote {write_report(run, args, results)}")
    return 0


def measure(spark: SparkSession, remote: RemoteSession, n: int, runs: int) -> dict[str, Any]:
    sessions: dict[str, Any] = {"classic": spark, "connect": remote}
    times: dict[str, list[float]] = {f"{p}_{j}": [] for p in sessions for j in ("plain", "inject", "infer", "lazy")}
    times["served_inject"] = []
    lineages: dict[str, ember.Lineage] = {}
    inferred: dict[str, ember.InferredLineage] = {}
    for round_ in range(runs + 1):  # round 0 warms up
        for path, session in sessions.items():
            plain, _ = timed(lambda s=session: tpch.query(s, n).toArrow())
            took, lineages[path] = timed(lambda s=session: ember.capture(tpch.query(s, n), strategy="inject"))
            settled(lineages[path])
            guessed, inferred[path] = timed(lambda s=session: ember.infer(tpch.query(s, n)))
            if round_:
                times[f"{path}_plain"].append(plain)
                times[f"{path}_inject"].append(took)
                times[f"{path}_infer"].append(guessed)
        remote.conf.set(READS, "spark")
        try:
            took, lineages["served"] = timed(lambda: ember.capture(tpch.query(remote, n), strategy="inject"))
            settled(lineages["served"])
        finally:
            remote.conf.unset(READS)
        if round_:
            times["served_inject"].append(took)
    for _ in range(runs):
        for path, lazy in inferred.items():
            source = lazy.sources[0]
            times[f"{path}_lazy"].append(timed(lambda lazy=lazy, source=source: lazy.backward(oids=[0]).ids(source))[0] * 1000)
    med = {k: statistics.median(v) for k, v in times.items()}
    traces = {path: trace_latency(lin) for path, lin in lineages.items()}
    return {
        "n": n,
        **med,
        "classic_over": med["classic_inject"] / med["classic_plain"] - 1,
        "connect_over": med["connect_inject"] / med["connect_plain"] - 1,
        "plain_added": med["connect_plain"] - med["classic_plain"],
        "inject_added": med["connect_inject"] - med["classic_inject"],
        "classic_back": traces["classic"][0],
        "connect_back": traces["connect"][0],
        "classic_fwd": traces["classic"][2],
        "connect_fwd": traces["connect"][2],
        "served_over": med["served_inject"] / med["connect_plain"] - 1,
        "connect_rows": traces["connect"][1],
        "served_rows": traces["served"][1],
        "served_back": traces["served"][0],
        "classic_infer_over": med["classic_infer"] / med["classic_plain"] - 1,
        "connect_infer_over": med["connect_infer"] / med["connect_plain"] - 1,
    }


def headline(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    over, over_q = worst(results, "connect_over")
    return [
        figure("connect_median", "Inject overhead over Connect, median", median(results, "connect_over"), "%"),
        figure("connect_worst", "Inject overhead over Connect, worst", over, "%", note=over_q),
        figure("classic_median", "Inject overhead on a classic session (same run), median", median(results, "classic_over"), "%"),
        figure("connect_back", "One-row backward trace over Connect, ids, median", median(results, "connect_back"), "ms", 1),
        figure("classic_back", "One-row backward trace on a classic session, ids, median", median(results, "classic_back"), "ms", 1),
        figure("served_median", "Inject overhead over Connect, files read by the server, median", median(results, "served_over"), "%"),
        figure("served_rows", "One-row backward trace with rows, files read by the server, median", median(results, "served_rows"), "ms", 1),
        figure("connect_rows", "One-row backward trace with rows over Connect, files read here, median", median(results, "connect_rows"), "ms", 1),
        figure("connect_infer", "ember.infer over Connect against the plain job, median", median(results, "connect_infer_over"), "%"),
        figure("classic_infer", "ember.infer on a classic session against the plain job, median", median(results, "classic_infer_over"), "%"),
        figure("connect_lazy", "Exact one-row lazy trace over Connect, median", median(results, "connect_lazy"), "ms", 1),
        figure("classic_lazy", "Exact one-row lazy trace on a classic session, median", median(results, "classic_lazy"), "ms", 1),
    ]


def write_report(run: Run, args: Any, results: list[dict[str, Any]]) -> object:
    lines = [
        f"Medians of {args.runs} alternating rounds after a warm-up; each path's Inject overhead is against its "
        "own plain job in the same run. *added*: seconds Connect adds to the classic session's time.",
        "",
        "| query | classic plain s | classic inject | Connect plain s | Connect inject | plain added s | inject added s "
        "| backward ids ms classic / Connect | forward ms classic / Connect | served inject "
        "| with rows ms Connect / served | infer classic / Connect | lazy trace ms classic / Connect |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| Q{int(r['n'])} | {r['classic_plain']:.2f} | {r['classic_over']:.0%} | {r['connect_plain']:.2f} | "
        f"{r['connect_over']:.0%} | {r['plain_added']:+.2f} | {r['inject_added']:+.2f} | "
        f"{r['classic_back']:.1f} / {r['connect_back']:.1f} | {r['classic_fwd']:.1f} / {r['connect_fwd']:.1f} | "
        f"{r['served_over']:.0%} | {r['connect_rows']:.1f} / {r['served_rows']:.1f} | "
        f"{r['classic_infer_over']:.0%} / {r['connect_infer_over']:.0%} | {r['classic_lazy']:.1f} / {r['connect_lazy']:.1f} |"
        for r in results
    ]
    lines += ["", "*served*: the capture over Connect with `spark.ember.sourceReads=spark` (the client reads no "
              "source file: side tables are the server's jobs, traced rows a Spark job), against the Connect plain job. "
              "*infer*: `ember.infer` against the path's plain job; *lazy trace*: its exact backward trace of output row 0."]
    return run.write(f"Capture over Spark Connect — TPC-H SF{args.scale:g}, local[2]", lines, results, headline(results), args)


if __name__ == "__main__":
    raise SystemExit(main())
