"""Lineage tables on their own: encoding, files and the two step primitives, against plain
Python lists of rows."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ember.rdd.ids import SHIFT
from ember.rdd.tables import (
    NARROW,
    Shared,
    Table,
    children,
    encode_table,
    lookup,
    read_table,
    table_rows,
    write_table,
)

SLOT = 7 << SHIFT
# ids of one split (a combiner's parents) and ids spread over slots (a reducer's)
narrow_ids = st.integers(SLOT, SLOT + NARROW - 1)
wide_ids = st.integers(0, (1 << 62) - 1)
tables = st.one_of(
    st.lists(st.lists(narrow_ids, max_size=6), min_size=1, max_size=12),
    st.lists(st.lists(wide_ids, max_size=6), min_size=1, max_size=12),
)


def check(table: Table, rows: list[list[int]]) -> None:
    assert list(table_rows(table)) == rows
    for n in range(len(rows)):
        assert sorted(lookup(table, [n]).tolist()) == sorted(rows[n])
    named = [p for row in rows for p in row]
    # and ids the table cannot hold, a uint32 wrap-around away from ones not probed
    wrapped = {p + NARROW for p in named[1::2]} | {p - NARROW for p in named[1::2] if p >= NARROW}
    probe = sorted(set(named[::2]) | wrapped)
    want = [n for n, row in enumerate(rows) if set(row) & set(probe)]
    assert children(table, np.array(probe, np.int64)).tolist() == want


@settings(deadline=None)
@given(rows=tables)
def test_tables_answer_like_their_rows(rows: list[list[int]], tmp_path_factory: object) -> None:
    table = encode_table(rows)
    check(table, rows)
    folder = tmp_path_factory.mktemp("tables")  # type: ignore[attr-defined]
    _, path, _ = write_table(table, [], str(folder), "t")
    check(read_table(path), rows)


def test_one_split_is_stored_in_four_bytes_a_parent(tmp_path: Path) -> None:
    narrow = encode_table([[SLOT + 5, SLOT + 9], [SLOT + (1 << 31)]])
    assert narrow.parents.dtype == np.uint32 and narrow.base == SLOT + 5
    assert narrow.slots() == {7}
    wide = encode_table([[SLOT, 3 << SHIFT]])
    assert wide.parents.dtype == np.int64 and wide.slots() == {3, 7}
    assert encode_table([[SLOT, SLOT + NARROW]]).parents.dtype == np.int64
    _, path, _ = write_table(narrow, [], str(tmp_path), "t")
    assert Path(path).stat().st_size == 8 * (5 + 3) + 4 * 3


@settings(deadline=None)
@given(parents=st.one_of(st.lists(narrow_ids, max_size=6), st.lists(wide_ids, max_size=6)), rows=st.integers(0, 5))
def test_a_shared_table_answers_like_its_rows_and_keeps_its_parents_once(
    parents: list[int], rows: int, tmp_path_factory: object
) -> None:
    """A partition function's outputs all name the records it read: one list, not one a row."""
    table = encode_table(Shared(parents, rows))
    assert len(table.parents) == len(parents)
    check(table, [parents] * rows)
    folder = tmp_path_factory.mktemp("shared")  # type: ignore[attr-defined]
    _, path, _ = write_table(table, [], str(folder), "t")
    check(read_table(path), [parents] * rows)
