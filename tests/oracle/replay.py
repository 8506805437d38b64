"""A lineage oracle by replay: an output row's backward lineage must be enough to make it again.

For a query in DuckDB SQL and one of its output rows with a lineage (per source, a set of
rids), DuckDB runs the query over the sources cut down to those rows (a source the lineage
does not reach: none of its rows), without its final LIMIT, and the row must be among
the results, value for value. Under DESIGN.md's rules this holds for every operator a
query can combine: a group keeps all its rows (so its aggregates), a join its pair, a
scalar subquery or a semi join's witnesses their full lineage, a window its frame (a
ranking function its partition), an anti join or an outer join's unmatched side finds
no more partners among fewer rows, and set operations keep their equal rows.

A lineage that misses a row fails the replay (a group's sum or count changes, a join
partner disappears, a scalar moves). One with rows too many passes it; exact equality is
what the hand-written TPC-H oracle (`tpch_lineage.py`) checks. Nothing here uses ember's
code: the lineage comes in as plain arrays.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tests.oracle.compare import close


class Replay:
    """The sources held in memory once; each replay registers its cut-down copies."""

    def __init__(self, path: Path, tables: list[str]):
        self.tables = {t: pq.read_table(path / f"{t}.parquet") for t in tables}
        self.con = duckdb.connect()
        for name, table in self.tables.items():
            self.con.register(name, table)

    def run(self, query: str, lineage: Mapping[str, np.ndarray] | None = None) -> pa.Table:
        """The query's rows over the whole sources (`lineage` None) or over only the rows
        the lineage names, with the final LIMIT dropped."""
        unlimited = re.sub(r"\bLIMIT\s+\d+\s*;?\s*$", "", query.strip(), flags=re.IGNORECASE)
        if lineage is not None:
            for name, table in self.tables.items():
                rids = lineage.get(name, np.zeros(0, np.int64))
                self.con.register(name, table.take(pa.array(rids, pa.int64())))
        try:
            return self.con.sql(unlimited).to_arrow_table()
        finally:
            if lineage is not None:
                for name, table in self.tables.items():
                    self.con.register(name, table)

    def close(self) -> None:
        self.con.close()


def holds(rows: pa.Table, row: tuple[object, ...]) -> bool:
    """Whether some row of `rows` has `row`'s values, column by column in order (numbers
    approximately: Spark's decimals and DuckDB's doubles round differently)."""
    if rows.num_columns != len(row):
        return False
    candidates = zip(*(c.to_pylist() for c in rows.columns), strict=True)
    return any(all(close(a, b, rel=1e-5, abs_tol=1e-3) for a, b in zip(candidate, row, strict=True)) for candidate in candidates)
