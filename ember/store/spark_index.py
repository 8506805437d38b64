"""Index levels built by the executors, for side tables too big to pass through the driver.

A side table that could outgrow the driver's result channel (`annotate.bounded`) is
written by its job's tasks into the capture's scratch folder (`Scratch`), sorted by the
columns that make its groups contiguous (`index.order_by`). A sort's partitions are
ordered and each task writes one file named by its partition, so a row's number in the
level is the rows of the earlier files (their Parquet footers, read by the driver) plus
its index in its file (`_metadata.row_index`): no pass over the rows numbers them.

A second job turns the rows into the level's columns (`Staged.level`): rids as they are,
each ref resolved by a join with the groups (`[start, end)` row ranges) of the table it
points at, computed by Spark from the runs of equal keys that table's level tasks wrote
where they read its rows in order (else from its own files), or sent from the driver when
that table was small. Its tasks each take whole stretches of consecutive rows, encode
every column as the driver would (ProvRC runs or plain, `store.columns`) and write each
stretch as a part (`store.parts`). A task names its parts in its result; Spark keeps one
result per task, so the parts of a failed or speculative attempt are never named, and
the driver deletes them. Nothing of the table's rows crosses the driver: only file
footers, part names and, for refs from small levels, the groups those refs name.
"""

from __future__ import annotations

import json
import math
import tempfile
import uuid
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyspark import TaskContext
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import TimestampType

from ember.engines.spark import faults
from ember.engines.spark.numbering import parquet_rid
from ember.plan.slots import ListSlot, RefSlot, RidSlot, SideTable
from ember.plan.sources import Source
from ember.store.build import Groups, order_by
from ember.store.columns import IntColumn, Plain, encode
from ember.store.files import filesystem, open_column, write_column
from ember.store.index import Level, Ranges
from ember.store.parts import Parts, tiled

PART_ROWS = 1 << 20  # rows per part: what one task holds in memory to encode a stretch
RN = "__ember_rn"


class Scratch:
    """A capture's working folder: the side tables' files and the parts built from them.
    Deleted when nothing holds it any more (a lineage whose index reads its parts does)."""

    def __init__(self, staging: str | None):
        if staging is None:
            uri = tempfile.mkdtemp(prefix="ember-scratch-")
        else:
            uri = f"{staging.rstrip('/')}/ember-{uuid.uuid4().hex[:12]}"
        self.fs, self.root = filesystem(uri)
        self.fs.create_dir(self.root)
        self.uri = uri if "://" in uri else "file://" + self.root  # as Spark and the executors name it
        weakref.finalize(self, _remove, self.fs, self.root)

    def drop(self, name: str) -> None:
        _remove(self.fs, f"{self.root}/{name}")


def _remove(fs: pafs.FileSystem, path: str) -> None:
    if fs.get_file_info(path).type != pafs.FileType.NotFound:
        fs.delete_dir(path)


def distributable(table: SideTable, names: list[str]) -> bool:
    """Whether a side table's level can be built by the executors: no lists inside its rows
    (they are flattened on the driver) and every column the index reads named once."""
    needed = [*order_by(table), *(a.name for s in table.slots for a in s.attrs)]
    return not any(isinstance(s, ListSlot) for s in table.slots) and all(names.count(n) == 1 for n in needed)


def stage(side: DataFrame, table: SideTable, sources: dict[str, Source], scratch: Scratch, keep: bool = True) -> Staged:
    """Writes a side table's rows into the scratch folder. Kept there (`keep`, for a level
    built from them), they are sorted for the level and key slots become rids by joins with
    their sources (as `capture.keys` does on the driver); else they are read back as they are."""
    names = side.columns  # may repeat a name (then not `keep`); Parquet columns may not
    stamps = [j for j, f in enumerate(side.schema.fields) if isinstance(f.dataType, TimestampType)]
    df = side.toDF(*[f"c{j}" for j in range(len(names))])
    if keep:
        for slot in table.slots:
            if isinstance(slot, RidSlot) and slot.key_column is not None:
                df = _rekeyed(df, f"c{names.index(slot.attr.name)}", sources[slot.source], slot.key_column)
        if order_by(table):
            df = df.orderBy(*[F.col(f"c{names.index(n)}").asc_nulls_first() for n in order_by(table)])
    # Timestamps travel as microseconds (Spark would write INT96, which readers turn into other types).
    df = df.select(*[F.unix_micros(F.col(f"c{j}")).alias(f"c{j}") if j in stamps else F.col(f"c{j}") for j in range(len(names))])
    folder = f"staged/t{table.id}"
    df.write.parquet(f"{scratch.uri}/{folder}")
    infos = scratch.fs.get_file_info(pafs.FileSelector(f"{scratch.root}/{folder}"))
    files = sorted(i.base_name for i in infos if i.base_name.endswith(".parquet") and not i.base_name.startswith("_"))
    counts = [pq.ParquetFile(scratch.fs.open_input_file(f"{scratch.root}/{folder}/{f}")).metadata.num_rows for f in files]
    offsets = np.concatenate(([0], np.cumsum(counts, dtype=np.int64)))
    return Staged(
        side.sparkSession, scratch, folder, names, stamps, tuple(zip(files, offsets[:-1].tolist(), strict=True)),
        int(offsets[-1]),
    )


def _rekeyed(df: DataFrame, column: str, source: Source, key: str) -> DataFrame:
    """`column`'s key values replaced by the rids of the source rows holding them (null
    stays null); the key is unique in the source, so no row is repeated."""
    spark = df.sparkSession
    table = spark.read.parquet(*[f.uri for f in source.files])
    rids = table.select(F.col(key).alias("__ember_k"), parquet_rid(table, source).alias("__ember_r"))
    joined = df.join(rids, df[column] == rids["__ember_k"], "left")
    return joined.select(*[F.col("__ember_r").alias(c) if c == column else F.col(c) for c in df.columns])


@dataclass(frozen=True, eq=False)
class Staged:
    """A side table's rows as its job's tasks wrote them, sorted for its level (`Remote`)."""

    spark: SparkSession
    scratch: Scratch
    folder: str
    names: list[str]  # the table's columns, in order (the files name them c0, c1, ...)
    stamps: list[int]  # timestamp columns, stored as microseconds
    files: tuple[tuple[str, int], ...]  # file name, number of its first row in the level
    rows: int
    grouped: list[str] = field(default_factory=list)  # the folder of group runs its level's tasks wrote, once built

    def read(self) -> pa.Table:
        """The rows on the driver, as they were written (then no longer kept)."""
        table = pq.read_table(f"{self.scratch.root}/{self.folder}", filesystem=self.scratch.fs)
        for j in self.stamps:
            table = table.set_column(j, f"c{j}", table.column(j).cast(pa.timestamp("us", tz="UTC")))
        self.release()
        return table.rename_columns(self.names)

    def release(self) -> None:
        """Deletes the files once the level is built (its parts live on)."""
        self.scratch.drop(self.folder)
        for folder in self.grouped:
            self.scratch.drop(folder)

    def frame(self, columns: list[str]) -> DataFrame:
        """The named columns and each row's number in the level (`RN`)."""
        df = self.spark.read.parquet(f"{self.scratch.uri}/{self.folder}")
        name = F.element_at(F.split(F.col("_metadata.file_path"), "/"), -1)
        offsets = F.create_map(*[x for f, o in self.files for x in (F.lit(f), F.lit(o))])
        cols = []
        for c in columns:
            j = self.names.index(c)
            stored = F.col(f"c{j}")
            cols.append((F.timestamp_micros(stored) if j in self.stamps else stored).alias(c))
        return df.select(*cols, (F.col("_metadata.row_index") + F.element_at(offsets, name)).alias(RN))

    def keys(self, slot: RefSlot) -> DataFrame:
        """The keys of the rows whose `slot` is present, as columns k0..kn."""
        df = self.frame([slot.present.name, *(k.name for k in slot.keys)])
        return df.filter(F.col(slot.present.name).isNotNull()).select(
            *[F.col(k.name).alias(f"k{i}") for i, k in enumerate(slot.keys)]
        )

    def groups(self, table: SideTable) -> DataFrame:
        """Each group's keys (g0..gn) and its rows `[__s, __e)`, computed by Spark: from the
        runs of equal keys the level's tasks wrote (`grouped`), a few rows per group, else
        from every row's keys."""
        if self.grouped:
            runs = self.spark.read.parquet(f"{self.scratch.uri}/{self.grouped[0]}")
            keys = [F.col(f"g{i}") for i in range(len(table.keys))]
            return runs.groupBy(*keys).agg(F.min("__s").alias("__s"), F.max("__e").alias("__e"))
        df = self.frame([k.name for k in table.keys])
        keys = [F.col(k.name).alias(f"g{i}") for i, k in enumerate(table.keys)]
        return df.groupBy(*keys).agg(F.min(RN).alias("__s"), (F.max(RN) + 1).alias("__e"))

    def groups_of(self, table: SideTable, wanted: pa.Table) -> pa.Table:
        """The groups with the wanted keys (columns named like `wanted`'s), as Arrow: for
        refs from a level on the driver, which names few of them."""
        names = wanted.column_names
        groups = self.groups(table)
        if wanted.num_rows == 0:
            return groups.limit(0).toArrow().rename_columns([*names, "__s", "__e"])
        keys = F.broadcast(self.spark.createDataFrame(wanted.group_by(names, use_threads=False).aggregate([])))
        cond = _all([groups[f"g{i}"].eqNullSafe(keys[n]) for i, n in enumerate(names)])
        return groups.join(keys, cond, "left_semi").toArrow().rename_columns([*names, "__s", "__e"])

    def level(
        self, table: SideTable, below: list[Groups], tables: tuple[SideTable, ...], levels: list[Level], compress: bool
    ) -> Level:
        """The table's level, built by the executors as parts in the scratch folder."""
        needed = {a.name for a in (*table.keys, *(a for s in table.slots for a in s.attrs))}
        df = self.frame(sorted(needed))
        # Without a join, each task reads stretches of its files in order: no shuffle to cut them.
        in_order = not any(isinstance(s, RefSlot) and s.keys for s in table.slots)
        values: list[tuple[str, Column]] = []
        for i, slot in enumerate(table.slots):
            if isinstance(slot, RidSlot):
                values.append((f"rid{i}", F.coalesce(F.col(slot.attr.name).cast("long"), F.lit(-1))))
            else:
                assert isinstance(slot, RefSlot)
                df, start, end = self._resolved(df, i, slot, below[slot.table], tables[slot.table], levels[slot.table].rows)
                values += [(f"ref{i}.start", start), (f"ref{i}.end", end)]
        # In order, the tasks also write each run of equal keys they see: the groups, read from those.
        runs = [F.col(k.name).alias(f"g{j}") for j, k in enumerate(table.keys)] if in_order else []
        df = df.select(F.col(RN), *[c.alias(n.replace(".", "_")) for n, c in values], *runs)  # a dot would name a field
        grouped = f"groups/t{table.id}" if runs else None
        metas = _written(
            df, [n for n, _ in values], self.scratch, f"index/t{table.id}", self.rows, compress, in_order, grouped
        )
        if grouped is not None and self.scratch.fs.get_file_info(f"{self.scratch.root}/{grouped}").type != pafs.FileType.NotFound:
            self.grouped.append(grouped)
        columns = {n: _column(metas[n], self.rows, self.scratch) for n, _ in values}
        rids = tuple((s.source, columns[f"rid{i}"]) for i, s in enumerate(table.slots) if isinstance(s, RidSlot))
        refs = tuple(
            Ranges(s.table, columns[f"ref{i}.start"], columns[f"ref{i}.end"])
            for i, s in enumerate(table.slots)
            if isinstance(s, RefSlot)
        )
        return Level(self.rows, rids, refs, table.why)

    def _resolved(
        self, df: DataFrame, i: int, slot: RefSlot, target: Groups, table: SideTable, rows: int
    ) -> tuple[DataFrame, Column, Column]:
        """`df` with what `slot` needs joined in, and its `[start, end)` range (as `index._resolve`)."""
        present = F.col(slot.present.name).isNotNull()
        if not slot.keys:  # the whole table is one group (a scalar subquery's, an unpartitioned window's)
            s, e, hit = F.lit(0).cast("long"), F.lit(rows).cast("long"), present
        else:
            df, s, e = self._joined(df, i, slot, target, table)
            hit = present & s.isNotNull()
        if slot.lo is not None and slot.hi is not None:  # a window frame, as `index._resolve` reads it
            first = e - F.col(slot.lo.name)
            s, e = first, F.greatest(first, s + F.col(slot.hi.name))
        return df, F.when(hit, s).otherwise(F.lit(0)).cast("long"), F.when(hit, e).otherwise(F.lit(0)).cast("long")

    def _joined(
        self, df: DataFrame, i: int, slot: RefSlot, target: Groups, table: SideTable
    ) -> tuple[DataFrame, Column, Column]:
        """`df` with the range of the group each row's keys name joined in (null: none)."""
        if isinstance(target, Staged):
            groups = target.groups(table)
        else:
            assert isinstance(target, pa.Table)  # a rollup's `Sets` only where no table is remote (`annotate`)
            groups = self.spark.createDataFrame(target.rename_columns([f"g{j}" for j in range(len(slot.keys))] + ["__s", "__e"]))
        g = groups.select(
            *[F.col(f"g{j}").alias(f"__ember_g{i}_{j}") for j in range(len(slot.keys))],
            F.col("__s").alias(f"__ember_s{i}"),
            F.col("__e").alias(f"__ember_e{i}"),
        )
        cond = _all([F.col(k.name).eqNullSafe(F.col(f"__ember_g{i}_{j}")) for j, k in enumerate(slot.keys)])
        return df.join(g, cond, "left"), F.col(f"__ember_s{i}"), F.col(f"__ember_e{i}")


def _all(conds: list[Column]) -> Column:
    out = conds[0]
    for c in conds[1:]:
        out = out & c
    return out


def _written(
    df: DataFrame,
    names: list[str],
    scratch: Scratch,
    folder: str,
    rows: int,
    compress: bool,
    in_order: bool = False,
    grouped: str | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """Each column's parts, written by the tasks; orphans of failed attempts deleted.

    `in_order`: `df` reads the staged files with no shuffle, so each task's rows come in
    stretches of consecutive numbers and the tasks write them as they stream (a shuffle
    into `PART_ROWS` stretches would move every row of the level once more); else the rows
    are shuffled into such stretches first. `grouped`: where the tasks also write the runs
    of equal keys (columns g0..gn of `df`) they see, with their rows `[__s, __e)`; a failed
    attempt's runs repeat those of the attempt that succeeds, which reading them as groups
    (least start, greatest end per key) makes no difference to."""
    spread = df if in_order else df.repartition(max(1, math.ceil(rows / PART_ROWS)), F.floor(F.col(RN) / PART_ROWS))
    fail = df.sparkSession.conf.get(faults.FAIL_PARTS_ONCE, None)
    reports = spread.mapInArrow(
        _part_writer(scratch.uri, folder, names, compress, fail, in_order, grouped), "first long, rows long, columns string"
    ).toArrow()
    found: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    for first, columns in sorted(zip(reports.column("first").to_pylist(), reports.column("columns").to_pylist(), strict=True)):
        for name, meta in json.loads(columns).items():
            found[name].append({**meta, "first": first})
    named = {m["file"].rsplit("/", 1)[-1] for metas in found.values() for m in metas}
    if scratch.fs.get_file_info(f"{scratch.root}/{folder}").type != pafs.FileType.NotFound:
        for info in scratch.fs.get_file_info(pafs.FileSelector(f"{scratch.root}/{folder}")):
            if info.base_name not in named:
                scratch.fs.delete_file(info.path)
    for name, metas in found.items():
        if not tiled(metas, rows):
            raise AssertionError(f"the parts of {folder}.{name} do not cover its {rows} rows")
    return found


def _part_writer(
    uri: str,
    folder: str,
    names: list[str],
    compress: bool,
    fail: str | None,
    in_order: bool = False,
    grouped: str | None = None,
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The task that encodes and writes a partition's stretches of consecutive rows: all
    of them at once, sorted, or (`in_order`) as they stream, about `PART_ROWS` at a time,
    so a task holds no more than that of a file split however big."""
    part_rows = PART_ROWS  # read here: the tasks import this module afresh

    def chunks(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.Table]:
        held: list[pa.RecordBatch] = []
        rows = 0
        for batch in batches:
            held.append(batch)
            rows += batch.num_rows
            if in_order and rows >= part_rows:
                yield pa.Table.from_batches(held)
                held, rows = [], 0
        if held:
            yield pa.Table.from_batches(held)

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        ctx = TaskContext.get()
        tag = f"s{ctx.stageId()}p{ctx.partitionId()}a{ctx.attemptNumber()}" if ctx else uuid.uuid4().hex[:8]
        fs, root = filesystem(uri)
        pack: Callable[[np.ndarray], IntColumn] = encode if compress else Plain
        reports = []
        for chunk in chunks(batches):
            if chunk.num_rows:
                fs.create_dir(f"{root}/{folder}")
                ordered = chunk.sort_by(RN)
                reports += _stretches_written(fs, root, folder, tag, names, pack, ordered, part_rows)
                if grouped is not None:
                    fs.create_dir(f"{root}/{grouped}")
                    first = ordered.column(RN)[0].as_py()
                    pq.write_table(_key_runs(ordered), f"{root}/{grouped}/{first:012d}-{tag}.parquet", filesystem=fs)
        if not reports:
            return
        if fail is not None and ctx is not None and ctx.partitionId() == 0 and ctx.attemptNumber() == 0:
            how, markers = faults.parse(fail)
            marker = f"{markers.rstrip('/')}/{folder.replace('/', '-')}"
            if faults.first(marker):
                faults.strike(how, marker)
        for first, n, metas_json in reports:
            yield pa.record_batch([pa.array([first], pa.int64()), pa.array([n], pa.int64()), pa.array([metas_json])],
                                  names=["first", "rows", "columns"])

    return write


def _key_runs(table: pa.Table) -> pa.Table:
    """The runs of rows of `table` (sorted by row number) with equal keys (columns g0..gn,
    nulls equal) and consecutive numbers: each run's keys and rows `[__s, __e)`."""
    rn = table.column(RN).to_numpy()
    keys = [n for n in table.column_names if n.startswith("g") and n[1:].isdigit()]
    new = np.diff(rn) != 1
    for name in keys:
        column = table.column(name)
        a, b = column.slice(1), column.slice(0, len(column) - 1)
        same = pc.or_(pc.fill_null(pc.equal(a, b), False), pc.and_(pc.is_null(a), pc.is_null(b)))
        new |= ~same.to_numpy(zero_copy_only=False)
    starts = np.concatenate(([0], np.flatnonzero(new) + 1))
    ends = np.append(starts[1:], rn.size)
    runs = table.select(keys).take(pa.array(starts))
    return runs.append_column("__s", pa.array(rn[starts])).append_column("__e", pa.array(rn[ends - 1] + 1))


def _stretches_written(
    fs: pafs.FileSystem,
    root: str,
    folder: str,
    tag: str,
    names: list[str],
    pack: Callable[[np.ndarray], IntColumn],
    table: pa.Table,
    part_rows: int,
) -> list[tuple[int, int, str]]:
    """Each stretch of consecutive row numbers in `table` (sorted by them) within one
    `part_rows` stretch of the level written as a part per column: (first row, rows, the
    columns' part entries as JSON)."""
    rn = table.column(RN).to_numpy()
    cuts = np.flatnonzero((np.diff(rn) != 1) | (np.diff(rn // part_rows) != 0)) + 1
    reports = []
    for lo, hi in zip(np.concatenate(([0], cuts)).tolist(), np.append(cuts, rn.size).tolist(), strict=True):
        first = int(rn[lo])
        metas = {}
        for name in names:
            values = table.column(name.replace(".", "_")).slice(lo, hi - lo).to_numpy().astype(np.int64, copy=False)
            file = f"{folder}/{first:012d}-{tag}.{name}.parquet"
            meta, size = write_column(fs, root, file, pack(values))
            metas[name] = {**meta, "size": size}
        reports.append((first, hi - lo, json.dumps(metas)))
    return reports


def _column(metas: list[dict[str, Any]], rows: int, scratch: Scratch) -> Parts:
    sizes = {m["file"]: m["size"] for m in metas}
    entries = [{k: v for k, v in m.items() if k != "size"} for m in metas]

    def opener(meta: dict[str, Any]) -> IntColumn:
        return open_column(scratch.fs, scratch.root, meta, sizes)

    return Parts(entries, rows, opener, sum(sizes.values()), (scratch.fs, scratch.root), owner=scratch)
