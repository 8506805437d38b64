"""Reads source rows by rid, and checks the source is still what capture saw."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ember.arrow import int64s
from ember.engines import duck
from ember.engines.duck.sql import parquet_file, partition_columns, quoted, quoted_text
from ember.errors import EmberError, IdOutOfRangeError, InvalidPredicateError, StaleSourceError
from ember.plan.sources import COUNTED, KEYED, RID, Source, SourceFile, file_facts, local_path


def check_unchanged(source: Source) -> None:
    """Raises if a source file's size or modification time differs from capture time."""
    if source.remote:
        served(source).check()
        return
    for f in source.files:
        try:
            size, mtime = file_facts(f.uri)
        except FileNotFoundError:
            raise StaleSourceError(f"source {source.name!r}: file {f.uri} is gone since capture") from None
        if (size, mtime) != (f.size, f.mtime_ns):
            raise StaleSourceError(
                f"source {source.name!r}: file {f.uri} changed since capture "
                f"(size {f.size} → {size}, modified {f.mtime_ns} → {mtime}); capture again"
            )


def source_relation(source: Source) -> pa.Table | str:
    """The source's rows with `ember_rid`, as DuckDB sees them."""
    if source.kind == "memory":
        return source.data.append_column(RID, pa.array(np.arange(source.rows, dtype=np.int64)))
    if source.kind == "parquet" and not source.remote:
        check_unchanged(source)
        files = " UNION ALL BY NAME ".join(
            f"SELECT * EXCLUDE (file_row_number), file_row_number + {f.offset} AS {RID} FROM {parquet_file(source, f)}"
            for f in source.files
        )
        if not source.columns:
            return files
        columns = ", ".join(quoted(c) for c in (*source.columns, *(n for n, _ in source.partitioning), RID))
        return f"SELECT {columns} FROM ({files})"
    if source.kind == "range":
        start, _, step = (int(x) for x in source.key.split(":")[1:])
        return f"SELECT {start} + i * {step} AS id, i AS {RID} FROM range({source.rows}) t(i)"
    if source.remote:
        raise InvalidPredicateError(f"source {source.name!r} is read by its Spark Connect server, not by DuckDB here")
    raise InvalidPredicateError(f"SQL over the rows of {source.kind} sources is not available")


def read_rows(source: Source, rids: np.ndarray) -> pa.Table:
    """The source rows with these (sorted, unique) rids, in rid order, plus `ember_rid`."""
    if source.kind == "memory":
        table = source.data.take(pa.array(rids, type=pa.int64()))
    elif source.kind == "parquet":
        check_unchanged(source)
        kept = source.kept.read(rids) if source.kept is not None else None
        if kept is not None:
            return kept
        if source.remote:
            return _unviewed(served(source).rows(rids))
        table = _parquet_rows(source, rids)
    elif source.kind in COUNTED:
        check_unchanged(source)
        if source.data is None:
            raise EmberError(f"source {source.name!r} is {source.kind.upper()}: reading its rows needs ember.load(path, spark)")
        return _unviewed(source.data.rows(rids.tolist()))
    elif source.kind == "range":
        start, _, step = (int(x) for x in source.key.split(":")[1:])
        table = pa.table({"id": pa.array(start + rids * step, type=pa.int64())})
    elif source.kind == KEYED:
        return _unviewed(live_keyed(source).rows(rids))
    else:
        table = pa.table({})
    return table.append_column(RID, pa.array(rids, type=pa.int64()))


def served(source: Source) -> Any:
    """What reads a remote source's rows and facts through its Spark Connect server
    (`engines.spark.served.ServerFiles`)."""
    if source.data is None:
        raise EmberError(f"source {source.name!r} is read by a Spark Connect server: reading it needs ember.load(path, spark)")
    return source.data


def source_keys(source: Source) -> pa.Table:
    """A keyed source's keys in rid order (row i is rid i): its live numbering's
    (`numbering.KeyedNumbering`), or the table a loaded store holds."""
    data = source.data
    return data if isinstance(data, pa.Table) else data.keys


def live_keyed(source: Source) -> Any:
    """What reads a keyed source's rows through Spark (a capture's numbering, or a loaded
    store's `query.lineage._Rekeyed`)."""
    if isinstance(source.data, pa.Table):
        raise EmberError(f"source {source.name!r} is keyed: its keys alone were read from the store (ember.load reads its rows)")
    return source.data


def key_rids(source: Source, keys: pa.Table) -> np.ndarray:
    """The rids of a keyed source's rows with these key values (columns named as its key);
    a key no row had at capture is `IdOutOfRangeError`."""
    held = source_keys(source)
    try:
        wanted = keys.select(held.column_names).cast(held.schema)
    except (KeyError, pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise EmberError(f"source {source.name!r} is keyed by {', '.join(held.column_names)} ({held.schema.types}); keys given: {e}") from None
    numbered = held.append_column(_KEY_RID, pa.array(np.arange(held.num_rows), pa.int64()))
    found = wanted.join(numbered, held.column_names, join_type="left outer")
    missing = found.filter(pc.is_null(found.column(_KEY_RID)))
    if missing.num_rows:
        example = missing.select(held.column_names).slice(0, 1).to_pylist()[0]
        raise IdOutOfRangeError(f"source {source.name!r} had no row with the key {example} at capture")
    return np.unique(found.column(_KEY_RID).to_numpy()).astype(np.int64)


_KEY_RID = "__ember_rid"


def _parquet_rows(source: Source, rids: np.ndarray) -> pa.Table:
    if not source.files:
        return pa.table({})
    spans = [(f, np.searchsorted(rids, [f.offset, f.offset + f.rows])) for f in source.files]
    read = [(f, _file_rows(source, f, rids[lo:hi] - f.offset)) for f, (lo, hi) in spans if lo < hi]
    if not read:
        read = [(source.files[0], _file_rows(source, source.files[0], rids[:0]))]
    return pa.concat_tables(_partitioned(source, read), promote_options="permissive")


def _file_rows(source: Source, f: SourceFile, rows: np.ndarray) -> pa.Table:
    """Rows of one file, with the source's columns as Spark reads them: by name (a column
    the file lacks is null)."""
    path = local_path(f.uri)
    held = _unviewed(pq.read_schema(path).empty_table()).schema
    if rows.size:
        relation = f"read_parquet({quoted_text(str(path))}, file_row_number = true, hive_partitioning = false)"
        read = numbered_rows(relation, "file_row_number", rows).drop_columns(["file_row_number"])
        part = _unviewed(read).cast(held)
    else:
        part = held.empty_table()
    if not source.columns:
        return part
    names = {n.lower(): n for n in part.column_names}
    return pa.table(
        [part.column(names[c.lower()]) if c.lower() in names else pa.nulls(part.num_rows) for c in source.columns],
        names=list(source.columns),
    )


def _partitioned(source: Source, read: list[tuple[SourceFile, pa.Table]]) -> list[pa.Table]:
    """Each file's rows with its partition columns, typed as the source's other readers
    type them (one DuckDB query casts every file's values)."""
    if not source.partitioning:
        return [rows for _, rows in read]
    con = duck.connect()
    try:
        values = con.sql(" UNION ALL ".join(f"SELECT {partition_columns(source, f)}" for f, _ in read)).to_arrow_table()
    finally:
        con.close()
    out = []
    for i, (_, rows) in enumerate(read):
        for name, column in zip(values.column_names, values.columns, strict=True):
            rows = rows.append_column(name, pa.repeat(column[i], rows.num_rows))
        out.append(_unviewed(rows))
    return out


def numbered_rows(relation: str, column: str, numbers: np.ndarray) -> pa.Table:
    """The rows of a DuckDB `relation` whose `column` is one of `numbers` (sorted), in that
    order. A join with the numbers, not an IN list: DuckDB narrows the scan to their least
    and greatest (whole row groups skipped) and decodes the other columns only where they
    match, faster than a long IN list and far faster than Arrow reading the row
    groups that hold them."""
    con = duck.connect()
    try:
        con.register("wanted", pa.table({"n": int64s(numbers)}))
        return con.sql(
            f"SELECT r.* FROM {relation} r JOIN wanted ON r.{column} = wanted.n ORDER BY r.{column}"
        ).to_arrow_table()
    finally:
        con.close()


def _unviewed(table: pa.Table) -> pa.Table:
    """Plain string columns instead of string_view (which many Arrow consumers lack)."""
    cols = []
    for field in table.schema:
        col = table.column(field.name)
        if pa.types.is_string_view(field.type):
            col = pc.cast(col, pa.string())
        cols.append(col)
    return pa.table(cols, names=table.column_names)
