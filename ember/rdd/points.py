"""Titian's capture points: where lineage ids are assigned and where their tables live.

A lineage id ("ref") is `(point uid, partition, n)`: the partition of the capture point that
holds the record, so a trace can send the id straight to that partition (the directed
shuffle), and `n`, the record's number within that partition (a byte offset for text input,
the element index for `parallelize`, the output position for every other point).

Input points keep no table: their ids name the record itself. Every other point runs as one
blocking pass per partition that yields the partition's lineage table first and then its
records; that RDD is persisted (MEMORY_AND_DISK), so a table lives in the block of the task
that produced it and exists only once that attempt has succeeded.
"""

from __future__ import annotations

import bisect
import pickle
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import islice, pairwise
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from pyspark import RDD, StorageLevel

from ember.errors import EmberError
from ember.rdd.debug import SET_PARAM

if TYPE_CHECKING:
    from ember.rdd.context import LineageContext

Ref = tuple[int, int, int]
Row = Sequence[Ref]

CHUNK_REFS = 1 << 15  # parent refs per pickled chunk: a lookup unpickles only the chunks it needs
Table = tuple[list[int], list[bytes]]  # (first row of each chunk, pickled chunks)


class LineageSourceError(EmberError):
    """An input the RDD lineage cannot re-read by id (not a local text file, or CRLF lines)."""


def encode_table(rows: Sequence[Row]) -> Table:
    """Chunks of about `CHUNK_REFS` refs (a frequent key's row alone may exceed it), so a
    lookup next to a frequent key does not unpickle its refs too."""
    starts: list[int] = []
    size = CHUNK_REFS
    for i, row in enumerate(rows):
        if size >= CHUNK_REFS:
            starts.append(i)
            size = 0
        size += len(row) + 1
    bounds = [*starts, len(rows)]
    return starts, [pickle.dumps(list(rows[a:b]), 5) for a, b in pairwise(bounds)]


def lookup(table: Table, ns: Iterable[int]) -> Iterator[Row]:
    """The parent refs of rows `ns` of one partition's table."""
    starts, blobs = table
    chunk: list[Row] = []
    current = -1
    for n in sorted(set(ns)):
        at = bisect.bisect_right(starts, n) - 1
        if at != current:
            current = at
            chunk = pickle.loads(blobs[at])
        yield chunk[n - starts[at]]


def table_rows(table: Table) -> Iterator[Row]:
    for blob in table[1]:
        yield from pickle.loads(blob)


def _identity(key: int) -> int:
    return key


def directed(refs: RDD[Any], partitions: int) -> RDD[Any]:
    """Only the traced ids move: each `(pid, n)` goes to partition `pid` of its capture point."""
    return refs.map(lambda r: (r[1], r[2])).partitionBy(partitions, _identity)


def _ns(wanted: Iterable[tuple[int, int]]) -> list[int]:
    return sorted({n for _, n in wanted})


def by_partition(refs: Iterable[Ref]) -> dict[int, list[int]]:
    """`pid -> sorted ns` of refs known on the driver."""
    found: dict[int, set[int]] = {}
    for _, pid, n in refs:
        found.setdefault(pid, set()).add(n)
    return {pid: sorted(ns) for pid, ns in found.items()}


def on_partitions(
    rdd: RDD[Any], wanted: dict[int, list[int]], fn: Callable[[int, Iterable[Any], list[int]], Iterator[Any]]
) -> list[Any]:
    """`fn(pid, partition, ns)` on only the partitions named in `wanted`: one job, no shuffle,
    no task for a partition the trace does not reach (the driver-directed form of a step)."""
    if not wanted:
        return []
    task = rdd.mapPartitionsWithIndex(lambda pid, it: fn(pid, it, wanted.get(pid, [])))
    return list(rdd.context.runJob(task, iter, partitions=sorted(wanted)))


class Point(ABC):
    """A capture point; `parents` are the points its ids refer to."""

    kind = "input"

    def __init__(self, lc: LineageContext, parents: Sequence[Point], partitions: int) -> None:
        self.lc = lc
        self.parents = tuple(parents)
        self.partitions = partitions
        self.uid = lc._register(self)

    @abstractmethod
    def records(self, refs: RDD[Any]) -> RDD[Any]:
        """`(ref, raw record)` for the given refs of this point (duplicates removed)."""

    @abstractmethod
    def local_records(self, refs: Sequence[Ref]) -> list[tuple[Ref, Any]]:
        """`records` for refs known on the driver, read by tasks on only their partitions."""

    def unpersist(self) -> None:  # noqa: B027 (a default: input points hold nothing)
        """Drops the tables this point persisted."""


class IndexedInput(Point):
    """`parallelize` and DataFrame rows: `source` holds `(n, record)`, n the element index."""

    def __init__(self, lc: LineageContext, source: RDD[Any]) -> None:
        super().__init__(lc, (), source.getNumPartitions())
        self.source = source

    def tagged(self) -> RDD[Any]:
        uid = self.uid
        return self.source.mapPartitionsWithIndex(
            lambda pid, it: ((x, (uid, pid, n)) for n, x in it), preservesPartitioning=True
        )

    def records(self, refs: RDD[Any]) -> RDD[Any]:
        uid = self.uid

        def pick(pair: tuple[list[tuple[int, int]], list[tuple[int, Any]]]) -> Iterator[Any]:
            wanted, rows = pair
            if not wanted:
                return
            pid, ns = wanted[0][0], set(_ns(wanted))
            yield from (((uid, pid, n), x) for n, x in rows if n in ns)

        return directed(refs, self.partitions).glom().zip(self.source.glom()).flatMap(pick)

    def local_records(self, refs: Sequence[Ref]) -> list[tuple[Ref, Any]]:
        uid = self.uid

        def pick(pid: int, rows: Iterable[tuple[int, Any]], ns: list[int]) -> Iterator[Any]:
            keep = set(ns)
            return (((uid, pid, n), x) for n, x in rows if n in keep)

        return on_partitions(self.source, by_partition(refs), pick)


class TextInput(Point):
    """A local text file read by `sc.textFile`; ids are (split, byte offset of the line)."""

    def __init__(self, lc: LineageContext, path: str, min_partitions: int | None) -> None:
        lines = lc.sc.textFile(path, min_partitions)
        splits = []
        for part in lines._jrdd.rdd().partitions():
            split = part.inputSplit().value()
            url = urlparse(split.getPath().toString())
            if url.scheme not in ("", "file"):
                raise LineageSourceError(f"{path}: only local files can be re-read by offset")
            splits.append((url.path, int(split.getStart())))
        for file in {p for p, _ in splits}:
            with open(file, "rb") as f:
                if b"\r\n" in f.read(1 << 16):
                    raise LineageSourceError(f"{file}: CRLF line ends; ids assume LF")
        super().__init__(lc, (), len(splits))
        self.lines = lines
        self.splits = splits

    def tagged(self) -> RDD[Any]:
        uid, splits = self.uid, self.splits

        def tag(pid: int, lines: Iterable[str]) -> Iterator[tuple[str, Ref]]:
            path, pos = splits[pid]
            if pos:  # Hadoop's reader skips the partial line a split starts in
                with open(path, "rb") as f:
                    f.seek(pos)
                    pos += len(f.readline())
            for line in lines:
                yield line, (uid, pid, pos)
                pos += (len(line) if line.isascii() else len(line.encode())) + 1

        return self.lines.mapPartitionsWithIndex(tag, preservesPartitioning=True)

    def records(self, refs: RDD[Any]) -> RDD[Any]:
        uid, splits = self.uid, self.splits
        return directed(refs, self.partitions).mapPartitionsWithIndex(
            lambda pid, wanted: _lines(splits[pid][0], uid, pid, _ns(wanted))
        )

    def local_records(self, refs: Sequence[Ref]) -> list[tuple[Ref, Any]]:
        """Read by the driver, seeking to each line: the file is local to it (checked when
        the input was opened), and a job would cost more than the reads."""
        return [rec for pid, ns in sorted(by_partition(refs).items()) for rec in _lines(self.splits[pid][0], self.uid, pid, ns)]


def _lines(path: str, uid: int, pid: int, ns: list[int]) -> Iterator[tuple[Ref, str]]:
    """The lines starting at byte offsets `ns` of `path`."""
    if not ns:
        return
    with open(path, "rb") as f:
        for n in ns:
            f.seek(n)
            yield (uid, pid, n), f.readline().rstrip(b"\n").decode()


class Captured(Point):
    """A combiner, reducer, join or stage point: `run(pid, items)` yields table rows and records."""

    def __init__(
        self,
        lc: LineageContext,
        kind: str,
        parents: Sequence[Point],
        upstream: RDD[Any],
        run: Callable[[int, Iterable[Any]], tuple[list[Row], list[Any]]],
    ) -> None:
        super().__init__(lc, parents, upstream.getNumPartitions())
        self.kind = kind
        uid = self.uid
        reach = self.reach = lc.sc.accumulator(set(), SET_PARAM)

        def capture(pid: int, items: Iterable[Any]) -> Iterator[Any]:
            rows, out = run(pid, items)
            reach.add({(pid, -1, -1)} | {(pid, r[0], r[1]) for row in rows for r in row})
            yield encode_table(rows)
            yield from ((rec, (uid, pid, n)) for n, rec in enumerate(out))

        self.stored = upstream.mapPartitionsWithIndex(capture).persist(
            StorageLevel.MEMORY_AND_DISK
        )
        self.data = self.stored.mapPartitions(lambda it: islice(it, 1, None), True)
        self.tables = self.stored.mapPartitions(lambda it: islice(it, 1), True)

    def parents_of(self, refs: RDD[Any]) -> RDD[Any]:
        """One backward step: a local join of the directed ids with this point's tables."""

        def expand(pair: tuple[list[tuple[int, int]], list[Table]]) -> Iterator[Ref]:
            wanted, (table,) = pair
            for row in lookup(table, _ns(wanted)):
                yield from row

        return directed(refs, self.partitions).glom().zip(self.tables.glom()).flatMap(expand)

    def local_parents(self, refs: Sequence[Ref]) -> list[Ref]:
        """`parents_of` for refs known on the driver: tasks on only the tables they name."""

        def expand(pid: int, tables: Iterable[Table], ns: list[int]) -> Iterator[Ref]:
            for row in lookup(next(iter(tables)), ns):
                yield from row

        return on_partitions(self.tables, by_partition(refs), expand)

    def children_of(self, parents: set[Ref]) -> RDD[Any]:
        """One forward step: the rows of this point's tables that name any of `parents`,
        scanning only the tables whose task saw those parents' partitions."""
        uid = self.uid
        known = self.lc.sc.broadcast(parents)

        def scan(pid: int, tables: Iterable[Table], ns: list[int] | None = None) -> Iterator[Ref]:
            for table in tables:
                for n, row in enumerate(table_rows(table)):
                    if not known.value.isdisjoint(row):
                        yield (uid, pid, n)

        reached = self._reached({(r[0], r[1]) for r in parents})
        if reached is None:
            return self.tables.mapPartitionsWithIndex(scan)
        found = on_partitions(self.tables, {pid: [] for pid in reached}, scan)
        return self.lc.sc.parallelize(found, 1)

    def _reached(self, partitions: set[tuple[int, int]]) -> list[int] | None:
        """This point's partitions whose tables name any of these parent partitions, from
        what the capture tasks reported; None until every partition has reported."""
        seen = self.reach.value
        if {pid for pid, _, _ in seen} != set(range(self.partitions)):
            return None
        return sorted({pid for pid, u, p in seen if (u, p) in partitions})

    def records(self, refs: RDD[Any]) -> RDD[Any]:
        def pick(pair: tuple[list[tuple[int, int]], list[tuple[Any, Ref]]]) -> Iterator[Any]:
            wanted, rows = pair
            for n in _ns(wanted):
                rec, ref = rows[n]
                yield ref, rec

        return directed(refs, self.partitions).glom().zip(self.data.glom()).flatMap(pick)

    def local_records(self, refs: Sequence[Ref]) -> list[tuple[Ref, Any]]:
        def pick(pid: int, data: Iterable[tuple[Any, Ref]], ns: list[int]) -> Iterator[Any]:
            rows = list(islice(data, ns[-1] + 1))
            return ((rows[n][1], rows[n][0]) for n in ns)

        return on_partitions(self.data, by_partition(refs), pick)

    def unpersist(self) -> None:
        self.stored.unpersist()
