"""Traces too big for one process, as Spark jobs over a saved store (Titian's directed
approach).

Backward: the traced row numbers are the only thing that starts on the driver. At each
level they are sent to the tasks that read the row groups (or parts) holding them;
ranges into lower levels become row numbers there, and so on down to source rids.

Forward: each level is read by tasks that each take a stretch of its rows (no shuffle):
rows holding a traced rid (broadcast) are marked, and so are rows whose ref range holds
a marked row of a lower level, found by binary search in that level's marks, which are
broadcast too while they are few (`MAX_MARKS`); past that they stay a DataFrame and the
ranges are matched by a range join. Results are DataFrames; only traced ids move.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ember.engines.spark.numbering import parquet_rid
from ember.errors import EmberError
from ember.plan.sources import OID, RID, Source
from ember.query.trace import source_by_name
from ember.store.columns import IntColumn, isin_sorted, sorted_unique
from ember.store.files import ROW_GROUP, filesystem, open_column, read_manifest

ROW = "row"
CHUNK = 16 * ROW_GROUP  # rows of a level one forward task reads
MAX_MARKS = 8_000_000  # marked rows of a level broadcast to the next one's tasks (64 MB)

Marks = np.ndarray | DataFrame  # a level's marked rows: sorted, on the driver, or on the cluster


class SparkTrace:
    """A backward trace whose rids stay on the cluster."""

    def __init__(self, spark: SparkSession, sources: Mapping[str, Source], ids: Mapping[str, DataFrame]):
        self._spark = spark
        self._sources = dict(sources)
        self._ids = dict(ids)
        self.exact = True

    @property
    def sources(self) -> list[str]:
        """Sources the plan can reach from the traced rows (a trace may still find none of their rows)."""
        return sorted(n for n, s in self._sources.items() if s.key in self._ids)

    def ids(self, name: str) -> DataFrame:
        """The distinct `ember_rid`s of source `name` in the lineage (one column, unordered)."""
        src = source_by_name(self._sources, name)
        if src.key not in self._ids:
            return self._spark.createDataFrame([], f"{RID} long")
        return self._ids[src.key]

    def rows(self, name: str) -> DataFrame:
        """Those rows of a Parquet source, read by the executors, with `ember_rid`."""
        src = source_by_name(self._sources, name)
        if src.kind != "parquet":
            raise EmberError(f"rows on Spark are read from Parquet sources; {name!r} is {src.kind}")
        table = self._spark.read.parquet(*[f.uri for f in src.files])
        numbered = table.select("*", parquet_rid(table, src).alias(RID))
        return numbered.join(self.ids(name), RID, "left_semi")


def backward(spark: SparkSession, store: str, sources: Mapping[str, Source], oids: np.ndarray) -> SparkTrace:
    walk = _Walk(spark, store)
    rows = spark.createDataFrame(pa.table({ROW: pa.array(oids, pa.int64())}))
    pending: dict[int, list[DataFrame]] = {}
    found: dict[str, list[DataFrame]] = {}
    walk.visit(walk.manifest["output_level"], rows, found, pending)
    for tid in range(len(walk.manifest["levels"]) - 1, -1, -1):
        ranges = pending.pop(tid, [])
        if ranges:
            spans = _union(ranges).distinct()
            rows = spans.select(F.explode(F.sequence("start", F.col("end") - 1)).alias(ROW)).distinct()
            walk.visit(walk.manifest["levels"][tid], rows, found, pending)
    ids = {key: _union(parts).distinct() for key, parts in found.items()}
    return SparkTrace(spark, sources, ids)


def forward(spark: SparkSession, store: str, source: Source, rids: np.ndarray) -> DataFrame:
    """`ember_oid`s of the output rows reached by `rids` of `source`, as a DataFrame."""
    walk = _Walk(spark, store)
    traced = sorted_unique([np.asarray(rids, dtype=np.int64)])
    marks: list[Marks | None] = []
    for level in walk.manifest["levels"]:
        hit = walk.marked(level, source.key, traced, marks)
        marks.append(None if hit is None else _settled(hit))
    out = walk.marked(walk.manifest["output_level"], source.key, traced, marks)
    if out is None:
        return spark.createDataFrame([], f"{OID} long")
    return out.select(F.col(ROW).alias(OID))


def _settled(hit: DataFrame) -> Marks | None:
    """A level's marks, brought to the driver (to be broadcast) unless there are many."""
    few = hit.limit(MAX_MARKS + 1).toArrow().column(ROW).to_numpy()
    if few.size > MAX_MARKS:
        return hit
    return np.sort(few) if few.size else None


class _Walk:
    def __init__(self, spark: SparkSession, store: str):
        self.spark = spark
        self.fs, self.root = filesystem(store)
        self.manifest = read_manifest(self.fs, self.root, store)
        self.base = self.root if "://" in store else "file://" + self.root
        self.sizes: dict[str, int] = self.manifest["files"]

    def visit(
        self, level: dict[str, Any], rows: DataFrame, found: dict[str, list[DataFrame]], pending: dict[int, list[DataFrame]]
    ) -> None:
        for r in level["rids"]:
            vals = self.values(r["column"], rows, RID)
            found.setdefault(r["source"], []).append(vals.filter(F.col(RID) >= 0).select(RID))
        for r in level["refs"]:
            spans = self.values(r["start"], rows, "start").join(self.values(r["end"], rows, "end"), ROW)
            pending.setdefault(r["table"], []).append(spans.filter("end > start").select("start", "end"))

    def values(self, meta: dict[str, Any], rows: DataFrame, name: str) -> DataFrame:
        """(row, value) for the traced rows; the traced row numbers go to the data, not back.

        Rows are partitioned by row group, and each task reads only the row groups (of a
        plain column or of the parts) holding its rows; run-encoded columns are read whole."""
        parts = max(1, min(self.spark.sparkContext.defaultParallelism * 2, -(-int(meta["rows"]) // ROW_GROUP)))
        rows = rows.repartition(parts, (F.col(ROW) / ROW_GROUP).cast("long"))
        opener = self._opener(meta)

        def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            column = opener()
            for batch in batches:
                at = np.sort(batch.column(0).to_numpy())
                yield pa.record_batch([pa.array(at), pa.array(column.take(at))], names=[ROW, name])

        return rows.mapInArrow(read, f"{ROW} long, {name} long")

    def _opener(self, meta: dict[str, Any]) -> Callable[[], IntColumn]:
        """Opens a column where a task runs (it reads the store by its URI)."""
        base, sizes = self.base, self.sizes

        def column() -> IntColumn:
            fs, root = filesystem(base)
            return open_column(fs, root, meta, sizes)

        return column

    def marked(
        self, level: dict[str, Any], key: str, traced: np.ndarray, marks: list[Marks | None]
    ) -> DataFrame | None:
        """Rows of a level holding a traced rid, or pointing at a marked row of a lower level."""
        rids = [self._opener(r["column"]) for r in level["rids"] if r["source"] == key]
        near = [(self._opener(r["start"]), self._opener(r["end"]), marks[r["table"]]) for r in level["refs"]
                if isinstance(marks[r["table"]], np.ndarray)]
        far = [r for r in level["refs"] if isinstance(marks[r["table"]], DataFrame)]
        parts = [self._joined(r, marks[r["table"]]) for r in far]
        if (rids and traced.size) or near:
            parts.append(self._scanned(level["rows"], rids, traced, near))
        return _union(parts).distinct() if parts else None

    def _scanned(
        self,
        rows: int,
        rids: list[Callable[[], IntColumn]],
        traced: np.ndarray,
        near: list[tuple[Callable[[], IntColumn], Callable[[], IntColumn], Any]],
    ) -> DataFrame:
        """Marks found by tasks that each read a stretch of the level's rows."""
        shared = self.spark.sparkContext.broadcast((traced, [m for _, _, m in near]))
        chunk = CHUNK
        tasks = max(1, min(-(-rows // chunk), 4 * self.spark.sparkContext.defaultParallelism))
        stretches = self.spark.range(0, rows, chunk, numPartitions=tasks)

        def scan(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            wanted, below = shared.value
            columns = [open_rid() for open_rid in rids]
            spans = [(s(), e()) for s, e, _ in near]
            for batch in batches:
                for lo in batch.column(0).to_numpy().tolist():
                    at = np.arange(lo, min(lo + chunk, rows), dtype=np.int64)
                    hit = np.zeros(at.size, dtype=bool)
                    for col in columns:
                        hit |= isin_sorted(col.take(at), wanted)
                    for (start, end), m in zip(spans, below, strict=True):
                        hit |= np.searchsorted(m, start.take(at)) < np.searchsorted(m, end.take(at))
                    yield pa.record_batch([pa.array(at[hit])], names=[ROW])

        return stretches.mapInArrow(scan, f"{ROW} long")

    def _joined(self, ref: dict[str, Any], below: DataFrame) -> DataFrame:
        """Rows whose range holds a marked row of a lower level with many marks: a range join."""
        rows = self.spark.range(int(ref["start"]["rows"])).select(F.col("id").alias(ROW))
        spans = self.values(ref["start"], rows, "start").join(self.values(ref["end"], rows, "end"), ROW)
        hit = below.select(F.col(ROW).alias("m"))
        cond = (hit["m"] >= spans["start"]) & (hit["m"] < spans["end"])
        return spans.join(hit, cond, "left_semi").select(ROW)


def _union(parts: list[DataFrame]) -> DataFrame:
    out = parts[0]
    for p in parts[1:]:
        out = out.unionByName(p)
    return out
