"""Side tables read when a trace reaches them, not at capture.

A side table every group of which reaches the result is read whole, beside the job
(`SideTable.whole`), on the cores the job runs on, whatever is traced later, and one
with a group per row of a large source takes a large share of the job's time. Where such
a table's scans hold more rows than `capture.sides.AT_TRACE_ROWS`, capture keeps only
its groups' keys (the level's rows, one per group the lineage points at), and a backward
trace reads the groups it reaches, for their keys only, as the capture would have read
them. A trace reaching half of the groups or more, a forward trace (which group holds a
source row is known only once the table is read) and a saved store read it whole, once,
and keep it. Each read checks first that the sources are as they were at capture.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
import pyarrow as pa

from ember.engines import duck
from ember.plan.slots import SideTable
from ember.store.build import SORTED, KeyRows, group_ranges, leaf_level, sorted_rows
from ember.store.columns import encode, expand_ranges
from ember.store.index import Expanded, Level, LineageIndex, Ranges, marked_rows

Reader = Callable[[pa.Table | None], pa.Table]  # wanted keys k0..kn (None: every group) → the table's rows


@dataclass
class Later:
    """One side table read at trace time (`store.index.Deferred`)."""

    table: SideTable
    keys: pa.Table  # k0..kn, a row per row of the table's level, in its order
    read: Reader
    _whole: tuple[Level, np.ndarray, np.ndarray] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def expanded(self, start: np.ndarray, end: np.ndarray, owners: np.ndarray | None) -> Expanded:
        rows = expand_ranges(start, end)
        wanted = np.unique(rows)
        if wanted.size == 0:  # nothing to read (a walk of no output rows)
            return Level(0, (), (), self.table.why), rows, rows, None if owners is None else owners[:0]
        if self._whole is None and 2 * wanted.size < self.keys.num_rows:
            level, first, after = self._read(self.keys.take(pa.array(wanted)))
            at = np.searchsorted(wanted, rows)
        else:
            level, first, after = self.whole()
            at = rows
        s, e = first[at], after[at]
        some = e > s
        return level, s[some], e[some], None if owners is None else np.repeat(owners[some], (e - s)[some])

    def marked(self, source: str, rids: np.ndarray) -> np.ndarray:
        level, first, after = self.whole()
        below = np.concatenate(([0], np.cumsum(marked_rows(level, source, rids), dtype=np.int64)))
        return below[after] > below[first]

    def whole(self) -> tuple[Level, np.ndarray, np.ndarray]:
        with self._lock:
            if self._whole is None:
                self._whole = self._read(None)
            return self._whole

    def _read(self, wanted: pa.Table | None) -> tuple[Level, np.ndarray, np.ndarray]:
        """The level read for the `wanted` keys (None: all) and each one's group as a range of
        it; a key with no rows gets the empty range where its group would start, so ranges
        of consecutive keys stay contiguous (`materialized`)."""
        keys = self.keys if wanted is None else wanted
        rows = self.read(wanted)
        con = duck.connect()
        try:
            level, groups = leaf_level(con, rows, self.table)
            found, s, e = group_ranges(con, keys, groups)
        finally:
            con.close()
        starts = np.full(keys.num_rows, level.rows, dtype=np.int64)
        starts[found] = s
        first = np.minimum.accumulate(starts[::-1])[::-1].copy()
        after = first.copy()
        after[found] = e
        return level, first, after


def key_rows(table: SideTable, wanted: pa.Table, read: Reader) -> KeyRows:
    """A table's level rows before it is read: the `wanted` keys (k0..kn), sorted as the
    index sorts its rows, the other columns null."""
    con = duck.connect()
    try:
        keys = sorted_rows(con, wanted, wanted.column_names)
    finally:
        con.close()
    at = {k.name: i for i, k in enumerate(table.keys)}
    columns = [
        keys.column(f"k{at[a.name]}") if a.name in at else pa.nulls(keys.num_rows, pa.int64()) for a in table.plan.output
    ]
    rows = pa.table(columns, names=[a.name for a in table.plan.output]).replace_schema_metadata(SORTED)
    return KeyRows(rows, Later(table, keys, read))


def materialized(index: LineageIndex) -> LineageIndex:
    """The index with every table read at trace time read whole into its level, and the refs
    into it pointing at its groups (what a saved store holds)."""
    if not index.later:
        return index
    tables = list(index.tables)
    groups: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for tid, later in index.later.items():
        tables[tid], first, after = later.whole()
        groups[tid] = (first, after)

    def moved(level: Level) -> Level:
        refs = []
        for r in level.refs:
            if r.table in groups:
                first, after = groups[r.table]
                s, e = r.start.decode(), r.end.decode()
                r = Ranges(r.table, encode(_taken(first, s, e > s)), encode(_taken(after, e - 1, e > s)))
            refs.append(r)
        return replace(level, refs=tuple(refs))

    return LineageIndex(moved(index.output), tuple(moved(t) for t in tables))


def _taken(values: np.ndarray, at: np.ndarray, some: np.ndarray) -> np.ndarray:
    """`values[at]` where `some`, else 0."""
    out = np.zeros(at.size, dtype=np.int64)
    out[some] = values[at[some]]
    return out
