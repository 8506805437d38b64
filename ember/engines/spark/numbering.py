"""Numbering the rows of sources that need a look at their data first.

Runs after the plan is accepted and before the job, so a refused plan runs nothing.
In-memory tables are collected (they are on the driver already) and numbered by
position. CSV, JSON, XML, text, ORC and binary files have no row index in Spark, so they are
counted:

Spark reads a text file in splits, each split's rows in file order, and a task's
`monotonically_increasing_id` counts its rows consecutively. So a first pass counts
the rows of every (file, split) and notes the id of its first row; a row's rid is then
its id plus a per-split offset. Both passes read the same relation with the same
session settings, so Spark splits the files the same way. A table's partitions that a
job does not read (Spark lists only the others) are counted by a pass over them alone:
rids number all of a source's files.

A keyed source (a JDBC table, a Python data source, files declared with a key) has no
order to count: its key columns are read, and a row's rid is its key's rank.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from types import ModuleType
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from ember.engines.spark import jar
from ember.engines.spark.frames import functions_of
from ember.engines.spark.jvm import JObj, Jvm, iterate
from ember.errors import StaleSourceError, UnsupportedOperatorError
from ember.plan.sources import COUNTED, KEYED, READER_FORMATS, RID, Source, spark_path, spark_uri

# What Spark cuts files into splits and packs splits into tasks by (`FilePartition`): the
# counts ember takes number rows only while Spark reads the files the same way.
_SPLITTING = (
    "spark.sql.files.maxPartitionBytes",
    "spark.sql.files.openCostInBytes",
    "spark.sql.files.minPartitionNum",
    "spark.sql.files.maxPartitionNum",
    "spark.sql.leafNodeDefaultParallelism",
)
_ID, _SPLIT = HELPERS = ("__ember_row_id", "__ember_split")


def layout_of(spark: SparkSession, parallelism: int) -> tuple[str | None, ...]:
    """What Spark splits files by in this session: its settings and default parallelism."""
    return (*(spark.conf.get(key, None) for key in _SPLITTING), str(parallelism))


class Reading(Protocol):
    """Where a counted source's rows are read: a relation of a classic session's plan
    (`Relation`), or a reader of its files a Spark Connect client makes for the server
    (`served.ServerReading`)."""

    def frame(self) -> DataFrame:
        """The source's rows, its `_metadata` column within reach."""
        ...

    def layout(self) -> tuple[str | None, ...]:
        """`layout_of` the session that reads them."""
        ...

    def recipe(self) -> dict[str, Any]:
        """What reads the files again once loaded from a store: reader options and schema."""
        ...

    def check(self) -> None:
        """Raises if a file changed since capture, where this process cannot look itself."""
        ...


@dataclass(frozen=True)
class Relation:
    """A file relation of a classic session's plan, read through py4j."""

    jvm: Jvm
    relation: JObj

    def frame(self) -> DataFrame:
        return self.jvm.dataframe(self.relation)

    def layout(self) -> tuple[str | None, ...]:
        return layout_of(self.jvm.spark, self.jvm.spark.sparkContext.defaultParallelism)

    def recipe(self) -> dict[str, Any]:
        return _recipe(self.relation)

    def check(self) -> None:
        """Nothing: a classic session's files are this process's, which `fetch.rows` checks."""


@dataclass(frozen=True)
class TextNumbering:
    """How to number one text source's rows: where they are read, each split's rows as
    counted (under `layout`), and where its rids start."""

    reading: Reading
    splits: tuple[tuple[str, int, int, int], ...]  # ("path@split start", first row id, first rid, rows)
    layout: tuple[str | None, ...]
    _recounted: dict[tuple[str | None, ...], TextNumbering] = field(default_factory=dict, compare=False, repr=False)

    def place(self, F: ModuleType) -> tuple[Column, Column, Column]:
        """Each row's file, the start of its split, and its id (consecutive over a split's
        rows), as its scan gives them (columns made by `F`, PySpark's functions)."""
        return _file_place(F)

    def current(self) -> TextNumbering:
        """This numbering, counted again (once per layout) if Spark now splits the files
        otherwise (a Defer capture or a fetch after the session's settings or executors changed)."""
        layout = self.reading.layout()
        if layout == self.layout:
            return self
        if layout not in self._recounted:
            offsets: dict[str, int] = {}
            for key, _, rid, _ in self.splits:
                uri = key.rsplit("@", 1)[0]
                offsets[uri] = min(offsets.get(uri, rid), rid)
            counts = _split_counts(self.reading.frame(), self.place)
            again = replace(self, splits=_splits(counts, offsets), layout=layout, _recounted={})
            if sum(n for *_, n in again.splits) != sum(n for *_, n in self.splits):
                raise StaleSourceError("a counted source's files (CSV, JSON, XML, text, ORC, binary) hold other rows than at capture; capture again")
            self._recounted[layout] = again
        return self._recounted[layout]

    def ided(self, df: DataFrame) -> tuple[DataFrame, Column]:
        """`df` (the relation's rows) with its row ids taken right at the scan (columns
        `HELPERS`), and the rid column over them; a row whose id lies outside the rows
        counted for its split fails the job rather than take another row's rid."""
        F = functions_of(df)
        file, start, row_id = self.place(F)
        key = F.concat(file, F.lit("@"), start)
        ided = df.select(*[df[c] for c in df.columns], row_id.alias(_ID), key.alias(_SPLIT))
        fields = ("first", "rid", "rows")
        table = F.create_map(*[
            x for k, *facts in self.splits
            for x in (F.lit(k), F.struct(*[F.lit(v).alias(f) for f, v in zip(fields, facts, strict=True)]))
        ])
        split = F.try_element_at(table, F.col(_SPLIT))
        place = F.col(_ID) - split["first"]
        counted = (place >= 0) & (place < split["rows"])
        failed = F.raise_error(F.lit(
            "ember counted this source's rows under other Spark settings for splitting files "
            "(spark.sql.files.*, default parallelism) than this job's; capture again"))
        rid = F.when(counted, split["rid"] + place).otherwise(failed.cast("long"))
        return ided, rid

    def numbered(self) -> DataFrame:
        """The source's rows with `ember_rid` (a Spark job when run)."""
        df = self.reading.frame()
        ided, rid = self.current().ided(df)
        return ided.select(*[ided[c] for c in df.columns], rid.alias(RID))

    def rows(self, rids: list[int]) -> pa.Table:
        numbered = self.numbered()
        if not rids:
            return numbered.limit(0).toArrow()
        return numbered.filter(numbered[RID].isin(rids)).orderBy(RID).toArrow()

    def recipe(self) -> dict[str, Any]:
        return self.reading.recipe()

    def check(self) -> None:
        """Raises if a remote source's files changed since capture (`fetch.rows.check_unchanged`)."""
        self.reading.check()


@dataclass(frozen=True)
class HiveNumbering(TextNumbering):
    """A metastore table read with Hive's own reader (`HiveTableRelation`), numbered as a
    counted file source. Its scan has no `_metadata` column: the reader tells each row's
    file and split through `input_file_name()` and `input_file_block_start()`, which spell
    a file's path unescaped (`_read_path`), so its splits are keyed by that spelling.

    Each task of a Hive scan reads exactly one split (a Hadoop RDD's partition is one input
    split), so a row's place in its split is its `monotonically_increasing_id` without the
    partition number (its low 33 bits): rows are numbered alike however many partitions a
    scan reads (a self-join's sides pruned otherwise, dynamic partition pruning)."""

    table: str = ""  # the table's qualified name, which reads it again after a load

    def place(self, F: ModuleType) -> tuple[Column, Column, Column]:
        return _hive_place(F)

    def recipe(self) -> dict[str, Any]:
        return {"table": self.table}


def _file_place(F: ModuleType) -> tuple[Column, Column, Column]:
    """A file scan's rows' file (its URI) and split start, from its `_metadata` column, and id."""
    return F.col("_metadata.file_path"), F.col("_metadata.file_block_start"), F.monotonically_increasing_id()


_IN_PARTITION = (1 << 33) - 1  # the bits of `monotonically_increasing_id` that count a partition's rows


def _hive_place(F: ModuleType) -> tuple[Column, Column, Column]:
    """A Hive scan's rows' file (its path, as Hadoop's reader spells it), split start, and
    place in that split (see `HiveNumbering`)."""
    return F.input_file_name(), F.input_file_block_start(), F.monotonically_increasing_id().bitwiseAND(F.lit(_IN_PARTITION))


def _read_path(uri: str) -> str:
    """A file's URI as Hadoop's reader names it to `input_file_name()`: its path unescaped."""
    return spark_uri(spark_path(uri))


def number_hive_source(jvm: Jvm, source: Source) -> Source:
    """Counts the rows of each split of a Hive table's files, as `number_text_source` does
    for a file source, in one pass over all of the table's partitions (the job's scan may
    read some): rids number all of its files, and rows of any partition can be fetched. A
    file the listing did not hold, or an input format that reads no file splits (no file
    name per row), cannot be numbered: refused rather than guessed."""
    scan = source.data
    return number_hive(source, Relation(jvm, scan.copy(scan.tableMeta(), scan.dataCols(), scan.partitionCols(), scan.tableStats(), jvm.none())))


def number_hive(source: Source, whole: Reading) -> Source:
    """`number_hive_source` over a reading of the whole table (all of its partitions): a
    classic session's relation, or the table as a Spark Connect client reads it."""
    table = source.key.split(":", 1)[1]
    layout = whole.layout()
    by_file = _split_counts(whole.frame(), _hive_place)
    if "" in by_file:
        raise UnsupportedOperatorError(
            f"ember cannot number the rows of the Hive table {table}: its input format reads no file splits, "
            "so Spark does not tell which file a row comes from"
        )
    listed = {_read_path(f.uri): f for f in source.files}
    unlisted = sorted(set(by_file) - set(listed))
    if unlisted:
        raise StaleSourceError(f"source {source.name!r}: Spark read {unlisted[0]}, which the table did not list: capture again")
    files, offset = [], 0
    for f in source.files:
        n = sum(rows for _, rows, _ in by_file.get(_read_path(f.uri), ()))
        files.append(replace(f, rows=n, offset=offset))
        offset += n
    splits = _splits(by_file, {_read_path(f.uri): f.offset for f in files})
    return replace(source, rows=offset, files=tuple(files), data=HiveNumbering(whole, splits, layout, table=table))


def _recipe(relation: JObj) -> dict[str, Any]:
    """What reads a relation's files again: its reader options and schema."""
    rel = relation.relation()
    options = {str(t._1()): str(t._2()) for t in iterate(rel.options().toSeq())}
    return {
        "options": {k: v for k, v in options.items() if k.lower() not in ("path", "paths")},
        "schema": json.loads(rel.schema().json()),  # partition columns too, typed as the job reads them
    }


def files_reader(spark: SparkSession, source: Source, recipe: dict[str, Any], uris: list[str]) -> DataFrame:
    """A reader of some of a source's files, with the partition columns their folders give."""
    reader = spark.read.format(READER_FORMATS.get(source.kind, source.kind)).options(**recipe["options"])
    schema = recipe["schema"]  # a classic capture's as JSON; a Connect client's as DDL; none for fixed ones
    if schema is not None:
        reader = reader.schema(schema if isinstance(schema, str) else StructType.fromJson(schema))
    bases = {f.uri.rsplit("/", len(source.partitioning) + 1)[0] for f in source.files}
    if source.partitioning and len(bases) == 1:
        reader = reader.option("basePath", spark_path(bases.pop()))
    return reader.load([spark_path(u) for u in uris])


def reopen_text(spark: SparkSession, source: Source, recipe: dict[str, Any]) -> Source:
    """A loaded store's counted source (CSV, JSON, XML, text, ORC, binary files), read and counted again.

    Rids are file-order row positions, so recounting under this session's splits gives
    the same numbers; a different count means the files changed.
    """
    if source.kind == "hive":  # the table by its name, all of its partitions
        table = Jvm.analyzed(spark.table(recipe["table"])).collectLeaves().head()
        counted = number_hive_source(Jvm(spark), replace(source, data=table))
    else:
        df = files_reader(spark, source, recipe, [f.uri for f in source.files])
        counted = number_text_source(Jvm(spark), replace(source, data=Jvm.analyzed(df)))
    return counted_alike(source, counted)


def counted_alike(source: Source, counted: Source) -> Source:
    """`counted` (a loaded source counted again), if its files hold as many rows each as at
    capture: rids are file-order positions, so another count means the files changed."""
    if [f.rows for f in counted.files] != [f.rows for f in source.files]:
        raise StaleSourceError(f"source {source.name!r}: its files hold other rows than at capture; capture again")
    return counted


def shaped(jvm: Jvm, source: Source) -> Source:
    """The source as a check over none of its rows reads it: an in-memory one not yet
    collected (its data still the plan's) as an empty table of its columns, a keyed one
    with no keys numbered."""
    if source.kind == "memory" and not isinstance(source.data, pa.Table):
        return replace(source, rows=0, data=jvm.dataframe(source.data).limit(0).toArrow())
    if source.kind == KEYED and not isinstance(source.data, KeyedNumbering):
        return keyed_shape(source, jvm.dataframe(whole_relation(source.data)))
    return source


_KEY_RID = "__ember_key_rid"


def whole_relation(scan: JObj) -> JObj:
    """The relation a scan reads, with all of its columns (a V2 scan may read fewer): a
    keyed source's rows are joined to their rids by key columns the job need not read."""
    return scan.relation() if scan.getClass().getSimpleName() == "DataSourceV2ScanRelation" else scan


@dataclass(frozen=True)
class KeyedNumbering:
    """A keyed source's rows, identified by their keys: `keys` holds every row's key at
    capture, sorted, so row i is rid i. Rids rank keys rather than count positions: a source
    with no stable row order numbers alike however often, and in whatever order, it is read.
    (A loaded store holds the keys alone: `fetch.rows.source_keys`.)"""

    keys: pa.Table
    relation: DataFrame  # the source's relation, all columns, of either session: fetches rows by key

    def frame(self, spark: SparkSession, rids: np.ndarray | None = None) -> DataFrame:
        """The keys (of `rids`, or all) as a DataFrame: columns `__ember_k<i>` and the rid."""
        taken = self.keys if rids is None else self.keys.take(pa.array(rids, pa.int64()))
        table = pa.table(
            [*taken.columns, pa.array(np.arange(self.keys.num_rows) if rids is None else rids, pa.int64())],
            names=[*(f"__ember_k{i}" for i in range(taken.num_columns)), _KEY_RID],
        )
        if table.num_rows:
            return spark.createDataFrame(table)
        return spark.createDataFrame([], from_arrow_schema(table.schema))  # Spark infers no types from no rows

    def ided(self, df: DataFrame, rids: np.ndarray | None = None) -> tuple[DataFrame, Column]:
        """`df` (the relation's rows) joined to their rids by key, and the rid column; a row
        whose key was not numbered (the table changed since) fails the job rather than take
        no rid. With `rids`, only those rows (an inner join)."""
        keys = self.frame(df.sparkSession, rids)
        # the key's values as plain columns first: a field of `_metadata` in a join's condition
        # trips Spark 4.0's self-join check
        values = [f"__ember_v{i}" for i in range(self.keys.num_columns)]
        left = df.select("*", *[df[c].alias(v) for c, v in zip(self.keys.column_names, values, strict=True)])
        joined_on = [left[v] == keys[f"__ember_k{i}"].cast(left.schema[v].dataType) for i, v in enumerate(values)]
        condition = joined_on[0]
        for more in joined_on[1:]:
            condition = condition & more
        fn = functions_of(df)
        joined = left.join(fn.broadcast(keys), condition, "left" if rids is None else "inner")
        failed = fn.raise_error(fn.lit("a row of a keyed source has a key ember did not number at capture: the table changed; capture again"))
        return joined, fn.when(keys[_KEY_RID].isNotNull(), keys[_KEY_RID]).otherwise(failed.cast("long"))

    def numbered(self, rids: np.ndarray | None = None) -> DataFrame:
        """The source's rows (of `rids`, or all) with `ember_rid`, read through Spark."""
        df = self.relation
        joined, rid = self.ided(df, rids)
        return joined.select(*[df[c] for c in df.columns], rid.alias(RID))

    def rows(self, rids: np.ndarray) -> pa.Table:
        """The source's rows with these (sorted) rids, fetched by key, in rid order."""
        return self.numbered(rids).orderBy(RID).toArrow()


def _key_table(relation: DataFrame, row_key: tuple[str, ...], limit: int | None = None) -> pa.Table:
    """A keyed relation's key columns (a field of `_metadata` named by its path), read."""
    keys = relation.select(*[relation[c] for c in row_key])
    return (keys if limit is None else keys.limit(limit)).toArrow().rename_columns(list(row_key))


def keyed_shape(source: Source, relation: DataFrame) -> Source:
    """A keyed source with no keys numbered (`shaped`), over its `relation` of either session."""
    return replace(source, rows=0, data=KeyedNumbering(_key_table(relation, source.row_key, 0), relation))


def number_keyed(source: Source, relation: DataFrame) -> Source:
    """Reads a keyed source's key columns off its `relation` (one Spark job, on either
    session) and numbers its rows in key order. A key must identify rows: a null or
    repeated key is refused, naming an example."""
    keys = _key_table(relation, source.row_key)
    for column in keys.column_names:
        nulls = keys.column(column).null_count
        if nulls:
            raise UnsupportedOperatorError(f"source {source.name!r}: its key column {column} is null in {nulls} rows; a key identifies every row")
    counts = keys.group_by(keys.column_names).aggregate([([], "count_all")])
    repeated = counts.filter(pc.greater(counts.column("count_all"), 1))
    if repeated.num_rows:
        example = repeated.drop_columns(["count_all"]).slice(0, 1).to_pylist()[0]
        raise UnsupportedOperatorError(
            f"source {source.name!r}: its key ({', '.join(source.row_key)}) does not identify its rows: "
            f"{repeated.num_rows} keys are repeated, {example} among them"
        )
    ordered = keys.sort_by([(c, "ascending") for c in keys.column_names])
    return replace(source, rows=ordered.num_rows, data=KeyedNumbering(ordered, relation))


def number_source(jvm: Jvm, source: Source) -> Source:
    """The source with its rows counted, ready for capture."""
    if source.kind == "memory":
        table = jvm.dataframe(source.data).toArrow()
        return replace(source, rows=table.num_rows, data=table)
    if source.kind == "hive":
        return number_hive_source(jvm, source)
    if source.kind == KEYED:
        return number_keyed(source, jvm.dataframe(whole_relation(source.data)))
    if source.kind in COUNTED:
        return number_text_source(jvm, source)
    return source


def number_text_source(jvm: Jvm, source: Source) -> Source:
    """Counts the rows of each split of a counted source and fills in rows and offsets.
    Rids number all of a source's files: those of a table's partitions the job skips
    are counted by a reader of them alone."""
    read = {spark_uri(str(uri)) for uri in source.data.relation().location().inputFiles()}
    skipped = [f.uri for f in source.files if f.uri not in read]
    unread: dict[str, int] = {}
    if skipped:
        counts = files_reader(jvm.spark, source, _recipe(source.data), skipped).groupBy(F.col("_metadata.file_path")).count()
        unread = {str(r[0]): int(r[1]) for r in counts.collect()}
    return number_read(source, Relation(jvm, source.data), unread)


def number_read(source: Source, reading: Reading, unread: dict[str, int] | None = None) -> Source:
    """The source with its rows counted split by split as `reading` reads them, its files'
    rows and offsets filled in (`unread`: rows of files it does not read, counted apart)."""
    layout = reading.layout()
    by_file = _split_counts(reading.frame(), _file_place)
    rows = {uri: sum(n for _, n, _ in blocks) for uri, blocks in by_file.items()} | (unread or {})
    files, offset = [], 0
    for f in source.files:
        files.append(replace(f, rows=rows.get(f.uri, 0), offset=offset))
        offset += rows.get(f.uri, 0)
    numbering = TextNumbering(reading, _splits(by_file, {f.uri: f.offset for f in files}), layout)
    return replace(source, rows=offset, files=tuple(files), data=numbering)


def _split_counts(df: DataFrame, place: Callable[[ModuleType], tuple[Column, Column, Column]]) -> dict[str, list[tuple[int, int, int]]]:
    """Per file `df` (a relation's rows) reads: each split's start, rows and first row id,
    in one pass under the session's layout; `place`: each row's file, split start and id."""
    F = functions_of(df)
    file, start, row_id = place(F)
    counts = (
        df
        .select(file.alias("f"), start.alias("b"), row_id.alias("m"))
        .groupBy("f", "b")
        .agg(F.count(F.lit(1)).alias("n"), F.min("m").alias("m"))
        .collect()
    )
    by_file: dict[str, list[tuple[int, int, int]]] = {}
    for row in counts:
        by_file.setdefault(row["f"], []).append((int(row["b"]), int(row["n"]), int(row["m"])))
    return by_file


def _splits(by_file: dict[str, list[tuple[int, int, int]]], offsets: dict[str, int]) -> tuple[tuple[str, int, int, int], ...]:
    """Each split's (key, first row id, first rid, rows), its file's rids starting at its offset."""
    splits = []
    for uri, blocks in by_file.items():
        rid = offsets[uri]
        for block, n, first in sorted(blocks):
            splits.append((f"{uri}@{block}", first, rid, n))
            rid += n
    return tuple(splits)


def parquet_rid(table: DataFrame, source: Source) -> Column:
    """`ember_rid` of each row of `table`, a DataFrame that reads `source`'s Parquet files
    as they are: its index in its file plus the rows of earlier files (`RowIndex.java`)."""
    jvm = Jvm(table.sparkSession)
    return jvm.column(jar.helper(jvm, "RowIndex").rid(jvm.analyzed(table), *files(source)))


def files(source: Source) -> tuple[list[str], list[int]]:
    """Each file's path as Spark reads it and its first rid (neither needed for one file)."""
    if len(source.files) == 1:
        return [], []
    return [f.uri for f in source.files], [f.offset for f in source.files]
