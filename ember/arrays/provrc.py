"""ProvRC (DSLog §IV): lossless compression of one operation's cell lineage.

A lineage relation pairs output cells with input cells. Rules hand it over in *box form*
(each output cell with an input box), which step 1 of ProvRC would have produced anyway.

- Step 1 range-encodes the value side: rows that agree everywhere else and are contiguous
  on one attribute merge into an interval, one attribute at a time.
- Step 2 range-encodes the key side. Each value attribute keeps every representation that
  stays constant over a run: absolute, or relative to one key attribute (`a_i - b_j`).
  Element-wise, broadcast, aggregate, shift and window lineage all collapse to a few rows.
  Beyond DSLog, a *mirrored* representation (`a_i + b_j`) covers reversed axes (flip,
  rot90), which plain ProvRC keeps as one row per index.

The *backward* form keeps output attributes absolute (the key) and input attributes
possibly relative; the *forward* form swaps the roles. Both hold the same relation.

Tables are stored through a general integer codec (frame-of-reference or delta, bit
packing, then zstd), which is also what keeps unstructured lineage (sort, group-by)
at or below Parquet+gzip.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

import numpy as np
import pyarrow as pa

from ember.errors import StoreError

Form = Literal["backward", "forward"]
ABSOLUTE = -1  # val_ref of an attribute stored as an absolute interval
# val_ref j >= 0: relative, a = b_j + [lo, hi]; val_ref -2 - j: mirrored, a = [lo, hi] - b_j
MAGIC = b"EPRC"


@dataclass(frozen=True)
class Relation:
    """Output cell `out[r]` depends on every input cell of the box `[lo[r], hi[r]]` (inclusive)."""

    out: np.ndarray  # (n, output ndim)
    lo: np.ndarray  # (n, input ndim)
    hi: np.ndarray
    out_shape: tuple[int, ...]
    in_shape: tuple[int, ...]

    @staticmethod
    def pairs(
        out: np.ndarray, inp: np.ndarray, out_shape: tuple[int, ...], in_shape: tuple[int, ...]
    ) -> Relation:
        """A raw relation: one (output cell, input cell) pair per row."""
        out, inp = np.asarray(out, np.int64), np.asarray(inp, np.int64)
        out = out.reshape(len(out) if out.ndim == 2 else -1, len(out_shape))
        inp = inp.reshape(len(inp) if inp.ndim == 2 else -1, len(in_shape))
        return Relation(out, inp, inp, out_shape, in_shape)

    def raw(self) -> tuple[np.ndarray, np.ndarray]:
        """The raw (output cell, input cell) pairs, sorted and unique."""
        rows, inp = expand_boxes(self.lo, self.hi)
        return unique_pairs(self.out[rows], inp)


@dataclass(frozen=True)
class Index:
    """Boxes sorted by their start on the first axis, for interval joins."""

    lo: np.ndarray
    hi: np.ndarray
    order: np.ndarray
    starts: np.ndarray  # lo[order, 0]
    width: int  # widest interval on the first axis

    @staticmethod
    def of(lo: np.ndarray, hi: np.ndarray) -> Index:
        if lo.shape[1] == 0 or len(lo) == 0:
            return Index(lo, hi, np.arange(len(lo)), np.empty(0, np.int64), 0)
        o = np.argsort(lo[:, 0], kind="stable")
        return Index(lo, hi, o, lo[o, 0], int((hi[:, 0] - lo[:, 0]).max()))


@dataclass(frozen=True)
class Table:
    """One ProvRC table. Key intervals are absolute; a value interval is absolute, relative
    to a key attribute or mirrored on one, as `val_ref` says (see ABSOLUTE)."""

    form: Form
    out_shape: tuple[int, ...]
    in_shape: tuple[int, ...]
    key_lo: np.ndarray  # (r, K)
    key_hi: np.ndarray
    val_lo: np.ndarray  # (r, V)
    val_hi: np.ndarray
    val_ref: np.ndarray  # (r, V) int64

    @property
    def rows(self) -> int:
        return len(self.key_lo)

    @property
    def key_shape(self) -> tuple[int, ...]:
        return self.out_shape if self.form == "backward" else self.in_shape

    @property
    def val_shape(self) -> tuple[int, ...]:
        return self.in_shape if self.form == "backward" else self.out_shape

    @cached_property
    def key_index(self) -> Index:
        return Index.of(self.key_lo, self.key_hi)

    @cached_property
    def val_index(self) -> Index:
        """Each row's value side as an absolute bounding box (for pruning joins on it)."""
        lo, hi = shifts(self.key_lo, self.key_hi, self.val_ref)
        return Index.of(self.val_lo + lo, self.val_hi + hi)

    @cached_property
    def nbytes(self) -> int:
        """Bytes of the encoded table: what the workflow stores."""
        return len(encode(self))

    def same(self, other: Table) -> bool:
        return (
            self.form == other.form
            and self.out_shape == other.out_shape
            and self.in_shape == other.in_shape
            and all(
                np.array_equal(a, b) for a, b in zip(self._columns(), other._columns(), strict=True)
            )
        )

    def _columns(self) -> tuple[np.ndarray, ...]:
        return (self.key_lo, self.key_hi, self.val_lo, self.val_hi, self.val_ref)

    def decompress(self) -> tuple[np.ndarray, np.ndarray]:
        """The raw (output cell, input cell) pairs, sorted and unique. For tests and
        baselines only: queries never call this."""
        rows, key = expand_boxes(self.key_lo, self.key_hi)
        lo, hi = shifts(key, key, self.val_ref[rows])
        sub, val = expand_boxes(self.val_lo[rows] + lo, self.val_hi[rows] + hi)
        key = key[sub]
        return unique_pairs(key, val) if self.form == "backward" else unique_pairs(val, key)


# --- boxes and raw pairs --------------------------------------------------------


def key_of(ref: np.ndarray) -> np.ndarray:
    """The key attribute a value attribute is relative to or mirrored on (-1: absolute)."""
    return np.where(ref >= 0, ref, np.where(ref == ABSOLUTE, -1, -2 - ref))


def shifts(klo: np.ndarray, khi: np.ndarray, ref: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """What to add to stored value intervals [lo, hi] to get the values reached from the
    key box [klo, khi]: [lo + klo_j, hi + khi_j] when relative, [lo - khi_j, hi - klo_j]
    when mirrored, nothing when absolute."""
    if klo.shape[1] == 0:
        zero = np.zeros(ref.shape, np.int64)
        return zero, zero
    j = np.maximum(key_of(ref), 0)
    at_lo, at_hi = np.take_along_axis(klo, j, axis=1), np.take_along_axis(khi, j, axis=1)
    rel, mirrored = ref >= 0, ref <= -2
    lo = np.where(rel, at_lo, np.where(mirrored, -at_hi, 0))
    hi = np.where(rel, at_hi, np.where(mirrored, -at_lo, 0))
    return lo, hi


def expand_boxes(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every cell of every box: (box index per cell, cells)."""
    n, d = lo.shape
    sizes = hi - lo + 1
    counts = np.prod(sizes, axis=1) if d else np.ones(n, np.int64)
    rows = np.repeat(np.arange(n), counts)
    local = np.arange(len(rows)) - np.repeat(np.cumsum(counts) - counts, counts)
    cells = np.empty((len(rows), d), np.int64)
    for axis in reversed(range(d)):
        size = sizes[rows, axis]
        cells[:, axis] = lo[rows, axis] + local % size
        local //= size
    return rows, cells


def unique_pairs(out: np.ndarray, inp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    both = dedupe(np.concatenate([out, inp], axis=1))
    return both[:, : out.shape[1]], both[:, out.shape[1] :]


def dedupe(rows: np.ndarray) -> np.ndarray:
    """Unique rows in lexicographic order (np.unique(axis=0) without its slow row view)."""
    if len(rows) == 0 or rows.shape[1] == 0:
        return rows[:1]
    rows = rows[order(list(rows.T))]
    return rows[np.append(True, ~_equal_rows(rows))]


def order(cols: list[np.ndarray]) -> np.ndarray | slice:
    """Stable lexicographic order over columns (first primary), packing columns into words;
    `slice(None)` when the rows already are in that order (indexing with it copies nothing)."""
    n = len(cols[0]) if cols else 0
    if n < 2:
        return slice(None)
    words: list[np.ndarray] = []
    word, span = np.zeros(n, np.int64), 1
    for c in cols:
        base = int(c.min())
        width = int(c.max()) - base + 1
        if span * width >= 1 << 62:
            words.append(word)
            word, span = np.zeros(n, np.int64), 1
        word = word * width + (c - base)
        span *= width
    words.append(word)
    if len(words) == 1:
        w = words[0]
        return slice(None) if bool(np.all(w[1:] >= w[:-1])) else np.argsort(w, kind="stable")
    return np.lexsort(words[::-1])


def _runs(start: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    first = np.flatnonzero(start)
    last = np.append(first[1:] - 1, len(start) - 1)
    return first, last


def _equal_rows(x: np.ndarray) -> np.ndarray:
    """Whether each row equals the previous one (length n - 1)."""
    return np.all(x[1:] == x[:-1], axis=1) if x.shape[1] else np.ones(len(x) - 1, bool)


# --- compression ------------------------------------------------------------------


def compress(rel: Relation, form: Form = "backward") -> Table:
    if form == "backward":
        key, lo, hi = rel.out, rel.lo, rel.hi
    else:
        out, inp = rel.raw()
        key, lo, hi = inp, out, out
    key_lo, key_hi, val_lo, val_hi, ref = _provrc(key, lo, hi)
    return Table(form, rel.out_shape, rel.in_shape, key_lo, key_hi, val_lo, val_hi, ref)


def _provrc(
    key: np.ndarray, lo: np.ndarray, hi: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    n, k = key.shape
    v = lo.shape[1]
    if n == 0:
        empty = np.empty((0, k), np.int64)
        val = np.empty((0, v), np.int64)
        return empty, empty, val, val, val
    both = dedupe(np.concatenate([key, lo, hi], axis=1))
    key, lo, hi = both[:, :k], both[:, k : k + v], both[:, k + v :]
    for i in reversed(range(v)):
        key, lo, hi = _encode_value(key, lo, hi, i)
    return _encode_key(key, lo, hi)


def _encode_value(
    key: np.ndarray, lo: np.ndarray, hi: np.ndarray, i: int
) -> tuple[np.ndarray, ...]:
    """Step 1 for value attribute i: merge rows contiguous on it and equal elsewhere."""
    others = [c for c in range(lo.shape[1]) if c != i]
    o = order([*key.T, *lo[:, others].T, *hi[:, others].T, lo[:, i]])
    key, lo, hi = key[o], lo[o], hi[o]
    same = _equal_rows(np.concatenate([key, lo[:, others], hi[:, others]], axis=1))
    start = np.append(True, ~(same & (lo[1:, i] == hi[:-1, i] + 1)))
    first, last = _runs(start)
    if len(first) == len(key):
        return key, lo, hi
    hi_i = hi[last, i]
    key, lo, hi = key[first], lo[first], hi[first].copy()
    hi[:, i] = hi_i
    return key, lo, hi


def _encode_key(
    key: np.ndarray, lo: np.ndarray, hi: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Step 2: relative representations, then range-encode each key attribute."""
    k = key.shape[1]
    # representation 0 is absolute, 1 + j relative to key attribute j, 1 + k + j mirrored
    shift = np.concatenate([np.zeros((len(key), 1), np.int64), key, -key], axis=1)[:, None, :]
    rlo, rhi = lo[:, :, None] - shift, hi[:, :, None] - shift
    valid = np.ones(rlo.shape, bool)
    klo, khi = key.copy(), key.copy()
    # rows arrive sorted by key: with no key cell twice, boxes never need lining up
    repeated = bool(len(key) > 1 and _equal_rows(key).any())
    for j in reversed(range(k)):
        klo, khi, rlo, rhi, valid = _encode_key_attr(klo, khi, rlo, rhi, valid, j, repeated)
    pick = np.argmax(valid, axis=2)[:, :, None]
    val_lo = np.take_along_axis(rlo, pick, axis=2)[:, :, 0]
    val_hi = np.take_along_axis(rhi, pick, axis=2)[:, :, 0]
    rep = pick[:, :, 0].astype(np.int64)
    ref = np.where(rep <= k, rep - 1, -2 - (rep - 1 - k))
    return klo, khi, val_lo, val_hi, ref


def _encode_key_attr(
    klo: np.ndarray,
    khi: np.ndarray,
    rlo: np.ndarray,
    rhi: np.ndarray,
    valid: np.ndarray,
    j: int,
    repeated: bool,
) -> tuple[np.ndarray, ...]:
    n = len(rlo)
    others = [c for c in range(klo.shape[1]) if c != j]
    rank = np.zeros(n, np.int64)
    if repeated:  # the k-th box of one key cell lines up with the k-th box of the next one
        o = order([*klo.T, *khi.T, *rlo[:, :, 0].T, *rhi[:, :, 0].T])
        same_key = np.append(False, _equal_rows(np.concatenate([klo, khi], axis=1)[o]))
        group_start = np.maximum.accumulate(np.where(same_key, 0, np.arange(n)))
        rank[o] = np.arange(n) - group_start
    o = order([*klo[:, others].T, *khi[:, others].T, rank, klo[:, j]])
    klo, khi, rlo, rhi, valid, rank = klo[o], khi[o], rlo[o], rhi[o], valid[o], rank[o]
    same = _equal_rows(np.concatenate([klo[:, others], khi[:, others], rank[:, None]], axis=1))
    same &= klo[1:, j] == khi[:-1, j] + 1
    eq = valid[1:] & valid[:-1] & (rlo[1:] == rlo[:-1]) & (rhi[1:] == rhi[:-1])
    join = same & eq.any(axis=2).all(axis=1)
    changed = np.append(False, np.any(eq[1:] != eq[:-1], axis=(1, 2)))
    brk = ~join | (np.append(False, join[:-1]) & changed)
    first, last = _runs(np.append(True, brk))
    if len(first) == n:
        return klo, khi, rlo, rhi, valid
    hi_j = khi[last, j]
    merged = last > first
    klo, khi, rlo, rhi, valid = klo[first], khi[first].copy(), rlo[first], rhi[first], valid[first]
    khi[:, j] = hi_j
    valid[merged] &= eq[first[merged]]
    return klo, khi, rlo, rhi, valid


# --- the general codec ------------------------------------------------------------


def encode(table: Table) -> bytes:
    """Frame-of-reference or delta per column, bit-packed, zstd over the lot. Value
    intervals are stored as the cells reached from the key box's low corner (array
    coordinates, narrow) rather than as offsets (which span twice the range)."""
    corner, _ = shifts(table.key_lo, table.key_lo, table.val_ref)
    cols = [
        *table.key_lo.T,
        *(table.key_hi - table.key_lo).T,
        *(table.val_lo + corner).T,
        *(table.val_hi - table.val_lo).T,
        *table.val_ref.T,
    ]
    metas, parts = zip(*(pack(c) for c in cols), strict=True) if cols else ((), ())
    payload = b"".join(parts)
    header = json.dumps(
        {
            "form": table.form,
            "out": table.out_shape,
            "in": table.in_shape,
            "rows": table.rows,
            "cols": metas,
            "size": len(payload),
        },
        separators=(",", ":"),
    ).encode()
    body = pa.compress(payload, codec="zstd", asbytes=True) if payload else b""
    return MAGIC + struct.pack("<I", len(header)) + header + body


def decode(blob: bytes) -> Table:
    try:
        if blob[:4] != MAGIC:
            raise ValueError("not a ProvRC table")
        (size,) = struct.unpack("<I", blob[4:8])
        header = json.loads(blob[8 : 8 + size])
        form, out_shape, in_shape = header["form"], tuple(header["out"]), tuple(header["in"])
        if form not in ("backward", "forward"):
            raise ValueError(f"unknown form {form!r}")
        k, v = (len(out_shape), len(in_shape))[:: 1 if form == "backward" else -1]
        if len(header["cols"]) != 2 * k + 3 * v:
            raise ValueError("column count does not match the shapes")
        payload = (
            pa.decompress(blob[8 + size :], header["size"], codec="zstd", asbytes=True)
            if header["size"]
            else b""
        )
        n, cols, offset = header["rows"], [], 0
        for meta in header["cols"]:
            col, offset = unpack(payload, offset, n, meta)
            cols.append(col)
    except (ValueError, KeyError, TypeError, struct.error, pa.ArrowException) as e:
        raise StoreError(f"damaged lineage table ({e})") from None
    columns = iter(cols)

    def take(d: int) -> np.ndarray:
        return (
            np.stack([next(columns) for _ in range(d)], axis=1) if d else np.empty((n, 0), np.int64)
        )

    key_lo, key_w, val_at, val_w, ref = take(k), take(k), take(v), take(v), take(v)
    val_lo = val_at - shifts(key_lo, key_lo, ref)[0]
    return Table(form, out_shape, in_shape, key_lo, key_lo + key_w, val_lo, val_lo + val_w, ref)


def pack(col: np.ndarray) -> tuple[list[int], bytes]:
    """[mode, width, base, head] and the bit-packed bytes of one int64 column. Mode 0 packs
    `col - base`; mode 1 (when narrower: sorted or stepped columns) packs the deltas after
    the first value `head`, minus `base`."""
    col = np.asarray(col, np.int64)
    mode, head, values = 0, 0, col
    if len(col) > 1:
        delta = np.diff(col)
        if np.ptp(delta) < np.ptp(col):
            mode, head, values = 1, int(col[0]), np.append(delta.min(), delta)
    base = int(values.min()) if len(values) else 0
    width = (int(values.max()) - base).bit_length() if len(values) else 0
    if width == 0:
        return [mode, 0, base, head], b""
    u = (values - base).astype(np.uint64)
    bits = np.empty((len(u), width), np.uint8)
    for b in range(width):
        bits[:, b] = (u >> np.uint64(b)) & np.uint64(1)
    return [mode, width, base, head], np.packbits(bits, bitorder="little").tobytes()


def unpack(payload: bytes, offset: int, n: int, meta: list[int]) -> tuple[np.ndarray, int]:
    mode, width, base, head = meta
    nbytes = (n * width + 7) // 8
    if offset + nbytes > len(payload):
        raise ValueError("payload shorter than its columns")
    values = np.zeros(n, np.int64)
    if width:
        raw = np.frombuffer(payload, np.uint8, nbytes, offset)
        bits = np.unpackbits(raw, bitorder="little", count=n * width).reshape(n, width)
        for b in range(width):
            values |= bits[:, b].astype(np.int64) << b
    if mode == 0:
        return values + base, offset + nbytes
    deltas = np.where(np.arange(n) == 0, 0, values + base)
    return head + np.cumsum(deltas), offset + nbytes
