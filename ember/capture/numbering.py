"""Numbering the rows of sources that need a look at their data first.

Runs after the plan is accepted and before the job, so a refused plan runs nothing.
In-memory tables are collected (they are on the driver already) and numbered by
position. CSV and JSON files have no row index in Spark, so they are counted:

Spark reads a text file in splits, each split's rows in file order, and a task's
`monotonically_increasing_id` counts its rows consecutively. So a first pass counts
the rows of every (file, split) and notes the id of its first row; a row's rid is then
its id plus a per-split offset. Both passes read the same relation with the same
session settings, so Spark splits the files the same way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from ember.errors import StaleSourceError
from ember.plan.jvm import JObj, Jvm, iterate
from ember.plan.sources import Source

RID = "ember_rid"


@dataclass(frozen=True)
class TextNumbering:
    """How to number one text source's rows: the relation and each split's offset."""

    jvm: Jvm
    relation: JObj
    deltas: tuple[tuple[str, int], ...]  # ("path@split start", rid minus row id)

    def rid(self) -> Column:
        key = F.concat(F.col("_metadata.file_path"), F.lit("@"), F.col("_metadata.file_block_start"))
        table = F.create_map(*[x for k, d in self.deltas for x in (F.lit(k), F.lit(d))])
        return F.monotonically_increasing_id() + F.element_at(table, key)

    def numbered(self) -> DataFrame:
        """The source's rows with `ember_rid` (a Spark job when run)."""
        df = self.jvm.dataframe(self.relation)
        return df.select(*[df[c] for c in df.columns], self.rid().alias(RID))

    def rows(self, rids: list[int]) -> pa.Table:
        if not rids:
            return self.numbered().limit(0).toArrow()
        return self.numbered().filter(F.col(RID).isin(rids)).orderBy(RID).toArrow()

    def recipe(self) -> dict[str, Any]:
        """What a store needs to read these files again: reader options and schema."""
        rel = self.relation.relation()
        options = {str(t._1()): str(t._2()) for t in iterate(rel.options().toSeq())}
        return {
            "options": {k: v for k, v in options.items() if k.lower() not in ("path", "paths")},
            "schema": json.loads(rel.dataSchema().json()),
        }


def reopen_text(spark: SparkSession, source: Source, recipe: dict[str, Any]) -> Source:
    """A loaded store's CSV/JSON source, read and counted again in this session.

    Rids are file-order row positions, so recounting under this session's splits gives
    the same numbers; a different count means the files changed.
    """
    reader = spark.read.format(source.kind).options(**recipe["options"])
    df = reader.schema(StructType.fromJson(recipe["schema"])).load([f.uri for f in source.files])
    counted = number_text_source(Jvm(spark), replace(source, data=Jvm.analyzed(df)))
    if [f.rows for f in counted.files] != [f.rows for f in source.files]:
        raise StaleSourceError(f"source {source.name!r}: its files hold other rows than at capture; capture again")
    return counted


def shaped(jvm: Jvm, source: Source) -> Source:
    """The source as a check over none of its rows reads it: an in-memory one not yet
    collected (its data still the plan's) as an empty table of its columns."""
    if source.kind == "memory" and not isinstance(source.data, pa.Table):
        return replace(source, rows=0, data=jvm.dataframe(source.data).limit(0).toArrow())
    return source


def number_source(jvm: Jvm, source: Source) -> Source:
    """The source with its rows counted, ready for capture."""
    if source.kind == "memory":
        table = jvm.dataframe(source.data).toArrow()
        return replace(source, rows=table.num_rows, data=table)
    if source.kind in ("csv", "json"):
        return number_text_source(jvm, source)
    return source


def number_text_source(jvm: Jvm, source: Source) -> Source:
    """Counts the rows of each split of a CSV/JSON source and fills in rows and offsets."""
    df = jvm.dataframe(source.data)
    counts = (
        df.select(
            F.col("_metadata.file_path").alias("f"),
            F.col("_metadata.file_block_start").alias("b"),
            F.monotonically_increasing_id().alias("m"),
        )
        .groupBy("f", "b")
        .agg(F.count(F.lit(1)).alias("n"), F.min("m").alias("m"))
        .collect()
    )
    by_file: dict[str, list[tuple[int, int, int]]] = {}
    for row in counts:
        by_file.setdefault(row["f"], []).append((int(row["b"]), int(row["n"]), int(row["m"])))
    files, deltas, offset = [], [], 0
    for f in source.files:
        start = offset
        for block, n, first in sorted(by_file.get(f.uri, [])):
            deltas.append((f"{f.uri}@{block}", offset - first))
            offset += n
        files.append(replace(f, rows=offset - start, offset=start))
    numbering = TextNumbering(jvm, source.data, tuple(deltas))
    return replace(source, rows=offset, files=tuple(files), data=numbering)
