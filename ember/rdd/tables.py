"""Lineage tables: each capture point's per-partition table of the parent ids of every
record it made, encoded as two numpy arrays, written as one memory-mappable file, and the
two primitives a trace step runs on it (`lookup` backward, `children` forward).
"""

from __future__ import annotations

import os
import pickle
import socket
import uuid
from array import array
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain, pairwise
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from ember.rdd.ids import SHIFT, Ref, Row
from ember.store.columns import sorted_unique

NARROW = 1 << 32  # a table whose parent ids span less than this stores them as uint32


class Table(NamedTuple):
    """Row i names parents `base + parents[offsets[i]:offsets[i + 1]]`. A combiner's or a
    stage's parents all lie in one input split, so they span less than 2**32 and are kept
    as uint32 offsets from `base`: half the bytes in every block, file and page fault.

    A shared table (`offsets` of two, `rows` other than one) has every row name the same
    parents: the records a function of a whole partition read, kept once instead of once
    per output record."""

    offsets: NDArray[np.int64]
    base: int
    parents: NDArray[np.integer[Any]]
    rows: int

    @property
    def shared(self) -> bool:
        return len(self.offsets) - 1 != self.rows

    def ids(self, at: NDArray[np.int64] | slice) -> NDArray[np.int64]:
        """Parent ids at positions `at` of `parents`, as int64."""
        picked = self.parents[at].astype(np.int64, copy=False)
        return picked + self.base if self.base else picked

    def slots(self) -> set[int]:
        """The parent slots the table names (exact: a narrow span touches at most two)."""
        if not len(self.parents):
            return set()
        if self.parents.dtype == np.uint32:
            return {self.base >> SHIFT, (self.base + int(self.parents.max())) >> SHIFT}
        return set(sorted_unique([(self.parents >> SHIFT).astype(np.int64)]).tolist())


class Shared(NamedTuple):
    """Table rows for a function of a whole partition: `rows` outputs, each naming `parents`."""

    parents: Row
    rows: int


def encode_table(table_rows: Sequence[Row] | Shared) -> Table:
    """The rows as one offsets array and one parents array: a lookup slices, a forward
    step tests membership in one vectorised pass, and pickling copies two buffers."""
    rows: Sequence[Row] = [table_rows.parents] if isinstance(table_rows, Shared) else table_rows
    count = table_rows.rows if isinstance(table_rows, Shared) else len(table_rows)
    lengths = np.fromiter(map(len, rows), np.int64, len(rows))
    offsets = np.zeros(len(rows) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if rows and all(isinstance(row, array) for row in rows):
        parents = np.frombuffer(b"".join(rows), np.int64)  # type: ignore[arg-type]
    else:
        parents = np.fromiter(chain.from_iterable(rows), np.int64, int(offsets[-1]))
    if len(parents):
        low = int(parents.min())
        if int(parents.max()) - low < NARROW:
            return Table(offsets, low, (parents - low).astype(np.uint32), count)
    return Table(offsets, 0, parents, count)


def lookup(table: Table, ns: Iterable[int]) -> NDArray[np.int64]:
    """The parent ids of rows `ns` of one partition's table."""
    offsets = table.offsets
    rows = sorted_unique([np.fromiter(ns, np.int64)])
    if table.shared:
        rows = np.zeros(min(len(rows), 1), np.int64)
    starts, ends = offsets[rows], offsets[rows + 1]
    lengths = ends - starts
    total = int(lengths.sum())
    shift = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
    return table.ids(np.arange(total, dtype=np.int64) + shift)


def children(table: Table, parents: NDArray[np.int64]) -> NDArray[np.int64]:
    """The rows of `table` that name any of `parents` (sorted)."""
    named = table.parents
    if named.dtype == np.uint32:
        parents = parents - table.base
        parents = parents[(parents >= 0) & (parents < NARROW)].astype(np.uint32)
    hits = np.flatnonzero(np.isin(named, parents))
    if table.shared:
        return np.arange(table.rows if len(hits) else 0, dtype=np.int64)
    return sorted_unique([np.searchsorted(table.offsets, hits, side="right") - 1])


FILE_RECORDS = 100_000  # a partition with at most this many records also files them


# int64s before a table file's arrays: rows, offsets, base, parent itemsize, parent count
HEADER = 5


def write_table(table: Table, records: list[Any], folder: str, name: str) -> tuple[str, str, bool]:
    """Writes `table` as one file (header, offsets, parents) under `folder` on this host,
    under a name of its own for this task attempt, and the partition's records next to it
    when they are few; returns `(host, path, records filed)`."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{name}-{uuid.uuid4().hex}.table")
    filed = len(records) <= FILE_RECORDS
    if filed:
        with open(path + ".tmp", "wb") as f:
            pickle.dump(records, f, protocol=5)
        os.replace(path + ".tmp", path + ".records")
    header = [table.rows, len(table.offsets), table.base, table.parents.itemsize, len(table.parents)]
    with open(path + ".tmp", "wb") as f:
        np.array(header, np.int64).tofile(f)
        table.offsets.tofile(f)
        table.parents.tofile(f)
    os.replace(path + ".tmp", path)
    return socket.gethostname(), path, filed


def load_records(path: str) -> Any:
    with open(path, "rb") as f:
        return pickle.load(f)


def read_table(path: str) -> Table:
    """A table file, memory-mapped: a step reads only the pages of the rows it looks up."""
    whole = np.memmap(path, np.uint8, "r")
    rows, offsets, base, itemsize, count = whole[: HEADER * 8].view(np.int64).tolist()
    start = (HEADER + offsets) * 8
    dtype = np.uint32 if itemsize == 4 else np.int64
    return Table(
        whole[HEADER * 8 : start].view(np.int64),
        base,
        whole[start : start + itemsize * count].view(dtype),
        rows,
    )


def table_rows(table: Table) -> Iterator[list[Ref]]:
    if table.shared:
        yield from [table.ids(slice(None)).tolist()] * table.rows
        return
    offsets = table.offsets.tolist()
    for a, b in pairwise(offsets):
        yield table.ids(slice(a, b)).tolist()
