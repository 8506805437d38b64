"""Writes TPC-DS at a scale factor: one Parquet file per table and the 99 queries.

    .venv/tpcds/bin/python scripts/tpcds_generate.py 0.01 data/tpcds/sf0.01

Runs in its own small virtualenv (`make tpcds` makes it), not ember's: the generator is
DuckDB's `tpcds` extension (dsdgen, and the queries with their qualification
parameters, in DuckDB's dialect), which PyPI ships only for DuckDB 1.5.5, while ember
uses a newer DuckDB. Nothing here imports ember; `devkit.tpcds` reads what it writes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import duckdb
from duckdb_extensions import import_extension


def main(scale: float, out: Path) -> None:
    con = duckdb.connect()
    import_extension("tpcds", con=con)
    con.sql("LOAD tpcds")
    con.sql(f"CALL dsdgen(sf={scale})")
    partial = out.with_name(out.name + ".partial")
    (partial / "queries").mkdir(parents=True, exist_ok=True)
    for (table,) in con.sql("SHOW TABLES").fetchall():
        con.sql(f"COPY {table} TO '{partial / table}.parquet' (FORMAT parquet)")
    for n, text in con.sql("SELECT query_nr, query FROM tpcds_queries()").fetchall():
        (partial / "queries" / f"q{n:02d}.sql").write_text(text)
    partial.rename(out)  # a folder that exists is whole


if __name__ == "__main__":
    main(float(sys.argv[1]), Path(sys.argv[2]))
