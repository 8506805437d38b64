"""Columns made of parts: a level of the index that the executors wrote, a stretch of rows
per task (`store.spark_index`), read as one column.

Each part is an ordinary encoded column (runs or plain) covering rows `[first, first +
rows)` of the level; the parts tile the level in order. A part is opened when a trace
first touches its rows, so a trace over a level of thousands of parts reads a few.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow.fs as pafs

from ember.store.columns import IntColumn, Segmented, concatenated


class Parts(Segmented):
    """An `IntColumn` over consecutive parts, each opened on first use."""

    def __init__(
        self,
        metas: list[dict[str, Any]],
        rows: int,
        opener: Callable[[dict[str, Any]], IntColumn],
        nbytes: int,
        folder: tuple[pafs.FileSystem, str],
        owner: object | None = None,
    ):
        super().__init__(np.array([m["first"] for m in metas] + [rows], dtype=np.int64), nbytes)
        self.metas = metas  # per part: first (row), and the part's own column entry (file, encoding, rows)
        self.folder = folder  # filesystem and root that part files are named relative to
        self.owner = owner  # keeps a capture's scratch folder alive while the column is
        self._opener = opener
        self._open: dict[int, IntColumn] = {}

    def part(self, i: int) -> IntColumn:
        if i not in self._open:
            self._open[i] = self._opener(self.metas[i])
        return self._open[i]

    def _take_in(self, i: int, at: np.ndarray) -> np.ndarray:
        return self.part(i).take(at)

    def _decoded(self, i: int) -> np.ndarray:
        return self.part(i).decode()

    def hits(self, values: np.ndarray) -> np.ndarray:
        return concatenated([self.part(i).hits(values) + self._bounds[i] for i in range(len(self.metas))])


def tiled(metas: list[dict[str, Any]], rows: int) -> bool:
    """Whether parts (sorted by `first`) cover rows `[0, rows)` exactly, each once."""
    at = 0
    for m in metas:
        if m["first"] != at:
            return False
        at += m["rows"]
    return at == rows
