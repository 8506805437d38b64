"""Integer columns of a lineage index, in ProvRC's relative encoding where it pays.

Every column of a level maps a row number to one int64 (a rid, or a range bound in a
lower level). Lineage after filters, projections and clustered aggregates is mostly
*arithmetic*: consecutive rows hold consecutive rids (1-to-1 maps), or one rid repeats
(a join's fan-out). `Runs` stores such a column as maximal arithmetic runs
`value = base + step * (row - start)`, and traces run on the runs directly: a lookup is
a binary search over run starts, a forward match is interval arithmetic per run.
Columns without that structure stay `Plain` arrays (on disk: delta-packed, zstd).

Both kinds answer the two questions traces ask — `take(rows)` and `hits(values)` —
so the trace code never knows which encoding it reads, nor whether it is in memory or
lazily read from a store (`store.files`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import cached_property
from typing import Protocol

import numpy as np

SMALL_SET = 8
FEW_RANGES = 64  # ranges a plain column copies slice by slice
SHORT_RANGES = 16  # rows per range, on average, below which runs are read row by row
RUNS_WORTH_IT = 4  # rows per run, on average, before runs beat a delta-packed array
DENSE = 4  # slots of their range per value below which a bitmap beats a sort


def sorted_unique(chunks: list[np.ndarray]) -> np.ndarray:
    """Sorted distinct values; cheap when the chunks arrive sorted (one group's rids do).
    A sort and a mask: numpy 2's `np.unique` hashes, far slower on large arrays.
    Many values over a small range (a trace reaching most of a small source, several times
    over) are marked in a bitmap instead, which is linear; chunk by chunk, as
    concatenating them first costs as much again."""
    chunks = [c for c in chunks if c.size]
    bounds = None
    if len(chunks) > 1:
        bounds = min(int(c.min()) for c in chunks), max(int(c.max()) for c in chunks)
        if (bounds[1] - bounds[0]) // DENSE < sum(c.size for c in chunks):
            return _marked(chunks, *bounds)
    values = np.concatenate(chunks) if chunks else np.empty(0, np.int64)
    if values.size > 1 and not bool(np.all(values[1:] >= values[:-1])):
        lo, hi = bounds or (int(values.min()), int(values.max()))
        if (hi - lo) // DENSE < values.size:
            return _marked([values], lo, hi)
        values = np.sort(values)
    if values.size > 1:
        values = values[np.concatenate(([True], values[1:] != values[:-1]))]
    return values


def _marked(chunks: list[np.ndarray], lo: int, hi: int) -> np.ndarray:
    seen = np.zeros(hi - lo + 1, dtype=bool)
    for c in chunks:
        seen[c - lo if lo else c] = True
    return np.flatnonzero(seen) + lo


class IntColumn(Protocol):
    @property
    def size(self) -> int: ...

    @property
    def nbytes(self) -> int: ...

    def take(self, rows: np.ndarray) -> np.ndarray:
        """The values at `rows` (sorted row numbers)."""
        ...

    def take_ranges(self, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        """The values at the rows of each `[start, end)`, range after range (a trace's walk
        down a level: whole groups, often a few long ranges)."""
        ...

    def take_valid(self, start: np.ndarray, end: np.ndarray, positions: bool) -> tuple[np.ndarray, np.ndarray | None]:
        """`take_ranges`' values that are rids (-1 marks a row without one) and, if asked,
        where each stands in `take_ranges`' output (a trace carrying each row's owner)."""
        ...

    def hits(self, values: np.ndarray) -> np.ndarray:
        """Sorted rows whose value is one of `values` (sorted, unique, non-negative)."""
        ...

    def decode(self) -> np.ndarray:
        """Every value, in row order."""
        ...


@dataclass(frozen=True, eq=False)
class Plain:
    values: np.ndarray

    @property
    def size(self) -> int:
        return int(self.values.size)

    @property
    def nbytes(self) -> int:
        return int(self.values.nbytes)

    def take(self, rows: np.ndarray) -> np.ndarray:
        return self.values[rows]

    def take_ranges(self, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        if start.size <= FEW_RANGES:  # copies of slices: no index array
            return concatenated([self.values[s:e] for s, e in zip(start.tolist(), end.tolist(), strict=True)])
        return self.values[expand_ranges(start, end)]

    def take_valid(self, start: np.ndarray, end: np.ndarray, positions: bool) -> tuple[np.ndarray, np.ndarray | None]:
        values = self.take_ranges(start, end)
        if self._all_rids:
            return values, np.arange(values.size, dtype=np.int64) if positions else None
        return nonnegative(values, positions)

    @cached_property
    def _all_rids(self) -> bool:
        """No -1 in the column (true of most), told once, not per trace."""
        return self.values.size == 0 or int(self.values.min()) >= 0

    def hits(self, values: np.ndarray) -> np.ndarray:
        return np.flatnonzero(isin_sorted(self.values, values)).astype(np.int64)

    def decode(self) -> np.ndarray:
        return self.values


@dataclass(frozen=True, eq=False)
class Runs:
    """Run `i` covers rows `[start[i], start[i+1])` (the last one up to `size`)."""

    start: np.ndarray
    base: np.ndarray
    step: np.ndarray
    length: int

    @property
    def size(self) -> int:
        return self.length

    @property
    def nbytes(self) -> int:
        return int(self.start.nbytes + self.base.nbytes + self.step.nbytes)

    def take(self, rows: np.ndarray) -> np.ndarray:
        run = np.searchsorted(self.start, rows, side="right") - 1
        return self.base[run] + self.step[run] * (rows - self.start[run])

    def take_ranges(self, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        """Each range cut at run boundaries, each piece computed from its run: a binary
        search per range instead of per row.
        Short ranges (a customer's few orders) are read row by row: the cut costs more."""
        keep = end > start
        start, end = start[keep], end[keep]
        if int((end - start).sum()) < SHORT_RANGES * start.size:
            return self.take(expand_ranges(start, end))
        return self._values(*self._pieces(start, end))

    def take_valid(self, start: np.ndarray, end: np.ndarray, positions: bool) -> tuple[np.ndarray, np.ndarray | None]:
        """Pieces of a run of -1 are dropped before they are expanded: a union's branch
        columns are mostly such runs (the rows of the other branches)."""
        keep = end > start
        start, end = start[keep], end[keep]
        if int((end - start).sum()) < SHORT_RANGES * start.size:
            return nonnegative(self.take(expand_ranges(start, end)), positions)
        run, lo, hi = self._pieces(start, end)
        live = (self.step[run] != 0) | (self.base[run] >= 0)
        at = np.cumsum(hi - lo) - (hi - lo)  # where each piece starts in take_ranges' output
        run, lo, hi, at = run[live], lo[live], hi[live], at[live]
        vals, kept = nonnegative(self._values(run, lo, hi), positions)
        return vals, None if kept is None else expand_ranges(at, at + hi - lo)[kept]

    def _pieces(self, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Non-empty ranges cut where runs change: each piece's run and rows `[lo, hi)`."""
        first = np.searchsorted(self.start, start, side="right") - 1
        last = np.searchsorted(self.start, end - 1, side="right") - 1
        spans = last - first + 1
        piece = np.arange(int(spans.sum()), dtype=np.int64)
        of = np.repeat(np.arange(start.size), spans)
        run = first[of] + piece - np.repeat(np.cumsum(spans) - spans, spans)
        ends = np.append(self.start[1:], self.length)
        return run, np.maximum(start[of], self.start[run]), np.minimum(end[of], ends[run])

    def _values(self, run: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Piece `i`'s values are `first[i] + step * k` for its k-th row: one ramp over all
        pieces shifted per piece, no gather per row. The shift may wrap around int64; the
        sum wraps back, as the values themselves fit."""
        n = hi - lo
        step = self.step[run]
        first = self.base[run] + step * (lo - self.start[run])
        one = step.size > 0 and not bool(np.any(step != step[0]))  # one step (0 or 1, mostly): no second repeat
        if one and step[0] == 0:
            return np.repeat(first, n)
        shift = np.repeat(first - step * (np.cumsum(n) - n), n)
        ramp = np.arange(shift.size, dtype=np.int64)
        return shift + (int(step[0]) * ramp if one else np.repeat(step, n) * ramp)

    def hits(self, values: np.ndarray) -> np.ndarray:
        ends = np.append(self.start[1:], self.length)
        last = self.base + self.step * (ends - 1 - self.start)
        lo_val, hi_val = np.minimum(self.base, last), np.maximum(self.base, last)
        lo = np.searchsorted(values, lo_val, side="left")
        hi = np.searchsorted(values, hi_val, side="right")
        found = hi > lo
        flat = found & (self.step == 0)  # a repeated value: every row of the run, or none
        rows = [expand_ranges(self.start[flat], ends[flat])]
        moving = found & (self.step != 0)
        idx = np.repeat(np.flatnonzero(moving), (hi - lo)[moving])
        vals = values[expand_ranges(lo[moving], hi[moving])]
        offset = vals - self.base[idx]
        on_step = offset % self.step[idx] == 0
        rows.append(self.start[idx][on_step] + offset[on_step] // self.step[idx][on_step])
        return np.sort(np.concatenate(rows))

    def decode(self) -> np.ndarray:
        lengths = np.diff(np.append(self.start, self.length))
        offset = np.repeat(self.base - self.step * self.start, lengths)
        return offset + np.repeat(self.step, lengths) * np.arange(self.length, dtype=np.int64)


def encode(values: np.ndarray) -> IntColumn:
    """Runs when the column has arithmetic structure, else the plain array."""
    values = np.ascontiguousarray(values, dtype=np.int64)
    steps = np.diff(values)
    # Each change of step starts a run, and absorbing one-row runs at most halves them:
    # past this many changes runs cannot win, told without building them (scattered
    # rids would pay for building runs that lose).
    changed = steps[1:] != steps[:-1]
    if values.size > 2 and np.count_nonzero(changed) * RUNS_WORTH_IT > 2 * values.size:
        return Plain(values)
    runs = to_runs(values, steps, changed)
    if runs.start.size * RUNS_WORTH_IT <= values.size:
        return runs
    return Plain(values)


def to_runs(v: np.ndarray, d: np.ndarray | None = None, changed: np.ndarray | None = None) -> Runs:
    """Arithmetic runs of `v`; `d` and `changed` are its steps and where the step changes,
    if the caller has them (`encode`)."""
    n = int(v.size)
    if n <= 1:
        return Runs(np.zeros(n, np.int64), v.copy(), np.zeros(n, np.int64), n)
    d = np.diff(v) if d is None else d
    changed = d[1:] != d[:-1] if changed is None else changed
    seg = np.concatenate(([0], np.flatnonzero(changed) + 1))
    # Segment k of equal steps covers rows seg[k]..seg[k+1]; the row two segments share goes
    # to the earlier one.
    start = seg + (np.arange(seg.size) > 0)
    step = d[seg]
    keep = start < n
    start, step = start[keep], step[keep]
    # A one-row run whose value continues the next run's progression absorbs that run
    # (greedy segmentation's usual fix: 0 1 2 3 10 11 12 → two runs, not three).
    length = np.diff(np.append(start, n))
    nxt = np.append(start[1:], n)
    absorb = np.zeros(start.size, dtype=bool)
    if start.size > 1:
        cand = (length[:-1] == 1) & (v[nxt[:-1]] - v[start[:-1]] == step[1:])
        cand &= ~np.concatenate(([False], cand[:-1]))
        absorb[:-1] = cand
        step = np.where(absorb, np.append(step[1:], 0), step)
        drop = np.concatenate(([False], absorb[:-1]))
        start, step = start[~drop], step[~drop]
    return Runs(start.astype(np.int64), v[start], step.astype(np.int64), n)


def isin_sorted(values: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    """`np.isin` for a sorted unique set: a binary search per value, no hashing or sorting."""
    if sorted_set.size == 0:
        return np.zeros(values.size, dtype=bool)
    if sorted_set.size <= SMALL_SET:  # a few vectorized comparisons beat a binary search per value
        hit = values == sorted_set[0]
        for v in sorted_set[1:]:
            hit |= values == v
        return hit
    pos = np.minimum(np.searchsorted(sorted_set, values), sorted_set.size - 1)
    return sorted_set[pos] == values


def nonnegative(values: np.ndarray, positions: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """The values that are rids and, if asked, their positions (`IntColumn.take_valid`)."""
    if not positions:
        return values[values >= 0], None
    at = np.flatnonzero(values >= 0)
    return values[at], at


def expand_ranges(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Every integer in each `[start, end)`, range after range (with repeats)."""
    lengths = end - start
    total = int(lengths.sum()) if lengths.size else 0
    if total == 0:
        return np.empty(0, dtype=np.int64)
    offsets = np.repeat(start - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
    return offsets + np.arange(total, dtype=np.int64)


class Segmented(ABC):
    """A column kept in consecutive segments (the row groups of a file, the parts of a
    level), segment `i` holding rows `[bounds[i], bounds[i + 1])`, each read on first use."""

    def __init__(self, bounds: np.ndarray, nbytes: int):
        self._bounds = bounds
        self._nbytes = nbytes

    @property
    def size(self) -> int:
        return int(self._bounds[-1])

    @property
    def nbytes(self) -> int:
        return self._nbytes

    @abstractmethod
    def _take_in(self, i: int, at: np.ndarray) -> np.ndarray:
        """Values of segment `i` at rows `at`, counted from its start."""

    @abstractmethod
    def _decoded(self, i: int) -> np.ndarray:
        """Segment `i`'s values, whole."""

    def take_ranges(self, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        return self.take(expand_ranges(start, end))

    def take_valid(self, start: np.ndarray, end: np.ndarray, positions: bool) -> tuple[np.ndarray, np.ndarray | None]:
        return nonnegative(self.take_ranges(start, end), positions)

    def take(self, rows: np.ndarray) -> np.ndarray:
        """Each segment is asked once, for its own rows."""
        at = np.searchsorted(self._bounds, rows, side="right") - 1
        out = np.empty(rows.size, dtype=np.int64)
        cuts = np.flatnonzero(np.diff(at)) + 1
        for lo, hi in zip(np.concatenate(([0], cuts)), np.append(cuts, rows.size), strict=True):
            if hi > lo:
                i = int(at[lo])
                out[lo:hi] = self._take_in(i, rows[lo:hi] - self._bounds[i])
        return out

    def decode(self) -> np.ndarray:
        return concatenated([self._decoded(i) for i in range(self._bounds.size - 1)])


def concatenated(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts).astype(np.int64, copy=False) if parts else np.empty(0, dtype=np.int64)
