"""Sources: what a plan reads, how its rows are numbered, and how to tell it changed."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
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


SAVED = "saved"


@dataclass(frozen=True)
class Source:
    """A table the plan reads. `key` identifies it across reads (a self-join reads one source)."""

    key: str
    name: str
    kind: str  # parquet | csv | json | memory | range | saved (an intermediate `ember.infer` kept)
    rows: int
    files: tuple[SourceFile, ...] = ()
    options: tuple[tuple[str, str], ...] = ()
    data: Any = field(default=None, compare=False, hash=False, repr=False)  # pyarrow.Table for memory
    kept: Any = field(default=None, compare=False, hash=False, repr=False)  # a loaded store's row copy (store.kept)


def spark_uri(uri: str) -> str:
    """A file URI spelled as Spark's `_metadata.file_path` spells it (`file:/x`, not `file:///x`)."""
    return "file:/" + uri[len("file:///") :] if uri.startswith("file:///") else uri


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
    name = local_path(uri.rstrip("/")).name
    return name.split(".", 1)[0] or name
