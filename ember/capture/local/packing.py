"""Rows sorted for the index after DuckDB returns them, as packed integers.

DuckDB's sort can be most of a small read's time; rows whose columns are all integers
sort faster packed (`store.build.sorted_rows`). Key columns that are the wanted keys
(names, dates) come back from the read as one integer, their number among the wanted
keys in key order (`engines.duck.wanted`'s `numbered`), and are looked up after the sort.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import pyarrow as pa

from ember.engines.duck.sql import duck_type
from ember.engines.duck.wanted import GROUP
from ember.plan.slots import SideTable
from ember.store.build import order_by, sorted_rows

_INTEGERS = frozenset({"tinyint", "smallint", "int", "bigint"})


@dataclass(frozen=True)
class Packing:
    """How a read's rows are sorted after DuckDB returns them."""

    names: tuple[str, ...]  # the table's columns, in order
    keys: tuple[str, ...]  # the key columns that come back numbered: key i is wanted column k<i>
    order: tuple[str, ...]  # the columns read, as they are sorted

    def sorted(self, con: duckdb.DuckDBPyConnection, rows: pa.Table, wanted: pa.Table | None) -> pa.Table:
        """The rows sorted; numbered keys looked up in `wanted` (in key order, as registered)."""
        ordered = sorted_rows(con, rows, list(self.order))
        if not self.keys:
            return ordered
        assert wanted is not None
        group = ordered.column(GROUP)
        keys = {name: wanted.column(f"k{i}").take(group) for i, name in enumerate(self.keys)}
        return pa.table([keys[n] if n in keys else ordered.column(n) for n in self.names], names=list(self.names))


def packing(table: SideTable, numbered: bool) -> Packing | None:
    """How the table's rows are sorted after the read, if its columns are integers, or keys
    `numbered` (the wanted ones), all sorted by; None: DuckDB sorts them."""
    order, attrs = order_by(table), table.plan.output
    names = [a.name for a in attrs]
    keys = [k.name for k in table.keys] if numbered else []
    if not order or sorted(order) != sorted(names) or len(set(names)) != len(names):
        return None
    if any(a.dtype not in _INTEGERS for a in attrs if a.name not in keys):
        return None
    if any(duck_type(k.dtype) is None or k.dtype in ("float", "double") for k in table.keys if k.name in keys):
        return None  # numbered by Arrow, which sorts NaN first and no nested type
    return Packing(tuple(names), tuple(keys), (*([GROUP] if keys else []), *(n for n in order if n not in keys)))
