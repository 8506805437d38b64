"""The lineage of one captured job: its output and the indexes that trace it."""

from __future__ import annotations

from collections.abc import Iterable

import duckdb
import numpy as np
import pyarrow as pa

from ember.errors import IdOutOfRangeError, InvalidPredicateError
from ember.fetch.rows import RID, check_unchanged
from ember.plan.sources import Source, local_path
from ember.query.trace import OID, ForwardTrace, Trace, source_by_name
from ember.store.index import LineageIndex


class Lineage:
    """Row-level lineage of a job; traces are answered in-process from the index."""

    def __init__(self, output: pa.Table, index: LineageIndex, sources: Iterable[Source], mode: str = "eager"):
        self._output = output.append_column(OID, pa.array(np.arange(output.num_rows, dtype=np.int64)))
        self._index = index
        self._sources = {s.name: s for s in sources if s.kind != "none"}
        self.mode = mode

    @property
    def sources(self) -> list[str]:
        """Names of the sources the job reads."""
        return sorted(self._sources)

    @property
    def index_bytes(self) -> int:
        return self._index.nbytes

    def output(self) -> pa.Table:
        """The job's output rows with `ember_oid` (their position)."""
        return self._output

    def backward(self, oids: Iterable[int] | None = None, where: str | None = None) -> Trace:
        """Source rows behind the output rows chosen by `oids` or by a SQL `where` over output columns."""
        chosen = self._choose(self._output, "output", oids, where, OID)
        found = self._index.backward(chosen)
        return Trace(self._sources, found)

    def forward(self, source: str, ids: Iterable[int] | None = None, where: str | None = None) -> ForwardTrace:
        """Output rows reached by the rows of `source` chosen by `ids` or by a SQL `where` over its columns."""
        src = source_by_name(self._sources, source)
        if where is not None and ids is None and src.kind in ("csv", "json"):
            chosen = _select_text(src, where)
        elif where is not None and ids is None:
            chosen = _select(_source_relation(src), where, RID, f"source {source!r}")
        else:
            chosen = _ids(ids, src.rows, f"rid of source {source!r}")
        return ForwardTrace(self._output, self._index.forward(src.key, chosen))

    def _choose(
        self, table: pa.Table, what: str, ids: Iterable[int] | None, where: str | None, column: str
    ) -> np.ndarray:
        if (ids is None) == (where is None):
            raise TypeError("give exactly one of ids/oids or where")
        if where is not None:
            return _select(table, where, column, what)
        return _ids(ids, table.num_rows, f"ember_oid of the {what}")

    def __repr__(self) -> str:
        return f"<ember lineage: {self._output.num_rows} output rows from {', '.join(self.sources)}>"


def _ids(ids: Iterable[int] | None, bound: int, what: str) -> np.ndarray:
    arr = np.unique(np.asarray(list(ids) if ids is not None else [], dtype=np.int64))
    bad = arr[(arr < 0) | (arr >= bound)]
    if bad.size:
        raise IdOutOfRangeError(f"{what} out of range: {bad[:5].tolist()} (valid: 0 to {bound - 1})")
    return arr


def _select(relation: pa.Table | str, where: str, column: str, what: str) -> np.ndarray:
    con = duckdb.connect()
    try:
        if isinstance(relation, pa.Table):
            con.register("rel", relation)
        else:
            con.execute(f"CREATE VIEW rel AS {relation}")
        try:
            res = con.execute(f"SELECT {column} FROM rel WHERE ({where}) ORDER BY 1").fetchnumpy()
        except duckdb.ParserException as e:
            raise InvalidPredicateError(f"where={where!r} does not parse: {e}") from None
        except duckdb.BinderException as e:
            raise InvalidPredicateError(f"where={where!r} does not fit the columns of the {what}: {e}") from None
        except duckdb.Error as e:
            raise InvalidPredicateError(f"where={where!r} failed on the {what}: {e}") from None
        return np.unique(res[column].astype(np.int64))
    finally:
        con.close()


def _select_text(source: Source, where: str) -> np.ndarray:
    """Rids of a CSV/JSON source's rows matching `where`, evaluated by Spark (one job)."""
    check_unchanged(source)
    df = source.data.numbered()
    try:
        rows = df.filter(where).select(RID).toArrow()
    except Exception as e:  # Spark's parse and analysis errors share no base class worth naming
        raise InvalidPredicateError(f"where={where!r} failed on source {source.name!r}: {e}") from None
    return np.unique(rows.column(RID).to_numpy().astype(np.int64))


def _source_relation(source: Source) -> pa.Table | str:
    """The source's rows with `ember_rid`, as DuckDB sees them."""
    if source.kind == "memory":
        return source.data.append_column(RID, pa.array(np.arange(source.rows, dtype=np.int64)))
    if source.kind == "parquet":
        check_unchanged(source)
        parts = [
            f"SELECT * EXCLUDE (file_row_number), file_row_number + {f.offset} AS {RID} "
            f"FROM read_parquet('{str(local_path(f.uri)).replace(chr(39), chr(39) * 2)}', file_row_number = true)"
            for f in source.files
        ]
        return " UNION ALL ".join(parts)
    if source.kind == "range":
        start, _, step = (int(x) for x in source.key.split(":")[1:])
        return f"SELECT {start} + i * {step} AS id, i AS {RID} FROM range({source.rows}) t(i)"
    raise InvalidPredicateError(f"where= is not available on {source.kind} sources")
