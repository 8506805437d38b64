"""In-process lineage indexes and their traces; `store.build` builds one after capture
from the captured slots.

A *level* is a table of rows that carry lineage: the output (in `ember_oid` order) or a
side table (sorted by its group keys, so every group is a contiguous row range, like
Smoke's rid index laid out flat). Each level holds, per row:

- rid columns: one per rid slot (-1 where the row has no such source row);
- ref ranges: per ref slot, the `[start, end)` row range of the side table it points at.

Columns are encoded (`store.columns`: arithmetic runs where lineage has structure, plain
arrays where not) and traces read them without decoding: backward traces walk ranges
down from the output, forward traces mark rows bottom up. No Spark job, no per-row Python.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Protocol, TypeAlias

import numpy as np

from ember.store.columns import IntColumn, Plain, sorted_unique
from ember.store.parts import Parts


@dataclass(frozen=True)
class Ranges:
    table: int
    start: IntColumn
    end: IntColumn


@dataclass(frozen=True)
class Level:
    rows: int
    rids: tuple[tuple[str, IntColumn], ...]  # (source key, rid per row or -1)
    refs: tuple[Ranges, ...]
    why: str = "output"

    def columns(self) -> list[IntColumn]:
        return [c for _, c in self.rids] + [c for r in self.refs for c in (r.start, r.end)]


_Found: TypeAlias = tuple[np.ndarray, np.ndarray | None]  # rids, and the output row each is traced for
Expanded: TypeAlias = tuple[Level, np.ndarray, np.ndarray, np.ndarray | None]  # level, its ranges, their rows' owners


class Deferred(Protocol):
    """A side table read when a trace reaches it (`store.later`): its level holds one row per
    group the lineage points at, and those groups' rows are read from the sources then."""

    def expanded(self, start: np.ndarray, end: np.ndarray, owners: np.ndarray | None) -> Expanded:
        """The groups of the level's rows `[start, end)` as ranges of a level read for them
        (`owners`: one per row of the ranges, as `_visit` takes them)."""
        ...

    def marked(self, source: str, rids: np.ndarray) -> np.ndarray:
        """Per row of the level: whether its group holds any of `rids` of `source`."""
        ...

    def whole(self) -> tuple[Level, np.ndarray, np.ndarray]:
        """The table read whole: its level, and each row's group as a range of it."""
        ...


@dataclass(frozen=True)
class LineageIndex:
    output: Level
    tables: tuple[Level, ...]  # by side-table id; a table only points at lower ids
    later: Mapping[int, Deferred] = field(default_factory=dict)  # tables read at trace time, by id

    @property
    def nbytes(self) -> int:
        return sum(c.nbytes for lv in (self.output, *self.tables) for c in lv.columns())

    @property
    def built_remotely(self) -> bool:
        """Whether the executors built some level (its parts are read on demand)."""
        return any(isinstance(c, Parts) for lv in (self.output, *self.tables) for c in lv.columns())

    @property
    def raw_nbytes(self) -> int:
        """What the index would take as plain int64 arrays."""
        return sum(8 * c.size for lv in (self.output, *self.tables) for c in lv.columns())

    def backward(self, oids: np.ndarray) -> dict[str, np.ndarray]:
        """Source key → sorted unique rids in the lineage of the given output rows."""
        found = self._walk(oids, None)
        return {k: sorted_unique([rids for rids, _ in parts]) for k, parts in found.items()}

    def backward_pairs(self, oids: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Source key → (oids, rids): each output row's own lineage, distinct, sorted by oid then rid."""
        out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for key, parts in self._walk(oids, oids).items():
            rids = np.concatenate([r for r, _ in parts])
            owners = np.concatenate([o for _, o in parts if o is not None])
            order = np.lexsort((rids, owners))
            rids, owners = rids[order], owners[order]
            keep = np.ones(rids.size, dtype=bool)
            keep[1:] = (rids[1:] != rids[:-1]) | (owners[1:] != owners[:-1])
            out[key] = (owners[keep], rids[keep])
        return out

    def _walk(self, rows: np.ndarray, owners: np.ndarray | None) -> dict[str, list[_Found]]:
        """Walks levels top down; every row carries the output row (`owner`) it is traced
        for, unless `owners` is None (one trace of all `rows`: nothing to carry)."""
        found: dict[str, list[_Found]] = {}
        pending: dict[int, list[tuple[np.ndarray, np.ndarray, np.ndarray | None]]] = {}
        _visit(self.output, rows, rows + 1, owners, found, pending)
        for tid in range(len(self.tables) - 1, -1, -1):
            if tid in pending:
                parts = pending.pop(tid)
                start, end = np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
                if owners is None:
                    start, end = merge(start, end)
                    _visit(*self._level(tid, start, end, None), found, pending)
                    continue
                owner = np.concatenate([p[2] for p in parts if p[2] is not None])
                start, end, owner = _merge_owned(start, end, owner, self.tables[tid].rows)
                _visit(*self._level(tid, start, end, np.repeat(owner, end - start)), found, pending)
        return found

    def _level(self, tid: int, start: np.ndarray, end: np.ndarray, owners: np.ndarray | None) -> Expanded:
        """What a walk visits for table `tid`'s rows `[start, end)`."""
        later = self.later.get(tid)
        return (self.tables[tid], start, end, owners) if later is None else later.expanded(start, end, owners)

    def forward(self, source: str, rids: np.ndarray) -> np.ndarray:
        """Sorted oids of the output rows whose lineage holds any of `rids` of `source`."""
        rids = sorted_unique([np.asarray(rids, dtype=np.int64)])
        marks: list[np.ndarray] = []
        for tid, level in enumerate(self.tables):
            later = self.later.get(tid)
            marks.append(_marked(level, source, rids, marks) if later is None else later.marked(source, rids))
        return np.flatnonzero(_marked(self.output, source, rids, marks)).astype(np.int64)


def _visit(
    level: Level,
    first: np.ndarray,
    after: np.ndarray,
    owners: np.ndarray | None,
    found: dict[str, list[_Found]],
    pending: dict[int, list[tuple[np.ndarray, np.ndarray, np.ndarray | None]]],
) -> None:
    """Reads the level's rows `[first, after)`, range after range (`owners`: one per row)."""
    for key, col in level.rids:
        vals, at = col.take_valid(first, after, owners is not None)
        found.setdefault(key, []).append((vals, None if owners is None or at is None else owners[at]))
    for r in level.refs:
        start, end = r.start.take_ranges(first, after), r.end.take_ranges(first, after)
        keep = end > start
        pending.setdefault(r.table, []).append((start[keep], end[keep], None if owners is None else owners[keep]))


def _merge_owned(
    start: np.ndarray, end: np.ndarray, owner: np.ndarray, rows: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`merge` per owner: each owner's ranges become sorted and disjoint."""
    span = rows + 1
    if owner.size and int(owner.max()) >= (1 << 62) // span:  # would overflow: keep the ranges as they are
        return start, end, owner
    s, e = merge(owner * span + start, owner * span + end)
    o = s // span
    return s - o * span, e - o * span, o


def merge(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of ranges `[start, end)` as sorted, disjoint ranges."""
    if start.size == 0:
        return start, end
    if not bool(np.all(start[1:] >= start[:-1])):  # a level's refs in row order mostly come sorted
        order = np.argsort(start, kind="stable")
        start, end = start[order], end[order]
    e = np.maximum.accumulate(end)
    breaks = start[1:] > e[:-1]
    return start[np.concatenate(([True], breaks))], e[np.concatenate((breaks, [True]))]


def marked_rows(level: Level, source: str, rids: np.ndarray) -> np.ndarray:
    """Per row of a level whose rows point at no table: whether it holds any of `rids`."""
    return _marked(level, source, rids, [])


def _marked(level: Level, source: str, rids: np.ndarray, marks: list[np.ndarray]) -> np.ndarray:
    hit = np.zeros(level.rows, dtype=bool)
    for key, col in level.rids:
        if key == source:
            hit[col.hits(rids)] = True
    for r in level.refs:
        marked = np.flatnonzero(marks[r.table])  # a trace marks few rows: no count over the whole level
        if marked.size:
            hit |= np.searchsorted(marked, r.end.decode()) > np.searchsorted(marked, r.start.decode())
    return hit


def as_plain(index: LineageIndex) -> LineageIndex:
    """The same index with every column decoded (the uncompressed reference form)."""
    return map_columns(index, lambda c: Plain(c.decode()))


def map_columns(index: LineageIndex, fn: Callable[[IntColumn], IntColumn]) -> LineageIndex:
    """The same index with each column replaced by `fn(column)`."""

    def level(lv: Level) -> Level:
        rids = tuple((k, fn(c)) for k, c in lv.rids)
        refs = tuple(Ranges(r.table, fn(r.start), fn(r.end)) for r in lv.refs)
        return Level(lv.rows, rids, refs, lv.why)

    return replace(index, output=level(index.output), tables=tuple(level(t) for t in index.tables))
