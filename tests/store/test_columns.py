"""Encoded columns answer exactly what the plain array answers, and runs stay few."""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ember.store import columns as encoded
from ember.store.columns import (
    FEW_RANGES,
    RUNS_WORTH_IT,
    Plain,
    Runs,
    encode,
    sorted_unique,
    to_runs,
)


@st.composite
def columns(draw: st.DrawFn) -> np.ndarray:
    """Concatenated arithmetic runs (any step, incl. 0 and negative) with some noise rows."""
    parts = []
    for _ in range(draw(st.integers(0, 6))):
        base, step, n = draw(st.integers(-1, 50)), draw(st.integers(-3, 3)), draw(st.integers(1, 8))
        parts.append(base + step * np.arange(n, dtype=np.int64))
        if draw(st.booleans()):
            parts.append(np.array(draw(st.lists(st.integers(-1, 50), max_size=3)), dtype=np.int64))
    return np.concatenate(parts) if parts else np.empty(0, np.int64)


@settings()  # examples: the Hypothesis profile (tests/conftest.py)
@given(columns(), st.data())
def test_runs_answer_as_the_plain_array(values: np.ndarray, data: st.DataObject) -> None:
    runs, plain = to_runs(values), Plain(values)
    assert runs.decode().tolist() == values.tolist()
    assert encode(values).decode().tolist() == values.tolist()
    # encode's shortcut past too many step changes chooses as building the runs would
    assert isinstance(encode(values), Runs) == (runs.start.size * RUNS_WORTH_IT <= values.size)
    rows = np.array(sorted(data.draw(st.sets(st.integers(0, max(values.size - 1, 0)))) if values.size else []))
    rows = rows.astype(np.int64)
    assert runs.take(rows).tolist() == plain.take(rows).tolist() == values[rows].tolist()
    wanted = np.array(sorted(data.draw(st.sets(st.integers(0, 60), max_size=14))), dtype=np.int64)
    truth = [i for i, v in enumerate(values.tolist()) if v in set(wanted.tolist())]
    assert runs.hits(wanted).tolist() == truth
    assert plain.hits(wanted).tolist() == truth


@pytest.mark.parametrize("short", [0, 1 << 40], ids=["cut at runs", "row by row"])
@settings()  # examples: the Hypothesis profile (tests/conftest.py)
@given(columns(), st.data())
def test_ranges_of_rows_are_taken_as_their_rows(short: int, values: np.ndarray, data: st.DataObject) -> None:
    """Whole ranges (a trace's walk down a level), in any order and overlapping, read
    what their rows read one by one, however runs read them; past `FEW_RANGES` a plain
    column indexes instead. Their rids alone (runs of -1 skipped unread) are the same
    values, at the same places."""
    bounds = st.integers(0, values.size)
    pairs = data.draw(st.lists(st.tuples(bounds, bounds), max_size=FEW_RANGES + 6))
    start = np.array([min(p) for p in pairs], dtype=np.int64)
    end = np.array([max(p) for p in pairs], dtype=np.int64)
    rows = [r for s, e in zip(start.tolist(), end.tolist(), strict=True) for r in range(s, e)]
    truth = values[np.array(rows, dtype=np.int64)].tolist() if rows else []
    valid = [(at, v) for at, v in enumerate(truth) if v >= 0]
    with mock.patch.object(encoded, "SHORT_RANGES", short):
        for column in (to_runs(values), Plain(values)):
            assert column.take_ranges(start, end).tolist() == truth
            vals, at = column.take_valid(start, end, positions=True)
            assert at is not None
            assert list(zip(at.tolist(), vals.tolist(), strict=True)) == valid
            assert column.take_valid(start, end, positions=False)[0].tolist() == [v for _, v in valid]


@given(st.lists(st.lists(st.integers(0, 200), max_size=40), max_size=5), st.integers(0, 10**12))
def test_sorted_unique_is_the_sorted_set(chunks: list[list[int]], shift: int) -> None:
    """Dense values (marked in a bitmap) and sparse ones (sorted) alike, from zero and far
    from it."""
    for offset in (0, shift):
        for spread in (lambda v: v % 7, lambda v: v, lambda v: v * 1000):  # tight, dense, sparse
            arrays = [spread(np.array(c, dtype=np.int64)) + offset for c in chunks]
            assert sorted_unique(arrays).tolist() == sorted({spread(v) + offset for c in chunks for v in c})


def test_structure_becomes_few_runs() -> None:
    one_to_one = np.arange(100, 1_000_100, dtype=np.int64)
    fan_out = np.repeat(np.arange(1000, dtype=np.int64), 50)
    gaps = np.concatenate([np.arange(0, 10), np.arange(20, 30), np.arange(40, 50)]).astype(np.int64)
    assert to_runs(one_to_one).start.size == 1
    assert to_runs(fan_out).start.size == 1000
    assert to_runs(gaps).start.size == 3
    assert isinstance(encode(one_to_one), Runs)
    assert isinstance(encode(np.random.default_rng(1).integers(0, 10**6, 1000)), Plain)
