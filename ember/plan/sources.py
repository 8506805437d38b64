"""Sources: what a plan reads, how its rows are numbered, and how to tell it changed."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import unquote, urlparse


@dataclass(frozen=True)
class SourceFile:
    """One file of a file source, with the facts that detect a change after capture."""

    uri: str  # as Spark names it in `_metadata.file_path`
    size: int
    mtime_ns: int
    rows: int
    offset: int  # ember_rid of the file's first row
    partition: tuple[str | None, ...] = ()  # its partition columns' values, as its folders spell them


def saved_file(fields: dict[str, Any]) -> SourceFile:
    """A SourceFile from its saved fields (`asdict`'s, through JSON)."""
    return SourceFile(**{**fields, "partition": tuple(fields.get("partition", ()))})


RID = "ember_rid"  # a source row's id: its ordinal in the source (files in path order)
OID = "ember_oid"  # an output row's id: its position in the output as collected
SAVED = "saved"
# File formats with no row index in Spark: their rows are numbered by counting each split
# (`engines.spark.numbering`), and only Spark reads them back (`binaryFile`: a row per file).
# `hive`: a metastore table Spark reads with its Hive serde (a text-serde table, say): its
# files are the table's, its rows counted as Hive's reader gives them.
COUNTED = ("csv", "json", "text", "orc", "xml", "binary", "hive")
READER_FORMATS = {"binary": "binaryFile"}  # a source kind whose reader Spark names otherwise


# A source with no stable row order (a JDBC table, a Python data source): its rows are
# identified by the values of key columns the user names (`ember.source(df, name, key=)`).
KEYED = "keyed"


@dataclass(frozen=True)
class Source:
    """A table the plan reads. `key` identifies it across reads (a self-join reads one source)."""

    key: str
    name: str
    kind: str  # parquet | csv | json | memory | range | keyed | saved (an intermediate `ember.infer` kept)
    rows: int
    files: tuple[SourceFile, ...] = ()
    partitioning: tuple[tuple[str, str], ...] = ()  # partition columns (name, Spark type), in Spark's order
    columns: tuple[str, ...] = ()  # a file source's columns as Spark reads them (by name: files may differ); () as the files hold them
    options: tuple[tuple[str, str], ...] = ()
    row_key: tuple[str, ...] = ()  # a keyed source's key columns: its rids rank their values
    # Files this process does not read (a Spark Connect server's, elsewhere): Spark reads
    # their rows (`data` reads them), DuckDB never does, and their facts are the server's.
    remote: bool = False
    data: Any = field(default=None, compare=False, hash=False, repr=False)  # pyarrow.Table for memory
    kept: Any = field(default=None, compare=False, hash=False, repr=False)  # a loaded store's row copy (store.kept)


def spark_uri(uri: str) -> str:
    """A file URI spelled as Spark's `_metadata.file_path` spells it (`file:/x`, not `file:///x`)."""
    return "file:/" + uri[len("file:///") :] if uri.startswith("file:///") else uri


def spark_path(uri: str) -> str:
    """A file URI as the path Spark's readers take (they escape a path's characters again)."""
    parsed = urlparse(uri)
    return parsed._replace(path=unquote(parsed.path)).geturl()


def local_path(uri: str) -> Path:
    """The local path of a `file:` URI (Spark's spelling of local files)."""
    parsed = urlparse(uri)
    if parsed.scheme not in ("", "file"):
        raise ValueError(f"not a local file: {uri}")
    return Path(unquote(parsed.path))


def file_facts(uri: str) -> tuple[int, int]:
    st = os.stat(local_path(uri))
    return st.st_size, st.st_mtime_ns


def stem(uri: str) -> str:
    """A source's default name: its file or folder stem."""
    name = PurePosixPath(unquote(urlparse(uri.rstrip("/")).path)).name  # any file system's (hdfs:, s3a:, file:)
    return name.split(".", 1)[0] or name


def path_order(uri: str) -> str:
    """The key that puts a source's files in path order (their paths, not their URIs' escapes)."""
    return unquote(urlparse(uri).path)


_NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")


def partition_of(uri: str, names: tuple[str, ...]) -> tuple[str | None, ...]:
    """A file's partition values as Spark reads them off its folders: `name=value` folders
    from the innermost up, values unescaped (`%3A` is `:`), Hive's default partition null."""
    found: dict[str, str | None] = {}
    for folder in reversed(PurePosixPath(path_order(uri)).parent.parts):
        name, eq, value = folder.partition("=")
        if not eq:
            if found:
                break
            continue
        found.setdefault(name.lower(), None if value == _NULL_PARTITION else _ESCAPE.sub(lambda m: chr(int(m[1], 16)), value))
    missing = [n for n in names if n.lower() not in found]
    if missing:
        raise ValueError(f"{uri}: no folder names partition column {missing[0]!r}")
    return tuple(found[n.lower()] for n in names)
