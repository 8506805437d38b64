"""Independent lineage: perturb one input cell at a time and see which output cells change.

Never uses ember's rules or tables. Exact for functions where a NaN in any read cell
reaches the output (arithmetic, sums, products, movement).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def changed(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return ~((a == b) | (np.isnan(a) & np.isnan(b)))


def pairs(
    f: Callable[..., np.ndarray], xs: list[np.ndarray], k: int
) -> set[tuple[tuple[int, ...], tuple[int, ...]]]:
    """{(output cell, input cell)} between f's output and its k-th argument."""
    base = np.asarray(f(*xs), float)
    found = set()
    for cell in np.ndindex(xs[k].shape):
        probe = [x.copy() for x in xs]
        probe[k][cell] = np.nan
        out = np.asarray(f(*probe), float)
        for hit in np.argwhere(changed(out, base)):
            found.add((tuple(int(i) for i in hit), cell))
    return found


def as_pairs(out: np.ndarray, inp: np.ndarray) -> set[tuple[tuple[int, ...], tuple[int, ...]]]:
    return {
        (tuple(int(i) for i in o), tuple(int(i) for i in a)) for o, a in zip(out, inp, strict=True)
    }


def backward(
    rel: set[tuple[tuple[int, ...], tuple[int, ...]]], cells: set[tuple[int, ...]]
) -> list[tuple[int, ...]]:
    return sorted({a for b, a in rel if b in cells})


def forward(
    rel: set[tuple[tuple[int, ...], tuple[int, ...]]], cells: set[tuple[int, ...]]
) -> list[tuple[int, ...]]:
    return sorted({b for b, a in rel if a in cells})


def rows(cells: np.ndarray) -> list[tuple[int, ...]]:
    return [tuple(int(i) for i in c) for c in cells]
