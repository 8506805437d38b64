"""One DuckDB connection over the TPC-H files for the oracle."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from tests.oracle.tpch_oracle import connect


@pytest.fixture(scope="session")
def duck(tpch: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    con = connect(tpch)
    yield con
    con.close()
