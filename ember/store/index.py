"""In-process lineage indexes, built once after capture from the captured slots.

A *level* is a table of rows that carry lineage: the output (in `ember_oid` order) or a
side table (sorted by its group keys, so every group is a contiguous row range, like
Smoke's rid index laid out flat). Each level holds, per row:

- rid arrays: one int64 array per rid slot (-1 where the row has no such source row);
- ref ranges: per ref slot, the `[start, end)` row range of the side table it points at.

Backward traces walk ranges down from the output; forward traces mark rows bottom up.
Both are whole-array numpy operations: no Spark job, no per-row Python.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import numpy as np
import pyarrow as pa

from ember.capture.annotate import RefSlot, RidSlot, SideTable, Slot


@dataclass(frozen=True)
class Ranges:
    table: int
    start: np.ndarray
    end: np.ndarray


@dataclass(frozen=True)
class Level:
    rows: int
    rids: tuple[tuple[str, np.ndarray], ...]  # (source key, rid per row or -1)
    refs: tuple[Ranges, ...]


@dataclass(frozen=True)
class LineageIndex:
    output: Level
    tables: tuple[Level, ...]  # by side-table id; a table only points at lower ids

    @property
    def nbytes(self) -> int:
        levels = (self.output, *self.tables)
        return sum(a.nbytes for lv in levels for _, a in lv.rids) + sum(
            r.start.nbytes + r.end.nbytes for lv in levels for r in lv.refs
        )

    def backward(self, oids: np.ndarray) -> dict[str, np.ndarray]:
        """Source key → sorted unique rids in the lineage of the given output rows."""
        found: dict[str, list[np.ndarray]] = {}
        pending: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
        _visit(self.output, oids, found, pending)
        for tid in range(len(self.tables) - 1, -1, -1):
            if tid in pending:
                starts, ends = zip(*pending.pop(tid), strict=True)
                rows = expand(*merge(np.concatenate(starts), np.concatenate(ends)))
                _visit(self.tables[tid], rows, found, pending)
        return {k: sorted_unique(v) for k, v in found.items()}

    def forward(self, source: str, rids: np.ndarray) -> np.ndarray:
        """Sorted oids of the output rows whose lineage holds any of `rids` of `source`."""
        marks: list[np.ndarray] = []
        for level in self.tables:
            marks.append(_marked(level, source, rids, marks))
        return np.flatnonzero(_marked(self.output, source, rids, marks)).astype(np.int64)


def _visit(
    level: Level,
    rows: np.ndarray,
    found: dict[str, list[np.ndarray]],
    pending: dict[int, list[tuple[np.ndarray, np.ndarray]]],
) -> None:
    for key, arr in level.rids:
        vals = arr[rows]
        found.setdefault(key, []).append(vals[vals >= 0])
    for r in level.refs:
        start, end = r.start[rows], r.end[rows]
        keep = end > start
        pending.setdefault(r.table, []).append((start[keep], end[keep]))


def merge(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of ranges `[start, end)` as sorted, disjoint ranges."""
    if start.size == 0:
        return start, end
    order = np.argsort(start, kind="stable")
    s, e = start[order], np.maximum.accumulate(end[order])
    breaks = s[1:] > e[:-1]
    return s[np.concatenate(([True], breaks))], e[np.concatenate((breaks, [True]))]


def expand(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """All row numbers covered by the ranges `[start, end)` (with repeats)."""
    if start.size == 0:
        return np.empty(0, dtype=np.int64)
    lengths = end - start
    total = int(lengths.sum())
    offsets = np.repeat(start - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
    return offsets + np.arange(total, dtype=np.int64)


def sorted_unique(chunks: list[np.ndarray]) -> np.ndarray:
    """Sorted distinct values; cheap when the chunks arrive sorted (one group's rids do)."""
    values = np.concatenate(chunks) if chunks else np.empty(0, np.int64)
    if values.size > 1 and not bool(np.all(values[1:] >= values[:-1])):
        values = np.sort(values)
    if values.size > 1:
        values = values[np.concatenate(([True], values[1:] != values[:-1]))]
    return values


def _marked(level: Level, source: str, rids: np.ndarray, marks: list[np.ndarray]) -> np.ndarray:
    hit = np.zeros(level.rows, dtype=bool)
    for key, arr in level.rids:
        if key == source:
            hit |= np.isin(arr, rids)
    for r in level.refs:
        below = np.concatenate(([0], np.cumsum(marks[r.table], dtype=np.int64)))
        hit |= below[r.end] > below[r.start]
    return hit


# --- building -----------------------------------------------------------------


def build_index(
    output: pa.Table, output_slots: tuple[Slot, ...], tables: tuple[SideTable, ...], data: list[pa.Table]
) -> LineageIndex:
    """Sorts each side table by its keys and resolves every ref slot to row ranges."""
    con = duckdb.connect()
    groups: list[pa.Table] = []
    levels: list[Level] = []
    for table, arrow in zip(tables, data, strict=True):
        # Within a group, rows sorted by window position, else by rid: a group's rids come out sorted.
        tie = table.order or tuple(s.attr for s in table.slots if isinstance(s, RidSlot))
        ordered = _sorted(con, arrow, [k.name for k in (*table.keys, *tie)])
        levels.append(_level(con, ordered, table.slots, groups, levels))
        groups.append(_groups(con, ordered, [k.name for k in table.keys]))
    out = _level(con, output, output_slots, groups, levels)
    con.close()
    return LineageIndex(out, tuple(levels))


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _sorted(con: duckdb.DuckDBPyConnection, arrow: pa.Table, keys: list[str]) -> pa.Table:
    if not keys or arrow.num_rows == 0:
        return arrow
    con.register("t", arrow)
    order = ", ".join(f"{_quote(k)} ASC NULLS FIRST" for k in keys)
    result = con.sql(f"SELECT * FROM t ORDER BY {order}").to_arrow_table()
    con.unregister("t")
    return result


def _groups(con: duckdb.DuckDBPyConnection, ordered: pa.Table, keys: list[str]) -> pa.Table:
    """Key values → [start, end) row range of each group in a sorted side table."""
    if not keys:
        return pa.table({"__s": [0], "__e": [ordered.num_rows]})
    t = ordered.select(keys).append_column("__rn", pa.array(np.arange(ordered.num_rows, dtype=np.int64)))
    con.register("t", t)
    cols = ", ".join(_quote(k) for k in keys)
    result = con.sql(f"SELECT {cols}, min(__rn) AS __s, max(__rn) + 1 AS __e FROM t GROUP BY ALL").to_arrow_table()
    con.unregister("t")
    return result


def _level(
    con: duckdb.DuckDBPyConnection,
    arrow: pa.Table,
    slots: tuple[Slot, ...],
    groups: list[pa.Table],
    levels: list[Level],
) -> Level:
    n = arrow.num_rows
    rids: list[tuple[str, np.ndarray]] = []
    refs: list[Ranges] = []
    for slot in slots:
        if isinstance(slot, RidSlot):
            col = arrow.column(slot.attr.name)
            rids.append((slot.source, col.fill_null(-1).to_numpy().astype(np.int64, copy=False)))
        else:
            start, end = _resolve(con, arrow, slot, groups[slot.table], levels[slot.table].rows)
            refs.append(Ranges(slot.table, start, end))
    return Level(n, tuple(rids), tuple(refs))


def _resolve(
    con: duckdb.DuckDBPyConnection, arrow: pa.Table, slot: RefSlot, groups: pa.Table, target_rows: int
) -> tuple[np.ndarray, np.ndarray]:
    n = arrow.num_rows
    present = arrow.column(slot.present.name).is_valid().to_numpy(zero_copy_only=False)
    start = np.zeros(n, dtype=np.int64)
    end = np.zeros(n, dtype=np.int64)
    if not slot.keys:
        end[present] = target_rows
        return start, end
    names = [k.name for k in slot.keys]
    probe = arrow.select(names).append_column("__rn", pa.array(np.arange(n, dtype=np.int64)))
    probe = probe.filter(pa.array(present))
    gnames = [f"__g{i}" for i in range(len(names))]
    g = groups.rename_columns([*gnames, "__s", "__e"])
    con.register("p", probe)
    con.register("g", g)
    on = " AND ".join(
        f"p.{_quote(a)} IS NOT DISTINCT FROM g.{_quote(b)}" for a, b in zip(names, gnames, strict=True)
    )
    hits = con.execute(f"SELECT p.__rn, g.__s, g.__e FROM p JOIN g ON {on}").fetchnumpy()
    con.unregister("p")
    con.unregister("g")
    rn = hits["__rn"].astype(np.int64)
    s, e = hits["__s"].astype(np.int64), hits["__e"].astype(np.int64)
    if slot.lo is not None and slot.hi is not None:
        # A window frame. The group is the partition (sorted by row number); `lo` counts the
        # rows from the frame's start to the partition's end, `hi` those up to the frame's end.
        tail = arrow.column(slot.lo.name).to_numpy(zero_copy_only=False).astype(np.int64)[rn]
        head = arrow.column(slot.hi.name).to_numpy(zero_copy_only=False).astype(np.int64)[rn]
        first = e - tail
        s, e = first, np.maximum(first, s + head)
    start[rn] = s
    end[rn] = e
    return start, end
