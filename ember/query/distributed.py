"""Backward traces too big for one process, as Spark jobs over a saved store (Titian's
directed approach).

The traced row numbers are the only thing that starts on the driver. At each level they
are joined with the level's column files, which the executors read where they lie;
ranges into lower levels become row numbers there, and so on down to source rids.
Nothing is collected: `ids(name)` and `rows(name)` are DataFrames.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
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
from ember.query.trace import source_by_name
from ember.store.columns import Runs
from ember.store.files import filesystem, read_manifest

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
    fs, root = filesystem(store)
    manifest = read_manifest(fs, root, store)
    base = root if "://" in store else "file://" + root
    walk = _Walk(spark, base, fs, root)
    rows = spark.createDataFrame(pa.table({ROW: pa.array(oids, pa.int64())}))
    walk.visit(manifest["output_level"], rows)
    for tid in range(len(manifest["levels"]) - 1, -1, -1):
        ranges = walk.pending.pop(tid, [])
        if ranges:
            spans = _union(ranges).distinct()
            rows = spans.select(F.explode(F.sequence("start", F.col("end") - 1)).alias(ROW)).distinct()
            walk.visit(manifest["levels"][tid], rows)
    ids = {key: _union(parts).distinct() for key, parts in walk.found.items()}
    return SparkTrace(spark, sources, ids)


class _Walk:
    def __init__(self, spark: SparkSession, base: str, fs: Any, root: str):
        self.spark, self.base, self.fs, self.root = spark, base, fs, root
        self.found: dict[str, list[DataFrame]] = {}
        self.pending: dict[int, list[DataFrame]] = {}

    def visit(self, level: dict[str, Any], rows: DataFrame) -> None:
        for r in level["rids"]:
            vals = self.values(r["column"], rows, RID)
            self.found.setdefault(r["source"], []).append(vals.filter(F.col(RID) >= 0).select(RID))
        for r in level["refs"]:
            spans = self.values(r["start"], rows, "start").join(self.values(r["end"], rows, "end"), ROW)
            self.pending.setdefault(r["table"], []).append(spans.filter("end > start").select("start", "end"))

    def values(self, meta: dict[str, Any], rows: DataFrame, name: str) -> DataFrame:
        """(row, value) for the traced rows: a join with a plain column's file, or run arithmetic."""
        if meta["encoding"] == "plain":
            col = self.spark.read.parquet(f"{self.base}/{meta['file']}")
            col = col.select(F.col("_metadata.row_index").alias(ROW), F.col("v").alias(name))
            return rows.join(col, ROW)
        runs = pq.read_table(f"{self.root}/{meta['file']}", filesystem=self.fs)
        shared = self.spark.sparkContext.broadcast(
            (*(runs.column(c).to_numpy() for c in ("start", "base", "step")), int(meta["rows"]))
        )

        def lookup(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            column = Runs(*shared.value)
            for batch in batches:
                at = batch.column(0).to_numpy()
                yield pa.record_batch([pa.array(at), pa.array(column.take(at))], names=[ROW, name])

        return rows.mapInArrow(lookup, f"{ROW} long, {name} long")


def _union(parts: list[DataFrame]) -> DataFrame:
    out = parts[0]
    for p in parts[1:]:
        out = out.unionByName(p)
    return out
