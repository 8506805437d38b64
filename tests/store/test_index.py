"""The index walks (pure numpy) against brute-force set arithmetic on small random levels."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ember.store.columns import IntColumn, Plain, encode, expand_ranges, to_runs
from ember.store.index import Level, LineageIndex, Ranges, merge

PACKINGS: dict[str, Callable[[np.ndarray], IntColumn]] = {"plain": Plain, "runs": to_runs, "auto": encode}

SRC = "s"


@given(st.lists(st.tuples(st.integers(0, 20), st.integers(0, 5)), max_size=8))
def test_expand_covers_exactly_the_ranges(pairs: list[tuple[int, int]]) -> None:
    start = np.array([a for a, _ in pairs], dtype=np.int64)
    end = start + np.array([n for _, n in pairs], dtype=np.int64)
    want = [i for a, b in zip(start, end, strict=True) for i in range(a, b)]
    assert expand_ranges(start, end).tolist() == want


@given(st.lists(st.tuples(st.integers(0, 30), st.integers(1, 6)), max_size=12), st.booleans())
def test_merged_ranges_are_the_union_sorted_and_apart(pairs: list[tuple[int, int]], in_order: bool) -> None:
    """In row order (sorted by start, no sort needed) or not, the union as ranges apart."""
    pairs = sorted(pairs) if in_order else pairs
    start = np.array([a for a, _ in pairs], dtype=np.int64)
    end = start + np.array([n for _, n in pairs], dtype=np.int64)
    s, e = merge(start, end)
    assert set(expand_ranges(s, e).tolist()) == {i for a, n in pairs for i in range(a, a + n)}
    assert bool(np.all(e > s)) and bool(np.all(s[1:] > e[:-1]))


@st.composite
def two_levels(draw: st.DrawFn) -> tuple[LineageIndex, list[set[int]]]:
    """A side table of source rids grouped into ranges, and output rows with a rid and a range."""
    pack = PACKINGS[draw(st.sampled_from(sorted(PACKINGS)))]
    n_side = draw(st.integers(0, 12))
    if draw(st.booleans()):
        side_rids = np.array(draw(st.lists(st.integers(0, 9), min_size=n_side, max_size=n_side)), dtype=np.int64)
    else:  # clustered: consecutive rids, as after a filter over a sorted file
        side_rids = draw(st.integers(0, 3)) + np.arange(n_side, dtype=np.int64) // draw(st.integers(1, 3))
    n_out = draw(st.integers(1, 6))
    starts, ends, own = [], [], []
    for _ in range(n_out):
        a = draw(st.integers(0, n_side))
        b = draw(st.integers(a, n_side))
        starts.append(a)
        ends.append(b)
        own.append(draw(st.integers(-1, 9)))
    side = Level(n_side, ((SRC, pack(side_rids)),), ())
    out = Level(
        n_out,
        ((SRC, pack(np.array(own, dtype=np.int64))),),
        (Ranges(0, pack(np.array(starts, dtype=np.int64)), pack(np.array(ends, dtype=np.int64))),),
    )
    truth = [
        {int(r) for r in side_rids[a:b]} | ({o} if o >= 0 else set())
        for a, b, o in zip(starts, ends, own, strict=True)
    ]
    return LineageIndex(out, (side,)), truth


@settings()  # examples: the Hypothesis profile (tests/conftest.py)
@given(two_levels(), st.data())
def test_backward_and_forward_agree_with_sets(case: tuple[LineageIndex, list[set[int]]], data: st.DataObject) -> None:
    index, truth = case
    oids = sorted(set(data.draw(st.lists(st.integers(0, len(truth) - 1), max_size=3))))
    got = index.backward(np.array(oids, dtype=np.int64)).get(SRC, np.empty(0, np.int64))
    assert got.tolist() == sorted(set().union(*(truth[o] for o in oids)) if oids else set())
    rids = data.draw(st.lists(st.integers(0, 9), max_size=3))
    reached = index.forward(SRC, np.array(rids, dtype=np.int64)).tolist()
    assert reached == [o for o, lin in enumerate(truth) if lin & set(rids)]
