"""The packed sort against Python's own sort of the same rows (nulls first)."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from ember.store.packing import packed_sort

_TYPES = {"int8": (pa.int8(), -128, 127), "int64": (pa.int64(), -(2**63), 2**63 - 1), "uint32": (pa.uint32(), 0, 2**32 - 1)}


@st.composite
def _tables(draw: st.DrawFn) -> tuple[pa.Table, list[str]]:
    names = [f"c{i}" for i in range(draw(st.integers(1, 4)))]
    n = draw(st.integers(0, 30))
    columns = []
    for _ in names:
        dtype, lo, hi = _TYPES[draw(st.sampled_from(sorted(_TYPES)))]
        base = draw(st.integers(lo, hi))  # values close together, anywhere in the type's range
        width = draw(st.sampled_from([1, 4, 1000]))
        values = st.integers(max(lo, base - width), min(hi, base + width))
        columns.append(pa.array(draw(st.lists(st.one_of(st.none(), values), min_size=n, max_size=n)), type=dtype))
    order = draw(st.permutations(names))
    return pa.table(columns, names=names), list(order)


def _python_sorted(rows: pa.Table, order: list[str]) -> list[dict[str, int | None]]:
    return sorted(rows.to_pylist(), key=lambda r: [(r[c] is not None, r[c] or 0) for c in order])


@settings()  # examples: the Hypothesis profile (tests/conftest.py)
@given(_tables())
def test_rows_come_sorted_as_python_sorts_them_or_not_at_all(case: tuple[pa.Table, list[str]]) -> None:
    rows, order = case
    got = packed_sort(rows, order)
    if got is None:  # only where the columns' ranges cannot share 63 bits
        values = [[v for v in rows[c].to_pylist() if v is not None] or [0] for c in order]
        nulls = [rows[c].null_count > 0 for c in order]
        assert sum((max(v) - min(v) + z).bit_length() for v, z in zip(values, nulls, strict=True)) > 63
        return
    assert got.schema == rows.schema
    assert got.to_pylist() == _python_sorted(rows, order)


def test_a_wide_pair_of_columns_is_left_alone() -> None:
    """Two full-range int64 columns need 128 bits: the caller sorts them another way."""
    rows = pa.table({"a": pa.array([2**62, -(2**62)]), "b": pa.array([-(2**62), 2**62])})
    assert packed_sort(rows, ["a", "b"]) is None
    assert packed_sort(rows, ["a"]) is None  # a column not sorted by
    assert packed_sort(pa.table({"s": ["b", "a"]}), ["s"]) is None  # not an integer


def test_rids_sorted_within_small_keys_fit() -> None:
    """TPC-H Q13's shape: customer key, customer rid, order rid (null: no order)."""
    rows = pa.table({"k": [3, 1, 3, 1, 2], "rc": [2, 0, 2, 0, 1], "ro": [9, None, 4, None, 7]})
    got = packed_sort(rows, ["k", "rc", "ro"])
    assert got is not None
    assert got.to_pydict() == {"k": [1, 1, 2, 3, 3], "rc": [0, 0, 1, 2, 2], "ro": [None, None, 7, 4, 9]}
