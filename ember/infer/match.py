"""Finding a traced output row again among the rows of a restricted re-run.

Rows match when every column is equal (nulls equal nulls). Floating-point columns
may differ in their last bits, since a re-run can add a group's values in another
order (a sum over millions of rows drifts by about 1e-10 relative), so they match
within a relative 1e-6.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ember.engines import duck

TOLERANCE = 1e-6


def matches(found: pa.Table, wanted: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """Pairs (row of `found`, row of `wanted`) with equal values, sorted by `found` row."""
    names = [f"c{j}" for j in range(found.num_columns)]
    a = found.rename_columns(names).append_column("_i", pa.array(np.arange(found.num_rows, dtype=np.int64)))
    b = wanted.rename_columns(names).append_column("_i", pa.array(np.arange(wanted.num_rows, dtype=np.int64)))
    conds = []
    for name, field in zip(names, found.schema, strict=True):
        same = f"a.{name} IS NOT DISTINCT FROM b.{name}"
        if pa.types.is_floating(field.type):
            near = f"abs(a.{name} - b.{name}) <= {TOLERANCE} * greatest(abs(a.{name}), abs(b.{name}))"
            same = f"({same} OR {near})"
        conds.append(same)
    con = duck.connect()
    try:
        con.register("a", a)
        con.register("b", b)
        where = " AND ".join(conds) or "true"
        res = con.sql(f"SELECT a._i AS i, b._i AS j FROM a JOIN b ON {where} ORDER BY 1, 2").fetchnumpy()
    finally:
        con.close()
    return res["i"].astype(np.int64), res["j"].astype(np.int64)
