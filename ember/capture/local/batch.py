"""Tables of one wave whose queries are one, read once for all of their keys.

Tables read side by side may run one query up to names for other wanted keys (copies of
one CTE read per channel): they are read once, for all of their keys. Each table gets
every group read, its own and the others': refs point only at their own, and the index
keeps one level for them all (`store.build`'s `same`). A rollup's group table (its
wanted keys name grouping sets) and keys a hash would not compare alike are read alone
(`Reads.batch` decides which tables may share).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

import pyarrow as pa

from ember.plan.slots import SideTable


@dataclass
class Batch:
    """One read for several tables' keys, made by whichever table asks first."""

    first: SideTable  # the table whose query is run, for all the `keys`
    keys: pa.Table
    lock: threading.Lock = field(default_factory=threading.Lock)
    done: bool = False
    rows: pa.Table | None = None


def batches(shared: Sequence[list[tuple[SideTable, pa.Table]]]) -> dict[int, Batch]:
    """Table id → its batch, for each group of tables whose queries are one (`shared`): a
    group whose keys are all the same is one read already (`Reads`), one whose keys Arrow
    could not put in one table, or group, is read table by table."""
    found: dict[int, Batch] = {}
    for tables in shared:
        first, keys = tables[0]
        if all(same_keys(keys, other) for _, other in tables[1:]):
            continue
        if any(w.schema != keys.schema for _, w in tables) or any(pa.types.is_nested(f.type) for f in keys.schema):
            continue
        union = pa.concat_tables([w for _, w in tables])
        batch = Batch(first, union.group_by(union.column_names, use_threads=False).aggregate([]))
        found.update({t.id: batch for t, _ in tables})
    return found


def same_keys(a: pa.Table | None, b: pa.Table | None) -> bool:
    """Whether two tables' wanted keys are the same, in any order (each comes from its own
    refs' rows, which may list one set of keys in another order)."""
    if a is None or b is None:
        return a is b
    if a.equals(b):
        return True
    if a.num_rows != b.num_rows or a.schema != b.schema:
        return False
    try:
        return _ordered(a).equals(_ordered(b))
    except pa.ArrowNotImplementedError:  # nested keys: not sorted
        return False


def _ordered(keys: pa.Table) -> pa.Table:
    return keys.sort_by([(name, "ascending") for name in keys.column_names])
