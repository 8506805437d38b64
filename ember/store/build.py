"""Building a `LineageIndex` from what a capture brought back: the output's rows and each
side table's rows (fetched, carried inline as list slots, left where the executors wrote
them, or read at trace time), with their slots.

Each side table is sorted by its keys (`order_by`), so every group is a run of rows, and
every ref slot is resolved to the `[start, end)` row range of the group it names: by a hash
lookup where one plain key is compared, else by a DuckDB join (null keys match nulls, as
refs do), or, for a rollup, to the run of rows equal on its grouping set's leading keys
(`Sets`). List slots need no resolving: a list's items are its group, so their ranges are
the lists' offsets. The columns are then encoded (`store.columns`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol, TypeAlias

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ember.engines import duck
from ember.plan.ir import Attr
from ember.plan.slots import ListSlot, RefSlot, RidSlot, SideTable, Slot
from ember.store.columns import IntColumn, Plain, encode
from ember.store.index import Deferred, Level, LineageIndex, Ranges
from ember.store.packing import packed_sort

_Hits: TypeAlias = tuple[np.ndarray, np.ndarray, np.ndarray]  # probe row, its group's start and end


@dataclass(frozen=True)
class Sets:
    """A rollup table's sorted rows (`SideTable.prefixes`): each grouping set's groups are
    the runs of rows equal on its leading keys, found for the keys refs hold only
    (`_in_sets`): a fine set has close to a run per row."""

    keys: pa.Table  # the sorted rows' keys
    starts: dict[int, np.ndarray]  # leading keys → where their runs start
    length: dict[int, int]  # grouping id → how many leading keys its set groups by


class Remote(Protocol):
    """A side table whose rows stay where the executors wrote them (`store.spark_index`):
    its level is built there, and refs from levels built here ask it for the groups they name."""

    rows: int

    def level(
        self, table: SideTable, below: list[Groups], tables: tuple[SideTable, ...], levels: list[Level], compress: bool
    ) -> Level: ...

    def groups_of(self, table: SideTable, wanted: pa.Table) -> pa.Table: ...


@dataclass(frozen=True)
class KeyRows:
    """A side table read at trace time: one row per group the lineage points at (its keys,
    no lineage), sorted as `order_by` sorts, and what reads those groups then."""

    rows: pa.Table
    later: Deferred


SideRows: TypeAlias = pa.Table | Remote | KeyRows | None
Groups: TypeAlias = pa.Table | Remote | Sets  # a table's groups, as refs to it are resolved


def build_index(
    output: pa.Table,
    output_slots: tuple[Slot, ...],
    tables: tuple[SideTable, ...],
    data: list[SideRows],
    compress: bool = True,
    same: dict[int, int] | None = None,
) -> LineageIndex:
    """Sorts each side table by its keys, resolves every ref slot to row ranges, encodes.

    A table whose rows rode in the result (`data` None) is a list slot flattened: already
    grouped by the row that holds the list, so its ranges are the lists' offsets. A
    `Remote` table's level is built by the executors. A `KeyRows` table's level holds its
    groups' keys only, a row each; traces read the groups (`LineageIndex.later`). Tables
    with the `same` rows (table id → a label shared by the tables read as one) whose refs
    point at tables alike too are one table: refs to a later one point at the first one's
    level, and the later one's level is left empty (a subquery the plan reads several
    times is indexed and traced once).
    """
    con = duck.connect()
    groups: list[Groups] = []
    levels: list[Level] = []
    alias: dict[int, int] = {}
    first: dict[int, int] = {}  # `same` rows → the first table indexed with them
    later = {t.id: d.later for t, d in zip(tables, data, strict=True) if isinstance(d, KeyRows)}
    read = [d.rows if isinstance(d, KeyRows) else d for d in data]
    fetched = {t.id: d for t, d in zip(tables, read, strict=True) if isinstance(d, pa.Table)}
    flat = inline_rows(output, output_slots, tables, fetched, sort=True)
    spans = {tid: span for tid, (_, span) in flat.items()}
    for table, arrow in zip(tables, read, strict=True):
        if arrow is not None and not isinstance(arrow, pa.Table):
            level = arrow.level(table, groups, tables, [levels[alias.get(i, i)] for i in range(len(levels))], compress)
            levels.append(replace(level, refs=tuple(replace(r, table=alias.get(r.table, r.table)) for r in level.refs)))
            groups.append(arrow)
            continue
        rows_of = (same or {}).get(table.id) if arrow is not None else None
        earlier = first.setdefault(rows_of, table.id) if rows_of is not None else table.id
        if earlier != table.id and _alike(table, tables[earlier], alias):
            alias[table.id] = earlier
            levels.append(Level(0, (), (), f"{table.why} (as table {earlier})"))
            groups.append(groups[earlier])
            continue
        ordered = flat[table.id][0] if arrow is None else _ordered(con, arrow, table)
        levels.append(_level(con, ordered, table.slots, groups, tables, levels, table.why, compress, spans, alias))
        groups.append(_grouped(con, ordered, table))
    out = _level(con, output, output_slots, groups, tables, levels, "output", compress, spans, alias)
    con.close()
    return LineageIndex(out, tuple(levels), later)


def _ordered(con: duckdb.DuckDBPyConnection, arrow: pa.Table, table: SideTable) -> pa.Table:
    """A side table's rows sorted as `order_by` sorts (unless they came so)."""
    in_order = arrow.schema.metadata == SORTED or _in_order(arrow, order_by(table))
    return arrow if in_order else sorted_rows(con, arrow, order_by(table))


def leaf_level(con: duckdb.DuckDBPyConnection, rows: pa.Table, table: SideTable) -> tuple[Level, pa.Table]:
    """The level of a side table whose rows hold rids only, and its groups (keys, `__s`, `__e`)."""
    ordered = _ordered(con, rows, table)
    level = _level(con, ordered, table.slots, [], (), [], table.why, True, {}, {})
    return level, _groups(con, ordered, [k.name for k in table.keys])


def group_ranges(con: duckdb.DuckDBPyConnection, keys: pa.Table, groups: pa.Table) -> _Hits:
    """The rows of `keys` that name a group (as refs are resolved), with its row range."""
    return _hits(con, keys, np.ones(keys.num_rows, dtype=bool), groups)


def _alike(table: SideTable, earlier: SideTable, alias: dict[int, int]) -> bool:
    """Whether two tables with the same rows have the same level: the same keys, order and
    slots by output position, refs resolving to the same tables (list slots not compared)."""
    shapes = [_shape(t, alias) for t in (table, earlier)]
    return shapes[0] is not None and shapes[0] == shapes[1]


def _shape(table: SideTable, alias: dict[int, int]) -> tuple[object, ...] | None:
    at = {a.name: i for i, a in enumerate(table.plan.output)}
    named = [*table.keys, *_tie(table), *(a for s in table.slots for a in s.attrs)]
    if any(isinstance(s, ListSlot) for s in table.slots) or any(a.name not in at for a in named):
        return None

    def pos(attrs: tuple[Attr, ...]) -> tuple[int, ...]:
        return tuple(at[a.name] for a in attrs)

    return (
        pos(table.keys),
        pos(_tie(table)),
        table.prefixes,
        *((s.source, s.key_column, pos(s.attrs)) if isinstance(s, RidSlot) else
          (alias.get(s.table, s.table), pos(s.attrs)) for s in table.slots),
    )  # fmt: skip


Spans = tuple[np.ndarray, np.ndarray]


# Schema metadata of a side table's rows that arrive sorted by `order_by` (read by DuckDB).
SORTED = {b"ember.sorted": b"1"}


def order_by(table: SideTable) -> list[str]:
    """The columns a side table's rows are sorted by to be indexed: its keys, then `_tie`."""
    return [a.name for a in (*table.keys, *_tie(table))]


def _tie(table: SideTable) -> tuple[Attr, ...]:
    """Within a group, rows sorted by window position, else by rid: a group's rids come out sorted."""
    return table.order or tuple(s.attr for s in table.slots if isinstance(s, RidSlot))


def holders(output_slots: tuple[Slot, ...], tables: tuple[SideTable, ...]) -> dict[int, tuple[int | None, ListSlot]]:
    """Inline table id → the level whose rows carry its list (None: the output) and the slot."""
    found: dict[int, tuple[int | None, ListSlot]] = {s.table: (None, s) for s in output_slots if isinstance(s, ListSlot)}
    for t in tables:
        found.update({s.table: (t.id, s) for s in t.slots if isinstance(s, ListSlot)})
    return found


def inline_rows(
    output: pa.Table,
    output_slots: tuple[Slot, ...],
    tables: tuple[SideTable, ...],
    fetched: dict[int, pa.Table],
    sort: bool = False,
) -> dict[int, tuple[pa.Table, Spans]]:
    """Each inline table's rows, flattened from the list slot that carries them (in the
    output, in a fetched side table's rows, or in an enclosing inline table's: an aggregate
    under an aggregate), and the `[start, end)` range of each holder row's list. Parents
    are flattened before their children, so a child's ranges index its parent's rows as
    sorted (`sort`). Tables whose holder is not fetched yet are left out."""
    flat: dict[int, tuple[pa.Table, Spans]] = {}
    held = holders(output_slots, tables)
    for table in reversed(tables):
        if not table.inline:
            continue
        holder, slot = held[table.id]
        rows = output if holder is None else flat[holder][0] if holder in flat else fetched.get(holder)
        if rows is None:
            continue
        tie = [a.name for a in _tie(table)] if sort else []
        flat[table.id] = _flattened(rows.column(slot.attr.name), table.slots, tie)
    return flat


def _flattened(lists: pa.ChunkedArray, slots: tuple[Slot, ...], tie: list[str]) -> tuple[pa.Table, Spans]:
    """A list column as one table of its items (structs of the slots' attributes, or the
    one attribute's values), each list's rows sorted by `tie`, and the `[start, end)` row
    range of each list (empty for a null list)."""
    lengths = np.concatenate(
        [np.zeros(0, np.int64)] + [pc.fill_null(pc.list_value_length(c), 0).to_numpy().astype(np.int64) for c in lists.chunks]
    )
    end = np.cumsum(lengths)
    start = end - lengths
    items = pa.chunked_array([chunk.flatten() for chunk in lists.chunks], type=lists.type.value_type)
    if pa.types.is_struct(items.type):
        rows = pa.Table.from_struct_array(items)
    else:
        (attr,) = (a for s in slots for a in s.attrs)
        rows = pa.table({attr.name: items})
    if tie and rows.num_rows:
        rows = rows.take(_within_groups(lengths, rows.column(tie[0])))
    return rows, (start, end)


def _within_groups(lengths: np.ndarray, values: pa.ChunkedArray) -> np.ndarray:
    """The permutation that sorts `values` within consecutive groups of `lengths` rows.

    Collected lists arrive as a few ascending runs (one per task), which a stable sort
    on (group, value) merges in close to linear time."""
    v = values.fill_null(-1).to_numpy().astype(np.int64) + 1
    group = np.repeat(np.arange(lengths.size, dtype=np.int64), lengths)
    span = int(v.max()) + 1
    if span and lengths.size >= (1 << 62) // span:
        return np.lexsort((v, group))
    return np.argsort(group * span + v, kind="stable")


def _counted(counts: pa.ChunkedArray, rows: np.ndarray) -> np.ndarray:
    """A frame's row counts at the present rows (null only where no row is present)."""
    taken = counts.take(pa.array(rows))
    assert taken.null_count == 0, "a present row's window frame counts its rows"
    return taken.to_numpy(zero_copy_only=False).astype(np.int64)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def sorted_rows(con: duckdb.DuckDBPyConnection, arrow: pa.Table, keys: list[str]) -> pa.Table:
    """The rows sorted by `keys`, NULLS FIRST: as packed integers where they all are small
    integers (`store.packing`), else by DuckDB."""
    if not keys or arrow.num_rows == 0:
        return arrow
    packed = packed_sort(arrow, keys)
    if packed is not None:
        return packed
    con.register("t", arrow)
    order = ", ".join(f"{_quote(k)} ASC NULLS FIRST" for k in keys)
    result = con.sql(f"SELECT * FROM t ORDER BY {order}").to_arrow_table()
    con.unregister("t")
    return result


def _in_order(arrow: pa.Table, columns: list[str]) -> bool:
    """Whether the rows already come in `sorted_rows`' order: turning key slots into rids
    drops DuckDB's mark, not the order, where a rid before them orders each group (a
    large rollup's rows need no second sort then). A linear check, column by column over
    the pairs of rows still tied; NULLS FIRST."""
    n = arrow.num_rows
    cols = [arrow.column(c) for c in columns]
    if n < 2:
        return True
    if not all(_plain(c.type) for c in cols):
        return False
    tied = np.ones(n - 1, dtype=bool)
    for c in cols:
        before, after = c.slice(0, n - 1), c.slice(1)
        greater = pc.greater(before, after)
        equal = pc.equal(before, after)
        if c.null_count:
            null_before = pc.is_null(before).to_numpy(zero_copy_only=False)
            null_after = pc.is_null(after).to_numpy(zero_copy_only=False)
            greater = pc.or_(pc.fill_null(greater, False), pa.array(null_after & ~null_before))
            equal = pc.or_(pc.fill_null(equal, False), pa.array(null_before & null_after))
        if bool(np.any(tied & _bools(greater))):
            return False
        tied &= _bools(equal)
        if not tied.any():
            break
    return True


def _bools(values: pa.ChunkedArray | pa.Array) -> np.ndarray:
    return np.asarray(values.to_numpy(zero_copy_only=False), dtype=bool)


def _groups(con: duckdb.DuckDBPyConnection, ordered: pa.Table, keys: list[str]) -> pa.Table:
    """Key values → [start, end) row range of each group in a sorted side table: its runs of
    equal keys (`_run_starts`): finding where keys change is far cheaper than grouping the
    rows again."""
    if not keys:  # a global aggregate's one group, of every row
        return pa.table({"__s": [0], "__e": [ordered.num_rows]})
    starts = _run_starts(con, ordered, keys, {len(keys)})[len(keys)]
    firsts = ordered.select(keys).take(starts)
    return firsts.append_column("__s", pa.array(starts)).append_column("__e", pa.array(_ends(starts, ordered.num_rows)))


def _ends(starts: np.ndarray, rows: int) -> np.ndarray:
    return np.append(starts[1:], rows).astype(np.int64) if starts.size else starts


def _run_starts(con: duckdb.DuckDBPyConnection, ordered: pa.Table, keys: list[str], lengths: set[int]) -> dict[int, np.ndarray]:
    """Where the sorted rows' first n keys change (nulls equal, as refs match), for each n of
    `lengths`, each key compared once. Floating keys (DuckDB groups NaNs as one) and nested
    ones are grouped by DuckDB."""
    n = ordered.num_rows
    cols = [ordered.column(k) for k in keys]
    if not all(_plain(c.type) for c in cols):
        t = ordered.select(keys).append_column("__rn", pa.array(np.arange(n, dtype=np.int64)))
        con.register("t", t)
        found = {}
        for length in lengths:
            names = ", ".join(_quote(k) for k in keys[:length])
            runs = con.sql(f"SELECT min(__rn) AS __s FROM t GROUP BY {names} ORDER BY __s").fetchnumpy()["__s"]
            found[length] = np.asarray(runs, dtype=np.int64)
        con.unregister("t")
        return found
    changed = np.zeros(max(n - 1, 0), dtype=bool)
    found = {}
    for length, c in enumerate(cols[: max(lengths, default=0)], 1):
        if n:
            before, after = c.slice(0, n - 1), c.slice(1)
            if c.null_count:
                nulls = pc.not_equal(pc.is_null(before), pc.is_null(after))
                changed |= _bools(pc.or_(pc.fill_null(pc.not_equal(before, after), False), nulls))
            else:
                changed |= _bools(pc.not_equal(before, after))
        if length in lengths:
            found[length] = np.flatnonzero(np.concatenate(([n > 0], changed))).astype(np.int64)
    return found


def _grouped(con: duckdb.DuckDBPyConnection, ordered: pa.Table, table: SideTable) -> pa.Table | Sets:
    """The groups of a sorted side table, or the runs of each of a rollup's grouping sets."""
    names = [k.name for k in table.keys]
    if not table.prefixes:
        return _groups(con, ordered, names)
    length = dict(table.prefixes)
    return Sets(ordered.select(names), _run_starts(con, ordered, names, set(length.values()) - {0}), length)


def _plain(t: pa.DataType) -> bool:
    return any(
        test(t)
        for test in (pa.types.is_integer, pa.types.is_string, pa.types.is_large_string, pa.types.is_binary,
                     pa.types.is_temporal, pa.types.is_decimal, pa.types.is_boolean)
    )  # fmt: skip


def _level(
    con: duckdb.DuckDBPyConnection,
    arrow: pa.Table,
    slots: tuple[Slot, ...],
    groups: list[Groups],
    tables: tuple[SideTable, ...],
    levels: list[Level],
    why: str,
    compress: bool,
    spans: dict[int, Spans],
    alias: dict[int, int],
) -> Level:
    n = arrow.num_rows
    pack = encode if compress else Plain
    rids: list[tuple[str, IntColumn]] = []
    refs: list[Ranges] = []
    for slot in slots:
        if isinstance(slot, RidSlot):
            col = arrow.column(slot.attr.name)
            col = col.fill_null(-1) if col.null_count else col
            rids.append((slot.source, pack(col.to_numpy().astype(np.int64, copy=False))))
        elif isinstance(slot, ListSlot):
            start, end = spans[slot.table]
            refs.append(Ranges(slot.table, pack(start), pack(end)))
        else:
            target = alias.get(slot.table, slot.table)
            start, end = _resolve(con, arrow, slot, groups[target], tables[target], levels[target].rows)
            refs.append(Ranges(target, pack(start), pack(end)))
    return Level(n, tuple(rids), tuple(refs), why)


def _resolve(
    con: duckdb.DuckDBPyConnection,
    arrow: pa.Table,
    slot: RefSlot,
    target: Groups,
    table: SideTable,
    target_rows: int,
) -> tuple[np.ndarray, np.ndarray]:
    n = arrow.num_rows
    present = arrow.column(slot.present.name).is_valid().to_numpy(zero_copy_only=False)
    start = np.zeros(n, dtype=np.int64)
    end = np.zeros(n, dtype=np.int64)
    keys = arrow.select([k.name for k in slot.keys])
    if not slot.keys:  # the whole table is one group (a scalar subquery's, an unpartitioned window's)
        rn = np.flatnonzero(present)
        s, e = np.zeros(len(rn), np.int64), np.full(len(rn), target_rows, np.int64)
    elif isinstance(target, Sets):
        rn, s, e = _in_sets(con, keys, present, target, target_rows)
    else:
        groups = target if isinstance(target, pa.Table) else target.groups_of(table, keys.filter(pa.array(present)))
        rn, s, e = _hits(con, keys, present, groups)
    if slot.lo is not None and slot.hi is not None:
        # A window frame. The group is the partition (sorted by row number); `lo` counts the
        # rows from the frame's start to the partition's end, `hi` those up to the frame's end.
        tail, head = (_counted(arrow.column(a.name), rn) for a in (slot.lo, slot.hi))
        first = e - tail
        s, e = first, np.maximum(first, s + head)
    start[rn] = s
    end[rn] = e
    return start, end


def _hits(con: duckdb.DuckDBPyConnection, keys: pa.Table, present: np.ndarray, groups: pa.Table) -> _Hits:
    """The `present` rows whose keys name a group, with the group's row range."""
    g = groups.rename_columns([*(f"__g{i}" for i in range(keys.num_columns)), "__s", "__e"])
    return _looked_up(keys, present, g) or _joined(con, keys, present, g)


def _in_sets(con: duckdb.DuckDBPyConnection, keys: pa.Table, present: np.ndarray, sets: Sets, rows: int) -> _Hits:
    """Refs to a rollup's groups (keys, then the grouping id), each to the run of rows equal
    on its set's leading keys; the rolled-up keys, null, are not compared. Refs go down the
    sets from the coarsest, each step comparing the next keys with those of the runs inside
    the runs already found only, so no run is taken that no ref is in."""
    ids = pc.fill_null(keys.column(keys.num_columns - 1), -1).to_numpy()
    depth = np.full(keys.num_rows, -1, dtype=np.int64)
    for gid, length in sets.length.items():
        depth[present & (ids == gid)] = length
    start = np.zeros(keys.num_rows, dtype=np.int64)
    end = np.full(keys.num_rows, rows, dtype=np.int64)
    found = depth >= 0
    done = 0
    for length in sorted(sets.starts):
        going = np.flatnonzero(found & (depth >= length))
        if not going.size:
            break
        runs = _runs_within(sets.starts[length], start[going], end[going], rows)
        compared = list(range(done, length))
        inner = sets.keys.select(compared).take(runs[0])
        for name, column in zip(("__p", "__s", "__e"), (runs[1], runs[0], runs[2]), strict=True):
            inner = inner.append_column(name, pa.array(column))
        probe = keys.select(compared).take(going).append_column("__p", pa.array(start[going]))
        rn, s, e = _hits(con, probe, np.ones(going.size, dtype=bool), inner)
        found[going] = False
        found[going[rn]] = True
        start[going[rn]], end[going[rn]] = s, e
        done = length
    rn = np.flatnonzero(found)
    return rn, start[rn], end[rn]


def _runs_within(starts: np.ndarray, outer_start: np.ndarray, outer_end: np.ndarray, rows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The runs (start, the outer run holding it, end) that lie in the given outer runs."""
    outer, at = np.unique(outer_start, return_index=True)
    lo, hi = np.searchsorted(starts, outer), np.searchsorted(starts, outer_end[at])
    count = hi - lo
    picked = np.repeat(lo - np.cumsum(count) + count, count) + np.arange(count.sum())
    ends = _ends(starts, rows)
    return starts[picked], np.repeat(outer, count), ends[picked]


def _looked_up(keys: pa.Table, present: np.ndarray, groups: pa.Table) -> _Hits | None:
    """One key of a plain type, the same on both sides: Arrow's hash lookup over every row,
    nulls matching nulls as in the join, with no copy of the present rows (which the join
    needs first)."""
    if keys.num_columns != 1:
        return None
    values = groups.column(0)
    if keys.column(0).type != values.type or not _plain(values.type):
        return None
    at = pc.index_in(keys.column(0), value_set=values.combine_chunks(), skip_nulls=False).combine_chunks()
    rn = np.flatnonzero(present & at.is_valid().to_numpy(zero_copy_only=False))
    group = at.to_numpy(zero_copy_only=False)[rn].astype(np.int64)  # nulls (as NaN) are never taken
    start, end = (groups.column(c).to_numpy().astype(np.int64, copy=False)[group] for c in ("__s", "__e"))
    return rn, start, end


def _joined(con: duckdb.DuckDBPyConnection, keys: pa.Table, present: np.ndarray, groups: pa.Table) -> _Hits:
    probe = keys.append_column("__rn", pa.array(np.arange(keys.num_rows, dtype=np.int64))).filter(pa.array(present))
    con.register("p", probe)
    con.register("g", groups)
    on = " AND ".join(
        f"p.{_quote(a)} IS NOT DISTINCT FROM g.{_quote(b)}" for a, b in zip(keys.column_names, groups.column_names[: keys.num_columns], strict=True)
    )
    hits = con.execute(f"SELECT p.__rn, g.__s, g.__e FROM p JOIN g ON {on}").fetchnumpy()
    con.unregister("p")
    con.unregister("g")
    return hits["__rn"].astype(np.int64), hits["__s"].astype(np.int64), hits["__e"].astype(np.int64)
