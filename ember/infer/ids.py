"""Sets of row ids as sorted int64 arrays.

numpy 2's `unique` hashes, which on the million-row id sets a wide trace returns (Q1's
group: 1.5 M line items) costs ~0.5 s a call; ids arrive nearly sorted, and a sort then
one comparison of neighbours takes a few milliseconds.
"""

from __future__ import annotations

import numpy as np


def distinct(ids: np.ndarray) -> np.ndarray:
    """The ids, sorted, each once."""
    ordered = np.sort(np.asarray(ids, dtype=np.int64))
    if ordered.size < 2:
        return ordered
    return ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))]


def union(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return distinct(np.concatenate((a, b))) if a.size else distinct(b)
