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

from ember.store.columns import IntColumn


class Parts:
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
        self.metas = metas  # per part: first (row), and the part's own column entry (file, encoding, rows)
        self.folder = folder  # filesystem and root that part files are named relative to
        self.owner = owner  # keeps a capture's scratch folder alive while the column is
        self._bounds = np.array([m["first"] for m in metas] + [rows], dtype=np.int64)
        self._opener = opener
        self._nbytes = nbytes
        self._open: dict[int, IntColumn] = {}

    @property
    def size(self) -> int:
        return int(self._bounds[-1])

    @property
    def nbytes(self) -> int:
        return self._nbytes

    def part(self, i: int) -> IntColumn:
        if i not in self._open:
            self._open[i] = self._opener(self.metas[i])
        return self._open[i]

    def take(self, rows: np.ndarray) -> np.ndarray:
        at = np.searchsorted(self._bounds, rows, side="right") - 1
        out = np.empty(rows.size, dtype=np.int64)
        cuts = np.flatnonzero(np.diff(at)) + 1
        for lo, hi in zip(np.concatenate(([0], cuts)), np.append(cuts, rows.size), strict=True):
            if hi > lo:
                i = int(at[lo])
                out[lo:hi] = self.part(i).take(rows[lo:hi] - self._bounds[i])
        return out

    def hits(self, values: np.ndarray) -> np.ndarray:
        found = [self.part(i).hits(values) + self._bounds[i] for i in range(len(self.metas))]
        return np.concatenate(found).astype(np.int64) if found else np.empty(0, dtype=np.int64)

    def decode(self) -> np.ndarray:
        parts = [self.part(i).decode() for i in range(len(self.metas))]
        return np.concatenate(parts).astype(np.int64) if parts else np.empty(0, dtype=np.int64)


def tiled(metas: list[dict[str, Any]], rows: int) -> bool:
    """Whether parts (sorted by `first`) cover rows `[0, rows)` exactly, each once."""
    at = 0
    for m in metas:
        if m["first"] != at:
            return False
        at += m["rows"]
    return at == rows
