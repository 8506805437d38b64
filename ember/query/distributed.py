"""Traces too big for one process, as Spark jobs over a saved store (Titian's directed
approach).

Backward: the traced row numbers are the only thing that starts on the driver. At each
level they are sent to the tasks that read the row groups holding them (a plain column)
or looked up in broadcast runs; ranges into lower levels become row numbers there, and
so on down to source rids. Forward: each level's rid columns are semi-joined with the
traced rids, and marks climb through ref ranges by a range join. Nothing is collected:
results are DataFrames.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import nullcontext
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ember.capture.spark_build import parquet_rid
from ember.errors import EmberError
from ember.fetch.rows import RID
from ember.plan.sources import Source
from ember.query.trace import OID, source_by_name
from ember.store.columns import IntColumn, Runs
from ember.store.files import ROW_GROUP, StoredPlain, filesystem, read_manifest

ROW = "row"


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
        numbered = table.select("*", parquet_rid(src).alias(RID))
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
    traced = spark.createDataFrame(pa.table({RID: pa.array(rids, pa.int64())}))
    marks: list[DataFrame | None] = []
    for level in walk.manifest["levels"]:
        marks.append(walk.marked(level, source.key, traced, marks))
    out = walk.marked(walk.manifest["output_level"], source.key, traced, marks)
    if out is None:
        return spark.createDataFrame([], f"{OID} long")
    return out.select(F.col(ROW).alias(OID))


class _Walk:
    def __init__(self, spark: SparkSession, store: str):
        self.spark = spark
        self.fs, self.root = filesystem(store)
        self.manifest = read_manifest(self.fs, self.root, store)
        self.base = self.root if "://" in store else "file://" + self.root

    def visit(
        self, level: dict[str, Any], rows: DataFrame, found: dict[str, list[DataFrame]], pending: dict[int, list[DataFrame]]
    ) -> None:
        for r in level["rids"]:
            vals = self.values(r["column"], rows, RID)
            found.setdefault(r["source"], []).append(vals.filter(F.col(RID) >= 0).select(RID))
        for r in level["refs"]:
            spans = self.values(r["start"], rows, "start").join(self.values(r["end"], rows, "end"), ROW)
            pending.setdefault(r["table"], []).append(spans.filter("end > start").select("start", "end"))

    def marked(
        self, level: dict[str, Any], key: str, traced: DataFrame, marks: list[DataFrame | None]
    ) -> DataFrame | None:
        """Rows of a level holding a traced rid, or pointing at a marked row of a lower level."""
        parts = []
        for r in level["rids"]:
            if r["source"] == key:
                col = self.whole(r["column"], "v")
                parts.append(col.join(traced, col["v"] == traced[RID], "left_semi").select(ROW))
        for r in level["refs"]:
            below = marks[r["table"]]
            if below is not None:
                spans = self.whole(r["start"], "start").join(self.whole(r["end"], "end"), ROW)
                hit = below.select(F.col(ROW).alias("m"))
                cond = (hit["m"] >= spans["start"]) & (hit["m"] < spans["end"])
                parts.append(spans.join(hit, cond, "left_semi").select(ROW))
        return _union(parts).distinct() if parts else None

    def whole(self, meta: dict[str, Any], name: str) -> DataFrame:
        """A column as (row, value), read by the executors."""
        if meta["encoding"] == "plain":
            col = self.spark.read.parquet(f"{self.base}/{meta['file']}")
            return col.select(F.col("_metadata.row_index").alias(ROW), F.col("v").alias(name))
        return self.values(meta, self.spark.range(int(meta["rows"])).select(F.col("id").alias(ROW)), name)

    def values(self, meta: dict[str, Any], rows: DataFrame, name: str) -> DataFrame:
        """(row, value) for the traced rows; the traced row numbers go to the data, not back.

        Plain columns: rows are partitioned by row group, and each task reads only its
        row groups of the column file. Runs: small, broadcast, looked up by arithmetic.
        """
        if meta["encoding"] == "plain":
            uri = f"{self.base}/{meta['file']}"
            parts = max(1, min(self.spark.sparkContext.defaultParallelism * 2, -(-int(meta["rows"]) // ROW_GROUP)))
            rows = rows.repartition(parts, (F.col(ROW) / ROW_GROUP).cast("long"))

            def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
                fs, path = filesystem(uri)
                column = StoredPlain(pq.ParquetFile(fs.open_input_file(path)), 0, nullcontext)
                for batch in batches:
                    yield _looked_up(column, batch, name)

            return rows.mapInArrow(read, f"{ROW} long, {name} long")
        runs = pq.read_table(f"{self.root}/{meta['file']}", filesystem=self.fs)
        shared = self.spark.sparkContext.broadcast(
            (*(runs.column(c).to_numpy() for c in ("start", "base", "step")), int(meta["rows"]))
        )

        def lookup(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            column = Runs(*shared.value)
            for batch in batches:
                yield _looked_up(column, batch, name)

        return rows.mapInArrow(lookup, f"{ROW} long, {name} long")


def _looked_up(column: IntColumn, batch: pa.RecordBatch, name: str) -> pa.RecordBatch:
    at = np.sort(batch.column(0).to_numpy())
    return pa.record_batch([pa.array(at), pa.array(column.take(at))], names=[ROW, name])


def _union(parts: list[DataFrame]) -> DataFrame:
    out = parts[0]
    for p in parts[1:]:
        out = out.unionByName(p)
    return out
