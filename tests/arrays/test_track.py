"""Captured lineage of each op family equals perturbation (or explicit index math), and
values equal the untracked run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ember import arrays
from ember.arrays.track import TrackedArray
from tests.arrays.oracle import as_pairs, pairs

Pairs = set[tuple[tuple[int, ...], tuple[int, ...]]]


def captured(wf: arrays.Workflow, out: TrackedArray, x: TrackedArray) -> Pairs:
    """Lineage pairs from x to out, by forward queries (through composite steps too) and
    by backward queries, which must agree."""
    fwd = {
        (tuple(b), cell)
        for cell in np.ndindex(x.shape)
        for b in wf.forward(x, [cell], to=out).tolist()
    }
    back = {
        (cell, tuple(a))
        for cell in np.ndindex(out.shape)
        for a in wf.backward(out, [cell], to=x).tolist()
    }
    assert fwd == back
    return fwd


def check(f: Callable[..., Any], *shapes: tuple[int, ...], seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    xs = [rng.random(s) + 0.5 for s in shapes]
    wf = arrays.Workflow()
    ts = [wf.track(x) for x in xs]
    out = f(*ts)
    assert isinstance(out, TrackedArray)
    np.testing.assert_array_equal(np.asarray(out), f(*xs))
    for k, t in enumerate(ts):
        assert captured(wf, out, t) == pairs(f, xs, k), f"input {k}"


CASES: list[tuple[str, Callable[..., Any], list[tuple[int, ...]]]] = [
    ("negative", lambda a: -a, [(3, 4)]),
    ("add broadcast", lambda a, b: a + b, [(3, 4), (4,)]),
    ("outer broadcast", lambda a, b: a * b, [(3, 1), (1, 4)]),
    ("exp", np.exp, [(2, 3, 2)]),
    ("sum axis 1", lambda a: np.sum(a, axis=1), [(3, 4)]),
    ("mean keepdims", lambda a: np.mean(a, axis=0, keepdims=True), [(3, 4)]),
    ("max tuple axes", lambda a: np.max(a, axis=(0, 2)), [(2, 3, 2)]),
    ("std all", np.std, [(3, 4)]),
    ("prod method", lambda a: a.prod(axis=-1), [(3, 4)]),
    ("add.reduce", lambda a: np.add.reduce(a, axis=1), [(3, 4)]),
    ("cumsum axis", lambda a: np.cumsum(a, axis=1), [(3, 4)]),
    ("cumprod flat", np.cumprod, [(3, 4)]),
    ("multiply.accumulate", lambda a: np.multiply.accumulate(a), [(4, 2)]),
    ("diff", lambda a: np.diff(a, n=2, axis=0), [(5, 3)]),
    ("reshape", lambda a: a.reshape(4, 3), [(3, 4)]),
    ("transpose", lambda a: a.T, [(3, 4)]),
    ("flip", lambda a: np.flip(a, axis=0), [(3, 4)]),
    ("rot90", np.rot90, [(3, 4)]),
    ("roll", lambda a: np.roll(a, 2, axis=1), [(3, 4)]),
    ("slice", lambda a: a[1:, ::2], [(3, 5)]),
    ("fancy", lambda a: a[[2, 0, 2]], [(3, 4)]),
    ("int index", lambda a: a[1], [(3, 4)]),
    ("concatenate", lambda a, b: np.concatenate([a, b, a], axis=1), [(3, 2), (3, 1)]),
    ("stack", lambda a, b: np.stack([a, b]), [(3, 2), (3, 2)]),
    ("repeat", lambda a: np.repeat(a, 2, axis=0), [(3, 2)]),
    ("tile", lambda a: np.tile(a, (2, 3)), [(2, 2)]),
    ("pad", lambda a: np.pad(a, 1, constant_values=7.0), [(2, 3)]),
    ("tril", np.tril, [(3, 3)]),
    ("diagonal", np.diagonal, [(3, 3)]),
    ("matmul", lambda a, b: a @ b, [(3, 4), (4, 2)]),
    ("matvec", lambda a, b: a @ b, [(3, 4), (4,)]),
    ("vecmat", lambda a, b: np.matmul(a, b), [(4,), (4, 2)]),
    ("batched matmul", lambda a, b: a @ b, [(2, 3, 4), (4, 2)]),
    ("dot", np.dot, [(3, 4), (4, 2)]),
    ("outer", np.outer, [(3,), (2, 2)]),
    ("trace", np.trace, [(3, 3)]),
    ("convolve full", np.convolve, [(6,), (3,)]),
    ("convolve same", lambda a, v: np.convolve(a, v, mode="same"), [(6,), (4,)]),
    ("convolve valid", lambda a, v: np.convolve(a, v, mode="valid"), [(3,), (6,)]),
    ("correlate", lambda a, v: np.correlate(a, v, mode="full"), [(6,), (3,)]),
    ("filter2d", lambda a, k: arrays.filter2d(a, k), [(5, 4), (3, 3)]),
    ("filter2d valid", lambda a: arrays.filter2d(a, np.ones((2, 3)), mode="valid"), [(5, 4)]),
    ("cov", np.cov, [(3, 5)]),
    ("where", lambda a, b: np.where(np.arange(4) % 2 == 0, a, b), [(3, 4), (3, 4)]),
    ("clip", lambda a: np.clip(a, 0.7, 1.2), [(3, 4)]),
    ("gradient", np.gradient, [(6,)]),
    ("gradient 2-d", lambda a: np.gradient(a)[1], [(3, 4)]),
    ("multi-step", lambda a, b: np.sum(np.exp(-a) * b[:, None], axis=0)[::-1], [(3, 4), (3,)]),
]


@pytest.mark.parametrize(("name", "f", "shapes"), CASES, ids=[c[0] for c in CASES])
def test_lineage_equals_perturbation(
    name: str, f: Callable[..., Any], shapes: list[tuple[int, ...]]
) -> None:
    check(f, *shapes)


def test_sort_follows_the_values() -> None:
    x = np.array([[3.0, 1.0, 2.0], [0.0, 5.0, 4.0]])
    wf = arrays.Workflow()
    t = wf.track(x, name="x")
    s = np.sort(t, axis=1)
    np.testing.assert_array_equal(np.asarray(s), np.sort(x, axis=1))
    order = np.argsort(x, axis=1)
    want = {((i, j), (i, int(order[i, j]))) for i in range(2) for j in range(3)}
    assert captured(wf, s, t) == want


def test_boolean_mask_selects_and_counts_as_lineage() -> None:
    x = np.arange(12.0).reshape(3, 4)
    wf = arrays.Workflow()
    t = wf.track(x, name="x")
    mask = t > 5
    picked = t[mask]
    np.testing.assert_array_equal(np.asarray(picked), x[x > 5])
    assert wf.backward(picked, [(0,)], to="x").tolist() == [[1, 2]]
    assert wf.forward(t, [(2, 3)], to=picked).tolist() == [[5]]
    assert wf.forward(t, [(0, 0)], to=picked).tolist() == []


def test_unique_groups_cells() -> None:
    x = np.array([2.0, 1.0, 2.0, 3.0, 1.0])
    wf = arrays.Workflow()
    t = wf.track(x, name="x")
    u = np.unique(t)
    assert wf.backward(u, [(0,)], to=t).tolist() == [[1], [4]]
    assert wf.forward(t, [(2,)], to=u).tolist() == [[1]]


@settings(deadline=None)
@given(
    st.lists(st.integers(1, 3), min_size=1, max_size=3),
    st.lists(st.booleans(), min_size=3, max_size=3),
    st.integers(0, 2),
)
def test_broadcast_and_reduce_random_shapes(shape: list[int], ones: list[bool], axis: int) -> None:
    other = tuple(1 if o else s for s, o in zip(shape, ones, strict=False))
    check(lambda a, b: np.sum(a * b, axis=axis % len(shape)), tuple(shape), other)


@settings(deadline=None)
@given(st.integers(1, 3), st.integers(1, 3), st.integers(1, 3), st.integers(1, 2))
def test_matmul_random_shapes(n: int, k: int, m: int, batch: int) -> None:
    check(lambda a, b: a @ b, (batch, n, k), (k, m))


def test_unsupported_function_warns_and_perturbs() -> None:
    with pytest.warns(arrays.LineageWarning, match="cross"):
        check(np.cross, (4, 3), (4, 3))


def test_large_unsupported_function_raises_naming_it() -> None:
    wf = arrays.Workflow()
    t = wf.track(np.ones((100, 30)))
    with pytest.raises(arrays.UnsupportedArrayOperationError, match="kron"):
        np.kron(t, t)


def test_mutation_and_out_are_refused() -> None:
    t = arrays.track(np.ones(3))
    with pytest.raises(TypeError):
        t[0] = 2.0
    with pytest.raises(arrays.UnsupportedArrayOperationError):
        np.add(t, 1, out=np.empty(3))


def test_module_level_track_uses_one_workflow() -> None:
    a, b = arrays.track(np.ones((2, 2))), arrays.track(np.ones((2, 2)))
    c = a + b
    assert c.workflow is a.workflow is b.workflow
    assert c.workflow.backward(c, [(1, 0)], to=b).tolist() == [[1, 0]]


def test_tracked_keyword_arguments_and_non_numeric_results(tmp_path: object) -> None:
    wf = arrays.Workflow()
    t = wf.track(np.arange(4.0), name="t")
    v = wf.track(np.array([9.0]), name="v")
    out = np.insert(t, 1, values=v)
    np.testing.assert_array_equal(np.asarray(out), [0.0, 9.0, 1.0, 2.0, 3.0])
    assert wf.backward(out, [(1,)], to=v).tolist() == [[0]]
    assert wf.backward(out, [(2,)], to=t).tolist() == [[1]]
    assert np.array2string(t) == np.array2string(np.arange(4.0))
    with pytest.warns(arrays.LineageWarning, match="eig"):
        eig = np.linalg.eig(wf.track(np.eye(2)))
    assert isinstance(eig.eigenvalues, TrackedArray)


SINGLE_STEP: list[tuple[str, Callable[[Any], Any]]] = [
    ("negative", lambda a: -a),
    ("sin", np.sin),
    ("sum", lambda a: np.sum(a, axis=-1)),
    ("mean keepdims", lambda a: np.mean(a, axis=0, keepdims=True)),
    ("max all", np.max),
    ("cumsum", lambda a: np.cumsum(a, axis=-1)),
    ("diff", lambda a: np.diff(a, axis=0) if a.shape[0] > 1 else -a),
    ("transpose", np.transpose),
    ("flip", lambda a: np.flip(a, axis=-1)),
    ("rot90", lambda a: np.rot90(a) if a.ndim >= 2 else -a),
    ("roll", lambda a: np.roll(a, 1, axis=0)),
    ("reshape", np.ravel),
    ("repeat", lambda a: np.repeat(a, 2, axis=-1)),
    ("tile", lambda a: np.tile(a, 2)),
    ("slice", lambda a: a[::-1, ...]),
    ("fancy", lambda a: a[[0, -1, 0]]),
    ("concatenate", lambda a: np.concatenate([a, a], axis=0)),
    ("stack", lambda a: np.stack([a, a], axis=-1)),
    ("pad", lambda a: np.pad(a, 1)),
    ("matmul", lambda a: a @ np.ones(a.shape[-1])),
    ("outer", lambda a: np.multiply.outer(a, np.ones(2))),
]


@settings(deadline=None)
@given(
    st.sampled_from(range(len(SINGLE_STEP))),
    st.lists(st.integers(1, 4), min_size=1, max_size=3),
)
def test_each_table_decompresses_to_the_perturbation_relation(op: int, shape: list[int]) -> None:
    """compress -> decompress of every captured table equals the raw relation, found
    independently by perturbation, for random shapes."""
    f = SINGLE_STEP[op][1]
    x = np.random.default_rng(op).random(shape) + 0.5
    wf = arrays.Workflow()
    out = f(wf.track(x))
    np.testing.assert_array_equal(np.asarray(out), f(x))
    (edge,) = wf.edges
    assert as_pairs(*edge.table.decompress()) == pairs(f, [x], 0)


def test_np_array_copies_and_asarray_shares() -> None:
    t = arrays.track(np.zeros(3))
    copied = np.array(t)
    copied[0] = 1.0
    assert np.asarray(t)[0] == 0.0
    assert np.asarray(t) is np.asarray(t)
    assert np.asarray(t, dtype=np.float32).dtype == np.float32
