"""Groupings: a declared lineage-consuming query's result for every output row, computed
at capture (Smoke's group-by push-down), and partitions of the lineage by a column's value
(data skipping). `query.grouped` makes and answers them; the store saves them."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import numpy as np
import pyarrow as pa

from ember.engines import duck
from ember.errors import InvalidPredicateError
from ember.plan.sources import OID
from ember.store.columns import IntColumn, expand_ranges, sorted_unique


@dataclass(frozen=True, eq=False)
class Grouping:
    source: str  # source name
    query: str  # the lineage-consuming query, as declared
    column: str | None  # the partition column, for a partition
    result: pa.Table  # `ember_oid`, then the query's columns; sorted by `ember_oid`
    start: np.ndarray  # result row i came from rids[start[i]:end[i]]
    end: np.ndarray
    rids: IntColumn

    def rows(self, oids: np.ndarray) -> np.ndarray:
        owners = self.result.column(OID).to_numpy()
        lo, hi = np.searchsorted(owners, oids), np.searchsorted(owners, oids, side="right")
        return expand_ranges(lo, hi)

    def rids_of(self, rows: np.ndarray) -> np.ndarray:
        return self.rids.take(expand_ranges(self.start[rows], self.end[rows]))

    def skip(self, oids: np.ndarray, where: str) -> np.ndarray | None:
        """Rids in the lineage of `oids` whose partition value satisfies `where`, or None
        when `where` names other columns than the partition's."""
        assert self.column is not None
        rows = self.rows(oids)
        values = pa.table({self.column: self.result.column(self.column).take(pa.array(rows)), "__ember_row": rows})
        con = duck.connect()
        try:
            con.register("parts", values)
            hit = con.execute(f"SELECT __ember_row FROM parts WHERE ({where})").fetchnumpy()["__ember_row"]
        except duckdb.BinderException:
            return None
        except duckdb.Error as e:
            raise InvalidPredicateError(f"source_where {where!r} failed: {e}") from None
        finally:
            con.close()
        return sorted_unique([self.rids_of(np.sort(hit.astype(np.int64)))])
