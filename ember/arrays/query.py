"""In-situ lineage queries on ProvRC tables (DSLog §V).

Cells travel between arrays as unions of boxes. One hop joins the query boxes with a
table's rows on overlapping intervals and then either

- *expands* (query on the key side): a relative value attribute `a = b_j + [dl, du]`
  becomes `[b_lo + dl, b_hi + du]` over the joined `b_j` interval (a mirrored one,
  `a = [dl, du] - b_j`, becomes `[dl - b_hi, du - b_lo]`), or
- *restricts* (query on the value side): the key interval `b_j` shrinks to the values
  whose shifted value interval meets the query, `b_j ∩ [q_lo - du, q_hi - dl]`
  (mirrored: `b_j ∩ [dl - q_hi, du - q_lo]`).

Both are exact. The one case where expanding would over-approximate, two value
attributes relative to the same key attribute (a diagonal), splits that key interval
into single values first. Boxes are merged after every hop; no table is ever expanded.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ember.arrays.provrc import ABSOLUTE, Index, Table, expand_boxes, key_of, order, shifts


@dataclass(frozen=True)
class Boxes:
    """A set of cells of one array as a union of inclusive boxes."""

    lo: np.ndarray  # (k, ndim)
    hi: np.ndarray

    @staticmethod
    def of_cells(cells: np.ndarray) -> Boxes:
        return Boxes(cells, cells).merged()

    @staticmethod
    def union(parts: list[Boxes], ndim: int) -> Boxes:
        if not parts:
            return Boxes(np.empty((0, ndim), np.int64), np.empty((0, ndim), np.int64))
        return Boxes(np.concatenate([p.lo for p in parts]), np.concatenate([p.hi for p in parts]))

    def __len__(self) -> int:
        return len(self.lo)

    def cells(self) -> np.ndarray:
        """The cells, sorted and unique."""
        _, cells = expand_boxes(self.lo, self.hi)
        if len(cells) == 0 or cells.shape[1] == 0:
            return cells[:1]
        cells = cells[order(list(cells.T))]
        return cells[np.append(True, np.any(cells[1:] != cells[:-1], axis=1))]

    def merged(self) -> Boxes:
        """Adjacent or overlapping boxes that agree on all other axes become one."""
        lo, hi = self.lo, self.hi
        if len(lo) < 2:
            return self
        d = lo.shape[1]
        if d == 0:
            return Boxes(lo[:1], hi[:1])
        for axis in reversed(range(d)):
            others = [c for c in range(d) if c != axis]
            o = order([*lo[:, others].T, *hi[:, others].T, lo[:, axis]])
            lo, hi = lo[o], hi[o]
            rest = np.concatenate([lo[:, others], hi[:, others]], axis=1)
            group = np.append(0, np.cumsum(np.any(rest[1:] != rest[:-1], axis=1)))
            # running max of hi within a group: offset groups so they never mix
            span = int(hi[:, axis].max() - hi[:, axis].min()) + 2
            reach = np.maximum.accumulate(hi[:, axis] - hi[:, axis].min() + group * span)
            reach = reach - group * span + hi[:, axis].min()
            start = np.append(True, (group[1:] != group[:-1]) | (lo[1:, axis] > reach[:-1] + 1))
            first = np.flatnonzero(start)
            last = np.append(first[1:] - 1, len(lo) - 1)
            new_hi = reach[last]
            lo, hi = lo[first], hi[first].copy()
            hi[:, axis] = new_hi
        return Boxes(lo, hi)


def _candidates(qlo: np.ndarray, qhi: np.ndarray, index: Index) -> tuple[np.ndarray, np.ndarray]:
    """Pairs (query box, table row) whose boxes overlap on every axis: an interval join on
    the first axis via the index's sorted starts, then the remaining axes checked."""
    rlo, rhi = index.lo, index.hi
    if len(qlo) == 0 or len(rlo) == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    if rlo.shape[1] == 0:
        every = np.arange(len(qlo) * len(rlo))
        return every // len(rlo), every % len(rlo)
    begin = np.searchsorted(index.starts, qlo[:, 0] - index.width, side="left")
    end = np.searchsorted(index.starts, qhi[:, 0], side="right")
    counts = np.maximum(end - begin, 0)
    q = np.repeat(np.arange(len(qlo)), counts)
    pos = (
        np.arange(len(q)) - np.repeat(np.cumsum(counts) - counts, counts) + np.repeat(begin, counts)
    )
    r = index.order[pos]
    keep = np.all((np.maximum(qlo[q], rlo[r]) <= np.minimum(qhi[q], rhi[r])), axis=1)
    return q[keep], r[keep]


def expand(table: Table, query: Boxes) -> Boxes:
    """Key-side cells → value-side cells."""
    q, r = _candidates(query.lo, query.hi, table.key_index)
    klo = np.maximum(query.lo[q], table.key_lo[r])
    khi = np.minimum(query.hi[q], table.key_hi[r])
    ref = table.val_ref[r]
    klo, khi, ref, r = _split_diagonals(klo, khi, ref, r)
    lo, hi = shifts(klo, khi, ref)
    return Boxes(table.val_lo[r] + lo, table.val_hi[r] + hi)


def _split_diagonals(
    klo: np.ndarray, khi: np.ndarray, ref: np.ndarray, r: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Split key intervals that two value attributes are relative to into single values."""
    keys = key_of(ref)
    for j in range(klo.shape[1]):
        shared = ((keys == j).sum(axis=1) > 1) & (khi[:, j] > klo[:, j])
        if not shared.any():
            continue
        counts = np.where(shared, khi[:, j] - klo[:, j] + 1, 1)
        rows = np.repeat(np.arange(len(klo)), counts)
        step = np.arange(len(rows)) - np.repeat(np.cumsum(counts) - counts, counts)
        klo, khi, ref, r, keys = klo[rows].copy(), khi[rows].copy(), ref[rows], r[rows], keys[rows]
        split = shared[rows]
        klo[split, j] += step[split]
        khi[split, j] = klo[split, j]
    return klo, khi, ref, r


def restrict(table: Table, query: Boxes) -> Boxes:
    """Value-side cells → key-side cells."""
    q, r = _candidates(query.lo, query.hi, table.val_index)
    klo, khi = table.key_lo[r].copy(), table.key_hi[r].copy()
    qlo, qhi = query.lo[q], query.hi[q]
    ref, dlo, dhi = table.val_ref[r], table.val_lo[r], table.val_hi[r]
    rows = np.arange(len(r))
    keys = key_of(ref)
    for i in range(ref.shape[1]):
        rel, on = ref[:, i] >= 0, ref[:, i] != ABSOLUTE
        # relative a = b + [lo, hi] meets [qlo, qhi] for b in [qlo - hi, qhi - lo];
        # mirrored a = [lo, hi] - b does for b in [lo - qhi, hi - qlo]
        low = np.where(rel, qlo[:, i] - dhi[:, i], dlo[:, i] - qhi[:, i])
        high = np.where(rel, qhi[:, i] - dlo[:, i], dhi[:, i] - qlo[:, i])
        sub, j = rows[on], keys[on, i]
        klo[sub, j] = np.maximum(klo[sub, j], low[on])
        khi[sub, j] = np.minimum(khi[sub, j], high[on])
    keep = np.all(klo <= khi, axis=1)
    return Boxes(klo[keep], khi[keep])


def hop(table: Table, query: Boxes, to_input: bool) -> Boxes:
    """Cells of the table's input (to_input) or output reached from `query` on the other."""
    if (table.form == "backward") == to_input:
        return expand(table, query)
    return restrict(table, query)
