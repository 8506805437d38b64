"""ember.arrays: lineage storage (DSLog Table VII), forward query latency, capture overhead.

    .venv/bin/python -m bench.arrays

(a) Storage of one operation's lineage on ~10^6-cell arrays: raw int64 coordinate rows,
    the same as a .npy file, Parquet (pyarrow defaults), Parquet+gzip, and ember
    (ProvRC tables through its codec). The raw relation of every captured op is read
    back from ember's tables (tests prove that equals the relation).
(b) Forward queries from a random 10x10 block through 20 random 5-step and 20 random
    10-step workflows on a 250x400 array: ember in situ vs the same lineage as Parquet
    tables joined hop by hop in DuckDB.
(c) Capture: the tracked workflow vs plain numpy, first run and with reuse warm.
Writes the run's record and arrays.md (`bench.results`).
"""

from __future__ import annotations

import argparse
import io
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench.common import ROOT, Run, figure, timed, worst
from ember import arrays
from ember.arrays.provrc import Relation, Table, compress

RNG = np.random.default_rng(7)


def relation_bytes(out: np.ndarray, inp: np.ndarray) -> dict[str, int]:
    rows = np.concatenate([out, inp], axis=1)
    table = pa.table({f"c{i}": rows[:, i] for i in range(rows.shape[1])})
    sizes = {"raw": rows.size * 8}
    buf = io.BytesIO()
    np.save(buf, rows)
    sizes["npy"] = buf.getbuffer().nbytes
    for name, codec in (("parquet", "snappy"), ("parquet_gzip", "gzip")):
        buf = io.BytesIO()
        pq.write_table(table, buf, compression=codec)
        sizes[name] = buf.getbuffer().nbytes
    return sizes


def measure_tables(tables: list[Table]) -> dict[str, int]:
    total: dict[str, int] = {}
    for t in tables:
        out, inp = t.decompress()
        total["pairs"] = total.get("pairs", 0) + len(out)
        for k, v in relation_bytes(out, inp).items():
            total[k] = total.get(k, 0) + v
    total["ember"] = sum(t.nbytes for t in tables)
    total["rows"] = sum(t.rows for t in tables)
    return total


def captured(f: Callable[..., arrays.TrackedArray], *values: np.ndarray) -> list[Table]:
    wf = arrays.Workflow()
    f(*(wf.track(v) for v in values))
    return [e.table for e in wf.edges]


def filter_relation(n: int) -> Relation:
    """3x3 zero-padded filter: output pixel ← the clipped 3x3 window around it."""
    out = np.indices((n, n)).reshape(2, -1).T
    return Relation(out, np.maximum(out - 1, 0), np.minimum(out + 1, n - 1), (n, n), (n, n))


def groupby_relation(n: int, groups: int) -> Relation:
    keys = RNG.integers(0, groups, n)
    return Relation.pairs(keys[:, None], np.arange(n)[:, None], (groups,), (n,))


def join_relations(n_left: int, n_right: int) -> list[Relation]:
    """Left rows (foreign key into right) ⋈ right rows; output row r ← left l_r and right q_r."""
    fk = RNG.integers(0, n_right, n_left)
    out = np.arange(n_left)[:, None]
    return [
        Relation.pairs(out, np.arange(n_left)[:, None], (n_left,), (n_left,)),
        Relation.pairs(out, fk[:, None], (n_left,), (n_right,)),
    ]


def storage() -> list[tuple[str, dict[str, int]]]:
    a, b = RNG.random((1000, 1000)), RNG.random((1000, 1000))
    m = RNG.random((100, 100))
    cases: list[tuple[str, Callable[[], list[Table]]]] = [
        ("Negative", lambda: captured(lambda x: -x, a)),
        ("Addition", lambda: captured(lambda x, y: x + y, a, b)),
        ("Aggregate (sum axis=1)", lambda: captured(lambda x: np.sum(x, axis=1), a)),
        ("Repetition (tile 1x2)", lambda: captured(lambda x: np.tile(x, (1, 2)), a)),
        ("Matrix*Vector", lambda: captured(lambda x, v: x @ v, a, b[0])),
        ("Matrix*Matrix (100x100)", lambda: captured(lambda x, y: x @ y, m, m.T.copy())),
        ("Sort (1-D, 10^6)", lambda: captured(np.sort, a.ravel())),
        ("ImgFilter (3x3, 1000²)", lambda: [compress(filter_relation(1000))]),
        ("Group By (10^6 rows, 1000 keys)", lambda: [compress(groupby_relation(10**6, 1000))]),
        ("Inner Join (10^6 ⋈ 10^4)", lambda: [compress(r) for r in join_relations(10**6, 10**4)]),
    ]
    return [(name, measure_tables(make())) for name, make in cases]


# --- (b) queries and (c) capture -------------------------------------------------------

Step = Callable[[arrays.TrackedArray], arrays.TrackedArray]
STEPS: list[Step] = [
    lambda x: -x,
    np.exp,
    np.tanh,
    lambda x: np.sqrt(np.abs(x)),
    lambda x: x * 0.5 + 1,
    lambda x: x + np.roll(x, 1, axis=0),
    lambda x: x.T,
    lambda x: np.flip(x, axis=1),
    lambda x: np.sum(x, axis=1, keepdims=True) - x,
    lambda x: x[1:, :] - x[:-1, :],
    lambda x: np.concatenate([x[:, 1:], x[:, :1]], axis=1),
]


def workflow(
    picks: list[int], x: np.ndarray, track: bool, reuse: arrays.Reuse | None = None
) -> tuple[object, float]:
    def run() -> object:
        if not track:
            y = x
            for p in picks:
                y = STEPS[p](y)  # type: ignore[arg-type]
            return y
        wf = arrays.Workflow(reuse=reuse if reuse is not None else True)
        a = wf.track(x, name="a")
        y = a
        for p in picks:
            y = STEPS[p](y)
        return wf, a, y

    seconds, result = timed(run)
    return result, seconds


def duckdb_forward(
    con: duckdb.DuckDBPyConnection,
    folder: Path,
    wf: arrays.Workflow,
    start: int,
    target: int,
    cells: np.ndarray,
) -> None:
    """Hop-by-hop joins of the query cells with each edge's Parquet table, in node order."""
    con.register("q", pa.table({"c0": cells[:, 0], "c1": cells[:, 1]}))
    con.execute(f"create or replace temp table n{start} as select * from q")
    for n in range(start + 1, target + 1):
        parts = []
        for i, e in enumerate(wf.edges):
            if e.dst != n:
                continue
            src = len(wf.nodes[e.src].shape)
            dst = len(wf.nodes[e.dst].shape)
            on = " and ".join(f"t.s{k} = p.c{k}" for k in range(src))
            cols = ", ".join(f"t.d{k} as c{k}" for k in range(dst))
            parts.append(
                f"select {cols} from read_parquet('{folder}/{i}.parquet') t join n{e.src} p on {on}"
            )
        if parts:
            con.execute(
                f"create or replace temp table n{n} as select distinct * from ({' union all '.join(parts)})"
            )
        else:
            con.execute(f"create or replace temp table n{n} as select 0 as c0, 0 as c1 where false")


def queries(steps: int, count: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {
        "ember": [],
        "duckdb": [],
        "capture": [],
        "capture_warm": [],
        "numpy": [],
    }
    x = RNG.random((250, 400))
    for _ in range(count):
        picks = [int(p) for p in RNG.integers(0, len(STEPS), steps)]
        _, plain = workflow(picks, x, track=False)
        cache = arrays.Reuse()
        (wf, a, y), first = workflow(picks, x, track=True, reuse=cache)  # type: ignore[misc]
        _, warm = workflow(picks, x, track=True, reuse=cache)
        times["numpy"].append(plain)
        times["capture"].append(first)
        times["capture_warm"].append(warm)
        r, c = int(RNG.integers(0, 240)), int(RNG.integers(0, 390))
        block = np.array([(i, j) for i in range(r, r + 10) for j in range(c, c + 10)])
        got_seconds, got = timed(lambda wf=wf, a=a, y=y, block=block: wf.forward(a, block, to=y))
        times["ember"].append(got_seconds)
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            for i, e in enumerate(wf.edges):
                out, inp = e.table.decompress()
                cols = {f"s{k}": inp[:, k] for k in range(inp.shape[1])} | {
                    f"d{k}": out[:, k] for k in range(out.shape[1])
                }
                pq.write_table(pa.table(cols), folder / f"{i}.parquet")
            con = duckdb.connect()
            con.execute("set threads to 2")
            seconds, _ = timed(
                lambda con=con, folder=folder, wf=wf, a=a, y=y, block=block: duckdb_forward(
                    con, folder, wf, a._node, y._node, block
                )
            )
            want = con.execute(f"select * from n{y._node} order by all").fetchnumpy()
            con.close()
        times["duckdb"].append(seconds)
        assert len(want["c0"]) == len(got), "ember and DuckDB disagree"
    return times


ELEMENTWISE = 6  # the first storage cases: element-wise, aggregation, repetition, products


def headline(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The figures the summary shows."""
    storage = [r for r in rows if r["part"] == "storage"]
    shares = [dict(r, share=r["ember"] / r["raw"]) for r in storage[:ELEMENTWISE]]
    top, top_op = worst(shares, "share", lambda r: r["operation"])
    gains = [dict(r, gain=-r["parquet_gzip"] / r["ember"]) for r in storage]
    least, least_op = worst(gains, "gain", lambda r: r["operation"])
    steps = {r["steps"]: r for r in rows if r["part"] == "queries"}
    figs = [
        figure("elementwise", "Element-wise and aggregation lineage / raw, largest", top, "%", 4, note=top_op),
        figure("vs_gzip", "Parquet+gzip / ember, smallest", -least if least is not None else None, "x", 1,
               note=least_op),
    ]
    for n, r in steps.items():
        figs.append(figure(f"forward_{n}", f"Forward query vs DuckDB joins, {n} steps (median of ratios)",
                           r["speedup"], "x", note=f"{r['ember'] * 1000:.1f} ms vs {r['duckdb'] * 1000:.1f} ms"))
    if steps:
        r = steps[max(steps)]
        figs.append(figure("capture", f"First capture / plain numpy, {max(steps)} steps (medians)",
                           r["capture"] / r["numpy"], "x", note=f"reuse warm: {r['capture_warm'] / r['numpy']:.1f}\u00d7"))
    return figs


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks", help="results folder (history/, pages)")
    args = p.parse_args(argv)
    run = Run("arrays", args.out, argv)
    warnings.simplefilter("ignore", arrays.LineageWarning)
    np.seterr(all="ignore")  # random workflows overflow exp; lineage does not care
    rows: list[dict[str, Any]] = []
    lines = [
        f"numpy {np.__version__}; no Spark.",
        "",
        "## (a) Lineage storage (DSLog Table VII operations)",
        "",
        "Bytes of one operation's lineage; % of raw in parentheses. Raw: int64 coordinate rows "
        "(output cell, input cell). ember: ProvRC tables through ember's codec (what "
        "`lineage_bytes()` reports and `save` writes).",
        "",
        "| operation | lineage pairs | raw | .npy | Parquet | Parquet+gzip | ember | ProvRC rows | Parquet+gzip / ember |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, s in storage():
        rows.append({"part": "storage", "operation": name, **s})
        pct = {k: 100 * s[k] / s["raw"] for k in ("npy", "parquet", "parquet_gzip", "ember")}
        lines.append(
            f"| {name} | {s['pairs']:,} | {s['raw'] / 1e6:.2f} MB | {s['npy'] / 1e6:.2f} MB ({pct['npy']:.0f}%) "
            f"| {s['parquet'] / 1e6:.3f} MB ({pct['parquet']:.2f}%) | {s['parquet_gzip'] / 1e6:.3f} MB ({pct['parquet_gzip']:.3f}%) "
            f"| {s['ember']:,} B ({pct['ember']:.4f}%) | {s['rows']:,} | {s['parquet_gzip'] / s['ember']:.1f}x |"
        )
        print(lines[-1], flush=True)
    big = RNG.random((1000, 1000))
    start = time.perf_counter()
    tables = captured(lambda x, y: x @ y, big, big.T.copy())
    seconds = time.perf_counter() - start
    mm = {"bytes": sum(t.nbytes for t in tables), "rows": sum(t.rows for t in tables), "seconds": seconds}
    lines += [
        "",
        f"Matrix*Matrix at 1000x1000 (2x10^9 raw pairs, 64 GB as int64; no baseline can hold "
        f"it): ember stores {mm['bytes']:,} bytes in {mm['rows']} ProvRC rows after a {seconds:.1f} s capture.",
    ]
    lines += [
        "",
        "## (b) Forward queries and (c) capture overhead",
        "",
        "20 random workflows each over a 250x400 (100,000-cell) array, steps drawn from: "
        "negative, exp, tanh, sqrt(abs), affine, x + roll(x), transpose, flip, "
        "row-sum minus x, row difference (slices), rotate columns (concatenate of slices). "
        "Query: forward from a random 10x10 block to the last array. DuckDB: each edge's raw "
        "lineage as a Parquet file, joined hop by hop (2 threads). Medians (min-max).",
        "",
        "| workflows | ember query | DuckDB query | speed-up | plain numpy | tracked, first run | tracked, reuse warm |",
        "|---|---|---|---|---|---|---|",
    ]
    for steps in (5, 10):
        t = queries(steps, 20)

        def fmt(v: list[float]) -> str:
            return f"{statistics.median(v) * 1000:.1f} ms ({min(v) * 1000:.1f}-{max(v) * 1000:.1f})"

        speed = statistics.median(d / e for d, e in zip(t["duckdb"], t["ember"], strict=True))
        row: dict[str, Any] = {"part": "queries", "steps": steps, "speedup": speed}
        for k, v in t.items():
            row |= {k: statistics.median(v), f"{k}_min": min(v), f"{k}_max": max(v)}
        rows.append(row)
        lines.append(
            f"| {steps} steps | {fmt(t['ember'])} | {fmt(t['duckdb'])} | {speed:.0f}x (median of ratios) "
            f"| {fmt(t['numpy'])} | {fmt(t['capture'])} | {fmt(t['capture_warm'])} |"
        )
        print(lines[-1], flush=True)
    page = run.write("ember.arrays benchmarks", lines, rows, headline(rows), args, extra={"matmul_1000": mm})
    print(f"wrote {page}")


if __name__ == "__main__":
    main()
