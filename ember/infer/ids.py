"""Sets of row ids as sorted int64 arrays.

numpy 2's `unique` hashes, which is slow on the large id sets a wide trace returns (a
group over most of a table); ids arrive nearly sorted, so a sort then one comparison of
neighbours is far cheaper.
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
