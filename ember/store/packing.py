"""Rows of small integers sorted as one packed integer a row.

A side table is sorted by its keys and rids for the index, and those are mostly integers
of a few bits each: a rid counts a file's rows, a key a dimension's. Sorting them column
by column is a comparison per column per pair of rows.
Where every column is an integer and their ranges fit 63 bits together, each row packs
into one int64 whose order is the rows' order, and numpy sorts those with one comparison a
pair; the columns are read back out of the sorted integers.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_BITS = 63  # a packed row stays a non-negative int64


def packed_sort(rows: pa.Table, order: Sequence[str]) -> pa.Table | None:
    """`rows` sorted by the `order` columns, ascending, nulls first; None where it cannot be
    done this way: a column not in `order`, one not a (signed, or unsigned of at most 32
    bits) integer, or ranges wider than 63 bits together."""
    if sorted(order) != sorted(rows.column_names) or len(set(order)) != len(order):
        return None
    if rows.num_rows < 2:
        return rows
    fields = [_Field.of(rows.column(name)) for name in order]
    if any(f is None for f in fields) or sum(f.bits for f in fields if f is not None) > _BITS:
        return None
    packed = np.zeros(rows.num_rows, dtype=np.int64)
    for f in fields:
        assert f is not None
        packed <<= f.bits
        packed |= f.offsets
    packed.sort()
    out: dict[str, pa.Array] = {}
    for name, f in zip(reversed(order), reversed(fields), strict=True):
        assert f is not None
        out[name] = f.values(packed & ((1 << f.bits) - 1))
        packed >>= f.bits
    return pa.table([out[name] for name in rows.column_names], schema=rows.schema)


class _Field:
    """One column as offsets from its least value, 0 standing for null where it has nulls."""

    def __init__(self, offsets: np.ndarray, bits: int, low: int, nulls: bool, dtype: pa.DataType):
        self.offsets, self.bits, self.low, self.nulls, self.dtype = offsets, bits, low, nulls, dtype

    @staticmethod
    def of(column: pa.ChunkedArray) -> _Field | None:
        t = column.type
        if not pa.types.is_integer(t) or t.bit_width > (32 if pa.types.is_unsigned_integer(t) else 64):
            return None
        nulls = column.null_count > 0
        bounds = pc.min_max(column)
        low, high = bounds["min"].as_py(), bounds["max"].as_py()
        if low is None:  # every value null
            low = high = 0
        bits = (high - low + nulls).bit_length()
        if bits > _BITS:
            return None
        values = (column.fill_null(low) if nulls else column).to_numpy().astype(np.int64)
        offsets = values - np.int64(low) + np.int64(nulls)  # in [0, 2^63): wraps back if `values - low` would not fit
        if nulls:
            offsets[column.is_null().to_numpy(zero_copy_only=False)] = 0
        return _Field(offsets, bits, low, nulls, t)

    def values(self, offsets: np.ndarray) -> pa.Array:
        """The column's values back from sorted offsets."""
        values = (offsets - np.int64(self.nulls)) + np.int64(self.low)  # a null's wraps, masked
        mask = offsets == 0 if self.nulls else None
        return pa.array(values, mask=mask).cast(self.dtype)
