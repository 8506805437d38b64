"""Sources whose files this process cannot read (a Spark Connect server's), and counted
sources read again over Connect.

A client on another machine than its server (a remote cluster's files, on HDFS, S3 or
the server's own disk) cannot read a source in-process as ember does elsewhere (DuckDB
side tables, row fetches by rid, copies of traced rows). Such a source is `remote`: its
facts (sizes, modification times, row counts) are the server's, DuckDB never reads it,
so side tables over it are Spark's jobs, and its rows are read by a Spark job over
Connect, numbered as the capture numbered them (a file's offset plus its row index).

A counted source (CSV, JSON, XML, text, ORC, binary files) is numbered by counting each
split's rows (`numbering`), and only Spark reads it, here or not. Over Connect there is
no relation of the plan to read through py4j, so the client makes a reader of its files
for the server, with the job's scan's options and schema (`ServerReading`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import PurePosixPath
from typing import Any, Literal, cast
from urllib.parse import urlparse

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql.connect.session import SparkSession as RemoteSession

from ember.engines.spark import connect
from ember.engines.spark.numbering import (
    counted_alike,
    files_reader,
    layout_of,
    number_hive,
    number_read,
)
from ember.engines.spark.plan_import import Facts, Here, Listed
from ember.errors import EmberError, StaleSourceError
from ember.plan import ir
from ember.plan.sources import READER_FORMATS, RID, Source, SourceFile, local_path, spark_path

Reads = Literal["auto", "spark"]
READS = "spark.ember.sourceReads"  # "auto": this process reads the files it sees as the server does; "spark": none
_RID_TYPE = pa.int64()


def reads(session: RemoteSession) -> Reads:
    """Which files a capture over `session` reads in-process (`READS`)."""
    value = str(session.conf.get(READS, "auto")).lower()
    if value not in ("auto", "spark"):
        raise EmberError(f"{READS} is {value!r}: it takes 'auto' (the default) or 'spark'")
    return cast(Reads, value)


def seen_here(uri: str, size: int, mtime_ms: int) -> bool:
    """Whether this process sees a file the server listed as the server does: a local file
    of the same size and modification time (to the millisecond, as Hadoop lists it). A
    file at the same path on another machine is another file, and its facts tell.

    >>> seen_here("hdfs://nn/t/a.parquet", 10, 0)
    False
    """
    if urlparse(uri).scheme not in ("", "file"):
        return False
    try:
        st = local_path(uri).stat()
    except OSError:
        return False
    return st.st_size == size and st.st_mtime_ns // 1_000_000 == mtime_ms


class Reach:
    """Which files of a Connect capture this process reads (`plan_import.Files`): a
    source's files it sees as the server does, unless `spark.ember.sourceReads` is
    "spark"; else the source is remote, with the server's facts."""

    def __init__(self, session: RemoteSession):
        self.session = session
        self._reads: Reads | None = None  # the setting, read once per capture (a request)

    def facts(self, fmt: str, listed: list[Listed]) -> tuple[list[Facts], bool]:
        if self._reads is None:
            self._reads = reads(self.session)
        if self._reads == "auto" and all(seen_here(*f) for f in listed):
            return Here().facts(fmt, listed)
        found = server_facts(self.session, [uri for uri, _, _ in listed], fmt == "parquet")
        for (uri, _, _), (size, _, _) in zip(listed, found, strict=True):
            if size < 0:
                raise StaleSourceError(f"{uri} is gone since Spark listed it: capture again")
        return found, True

    def reader(self, source: Source) -> ServerFiles:
        return ServerFiles(source, lambda: self.session)


def server_facts(session: RemoteSession, uris: list[str], parquet: bool) -> list[Facts]:
    """The files' size (-1: gone), modification time (ns, from the server's ms) and Parquet
    rows, as the server sees them."""
    return [(size, mtime * 1_000_000, rows) for size, mtime, rows in connect.files(session, uris, parquet)]


class ServerFiles:
    """Reads a remote Parquet source's rows, and checks its files, through the server of
    the session `session()` gives (a capture's, or the one a store is loaded with)."""

    def __init__(self, source: Source, session: Callable[[], RemoteSession | None]):
        self._source, self._session = source, session

    def check(self) -> None:
        """Raises if a file's size or modification time differs from capture time (the
        server's facts, as the capture's were)."""
        source = self._source
        found = server_facts(self._spark(), [f.uri for f in source.files], False)
        for f, (size, mtime, _) in zip(source.files, found, strict=True):
            if size < 0:
                raise StaleSourceError(f"source {source.name!r}: file {f.uri} is gone since capture")
            if (size, mtime) != (f.size, f.mtime_ns):
                raise StaleSourceError(
                    f"source {source.name!r}: file {f.uri} changed since capture "
                    f"(size {f.size} → {size}, modified {f.mtime_ns} → {mtime}); capture again"
                )

    def numbered(self, files: tuple[SourceFile, ...] | None = None) -> DataFrame:
        """The source's rows (of `files`, else all) with `ember_rid`, as a DataFrame of the
        server's; columns as a local read gives them (the source's, then its partitions')."""
        source = self._source
        files = source.files if files is None else files
        reader = self._spark().read.format("parquet").options(**dict(source.options))
        if source.partitioning:  # partition values from the folders below the source's root
            reader = reader.option("basePath", spark_path(_root(files[0].uri, len(source.partitioning))))
        df = reader.load([spark_path(f.uri) for f in files])
        held = {c.lower(): c for c in df.columns}
        parts = {n.lower() for n, _ in source.partitioning}
        names = source.columns or tuple(c for c in df.columns if c.lower() not in parts)
        columns = [f"`{held[c.lower()]}` AS `{c}`" if c.lower() in held else f"NULL AS `{c}`" for c in names]
        columns += [f"CAST(`{held[n.lower()]}` AS {dtype}) AS `{n}`" for n, dtype in source.partitioning]
        offsets = " ".join(f"WHEN '{_quoted(f.uri)}' THEN {f.offset}" for f in files)
        rid = f"_metadata.row_index + CASE _metadata.file_path {offsets} END AS {RID}"
        return df.selectExpr(*columns, rid)

    def rows(self, rids: np.ndarray) -> pa.Table:
        """The rows with these sorted unique rids, in rid order, plus `ember_rid`: one job
        over the files that hold them, joined with the rids."""
        files = self._source.files
        starts = np.array([f.offset for f in files], dtype=np.int64)
        holding = np.unique(np.searchsorted(starts, rids, side="right") - 1) if rids.size else np.zeros(1, np.int64)
        df = self.numbered(tuple(files[i] for i in holding))
        wanted = self._spark().createDataFrame(pa.table({RID: pa.array(rids, _RID_TYPE)})) if rids.size else None
        found = df.limit(0) if wanted is None else df.join(wanted.hint("broadcast"), RID, "left_semi")
        return found.select(*df.columns).orderBy(RID).toArrow()

    def _spark(self) -> RemoteSession:
        spark = self._session()
        if spark is None:
            raise EmberError(
                f"source {self._source.name!r} is read by the Spark Connect server (this process cannot read its "
                "files): reading its rows needs ember.load(path, spark) with a session of that server"
            )
        return spark


class ServerReading:
    """A counted source's files as a reader this client makes for the Connect server reads
    them (`numbering.Reading`): the job's scan's reader options, and its columns' types as
    the schema (a binary file's are fixed), so each split holds the rows the job's scan
    read; the splits follow the server's settings and default parallelism."""

    def __init__(self, session: RemoteSession, source: Source, recipe: dict[str, Any]) -> None:
        self.session, self._source, self._recipe = session, source, recipe

    @classmethod
    def of_scan(cls, session: RemoteSession, source: Source, columns: tuple[ir.Attr, ...]) -> ServerReading:
        """The reading of a scan's columns (their types as DDL) with its reader options."""
        fixed = READER_FORMATS.get(source.kind) is not None
        schema = None if fixed else ", ".join(f"`{a.name.replace('`', '``')}` {a.dtype}" for a in columns)
        return cls(session, source, {"options": dict(source.options), "schema": schema})

    def frame(self) -> DataFrame:
        return files_reader(self.session, self._source, self.recipe(), [f.uri for f in self._source.files])  # type: ignore[arg-type]  # a Connect session reads files alike

    def layout(self) -> tuple[str | None, ...]:
        return layout_of(self.session, connect.parallelism(self.session))  # type: ignore[arg-type]  # a Connect session reads settings alike

    def recipe(self) -> dict[str, Any]:
        return self._recipe

    def check(self) -> None:
        ServerFiles(self._source, lambda: self.session).check()


class TableReading(ServerReading):
    """A metastore table read with a Hive serde, as the Connect server reads it by name:
    the whole table (all of its partitions), which the client cannot make a file reader of."""

    def frame(self) -> DataFrame:
        return self.session.table(self._recipe["table"])


def recounted(session: RemoteSession, source: Source, recipe: dict[str, Any]) -> Source:
    """A loaded store's counted source, read with its recipe through `session` and counted
    again (`numbering.counted_alike`)."""
    if "table" in recipe:
        return counted_alike(source, number_hive(source, TableReading(session, source, recipe)))
    return counted_alike(source, number_read(source, ServerReading(session, source, recipe)))


def _root(uri: str, depth: int) -> str:
    """The folder `depth` levels above a file's own: the root of a partitioned source.

    >>> _root("file:/t/y=1/m=2/a.parquet", 2)
    'file:///t'
    """
    parsed = urlparse(uri)
    return parsed._replace(path=str(PurePosixPath(parsed.path).parents[depth])).geturl()


def _quoted(text: str) -> str:
    """Text inside a SQL string literal.

    >>> _quoted("it's")
    "it\\\\'s"
    """
    return text.replace("\\", "\\\\").replace("'", "\\'")
