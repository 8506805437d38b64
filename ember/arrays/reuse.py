"""Reuse of captured lineage (DSLog §VI).

- *dim_sig*: a value-independent call with the same function, arguments and input
  shapes has the same lineage, so its tables are reused at once, with no capture.
- *gen_sig*: the same call on other shapes. Every interval that spans a whole axis is
  made symbolic ([0, N-1]), as is the N-1 of a mirrored axis (flip), and instantiated
  for the new shapes. Like DSLog's automatic
  prediction, the generalized mapping is only trusted after it reproduced a fresh
  capture on a different shape `confirm` times, and only for shapes that differ from
  the first one in axes those captures varied too; one mismatch retires it for good
  (cumsum, tile: their row counts or offsets depend on the shape; `repeat` along rows,
  confirmed on other column counts only, says nothing of other row counts).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np

from ember.arrays.provrc import ABSOLUTE, Table

Tables = tuple[tuple[int, int, Table], ...]  # (output index, input index, table)
Shapes = tuple[tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...]]  # (inputs, outputs)
How = Literal["dim", "gen"]


@dataclass(frozen=True)
class _Symbolic:
    """A table whose marked entries stand for "the last index of that axis"."""

    table: Table
    key_hi: np.ndarray  # marks on key_hi
    val_lo: np.ndarray  # marks on val_lo (mirrored values: a = (N - 1) - b)
    val_hi: np.ndarray  # marks on val_hi (absolute or mirrored)

    @staticmethod
    def of(table: Table) -> _Symbolic:
        key_last = np.asarray(table.key_shape, np.int64) - 1
        val_last = np.asarray(table.val_shape, np.int64) - 1
        absolute, mirrored = table.val_ref == ABSOLUTE, table.val_ref <= -2
        return _Symbolic(
            table,
            table.key_hi == key_last,
            mirrored & (table.val_lo == val_last),
            (absolute | mirrored) & (table.val_hi == val_last),
        )

    def on(self, out_shape: tuple[int, ...], in_shape: tuple[int, ...]) -> Table:
        t = replace(self.table, out_shape=out_shape, in_shape=in_shape)
        key_last = np.asarray(t.key_shape, np.int64) - 1
        val_last = np.asarray(t.val_shape, np.int64) - 1
        return replace(
            t,
            key_hi=np.where(self.key_hi, key_last, t.key_hi),
            val_lo=np.where(self.val_lo, val_last, t.val_lo),
            val_hi=np.where(self.val_hi, val_last, t.val_hi),
        )


@dataclass
class _General:
    tables: tuple[tuple[int, int, _Symbolic], ...]
    first: Shapes
    seen: set[Shapes]
    confirmed: int = 0
    varied: frozenset[int] = frozenset()  # axes (`_differing`) a confirming capture varied
    retired: bool = False

    def covers(self, shapes: Shapes) -> bool:
        """Whether confirming captures varied every axis in which `shapes` differ from the first."""
        return _differing(self.first, shapes) <= self.varied

    def on(self, shapes: Shapes) -> Tables:
        ins, outs = shapes
        return tuple((o, k, s.on(outs[o], ins[k])) for o, k, s in self.tables)


def _differing(a: Shapes, b: Shapes) -> frozenset[int]:
    """The axes, numbered across all inputs' then all outputs' shapes, whose extents differ."""
    axes = [x != y for sa, sb in zip(a[0] + a[1], b[0] + b[1], strict=True) for x, y in zip(sa, sb, strict=True)]
    return frozenset(i for i, differs in enumerate(axes) if differs)


def same(a: Tables, b: Tables) -> bool:
    return len(a) == len(b) and all(
        x[:2] == y[:2] and x[2].same(y[2]) for x, y in zip(a, b, strict=True)
    )


@dataclass
class Reuse:
    """Remembers tables by signature. A signature is any hashable description of the
    function and its non-array arguments; shapes are passed separately."""

    confirm: int = 1
    dim: dict[tuple[Any, Shapes], Tables] = field(default_factory=dict)
    gen: dict[tuple[Any, tuple[int, ...], tuple[int, ...]], _General] = field(default_factory=dict)

    @staticmethod
    def _gen_key(sig: Any, shapes: Shapes) -> tuple[Any, tuple[int, ...], tuple[int, ...]]:
        return sig, tuple(len(s) for s in shapes[0]), tuple(len(s) for s in shapes[1])

    def lookup(self, sig: Any, shapes: Shapes) -> tuple[How, Tables] | None:
        if (sig, shapes) in self.dim:
            return "dim", self.dim[sig, shapes]
        general = self.gen.get(self._gen_key(sig, shapes))
        if general and not general.retired and general.confirmed >= self.confirm and general.covers(shapes):
            return "gen", general.on(shapes)
        return None

    def learn(self, sig: Any, shapes: Shapes, tables: Tables) -> None:
        """Record a fresh capture; check it against the generalized mapping."""
        self.dim[sig, shapes] = tables
        key = self._gen_key(sig, shapes)
        general = self.gen.get(key)
        if general is None:
            self.gen[key] = _General(tuple((o, k, _Symbolic.of(t)) for o, k, t in tables), shapes, {shapes})
        elif not general.retired and shapes not in general.seen:
            general.seen.add(shapes)
            if same(general.on(shapes), tables):
                general.confirmed += 1
                general.varied |= _differing(general.first, shapes)
            else:
                general.retired = True
