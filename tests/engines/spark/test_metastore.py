"""Metastore tables in a Hive-enabled session (Spark's built-in metastore, embedded Derby in
a temp folder): managed and external tables, Parquet, ORC and Hive text tables, a
partitioned one read whole and pruned, `spark.table` and SQL, a join of two tables. Every
output row's backward lineage and every source row's forward lineage equal an oracle's:
DuckDB's SQL over each table's own files, read with DuckDB (Parquet), pyarrow (ORC) and
pandas (Hive text), each row's rid its ordinal in the table's files in path order.

The jobs run in a process of their own (`metastore_job.py`): a Hive session cannot share
the tests' JVM. They run twice: on a classic Hive session, and from a Spark Connect client
of a Hive-enabled server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.orc as orc
import pytest

from tests.conftest import ROOT
from tests.engines.spark.metastore_job import CASES, PARTS, WRITES

pytestmark = pytest.mark.jvm

ORDERS = (("oid", pa.int32()), ("cid", pa.int32()), ("amt", pa.float64()), ("note", pa.string()))
TABLES: dict[str, tuple[str, str, tuple[tuple[str, pa.DataType], ...]]] = {
    # name → (folder under the temp folder, how its files are read, its data columns)
    "orders_m": ("hive/warehouse/orders_m", "parquet", (*ORDERS, ("dt", pa.string()))),
    "orders_x": ("external", "parquet", (*ORDERS, ("dt", pa.string()))),
    "orders_t": ("hive/warehouse/orders_t", "text|", ORDERS),  # partitioned by dt
    "customers_t": ("hive/warehouse/customers_t", "text\x01", (("id", pa.int32()), ("name", pa.string()), ("region", pa.string()))),
    "orders_o": ("hive/warehouse/orders_o", "orc", (*ORDERS, ("dt", pa.string()))),
    "orders_s": ("hive/warehouse/orders_s", "parquet", (*ORDERS, ("dt", pa.string()))),
}

# Each case's job in DuckDB's SQL, with each output row's rids per source as lists
ORACLE = {
    "managed": "SELECT oid, amt, [rid] AS orders_m FROM orders_m WHERE amt > 6 ORDER BY oid",
    "external": "SELECT oid, note, [rid] AS orders_x FROM orders_x WHERE note IS NOT NULL ORDER BY oid",
    "partitioned": (
        "SELECT dt, count(*) AS n, sum(amt) AS total, list(rid) AS orders_t FROM orders_t GROUP BY dt ORDER BY dt NULLS FIRST"
    ),
    "pruned": "SELECT oid, note, dt, [rid] AS orders_t FROM orders_t WHERE dt = 'a:b' ORDER BY oid",
    "orc": "SELECT cid, max(amt) AS top, list(rid) AS orders_o FROM orders_o GROUP BY cid ORDER BY cid",
    "serde": "SELECT oid, cid, [rid] AS orders_s FROM orders_s WHERE oid % 4 = 1 ORDER BY oid",
    "self-join": (
        "SELECT a.oid, b.oid AS other, [a.rid, b.rid] AS orders_t FROM orders_t a JOIN orders_t b ON a.cid = b.cid "
        "WHERE a.dt = 'a:b' AND b.oid < 6 ORDER BY a.oid, b.oid"
    ),
    "join": (
        "SELECT c.region, count(*) AS n, sum(o.amt) AS total, list(o.rid) AS orders_t, list(c.rid) AS customers_t "
        "FROM orders_t o JOIN customers_t c ON o.cid = c.id WHERE o.amt > 3 GROUP BY c.region ORDER BY c.region"
    ),
}


@pytest.fixture(scope="module", params=["classic", "connect"])
def ran(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, Any]]]:
    """The cases' answers from a classic Hive session, and from a Connect client of a
    Hive-enabled server (the same jobs, the same oracles)."""
    folder = tmp_path_factory.mktemp("metastore")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "tests.engines.spark.metastore_job", str(folder), request.param],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    yield folder, json.loads((folder / "answers.json").read_text())


def files(folder: Path) -> list[Path]:
    """A table's files as Hive's reader takes them (hidden `_` and `.` files skipped), in path order."""
    return sorted(p for p in folder.rglob("*") if p.is_file() and not any(part.startswith(("_", ".")) for part in p.relative_to(folder).parts))


def read_file(path: Path, how: str, columns: tuple[tuple[str, pa.DataType], ...]) -> pa.Table:
    """One file's rows in file order, with the table's column names and types."""
    names = [n for n, _ in columns]
    if how == "parquet":
        table = duckdb.sql(f"SELECT * EXCLUDE (file_row_number) FROM read_parquet('{path}', file_row_number = true) ORDER BY file_row_number").to_arrow_table()
    elif how == "orc":
        table = orc.read_table(str(path))
    else:  # Hive text: one row a line, fields split at the delimiter, \N for null
        frame = pd.read_csv(path, sep=how[4:], header=None, names=names, na_values=[r"\N"], keep_default_na=False, dtype=object)
        table = pa.Table.from_pandas(frame, preserve_index=False)
    table = table.rename_columns(names)
    return table.cast(pa.schema([pa.field(n, t) for n, t in columns]))


def read_table(root: Path, name: str) -> pa.Table:
    """A table's rows with `rid`: the files in path order, each file's rows in its order; a
    partitioned table's partition value from its folder (`dt=...`, unescaped)."""
    folder, how, columns = TABLES[name]
    parts = []
    for path in files(root / folder):
        table = read_file(path, how, columns)
        if path.parent.name.startswith("dt="):
            table = table.append_column("dt", pa.array([unquote(path.parent.name[3:])] * table.num_rows, pa.string()))
        parts.append(table)
    whole = pa.concat_tables(parts)
    return whole.append_column("rid", pa.array(range(whole.num_rows), pa.int64()))


@pytest.fixture(scope="module")
def oracle(ran: tuple[Path, dict[str, Any]]) -> Iterator[tuple[duckdb.DuckDBPyConnection, dict[str, pa.Table]]]:
    con = duckdb.connect()
    tables = {name: read_table(ran[0], name) for name in TABLES}
    for name, table in tables.items():
        con.register(name, table)
    yield con, tables
    con.close()


@pytest.mark.parametrize("case", list(CASES))
def test_every_row_traces_as_the_oracle_over_the_tables_files(
    ran: tuple[Path, dict[str, Any]], oracle: tuple[duckdb.DuckDBPyConnection, dict[str, pa.Table]], case: str
) -> None:
    con, tables = oracle
    got = ran[1][case]
    want = con.sql(ORACLE[case]).to_arrow_table().to_pylist()
    sources = [s for s in TABLES if s in want[0]]
    assert got["output"] == [{k: v for k, v in row.items() if k not in sources} for row in want]
    backward = [{s: sorted(set(row[s])) for s in sources} for row in want]
    assert got["backward"] == backward  # sources are named by their tables
    for s in sources:
        reached: dict[int, list[int]] = {rid: [] for rid in range(tables[s].num_rows)}
        for oid, lineage in enumerate(backward):
            for rid in lineage[s]:
                reached[rid].append(oid)
        assert got["forward"][s] == {str(rid): oids for rid, oids in reached.items()}, s
        rids = sorted({rid for lineage in backward for rid in lineage[s]})
        rows = tables[s].take(rids).rename_columns([*tables[s].column_names[:-1], "ember_rid"]).to_pylist()
        assert got["rows"][s] == rows, s


def test_a_saved_lineage_reads_a_hive_tables_rows_again_through_the_metastore(
    ran: tuple[Path, dict[str, Any]], oracle: tuple[duckdb.DuckDBPyConnection, dict[str, pa.Table]]
) -> None:
    """Output rows 0 and 1 are the groups of the first two days."""
    table = oracle[1]["orders_t"]
    want = [{**{k: v for k, v in r.items() if k != "rid"}, "ember_rid": r["rid"]} for r in table.to_pylist() if r["dt"] in PARTS[:2]]
    assert ran[1]["loaded"]["orders_t"] == want


def test_a_table_whose_folder_holds_a_subfolder_is_refused_before_it_runs(ran: tuple[Path, dict[str, Any]]) -> None:
    refused = ran[1]["refused"]
    assert refused is not None, "ember captured a Hive table with files in a subfolder"
    assert "nested_t" in refused and "subfolder" in refused


@pytest.mark.parametrize("case", list(WRITES))
def test_a_write_into_a_table_links_each_written_row(
    ran: tuple[Path, dict[str, Any]], oracle: tuple[duckdb.DuckDBPyConnection, dict[str, pa.Table]], case: str
) -> None:
    """`capture(write=...)` with `saveAsTable` (Parquet) and `insertInto` (a partitioned Hive
    text table): every file of the table is one it wrote, and each file's row `i` traces
    back to the `orders_m` row with that row's `oid`."""
    folder, got = ran[0], ran[1][case]
    table = "written_p" if case == "saveAsTable" else "written_t"
    assert sorted(f for f, _, _ in got["files"]) == [str(p.relative_to(folder)) for p in files(folder / "hive/warehouse" / table)]
    rid = {row["oid"]: row["rid"] for row in oracle[1]["orders_m"].to_pylist()}
    seen = 0
    for path, offset, rows in got["files"]:
        written = read_file(folder / path, "parquet" if case == "saveAsTable" else "text|", ORDERS[: 3 if case == "saveAsTable" else 4])
        assert written.num_rows == rows
        for pos, oid in enumerate(written.column("oid").to_pylist()):
            assert got["backward"][offset + pos] == [rid[oid]], (path, pos)
        seen += rows
    assert seen == len(got["backward"])


def test_a_job_over_a_written_hive_table_traces_into_the_writer(
    ran: tuple[Path, dict[str, Any]], oracle: tuple[duckdb.DuckDBPyConnection, dict[str, pa.Table]]
) -> None:
    want = sorted(row["rid"] for row in oracle[1]["orders_m"].to_pylist() if row["oid"] % 3 == 0)
    assert ran[1]["downstream"] == want
