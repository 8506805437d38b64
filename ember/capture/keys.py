"""Rows named by a unique key instead of a carried rid.

A side of a join that is one filtered Parquet scan, joined on a column that is unique
and never null in its source, needs no rid: every joined row holds that column's value,
and exactly one source row has it. So capture carries the value from the join up (where
the rid would travel too) and nothing through the side's own scan and shuffle, and the
values become rids after the job. Whether a column is unique is read from the files
once per file version (size and modification time) and kept for later captures.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ember.capture.annotate import join_key_columns
from ember.errors import StaleSourceError
from ember.plan import ir
from ember.plan.slots import Annotated, ListSlot, RefSlot, RidSlot, SideTable, Slot, slot_attrs
from ember.plan.sources import Source, SourceFile, local_path
from ember.store.build import SideRows

MAX_ROWS = 16_000_000  # larger sources keep their rids (a key map costs 16 bytes a row)
_KEPT = 32  # key maps kept for later captures
_SPREAD = 4  # value slots per row a key map's lookup table may take (keys using one value in four)

_MAPS: OrderedDict[tuple[object, ...], KeyMap | None] = OrderedDict()


@dataclass(frozen=True)
class KeyMap:
    """A unique column's values, sorted, and the rid of the row holding each; where the
    values are dense enough (at most `_SPREAD` slots per row), also a table from value to
    its position among them: a binary search per value misses the cache at every step,
    a lookup in the table once."""

    keys: np.ndarray
    rids: np.ndarray
    low: int = 0
    table: np.ndarray | None = None  # position in `keys` of value `low + i` at i (any where absent)

    @staticmethod
    def of(keys: np.ndarray, rids: np.ndarray) -> KeyMap:
        if keys.size == 0 or int(keys[-1]) - int(keys[0]) + 1 > _SPREAD * keys.size:
            return KeyMap(keys, rids)
        low = int(keys[0])
        table = np.zeros(int(keys[-1]) - low + 1, dtype=np.int32)  # positions < MAX_ROWS
        table[keys - low] = np.arange(keys.size, dtype=np.int32)
        return KeyMap(keys, rids, low, table)

    def rids_of(self, values: pa.Array | pa.ChunkedArray) -> pa.Array:
        """The rid of each value's row (null stays null)."""
        valid = pc.is_valid(values).to_numpy(zero_copy_only=False)
        v = pc.fill_null(values, 0).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
        if not valid.any():
            return pa.nulls(len(values), pa.int64())
        if self.keys.size == 0:
            raise _missing()
        if self.table is not None:
            at = self.table[np.clip(v, self.low, self.low + self.table.size - 1) - self.low]
        else:
            at = np.minimum(np.searchsorted(self.keys, v), self.keys.size - 1)
        if not np.all(self.keys[at][valid] == v[valid]):
            raise _missing()
        return pa.array(self.rids[at], type=pa.int64(), mask=~valid)


def _missing() -> StaleSourceError:
    return StaleSourceError("a joined key is missing from its source: the files changed during capture")


def key_map(source: Source, column: str) -> KeyMap | None:
    """The key map of `column` in `source`, or None where it is not a unique, non-null
    integer column of local Parquet files."""
    ident = (tuple((f.uri, f.size, f.mtime_ns) for f in source.files), column)
    if ident in _MAPS:
        _MAPS.move_to_end(ident)
        return _MAPS[ident]
    found = _read(source, column)
    _MAPS[ident] = found
    if len(_MAPS) > _KEPT:
        _MAPS.popitem(last=False)
    return found


def _read(source: Source, column: str) -> KeyMap | None:
    if source.kind != "parquet" or source.remote or not source.files or source.rows > MAX_ROWS:
        return None
    try:
        paths = [local_path(f.uri) for f in source.files]
    except ValueError:  # not local files
        return None
    readers = [pq.ParquetFile(p) for p in paths]
    try:
        return _unique(readers, column, source.files)
    finally:
        for r in readers:
            r.close()


def _unique(readers: list[pq.ParquetFile], column: str, files: tuple[SourceFile, ...]) -> KeyMap | None:
    names = [next((n for n in r.schema_arrow.names if n.lower() == column.lower()), None) for r in readers]
    if any(n is None or not _integral(r.schema_arrow.field(n).type) for r, n in zip(readers, names, strict=True)):
        return None
    found = [(r, n) for r, n in zip(readers, names, strict=True) if n is not None]
    if _repeats(found):
        return None
    values, rids = [], []
    for (reader, name), f in zip(found, files, strict=True):
        col = reader.read(columns=[name]).column(0)
        if col.null_count or len(col) != f.rows:
            return None
        values.append(col.to_numpy().astype(np.int64, copy=False))
        rids.append(np.arange(f.offset, f.offset + f.rows, dtype=np.int64))
    keys, at = np.concatenate(values), np.concatenate(rids)
    if keys.size > 1 and not np.all(keys[1:] > keys[:-1]):  # tables are often written in key order
        order = np.argsort(keys, kind="stable")
        keys, at = keys[order], at[order]
        if np.any(keys[1:] == keys[:-1]):
            return None
    return KeyMap.of(keys, at)


def _repeats(columns: list[tuple[pq.ParquetFile, str]]) -> bool:
    """Whether the column surely repeats a value or holds a null, told without reading it
    whole: from the row groups' statistics (fewer distinct values in [min, max] than rows),
    or from its first row group alone. A foreign key column (most join columns) fails
    here, so its table is never read whole."""
    spans: list[tuple[int, int] | None] = []
    rows = 0
    for reader, name in columns:
        meta = reader.metadata
        leaf = next(j for j in range(meta.num_columns) if meta.schema.column(j).path == name)
        for g in range(meta.num_row_groups):
            stats = meta.row_group(g).column(leaf).statistics
            if stats is not None and stats.has_null_count and stats.null_count:
                return True
            spans.append((stats.min, stats.max) if stats is not None and stats.has_min_max else None)
            rows += meta.row_group(g).num_rows
    known = [s for s in spans if s is not None]
    if spans and len(known) == len(spans) and max(hi for _, hi in known) - min(lo for lo, _ in known) + 1 < rows:
        return True
    reader, name = columns[0]
    if reader.metadata.num_row_groups == 0:
        return False
    first = reader.read_row_group(0, columns=[name]).column(0)
    return bool(first.null_count) or pc.count_distinct(first).as_py() < len(first)


def _integral(t: pa.DataType) -> bool:
    return pa.types.is_signed_integer(t) or (pa.types.is_unsigned_integer(t) and t.bit_width < 64)


def unique_keys(plan: ir.Node) -> frozenset[tuple[str, str]]:
    """(source key, column) of every join column in `plan` that names its scan's rows."""
    return frozenset((scan.source.key, column) for scan, column in join_key_columns(plan) if key_map(scan.source, column) is not None)


def rekey(
    annotated: Annotated, result: pa.Table, data: list[SideRows], sources: dict[str, Source]
) -> tuple[pa.Table, list[SideRows]]:
    """The job's result and side tables with every key slot's values turned into rids
    (tables the executors keep were rekeyed by Spark when they were written)."""
    tables = annotated.tables
    maps: dict[str, KeyMap] = {}
    for slot in (*annotated.slots, *(s for t in tables for s in t.slots)):
        if isinstance(slot, RidSlot) and slot.key_column is not None:
            found = key_map(sources[slot.source], slot.key_column)
            if found is None:
                raise StaleSourceError(f"source {sources[slot.source].name!r} changed during capture; capture again")
            maps[slot.attr.name] = found
    if not maps:
        return result, data
    rekeyed = _Rekeyed(tables, maps)
    return rekeyed.table(result, annotated.slots), [
        rekeyed.table(d, t.slots) if isinstance(d, pa.Table) else d for d, t in zip(data, tables, strict=True)
    ]


@dataclass(frozen=True)
class _Rekeyed:
    tables: tuple[SideTable, ...]
    maps: dict[str, KeyMap]

    def table(self, rows: pa.Table, slots: tuple[Slot, ...]) -> pa.Table:
        for slot in slots:
            if isinstance(slot, RefSlot) or not self._holds_keys(slot):
                continue
            name = slot.attr.name
            i = rows.schema.get_field_index(name)
            rows = rows.set_column(i, name, self._column(rows.column(i), slot)).replace_schema_metadata(None)
        return rows  # no longer sorted by rid within groups

    def _holds_keys(self, slot: Slot) -> bool:
        if isinstance(slot, RidSlot):
            return slot.attr.name in self.maps
        return isinstance(slot, ListSlot) and any(self._holds_keys(s) for s in self.tables[slot.table].slots)

    def _column(self, col: pa.ChunkedArray, slot: Slot) -> pa.ChunkedArray:
        if isinstance(slot, RidSlot):
            return pa.chunked_array([self.maps[slot.attr.name].rids_of(c) for c in col.chunks], type=pa.int64())
        assert isinstance(slot, ListSlot)
        return pa.chunked_array([self._lists(c, self.tables[slot.table]) for c in col.chunks])

    def _lists(self, lists: pa.ListArray | pa.LargeListArray, table: SideTable) -> pa.Array:
        """A list column's items rekeyed: a struct's fields by name, a bare value as the
        table's one attribute."""
        items = lists.values
        if pa.types.is_struct(items.type):
            fields = items.flatten()
            names = [items.type.field(i).name for i in range(items.type.num_fields)]
            rows = self.table(pa.Table.from_arrays(fields, names=names), table.slots)
            items = pa.StructArray.from_arrays([c.combine_chunks() for c in rows.columns], names=names)
        else:
            (attr,) = slot_attrs(table.slots)
            rows = self.table(pa.table({attr.name: items}), table.slots)
            items = rows.column(0).combine_chunks()
        return type(lists).from_arrays(lists.offsets, items, mask=lists.is_null())
