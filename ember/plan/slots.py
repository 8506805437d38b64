"""Slots and side tables: the IR of the lineage a rewritten plan carries.

Every row of a rewritten plan carries *slots* next to its own columns: a rid slot holds
the `ember_rid` of one source row in its lineage; a ref slot points at a group of rows
of a *side table* (an aggregate's input rows that form the row's group, a semi join's
witnesses, a scalar subquery's rows); a list slot carries such a group in the row
itself. Side tables are plans whose rows carry slots too, so lineage stays normalized
(Smoke's rid index, not Perm's repeated tuples). Capture makes them, the store composes
them into indexes.
"""

from __future__ import annotations

from dataclasses import dataclass

from ember.plan import ir

FRESH_IDS_FROM = 1 << 40  # ember-made attribute ids; Catalyst's own ids stay far below
GROUPS = "aggregate groups"  # the `why` of an aggregate's group table


@dataclass(frozen=True)
class RidSlot:
    """The `ember_rid` of one source row; with `key_column`, that row's value in a column
    unique in the source instead, which names the row as well and is turned into its rid
    after the job (`capture.keys`)."""

    source: str  # Source.key
    attr: ir.Attr
    key_column: str | None = None

    @property
    def attrs(self) -> tuple[ir.Attr, ...]:
        return (self.attr,)


@dataclass(frozen=True)
class RefSlot:
    """Points at the rows of side table `table` whose keys equal `keys`; with `lo`/`hi`, only
    positions `[lo, hi)` of that group (a window frame)."""

    table: int
    keys: tuple[ir.Attr, ...]
    present: ir.Attr
    lo: ir.Attr | None = None
    hi: ir.Attr | None = None

    @property
    def attrs(self) -> tuple[ir.Attr, ...]:
        bounds = (self.lo, self.hi) if self.lo is not None and self.hi is not None else ()
        return (*self.keys, self.present, *bounds)


@dataclass(frozen=True)
class ListSlot:
    """The rows of side table `table` that belong to this row, carried in the row itself as
    the list column `attr` (a list of structs of that table's slot attributes)."""

    table: int
    attr: ir.Attr

    @property
    def attrs(self) -> tuple[ir.Attr, ...]:
        return (self.attr,)


Slot = RidSlot | RefSlot | ListSlot


@dataclass(frozen=True)
class SideTable:
    """Rows that ref slots point into, grouped by `keys`."""

    id: int
    plan: ir.Node
    keys: tuple[ir.Attr, ...]
    slots: tuple[Slot, ...]
    why: str  # what produced it, for messages and manifests
    order: tuple[ir.Attr, ...] = ()  # within a group (window position)
    inline: bool = False  # its rows ride in the job's result as a list slot; `plan` is not run
    local: bool = False  # read by DuckDB (unless its files or SQL turn out not to allow it)
    bounded: bool = True  # its rows may come back through the driver (else the executors index them)
    whole: bool = False  # every group reaches the result: worth reading whole, beside the job
    unique: frozenset[tuple[str, str]] = frozenset()  # (source key, column) unique, never null: `keyed`
    # A group table: its aggregate's input as the job reads it, which another table's plan
    # may aggregate too (`capture.local.inputs.Inputs` reads it once for both).
    aggregated: ir.Node | None = None
    # Its rows are reported by the job's own tasks (a partition map's wrapped function): `plan`
    # only describes them.
    reported: bool = False
    # A rollup's group table (`capture.rollup`): (grouping id, how many leading keys its
    # set groups by) for each grouping set; a ref's last key is the grouping id.
    prefixes: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class Annotated:
    plan: ir.Node  # output: the original columns, then every slot's attributes
    slots: tuple[Slot, ...]
    tables: tuple[SideTable, ...]  # children before parents
    inline_rids: int  # the rids `bounded` lets through the driver (0: none)


def slot_attrs(slots: tuple[Slot, ...]) -> tuple[ir.Attr, ...]:
    return tuple(a for s in slots for a in s.attrs)
