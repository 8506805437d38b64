"""Lineage store size and trace latency on TPC-H: raw int64 vs Parquet+zstd vs ember's encoding.

    .venv/bin/python -m bench.store --scale 1            # all 22 queries
    .venv/bin/python -m bench.store --scale 0.1 --queries 1 18 21

For each query: capture once, save the store, load it back, and measure
- lineage bytes three ways: plain int64 arrays, the same columns as Parquet with zstd
  (pyarrow defaults), and ember's store (run-encoded columns, delta-packed + zstd
  otherwise); each also as a share of the query's input bytes; plus the store's copies
  of reached source rows (`store.kept`), counted in ember's total;
- one-row traces on the loaded store: backward ids (the first trace after loading,
  and the median over 20 output rows), backward with rows (sources with ≤ 1,000 rows
  in the trace; first call after loading, then the median of 5), forward of one rid;
  and one-row backward ids on the Parquet+zstd form (columns read whole, then traced); and backward ids on the in-memory plain arrays,
  for comparison.
Writes the run's record and store.md (`bench.results`). Machines here are noisy: read
ratios, not milliseconds.
"""

from __future__ import annotations

import argparse
import io
import shutil
import statistics
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from rich.console import Console

import ember
from bench.common import (
    ROOT,
    Run,
    figure,
    input_bytes,
    median,
    ms_text,
    parser,
    per_query,
    timed,
    tpch_session,
    worst,
)
from devkit import tpch
from ember.store.columns import IntColumn, Plain
from ember.store.index import LineageIndex, as_plain, map_columns


def parquet_zstd(index: LineageIndex) -> dict[int, bytes]:
    """Each index column (by id) as a plain int64 Parquet file with zstd, pyarrow's defaults otherwise."""
    files = {}
    for level in (index.output, *index.tables):
        for col in level.columns():
            buf = io.BytesIO()
            pq.write_table(pa.table({"v": col.decode()}), buf, compression="zstd")
            files[id(col)] = buf.getvalue()
    return files


def parquet_zstd_trace(index: LineageIndex, files: dict[int, bytes], oid: int) -> None:
    """A trace on the Parquet+zstd form: every column read and decoded whole, then walked."""

    def read(col: IntColumn) -> IntColumn:
        return Plain(pq.read_table(io.BytesIO(files[id(col)])).column(0).to_numpy())

    map_columns(index, read).backward(np.array([oid]))


def folder_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.iterdir())


def sample_oids(lin: ember.Lineage, k: int = 20) -> list[int]:
    n = lin.output().num_rows
    return sorted({int(x) for x in np.linspace(0, n - 1, min(k, n))}) if n else []


def ms(seconds: float) -> float:
    return seconds * 1000


def measure(lin: ember.Lineage, store: Path) -> dict[str, float]:
    lin.save(str(store), overwrite=True)
    zstd = parquet_zstd(lin._index)
    loaded = ember.load(str(store))
    oids = sample_oids(loaded)
    nan = float("nan")
    row: dict[str, float] = {
        "raw": lin._index.raw_nbytes,
        "pq": sum(len(b) for b in zstd.values()),
        "index": folder_bytes(store / "index"),
        "kept": folder_bytes(store / "kept"),
    }
    row["ember"] = row["index"] + row["kept"]
    if not oids:
        return row | {"first": nan, "back": nan, "rows": nan, "rows_first": nan, "fwd": nan, "plain": nan, "pq_ms": nan}
    row["first"] = ms(timed(lambda: loaded.backward(oids=[oids[0]]))[0])
    row["back"] = ms(statistics.median(timed(lambda o=o: loaded.backward(oids=[o]))[0] for o in oids))
    plain = ember.Lineage(lin.output().drop_columns(["ember_oid"]), as_plain(lin._index), lin._sources.values())
    row["plain"] = ms(statistics.median(timed(lambda o=o: plain.backward(oids=[o]))[0] for o in oids))
    row["pq_ms"] = ms(statistics.median(timed(lambda: parquet_zstd_trace(lin._index, zstd, oids[0]))[0] for _ in range(3)))
    trace = loaded.backward(oids=[oids[0]])

    def with_rows() -> object:
        t = loaded.backward(oids=[oids[0]])
        return [t.rows(s) for s in t.sources if t.ids(s).size <= 1000]

    row["rows_first"] = ms(timed(with_rows)[0])  # includes checking the row copies' checksums
    row["rows"] = ms(statistics.median(timed(with_rows)[0] for _ in range(5)))
    source = max(trace.sources, key=lambda s: trace.ids(s).size, default=None)
    if source is None:
        return row | {"fwd": nan}
    rid = int(trace.ids(source)[0])
    row["fwd"] = ms(statistics.median(timed(lambda: loaded.forward(source, ids=[rid]))[0] for _ in range(20)))
    return row


def main(argv: list[str] | None = None) -> int:
    args = parser(__doc__).parse_args(argv)
    run = Run("store", args.out, argv)
    console = Console()
    spark, data = tpch_session(console, args.scale)
    stores = ROOT / "data" / "bench-stores"
    def one(n: int) -> tuple[int, int, dict[str, float]]:
        lin = ember.capture(tpch.query(spark, n), keep_rows=0)  # `save` makes the store's copies itself
        return n, input_bytes(data, lin.sources), measure(lin, stores / f"q{n}")

    results = per_query(console, args.queries, one)
    spark.stop()
    shutil.rmtree(stores, ignore_errors=True)
    console.print(f"wrote {write_report(run, args, results)}")
    return 0


def headline(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The figures the summary shows: bytes over all the queries' input, latencies per query."""
    total_in = sum(r["input"] for r in rows)

    def share(key: str) -> float | None:
        found = [r[key] for r in rows if r.get(key) is not None]
        return sum(found) / total_in if total_in and found else None

    back, back_q = worst(rows, "back")
    with_rows, rows_q = worst(rows, "rows")
    index, kept = share("index"), share("kept")
    return [
        figure("ember_share", "ember's store / input bytes, all queries", share("ember"), "%", 1,
               note=f"index {index * 100:.1f} %, row copies {kept * 100:.1f} %" if index is not None and kept is not None else None),
        figure("pq_share", "Parquet+zstd / input bytes", share("pq"), "%", 1),
        figure("raw_share", "Raw int64 / input bytes", share("raw"), "%", 1),
        figure("back", "Loaded store, one-row backward trace, ids, median", median(rows, "back"), "ms", 1,
               note=f"worst {ms_text(back)}, {back_q}" if back is not None else None),
        figure("first", "First trace after loading, median", median(rows, "first"), "ms", 1),
        figure("rows", "Loaded store, with rows, median", median(rows, "rows"), "ms", 1,
               note=f"worst {ms_text(with_rows)}, {rows_q}" if with_rows is not None else None),
        figure("pq_ms", "The same trace on the Parquet+zstd form, median", median(rows, "pq_ms"), "ms", 1),
    ]


def write_report(run: Run, args: argparse.Namespace, results: list[tuple[int, int, dict[str, float]]]) -> Path:
    total_in = sum(i for _, i, _ in results)
    totals = {k: sum(r[k] for _, _, r in results) for k in ("raw", "pq", "index", "kept", "ember")}

    def finite(key: str) -> list[float]:
        return [r[key] for _, _, r in results if r[key] == r[key]]

    lines = [
        "Bytes are the index files plus the store's copies "
        "of reached source rows (not the output or the sources); input = the Parquet files a query reads.",
        "",
        f"Over the {len(results)} queries: raw int64 {totals['raw'] / total_in:.1%} of input bytes, "
        f"Parquet+zstd {totals['pq'] / total_in:.1%}, ember {totals['ember'] / total_in:.1%} "
        f"(index {totals['index'] / total_in:.1%}, row copies {totals['kept'] / total_in:.1%}). "
        f"Loaded store, one-row backward ids: median {statistics.median(finite('back')):.1f} ms "
        f"(worst {max(finite('back')):.1f} ms; on the Parquet+zstd form median {statistics.median(finite('pq_ms')):.1f} ms, "
        f"worst {max(finite('pq_ms')):.0f} ms), "
        f"first trace after load median {statistics.median(finite('first')):.1f} ms; "
        f"with rows median {statistics.median(finite('rows')):.1f} ms, worst {max(finite('rows')):.0f} ms "
        f"(first call after loading: median {statistics.median(finite('rows_first')):.1f} ms, "
        f"worst {max(finite('rows_first')):.0f} ms).",
        "",
        "| query | input MB | raw MB | Parquet+zstd MB | ember index MB | row copies MB | ember / input "
        "| backward ms (plain in memory) | backward ms (Parquet+zstd) | backward ms (store) | first after load ms | first with rows ms | with rows ms "
        "| forward ms |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n, inb, r in results:
        lines.append(
            f"| Q{n} | {inb / 1e6:.0f} | {r['raw'] / 1e6:.2f} | {r['pq'] / 1e6:.2f} | {r['index'] / 1e6:.2f} | "
            f"{r['kept'] / 1e6:.2f} | "
            f"{r['ember'] / inb:.2%} | {r['plain']:.1f} | {r['pq_ms']:.1f} | {r['back']:.1f} | {r['first']:.1f} | "
            f"{r['rows_first']:.1f} | {r['rows']:.1f} | {r['fwd']:.1f} |"
        )
    rows = [{"n": n, "input": inb, **r} for n, inb, r in results]
    return run.write(f"Lineage store — TPC-H SF{args.scale:g}", lines, rows, headline(rows), args)


if __name__ == "__main__":
    raise SystemExit(main())
