"""Matching a deferred capture's rows to the rows the user's own job returned.

The deferred run executes the same plan again; Spark may return its rows in another
order, so rows are matched by value: equal rows pair up in the order each run returned
them. Floating-point columns are left out of the match (a sum of doubles may differ in
its last bits between runs) and so are nested ones.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ember.engines import duck
from ember.errors import EmberError


def match_rows(user: pa.Table, captured: pa.Table) -> np.ndarray:
    """Positions in `captured` of the rows matching `user`'s rows 0, 1, 2, ..."""
    n = user.num_rows
    if captured.num_rows != n:
        raise EmberError(
            f"the deferred capture returned {captured.num_rows} rows, the job {n}: the plan is not "
            "deterministic; capture it with strategy='inject'"
        )
    keys = [i for i, f in enumerate(user.schema) if _matchable(f.type)]
    if n == 0 or not keys:
        return np.arange(n, dtype=np.int64)
    names = [f"k{i}" for i in keys]
    pos = pa.array(np.arange(n, dtype=np.int64))
    con = duck.connect()
    try:
        con.register("u", pa.table([*(user.column(i) for i in keys), pos], names=[*names, "pos"]))
        con.register("c", pa.table([*(captured.column(i) for i in keys), pos], names=[*names, "pos"]))
        part = ", ".join(names)
        on = " AND ".join(f"u.{k} IS NOT DISTINCT FROM c.{k}" for k in names)
        pairs = con.execute(
            f"WITH u AS (SELECT *, row_number() OVER (PARTITION BY {part} ORDER BY pos) AS dup FROM u), "
            f"c AS (SELECT *, row_number() OVER (PARTITION BY {part} ORDER BY pos) AS dup FROM c) "
            f"SELECT u.pos AS u, c.pos AS c FROM u JOIN c ON {on} AND u.dup = c.dup ORDER BY u.pos"
        ).fetchnumpy()
    finally:
        con.close()
    if len(pairs["u"]) != n:
        raise EmberError(
            "the deferred capture returned other rows than the job (a nondeterministic plan, or "
            "sources changed during the job); capture it with strategy='inject'"
        )
    return pairs["c"].astype(np.int64)


def _matchable(t: pa.DataType) -> bool:
    return not (pa.types.is_floating(t) or pa.types.is_nested(t) or pa.types.is_dictionary(t))
