"""Titian's capture points: where lineage ids (`rdd.ids`) are assigned and where their
tables (`rdd.tables`) live.

Input points keep no table: their ids name the record itself. Every other point runs as one
blocking pass per partition that yields the partition's lineage table first and then its
records; that RDD is persisted (MEMORY_AND_DISK), so a table lives in the block of the task
that produced it and exists only once that attempt has succeeded.
"""

from __future__ import annotations

import mmap
import os
import socket
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import islice
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

import numpy as np
from numpy.typing import NDArray
from pyspark import RDD, StorageLevel

from ember.errors import EmberError
from ember.rdd.debug import SET_PARAM
from ember.rdd.ids import MASK, SHIFT, Ref, Row
from ember.rdd.tables import (
    Shared,
    Table,
    children,
    encode_table,
    load_records,
    lookup,
    read_table,
    write_table,
)
from ember.rdd.text import line_after, read_lines

if TYPE_CHECKING:
    from ember.rdd.context import LineageContext


class LineageSourceError(EmberError):
    """An input the RDD lineage cannot re-read by id (not a local, uncompressed text file)."""


DRAIN_RECORDS = 100_000


def _table_of(items: Iterable[Any]) -> Iterator[Table]:
    """A partition's table (the first item of its block)."""
    it = iter(items)
    table, records = next(it)
    yield table
    _drain(it, records)


def _drain(rest: Iterator[Any], records: int) -> None:
    """Reads a partition to its end when that is cheap: PySpark reuses a Python worker only
    if its task read all its input (replacing one costs more than the read)."""
    if records <= DRAIN_RECORDS:
        for _ in rest:
            pass


def _identity(key: int) -> int:
    return key


def on_partitions(
    rdd: RDD[Any],
    wanted: dict[int, list[int]],
    fn: Callable[[int, Iterable[Any], list[int]], Iterator[Any]],
) -> list[Any]:
    """`fn(pid, partition, ns)` on only the partitions named in `wanted`: one job, no shuffle,
    no task for a partition the trace does not reach (the driver-directed form of a step)."""
    if not wanted:
        return []
    task = rdd.mapPartitionsWithIndex(lambda pid, it: fn(pid, it, wanted.get(pid, [])))
    return list(rdd.context.runJob(task, iter, partitions=sorted(wanted)))


class Point(ABC):
    """A capture point; `parents` are the points its ids refer to. Its ids use the slots
    `base .. base + partitions - 1`."""

    kind = "input"

    def __init__(self, lc: LineageContext, parents: Sequence[Point], partitions: int) -> None:
        self.lc = lc
        self.parents = tuple(parents)
        self.partitions = partitions
        self.uid, self.base = lc._register(self, partitions)

    def owns(self, ref: Ref) -> bool:
        """On the driver only (a point holds its context)."""
        return self.base <= ref >> SHIFT < self.base + self.partitions

    def split(self, refs: Iterable[Ref]) -> dict[int, list[int]]:
        """`pid -> sorted ns` of this point's ids known on the driver."""
        found: dict[int, set[int]] = {}
        for ref in refs:
            found.setdefault((ref >> SHIFT) - self.base, set()).add(ref & MASK)
        return {pid: sorted(ns) for pid, ns in found.items()}

    def directed(self, refs: RDD[Any]) -> RDD[Any]:
        """Only the traced ids move: each goes, as `n`, to its partition of this point."""
        base = self.base
        pairs = refs.map(lambda r: ((r >> SHIFT) - base, r & MASK))
        return pairs.partitionBy(self.partitions, _identity)

    @abstractmethod
    def records(self, refs: RDD[Any]) -> RDD[Any]:
        """`(ref, raw record)` for the given refs of this point (duplicates removed)."""

    @abstractmethod
    def local_records(self, refs: Sequence[Ref]) -> list[tuple[Ref, Any]]:
        """`records` for refs known on the driver, read by tasks on only their partitions."""

    def unpersist(self) -> None:  # noqa: B027 (a default: input points hold nothing)
        """Drops the tables this point persisted."""


def _ns(wanted: Iterable[tuple[int, int]]) -> list[int]:
    return sorted({n for _, n in wanted})


class IndexedInput(Point):
    """`parallelize` and DataFrame rows: `source` holds `(n, record)`, n the element index."""

    def __init__(self, lc: LineageContext, source: RDD[Any]) -> None:
        super().__init__(lc, (), source.getNumPartitions())
        self.source = source

    def tagged(self) -> RDD[Any]:
        base = self.base
        return self.source.mapPartitionsWithIndex(
            lambda pid, it: ((x, (base + pid) << SHIFT | n) for n, x in it),
            preservesPartitioning=True,
        )

    def _pick(self) -> Callable[[int, Iterable[tuple[int, Any]], list[int]], Iterator[Any]]:
        base = self.base

        def pick(pid: int, rows: Iterable[tuple[int, Any]], ns: list[int]) -> Iterator[Any]:
            keep, slot = set(ns), (base + pid) << SHIFT
            return ((slot | n, x) for n, x in rows if n in keep)

        return pick

    def records(self, refs: RDD[Any]) -> RDD[Any]:
        pick = self._pick()

        def picked(pair: tuple[list[tuple[int, int]], list[tuple[int, Any]]]) -> Iterator[Any]:
            wanted, rows = pair
            return pick(wanted[0][0], rows, _ns(wanted)) if wanted else iter(())

        return self.directed(refs).glom().zip(self.source.glom()).flatMap(picked)

    def local_records(self, refs: Sequence[Ref]) -> list[tuple[Ref, Any]]:
        return on_partitions(self.source, self.split(refs), self._pick())


class TextInput(Point):
    """A local text file read by `sc.textFile`; ids are (split, byte offset of the line).
    Lines end as Hadoop's reader ends them: at LF, CRLF or a lone CR."""

    def __init__(self, lc: LineageContext, path: str, min_partitions: int | None) -> None:
        lines = lc.sc.textFile(path, min_partitions)
        splits = []
        jvm = lc.sc._jvm
        assert jvm is not None
        codecs = jvm.org.apache.hadoop.io.compress.CompressionCodecFactory(lc.sc._jsc.hadoopConfiguration())
        for part in lines._jrdd.rdd().partitions():
            split = part.inputSplit().value()
            url = urlparse(split.getPath().toString())
            if url.scheme not in ("", "file"):
                raise LineageSourceError(f"{path}: only local files can be re-read by offset")
            if codecs.getCodec(split.getPath()) is not None:  # offsets would be into the compressed bytes
                raise LineageSourceError(f"{url.path}: a compressed file cannot be re-read by offset; decompress it first")
            splits.append((url.path, int(split.getStart()), int(split.getStart() + split.getLength())))
        for file in {p for p, *_ in splits}:
            if os.path.getsize(file) > MASK:
                raise LineageSourceError(
                    f"{file}: larger than {MASK} bytes, the largest offset an id holds"
                )
        super().__init__(lc, (), len(splits))
        self.lines = lines
        self.splits = splits

    def tagged(self) -> RDD[Any]:
        base, splits = self.base, self.splits

        def tag(pid: int, lines: Iterable[str]) -> Iterator[tuple[str, Ref]]:
            path, pos, end = splits[pid]
            slot = (base + pid) << SHIFT
            if not os.path.getsize(path):
                return
            with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
                if pos:  # Hadoop's reader skips the partial line a split starts in
                    pos = line_after(m, pos)
                last = m.find(b"\n", end)
                # With no CR in the split (its last line included), an ASCII line's bytes are
                # its characters and an LF; else each line's end is found in the file.
                plain = m.find(b"\r", pos, len(m) if last < 0 else last) < 0
                for line in lines:
                    yield line, slot | pos
                    # the line's own bytes where they may not be its characters: a file need
                    # not be UTF-8 (Spark decoded what is not with replacement characters)
                    pos = pos + len(line) + 1 if plain and line.isascii() else line_after(m, pos)

        return self.lines.mapPartitionsWithIndex(tag, preservesPartitioning=True)

    def records(self, refs: RDD[Any]) -> RDD[Any]:
        base, splits = self.base, self.splits
        return self.directed(refs).mapPartitionsWithIndex(
            lambda pid, wanted: read_lines(splits[pid][0], (base + pid) << SHIFT, _ns(wanted))
        )

    def local_records(self, refs: Sequence[Ref]) -> list[tuple[Ref, Any]]:
        """Read by the driver, seeking to each line: the file is local to it (checked when
        the input was opened), and a job would cost more than the reads."""
        return [
            rec
            for pid, ns in sorted(self.split(refs).items())
            for rec in read_lines(self.splits[pid][0], (self.base + pid) << SHIFT, ns)
        ]


class Captured(Point):
    """A combiner, reducer, join or stage point: `run(pid, items)` yields table rows and records.

    Each capture task keeps its table twice: first in its persisted block (with the
    records, so Spark commits it with the successful attempt and any executor can read it)
    and as a file on its own disk, `<tmp>/ember-rdd-<context>/<uid>-<pid>-<attempt>.table`,
    which it names through an accumulator (Spark merges accumulators of successful
    attempts only, so a failed attempt's file is never named). A driver on the same host
    as the files memory-maps them and answers a step without a job; elsewhere a step runs
    tasks over the blocks.
    """

    def __init__(
        self,
        lc: LineageContext,
        kind: str,
        parents: Sequence[Point],
        upstream: RDD[Any],
        run: Callable[[int, Iterable[Any]], tuple[Sequence[Row] | Shared, list[Any]]],
    ) -> None:
        super().__init__(lc, parents, upstream.getNumPartitions())
        self.kind = kind
        uid, base, folder = self.uid, self.base, lc._folder
        reach = self.reach = lc.sc.accumulator(set(), SET_PARAM)
        files = self.files = lc.sc.accumulator(set(), SET_PARAM)

        def capture(pid: int, items: Iterable[Any]) -> Iterator[Any]:
            rows, out = run(pid, items)
            table = encode_table(rows)
            reach.add({(pid, -1)} | {(pid, s) for s in table.slots()})
            files.add({(pid, *write_table(table, out, folder, f"{uid}-{pid}"))})
            yield table, len(out)
            slot = (base + pid) << SHIFT
            yield from ((rec, slot | n) for n, rec in enumerate(out))

        self.stored = upstream.mapPartitionsWithIndex(capture).persist(StorageLevel.MEMORY_AND_DISK)
        self.data = self.stored.mapPartitions(lambda it: islice(it, 1, None), True)
        self.tables = self.stored.mapPartitions(_table_of, True)

    def _local_files(self) -> dict[int, tuple[str, bool]]:
        """`pid -> (table file, records filed)` for the files the driver can read."""
        found: dict[int, tuple[str, bool]] = {}
        for pid, host, path, filed in sorted(self.files.value):
            if (
                host == socket.gethostname()
                and os.path.exists(path)
                and (pid not in found or filed)
            ):
                found[pid] = path, filed
        return found

    def local_tables(self, pids: Iterable[int] | None = None) -> dict[int, Table]:
        """This point's tables (of partitions `pids`, default all) whose files the driver
        can read, memory-mapped."""
        files = self._local_files()
        wanted = files if pids is None else [pid for pid in pids if pid in files]
        return {pid: read_table(files[pid][0]) for pid in wanted}

    def local_outputs(self, pids: Iterable[int] | None = None) -> dict[int, list[Any]]:
        """This point's records (of partitions `pids`, default all), where the driver can
        read them; unpickled only for the partitions asked for."""
        files = {pid: path for pid, (path, filed) in self._local_files().items() if filed}
        wanted = files if pids is None else [pid for pid in pids if pid in files]
        return {pid: load_records(files[pid] + ".records") for pid in wanted}

    def parents_of(self, refs: RDD[Any]) -> RDD[Any]:
        """One backward step: a local join of the directed ids with this point's tables."""

        def expand(pair: tuple[list[tuple[int, int]], list[Table]]) -> Iterator[Ref]:
            wanted, (table,) = pair
            return iter(lookup(table, _ns(wanted)).tolist()) if wanted else iter(())

        return self.directed(refs).glom().zip(self.tables.glom()).flatMap(expand)

    def local_parents(self, refs: Sequence[Ref]) -> list[Ref]:
        """`parents_of` for refs known on the driver: read from the table files where the
        driver can, else by tasks on only the tables the refs name."""

        def expand(pid: int, tables: Iterable[Table], ns: list[int]) -> Iterator[NDArray[np.int64]]:
            yield lookup(next(iter(tables)), ns)

        wanted = self.split(refs)
        mapped = self.local_tables(wanted)
        found = [lookup(mapped[pid], ns) for pid, ns in wanted.items() if pid in mapped]
        rest = {pid: ns for pid, ns in wanted.items() if pid not in mapped}
        found += on_partitions(self.tables, rest, expand)
        return np.concatenate(found).tolist() if found else []

    def children_of(self, parents: set[Ref]) -> RDD[Any]:
        """One forward step: the rows of this point's tables that name any of `parents`."""
        local = self.local_children(parents)
        if local is not None:
            return self.lc.sc.parallelize(local, 1)
        return self.tables.mapPartitionsWithIndex(self._scan(parents))

    def local_children(self, parents: set[Ref]) -> list[Ref] | None:
        """`children_of` on the driver: only the tables whose task saw those parents'
        partitions, read from their files where it can, else by tasks on those tables.
        None while not every partition has reported what it saw."""
        reached = self._reached({r >> SHIFT for r in parents})
        if reached is None:
            return None
        traced = np.array(sorted(parents), np.int64)
        mapped = self.local_tables(reached)
        found = [
            ((self.base + pid) << SHIFT) | n
            for pid in reached
            if pid in mapped
            for n in children(mapped[pid], traced).tolist()
        ]
        rest: dict[int, list[int]] = {pid: [] for pid in reached if pid not in mapped}
        return found + on_partitions(self.tables, rest, self._scan(parents))

    def _scan(self, parents: set[Ref]) -> Callable[..., Iterator[Ref]]:
        base = self.base
        known = self.lc.sc.broadcast(np.array(sorted(parents), np.int64))

        def scan(pid: int, tables: Iterable[Table], ns: list[int] | None = None) -> Iterator[Ref]:
            slot = (base + pid) << SHIFT
            for table in tables:
                yield from (slot | n for n in children(table, known.value).tolist())

        return scan

    def _reached(self, slots: set[int]) -> list[int] | None:
        """This point's partitions whose tables name any of these parent slots, from what
        the capture tasks reported; None until every partition has reported."""
        seen = self.reach.value
        if {pid for pid, _ in seen} != set(range(self.partitions)):
            return None
        return sorted({pid for pid, slot in seen if slot in slots})

    def records(self, refs: RDD[Any]) -> RDD[Any]:
        def pick(pair: tuple[list[tuple[int, int]], list[tuple[Any, Ref]]]) -> Iterator[Any]:
            wanted, rows = pair
            for n in _ns(wanted):
                rec, ref = rows[n]
                yield ref, rec

        return self.directed(refs).glom().zip(self.data.glom()).flatMap(pick)

    def local_records(self, refs: Sequence[Ref]) -> list[tuple[Ref, Any]]:
        """From the records files where the driver can read them, else by tasks."""

        def pick(pid: int, stored: Iterable[Any], ns: list[int]) -> Iterator[Any]:
            it = iter(stored)
            _, records = next(it)
            rows = list(islice(it, ns[-1] + 1))
            _drain(it, records)
            return ((rows[n][1], rows[n][0]) for n in ns)

        wanted = self.split(refs)
        filed = self.local_outputs(wanted)
        found = [
            (((self.base + pid) << SHIFT) | n, filed[pid][n])
            for pid, ns in wanted.items()
            if pid in filed
            for n in ns
        ]
        rest = {pid: ns for pid, ns in wanted.items() if pid not in filed}
        return found + on_partitions(self.stored, rest, pick)

    def unpersist(self) -> None:
        self.stored.unpersist()
