"""One in-process DuckDB database for the package: opening a database costs ~25 ms, a cursor
on an open one well under 1 ms, and traces open one per question."""

from __future__ import annotations

import threading

import duckdb

_lock = threading.Lock()
_db: list[duckdb.DuckDBPyConnection] = []


def connect() -> duckdb.DuckDBPyConnection:
    """A fresh cursor: its registrations and temporary views are its own; close it after use."""
    with _lock:
        if not _db:
            _db.append(duckdb.connect())
        return _db[0].cursor()
