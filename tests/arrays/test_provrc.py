"""ProvRC round trips any relation losslessly and compresses the structured ones to a few rows."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ember.arrays.provrc import Relation, compress, decode, encode, pack, unpack
from ember.arrays.query import Boxes, hop
from ember.arrays.rules import broadcast
from ember.errors import StoreError
from tests.arrays.oracle import as_pairs, backward, forward, rows

shapes = st.lists(st.integers(1, 4), min_size=0, max_size=3).map(tuple)


@st.composite
def relations(draw: st.DrawFn) -> Relation:
    """Random box relations: structured patterns mixed with noise."""
    out_shape, in_shape = draw(shapes), draw(shapes)
    n_out = int(np.prod(out_shape))
    out_cells = np.array(list(np.ndindex(out_shape)), np.int64).reshape(n_out, len(out_shape))
    n = draw(st.integers(0, 2 * n_out))
    picks = draw(st.lists(st.integers(0, n_out - 1), min_size=n, max_size=n))
    lo, hi = [], []
    for _ in picks:
        a = [draw(st.integers(0, s - 1)) for s in in_shape]
        b = [draw(st.integers(x, s - 1)) for x, s in zip(a, in_shape, strict=True)]
        lo.append(a)
        hi.append(b)
    m = len(in_shape)
    return Relation(
        out_cells[picks].reshape(len(picks), len(out_shape)),
        np.array(lo, np.int64).reshape(len(lo), m),
        np.array(hi, np.int64).reshape(len(hi), m),
        out_shape,
        in_shape,
    )


@settings(deadline=None)
@given(relations(), st.sampled_from(["backward", "forward"]))
def test_round_trip(rel: Relation, form: str) -> None:
    table = compress(rel, form)  # type: ignore[arg-type]
    truth = as_pairs(*rel.raw())
    assert as_pairs(*table.decompress()) == truth
    assert as_pairs(*decode(encode(table)).decompress()) == truth
    assert table.rows <= (len(rel.out) if form == "backward" else len(truth))  # only ever merges


@settings(deadline=None)
@given(relations(), st.sampled_from(["backward", "forward"]), st.data())
def test_hops_equal_brute_force(rel: Relation, form: str, data: st.DataObject) -> None:
    table = compress(rel, form)  # type: ignore[arg-type]
    truth = as_pairs(*rel.raw())
    for to_input, shape in ((True, rel.out_shape), (False, rel.in_shape)):
        cells = data.draw(st.lists(st.tuples(*(st.integers(0, s - 1) for s in shape)), max_size=4))
        got = hop(
            table,
            Boxes.of_cells(np.array(cells, np.int64).reshape(len(cells), len(shape))),
            to_input,
        )
        want = (backward if to_input else forward)(truth, set(cells))
        assert rows(got.cells()) == want


def test_paper_example_sum_axis_1() -> None:
    """DSLog Tables I-III: B = sum(A, axis=1), A 3x2, is one row either way."""
    out = np.arange(3)[:, None]
    rel = Relation(out, np.hstack([out, 0 * out]), np.hstack([out, 0 * out + 1]), (3,), (3, 2))
    back = compress(rel)
    assert back.rows == 1
    assert back.key_lo.tolist() == [[0]] and back.key_hi.tolist() == [[2]]
    assert back.val_ref.tolist() == [[0, -1]]  # a1 relative to b1, a2 absolute
    assert back.val_lo.tolist() == [[0, 0]] and back.val_hi.tolist() == [[0, 1]]
    fwd = compress(rel, "forward")
    assert fwd.rows == 1 and fwd.val_ref.tolist() == [[0]]


def test_structured_relations_are_one_row() -> None:
    cells = np.indices((300, 200)).reshape(2, -1).T
    assert compress(Relation.pairs(cells, cells, (300, 200), (300, 200))).rows == 1  # one-to-one
    transposed = compress(Relation.pairs(cells, cells[:, ::-1], (300, 200), (200, 300)))
    assert transposed.rows == 1
    window = np.arange(8)[:, None]
    assert compress(Relation(window, window, window + 2, (8,), (10,))).rows == 1  # E8
    diagonal = compress(
        Relation.pairs(np.arange(3)[:, None], np.repeat(np.arange(3)[:, None], 2, 1), (3,), (3, 3))
    )
    assert diagonal.rows == 1
    got = hop(diagonal, Boxes.of_cells(np.array([[0], [1]])), True).cells()
    assert got.tolist() == [[0, 0], [1, 1]]  # exact, not the bounding box


def test_permutation_stays_small_on_disk() -> None:
    perm = np.random.default_rng(0).permutation(100_000)
    table = compress(Relation.pairs(np.arange(100_000), perm, (100_000,), (100_000,)))
    assert table.nbytes < 100_000 * 2.2  # 17 bits a row, packed
    assert as_pairs(*decode(encode(table)).decompress()) == as_pairs(
        np.arange(100_000)[:, None], perm[:, None]
    )


@given(st.lists(st.integers(-(2**40), 2**40), max_size=50))
def test_codec_columns(values: list[int]) -> None:
    col = np.array(values, np.int64)
    meta, data = pack(col)
    back, end = unpack(data, 0, len(col), meta)
    assert back.tolist() == values and end == len(data)


def test_damaged_blob_raises() -> None:
    cells = np.indices((5, 5)).reshape(2, -1).T
    blob = encode(compress(Relation.pairs(cells, cells[::-1], (5, 5), (5, 5))))
    with pytest.raises(StoreError):
        decode(blob[: len(blob) // 2])
    with pytest.raises(StoreError):
        decode(b"XXXX" + blob[4:])


MOVES = [
    lambda x: np.flip(x, axis=0),
    lambda x: np.flip(x),
    np.rot90,
    lambda x: np.rot90(x, 3),
    np.transpose,
    lambda x: np.roll(x, 1, axis=-1),
    lambda x: x[::-2],
    lambda x: np.swapaxes(x[::-1, :, ::-1], 0, 2),
]


@settings(deadline=None)
@given(
    st.tuples(st.integers(1, 4), st.integers(1, 4), st.integers(1, 3)),
    st.sampled_from(range(len(MOVES))),
    st.sampled_from(["backward", "forward"]),
    st.data(),
)
def test_reversed_and_permuted_axes(
    shape: tuple[int, int, int], move: int, form: str, data: st.DataObject
) -> None:
    """Flips and rotations (mirrored representation) round-trip and answer exactly."""
    ids = np.arange(np.prod(shape)).reshape(shape)
    moved = MOVES[move](ids)
    out = np.array(list(np.ndindex(moved.shape)), np.int64).reshape(moved.size, moved.ndim)
    inp = np.stack(np.unravel_index(moved.ravel(), shape), axis=1)
    rel = Relation.pairs(out, inp, moved.shape, shape)
    table = compress(rel, form)  # type: ignore[arg-type]
    truth = as_pairs(*rel.raw())
    assert as_pairs(*table.decompress()) == truth
    if form == "backward" and move < 4:
        assert table.rows == 1
    for to_input, s in ((True, moved.shape), (False, shape)):
        lo = [data.draw(st.integers(0, n - 1)) for n in s]
        hi = [data.draw(st.integers(a, n - 1)) for a, n in zip(lo, s, strict=True)]
        query = Boxes(np.array([lo], np.int64), np.array([hi], np.int64))
        cells = {tuple(int(i) for i in c) for c in query.cells()}
        want = (backward if to_input else forward)(truth, cells)
        assert rows(hop(table, query, to_input).cells()) == want


@settings(deadline=None)
@given(
    st.lists(st.integers(1, 4), max_size=3), st.lists(st.booleans(), max_size=3), st.integers(0, 1)
)
def test_broadcast_table_is_what_provrc_makes(
    shape: list[int], ones: list[bool], lead: int
) -> None:
    """Element-wise rules build their table directly; it must equal ProvRC of the raw
    broadcast relation (cell ids pushed through np.broadcast_to)."""
    in_shape = tuple(1 if o else n for n, o in zip(shape, ones + [False] * 3, strict=False))
    out_shape = (2,) * lead + tuple(shape)
    ids = np.broadcast_to(np.arange(int(np.prod(in_shape))).reshape(in_shape), out_shape)
    out = np.array(list(np.ndindex(out_shape)), np.int64).reshape(ids.size, len(out_shape))
    inp = np.zeros((ids.size, 0), np.int64)
    if in_shape:
        inp = np.stack(np.unravel_index(ids.ravel(), in_shape), axis=1)
    assert broadcast(in_shape, out_shape).same(
        compress(Relation.pairs(out, inp, out_shape, in_shape))
    )
