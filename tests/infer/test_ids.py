"""Id sets equal numpy's own set operations."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from ember.infer.ids import distinct, union

id_lists = st.lists(st.integers(0, 2**40), max_size=60)


@given(a=id_lists, b=id_lists)
def test_distinct_and_union_equal_numpy(a: list[int], b: list[int]) -> None:
    x, y = np.array(a, dtype=np.int64), np.array(b, dtype=np.int64)
    assert np.array_equal(distinct(x), np.unique(x)) and distinct(x).dtype == np.int64
    assert np.array_equal(union(x, y), np.union1d(x, y))
