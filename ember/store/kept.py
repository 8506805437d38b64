"""Copies of the source rows a lineage reaches, for fast row fetches.

A trace's rows are read from the source by rid, and Parquet decodes whole pages: rows
scattered over a large file (a writer may put a whole column chunk in one data page)
cost a decode of most of the file, however few rows are asked for. When the rows a
lineage reaches are a small share of a Parquet source, a live lineage holds a copy of
just those rows in memory, made in the background after capture (`HeldRows`), and a
store keeps one on disk, sorted by rid in small row groups, so a fetch reads the few
row groups (of a file a fraction of the size) that hold the rids (`KeptRows`). A copy
is only read while the source is unchanged, as the source itself would be.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from ember.engines.duck.sql import quoted_text
from ember.errors import StaleSourceError, StoreError
from ember.fetch.rows import check_unchanged, numbered_rows, read_rows
from ember.plan.sources import RID, Source, local_path

KEEP_SHARE = 0.1  # keep a copy when the lineage reaches at most this share of a source's rows
ROW_GROUP = 1 << 14  # rows per row group of a copy: small, so scattered rids skip most of it
HOLD_ROWS = 100_000  # most rows of one source a live lineage holds in memory


def rows_to_keep(source: Source, rids: np.ndarray, share: float) -> pa.Table | None:
    """The rows (sorted unique `rids`) worth copying into a store, or None.

    Only Parquet sources, unchanged since capture, whose reached rows are a small share:
    elsewhere a copy would save nothing, or could not be read now. A remote source's rows
    are read by its Spark Connect server, which saves a job per later fetch.
    """
    if source.kind != "parquet" or not rids.size or rids.size > share * source.rows:
        return None
    if isinstance(source.kept, HeldRows):
        return source.kept.table
    try:
        if not source.remote:
            for f in source.files:
                local_path(f.uri)
        return read_rows(source, rids)
    except (ValueError, StaleSourceError):
        return None


def held_copies(sources: Iterable[Source], reached: Mapping[str, np.ndarray], share: float) -> dict[str, Source]:
    """The sources (by name) whose reached rows are worth holding, each with its copy.

    A copy that cannot be made now (a file gone or rewritten since capture) is skipped:
    fetches then read the source, and say what changed.
    """
    held = {}
    for s in sources:
        rids = reached.get(s.key, np.empty(0, np.int64))
        if rids.size > HOLD_ROWS:
            continue
        try:
            table = rows_to_keep(s, rids, share)
            if table is not None:
                check_unchanged(s)  # not rewritten while it was read
        except (OSError, pa.ArrowException, duckdb.Error, StaleSourceError):
            continue
        if table is not None:
            held[s.name] = replace(s, kept=HeldRows(table))
    return held


class HeldRows:
    """A live lineage's copy of one source's reached rows, in memory, sorted by rid."""

    def __init__(self, table: pa.Table):
        self.table = table
        self._rids = table.column(RID).to_numpy()

    def read(self, rids: np.ndarray) -> pa.Table | None:
        """The rows with these sorted unique rids, or None when the copy lacks one of them."""
        at = np.searchsorted(self._rids, rids)
        if not rids.size or at[-1] >= self._rids.size or not np.array_equal(self._rids[at], rids):
            return None
        return self.table.take(pa.array(at, type=pa.int64()))


class KeptRows:
    """A store's copy of one source's reached rows; answers a fetch or says it cannot."""

    def __init__(self, fs: pafs.FileSystem, path: str, rows: int):
        self.fs, self.path, self.rows = fs, path, rows
        self._schema: pa.Schema | None = None

    def read(self, rids: np.ndarray) -> pa.Table | None:
        """The rows with these sorted unique rids (columns as `read_rows`), or None when
        the copy lacks one of them."""
        if not rids.size:
            return None
        try:
            schema = self._checked()
            if isinstance(self.fs, pafs.LocalFileSystem):
                table = self._local(rids)
            else:
                table = pq.read_table(self.path, filesystem=self.fs, filters=pc.field(RID).isin(pa.array(rids)))
        except (OSError, pa.ArrowException, duckdb.Error) as e:
            raise StoreError(f"{self.path} is damaged ({e})") from None
        return table.cast(schema) if table.num_rows == rids.size else None

    def _checked(self) -> pa.Schema:
        """The copy's schema, once its pages' checksums and row count are verified (on
        first use: DuckDB, which serves the fetches, does not check page checksums)."""
        if self._schema is None:
            with self.fs.open_input_file(self.path) as f:
                whole = pq.ParquetFile(f, page_checksum_verification=True).read()
            if whole.num_rows != self.rows:
                raise StoreError(f"{self.path} holds {whole.num_rows} rows, the manifest says {self.rows}")
            self._schema = whole.schema
        return self._schema

    def _local(self, rids: np.ndarray) -> pa.Table:
        """DuckDB skips row groups outside the rids' range and decodes other columns only
        for rows that match."""
        return numbered_rows(f"read_parquet({quoted_text(self.path)})", RID, rids)
