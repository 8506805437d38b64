"""Multi-step queries on compressed tables equal end-to-end perturbation of the whole pipeline."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from ember import arrays
from ember.arrays.query import Boxes
from tests.arrays.oracle import backward, forward, pairs, rows

Step = Callable[[np.ndarray], np.ndarray]
STEPS: list[tuple[str, Step]] = [
    ("negative", lambda x: -x),
    ("exp", np.exp),
    ("add self shifted", lambda x: x + np.roll(x, 1, axis=0)),
    ("transpose", lambda x: x.T),
    ("flip", lambda x: np.flip(x, axis=-1)),
    ("cumsum", lambda x: np.cumsum(x, axis=0)),
    ("sum keepdims", lambda x: np.sum(x, axis=1, keepdims=True) * np.ones(x.shape[1])),
    ("slice", lambda x: x[::2, 1:] if x.shape[0] > 2 and x.shape[1] > 2 else x),
    ("matmul", lambda x: x @ np.ones((x.shape[1], 2))),
    ("window", lambda x: np.diff(x, axis=1) if x.shape[1] > 2 else x),
    ("repeat", lambda x: np.repeat(x, 2, axis=0) if x.shape[0] < 5 else x),
    ("rot90", np.rot90),
    ("gram", lambda x: x @ x.T if x.shape[0] < 6 else x),
    ("tile", lambda x: np.tile(x, (1, 2)) if x.shape[1] < 5 else x),
    ("reversed slice", lambda x: x[::-1, ::-2]),
    ("stack and sum", lambda x: np.sum(np.stack([x, np.flip(x, axis=0)]), axis=0)),
]


@settings(deadline=None)
@given(
    st.lists(st.sampled_from(range(len(STEPS))), min_size=1, max_size=5),
    st.integers(2, 4),
    st.integers(2, 4),
    st.data(),
)
def test_pipelines_equal_end_to_end_perturbation(
    picks: list[int], n: int, m: int, data: st.DataObject
) -> None:
    def pipeline(x: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):  # exp of exp overflows; lineage does not care
            for i in picks:
                x = STEPS[i][1](x)
        return x

    x = np.random.default_rng(0).random((n, m)) + 0.5
    # The oracle perturbs an input cell to NaN and looks for outputs that change: one that
    # is NaN already (exp overflowed to inf, then inf - inf) can show no change.
    assume(not np.isnan(pipeline(x)).any())
    wf = arrays.Workflow(forward_tables=data.draw(st.booleans()))
    a = wf.track(x, name="a")
    b = pipeline(a)
    np.testing.assert_array_equal(np.asarray(b), pipeline(x))
    truth = pairs(pipeline, [x], 0)
    out_cells = data.draw(st.sets(st.tuples(*(st.integers(0, s - 1) for s in b.shape)), max_size=3))
    in_cells = data.draw(
        st.sets(st.tuples(st.integers(0, n - 1), st.integers(0, m - 1)), max_size=3)
    )
    got_back = wf.backward(b, sorted(out_cells), to=a)
    got_fwd = wf.forward(a, sorted(in_cells), to=b)
    assert got_back.dtype == np.int64 and got_back.shape[1] == 2
    assert rows(got_back) == backward(truth, out_cells)
    assert rows(got_fwd) == forward(truth, in_cells)


def test_issue_example_and_masks() -> None:
    wf = arrays.Workflow()
    x = np.random.default_rng(1).random((300, 200))
    a = wf.track(x, name="a")
    b = np.sum(-a + 1, axis=1)
    np.testing.assert_array_equal(np.asarray(b), np.sum(-x + 1, axis=1))
    back = wf.backward(b, [(5,)], to=a)
    assert back.tolist() == [[5, j] for j in range(200)]
    assert wf.forward(a, [(3, 4)], to=b).tolist() == [[3]]
    mask = np.zeros(300, bool)
    mask[[7, 9]] = True
    assert len(wf.backward(b, mask, to=a)) == 400
    assert wf.lineage_bytes() < 2_000  # 3 one-row tables; raw pairs would be 1.9 MB
    assert all(e.table.rows == 1 for e in wf.edges)


def test_query_across_a_dag_unions_paths() -> None:
    wf = arrays.Workflow()
    a = wf.track(np.arange(6.0), name="a")
    b = a[:3] + a[3:]  # b[i] reads a[i] and a[i + 3]
    assert wf.backward(b, [(1,)], to=a).tolist() == [[1], [4]]
    assert wf.forward(a, [(4,)], to=b).tolist() == [[1]]
    assert wf.forward(b, [(0,)], to=a).tolist() == []  # no path from b back to a


def test_boxes_merge_adjacent_and_overlapping() -> None:
    cells = np.array([[0, 0], [0, 1], [1, 0], [1, 1], [3, 3]])
    merged = Boxes.of_cells(cells)
    assert len(merged) == 2
    assert merged.cells().tolist() == cells.tolist()
    overlapping = Boxes(np.array([[0], [2], [9]]), np.array([[5], [7], [9]])).merged()
    assert overlapping.lo.tolist() == [[0], [9]] and overlapping.hi.tolist() == [[7], [9]]


def test_bad_cells_are_refused() -> None:
    wf = arrays.Workflow()
    a = wf.track(np.ones((3, 4)), name="a")
    b = -a
    assert wf.backward(b, (2, 3), to=a).tolist() == [[2, 3]]  # one cell as a tuple
    assert wf.backward(b, [], to=a).tolist() == []
    for bad, error in (
        (np.ones(3, bool), ValueError),  # mask of the wrong shape
        ([(0.5, 1.0)], TypeError),
        ([(1, 2, 3)], ValueError),
        ([(3, 0)], IndexError),
    ):
        with pytest.raises(error):
            wf.backward(b, bad, to=a)
    s = np.sum(a)
    assert wf.backward(s, [()], to=a).shape == (12, 2)
