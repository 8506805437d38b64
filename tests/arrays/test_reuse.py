"""Reused lineage equals a fresh capture, and only value-independent calls are reused."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from ember import arrays
from ember.arrays import rules
from ember.arrays.reuse import Tables, same

Op = Callable[[arrays.TrackedArray], arrays.TrackedArray]


def tables(wf: arrays.Workflow, op: int) -> Tables:
    return tuple((0, 0, e.table) for e in wf.edges if e.op == op)


def run(op: Op, shapes: list[tuple[int, ...]], reuse: bool = True) -> arrays.Workflow:
    wf = arrays.Workflow(reuse=reuse)
    for s in shapes:
        op(wf.track(np.random.default_rng(len(s)).random(s)))
    return wf


def reused_equals_fresh(op: Op, shapes: list[tuple[int, ...]]) -> list[str]:
    with_reuse, fresh = run(op, shapes), run(op, shapes, reuse=False)
    for i in range(len(shapes)):
        assert same(tables(with_reuse, i), tables(fresh, i)), f"call {i}"
    return [o.reused for o in with_reuse.ops]


@pytest.mark.parametrize(
    ("op", "expected"),
    [
        (lambda a: -a, ["", "dim", "", "gen"]),
        (lambda a: a * np.arange(a.shape[-1]), ["", "dim", "", "gen"]),  # plain operand
        (lambda a: np.sum(a, axis=1), ["", "dim", "", "gen"]),
        (lambda a: np.flip(a, axis=1), ["", "dim", "", "gen"]),  # mirrored: a = (N - 1) - b
        (np.rot90, ["", "dim", "", "gen"]),
        (lambda a: np.tile(a, 2), ["", "dim", "", ""]),  # offsets depend on the shape
        (lambda a: np.cumsum(a, axis=1), ["", "dim", "", ""]),  # one row per output column
        (np.sort, ["", "", "", ""]),  # value-dependent: never reused
    ],
)
def test_reuse_kinds(op: Op, expected: list[str]) -> None:
    assert reused_equals_fresh(op, [(4, 5), (4, 5), (6, 3), (7, 2)]) == expected


def test_generalized_only_to_the_axes_a_confirmation_varied() -> None:
    # Confirmed on another column count, `repeat` along rows has said nothing of other row
    # counts (its table has a row per input row): a new row count is captured afresh.
    def repeat(a: np.ndarray) -> np.ndarray:
        return np.repeat(a, 2, axis=0)

    assert reused_equals_fresh(repeat, [(2, 3), (2, 2), (4, 2)]) == ["", "", ""]
    assert reused_equals_fresh(repeat, [(2, 3), (2, 2), (2, 5)]) == ["", "", "gen"]


def test_reused_capture_does_not_run_the_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    wf = arrays.Workflow()
    -wf.track(np.ones((3, 3)))

    def boom(*_: object) -> None:
        raise AssertionError("captured again")

    monkeypatch.setattr(rules, "broadcast", boom)
    x = wf.track(np.zeros((3, 3)), name="x")
    b = -x
    assert wf.ops[-1].reused == "dim"
    assert wf.backward(b, [(1, 2)], to=x).tolist() == [[1, 2]]
    with pytest.raises(AssertionError, match="captured again"):
        -wf.track(np.zeros((2, 2)))


def test_a_shared_cache_serves_a_second_workflow() -> None:
    cache = arrays.Reuse()
    first, second = arrays.Workflow(reuse=cache), arrays.Workflow(reuse=cache)
    np.sum(first.track(np.ones((4, 3))), axis=0)
    b = second.track(np.zeros((4, 3)), name="b")
    s = np.sum(b, axis=0)
    assert second.ops[-1].reused == "dim"
    assert second.backward(s, [(2,)], to=b).tolist() == [[i, 2] for i in range(4)]
