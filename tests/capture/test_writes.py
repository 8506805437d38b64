"""`capture(write=...)`: every write form runs once, and each written row is linked to its lineage.

The oracle reads the written files back with pyarrow and pandas (not Spark, not ember)
and checks, for every row of every file ember says it wrote: that ember's output row at
`file.offset + position` is that row, that the row's partition folder is its raw row's,
and that its backward trace is exactly the raw rows that make it (found by the raw
table's `id`, which is also its row position, so its `ember_rid`).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pandas as pd
import pyarrow as pa
import pyarrow.orc as orc
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import ember
from ember.engines.spark.writes import files
from ember.plan.sources import local_path

DAYS = ["2024-01-01", "2024-01-02", "2024-01-03", None]
TAGS = ["a b", "c/d", "e%f"]  # spelled in folder names with escapes
N = 40
RAW = pd.DataFrame(
    {
        "id": range(N),
        "dt": [DAYS[i % 4] for i in range(N)],
        "s": [TAGS[i % 3] for i in range(N)],
        "k": [i % 5 for i in range(N)],
        "v": [float(i * 7 % 11) for i in range(N)],
    }
)


@pytest.fixture(scope="module")
def raw(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> DataFrame:
    return spark.read.parquet(str(raw_file(tmp_path_factory.mktemp("raw"))))


@pytest.fixture
def out(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "out"
    shutil.rmtree(tmp_path / "out", ignore_errors=True)


def read_back(path: Path, fmt: str, columns: list[str]) -> pd.DataFrame:
    """A written file's rows, read without Spark."""
    if fmt == "parquet":
        return pq.read_table(path).to_pandas()
    if fmt == "orc":
        return orc.read_table(path).to_pandas()
    if fmt == "csv":
        return pd.read_csv(path, header=None, names=columns, keep_default_na=False)
    if fmt == "json":
        return pd.read_json(path, lines=True) if path.stat().st_size else pd.DataFrame(columns=columns)
    lines = path.read_text().splitlines()
    return pd.DataFrame({"id": [int(line.split("|")[0]) for line in lines]})


def folder_values(root: Path, path: Path) -> dict[str, str | None]:
    values: dict[str, str | None] = {}
    for part in path.parent.relative_to(root).parts:
        name, _, value = part.partition("=")
        values[name] = None if value == "__HIVE_DEFAULT_PARTITION__" else unquote(value)
    return values


def check(lin: ember.Lineage, root: Path, fmt: str, raw_ids: Callable[[dict[str, Any]], list[int]]) -> int:
    """Every row of every file `lin` wrote is its output row at the file's offset, sits in
    its raw rows' partition folder, and traces back to `raw_ids(row)`; returns the rows."""
    output = lin.output().to_pandas()
    seen = 0
    for f in lin.written:
        path = local_path(f.uri)
        assert path.is_file() and str(path).startswith(str(root))
        rows = read_back(path, fmt, [c for c in output.columns if c != "ember_oid" and c not in folder_values(root, path)])
        assert len(rows) == f.rows
        where = folder_values(root, path)
        for pos, row in enumerate(rows.to_dict("records")):
            oid = f.offset + pos
            mine = output.iloc[oid].to_dict()
            assert str(mine["id"]) == str(row["id"]), (path, pos)
            full = {**row, **where}
            for name, value in where.items():
                assert (None if pd.isna(mine[name]) else str(mine[name])) == value, (path, name)
            assert lin.backward(oids=[oid]).ids("raw").tolist() == raw_ids(full), (path, pos)
        seen += f.rows
    return seen


def by_id(row: dict[str, Any]) -> list[int]:
    return [int(row["id"])]


def job(raw: DataFrame) -> DataFrame:
    """SQL text only: the same job builds over Spark Connect (tests/capture/test_connect.py)."""
    return raw.where("v > 1").selectExpr("id", "dt", "s", "k", "v * 2 AS v2").repartition(3)


def raw_file(folder: Path) -> Path:
    pq.write_table(pa.Table.from_pandas(RAW, preserve_index=False), folder / "raw.parquet")
    return folder / "raw.parquet"


@pytest.mark.parametrize(
    ("fmt", "partition_by"),
    [("parquet", ["dt"]), ("csv", ["dt", "s"]), ("json", []), ("orc", ["s"])],
)
def test_each_format_and_partitioning(raw: DataFrame, out: Path, fmt: str, partition_by: list[str]) -> None:
    lin = ember.capture(job(raw), write=lambda w: w.partitionBy(*partition_by).format(fmt).save(str(out)))
    assert lin.mode == "inject"
    assert {local_path(f.uri) for f in lin.written} == files(out), "every file the job wrote, and no other"
    assert check(lin, out, fmt, by_id) == lin.output().num_rows == int((RAW.v > 1).sum())


def test_text_files_and_max_records_per_file(raw: DataFrame, out: Path) -> None:
    df = job(raw).select(F.concat_ws("|", "id", "k").alias("value"), "dt", F.col("id"))
    lin = ember.capture(
        df.select("value", "dt"), write=lambda w: w.option("maxRecordsPerFile", 3).partitionBy("dt").text(str(out))
    )
    assert max(f.rows for f in lin.written) == 3 and len(lin.written) > 6
    output = lin.output().to_pandas()

    def from_value(row: dict[str, Any]) -> list[int]:
        return [int(row["id"])]

    output["id"] = output["value"].str.split("|").str[0]
    for f in lin.written:
        ids = [int(line.split("|")[0]) for line in local_path(f.uri).read_text().splitlines()]
        assert output["id"].iloc[f.offset : f.offset + f.rows].astype(int).tolist() == ids
        assert [lin.backward(oids=[f.offset + i]).ids("raw").tolist() for i in range(f.rows)] == [[i] for i in ids]


def test_an_aggregate_written_by_partition(raw: DataFrame, out: Path) -> None:
    df = raw.where("v > 1").groupBy("dt", "k").agg(F.sum("v").alias("total"), F.min("id").alias("id"))
    lin = ember.capture(df, write=lambda w: w.mode("overwrite").partitionBy("dt").parquet(str(out)))

    def members(row: dict[str, Any]) -> list[int]:
        day = RAW.dt.isna() if row["dt"] is None else RAW.dt == row["dt"]
        return RAW[day & (RAW.k == row["k"]) & (RAW.v > 1)].id.tolist()

    assert check(lin, out, "parquet", members) == lin.output().num_rows


def test_overwrite_replaces_and_append_adds(raw: DataFrame, out: Path) -> None:
    first = ember.capture(job(raw), write=lambda w: w.partitionBy("dt").parquet(str(out)))
    kept = files(out)
    again = ember.capture(job(raw).where("k = 1"), write=lambda w: w.mode("append").partitionBy("dt").parquet(str(out)))
    assert files(out) == kept | {local_path(f.uri) for f in again.written} and not kept & {local_path(f.uri) for f in again.written}
    assert check(again, out, "parquet", by_id) == int(((RAW.v > 1) & (RAW.k == 1)).sum())
    assert check(first, out, "parquet", by_id) == int((RAW.v > 1).sum()), "the first batch's files are as written"
    over = ember.capture(job(raw).where("k = 2"), write=lambda w: w.mode("overwrite").partitionBy("dt").parquet(str(out)))
    assert files(out) == {local_path(f.uri) for f in over.written}
    assert check(over, out, "parquet", by_id) == int(((RAW.v > 1) & (RAW.k == 2)).sum())


def test_ignore_and_error_if_exists_over_an_existing_folder(raw: DataFrame, out: Path) -> None:
    ember.capture(job(raw), write=lambda w: w.parquet(str(out)))
    before = {p: p.stat().st_mtime_ns for p in files(out)}
    ignored = ember.capture(job(raw), write=lambda w: w.mode("ignore").parquet(str(out)))
    assert ignored.written == () and ignored.output().num_rows == int((RAW.v > 1).sum())
    assert {p: p.stat().st_mtime_ns for p in files(out)} == before
    with pytest.raises(Exception, match=r"already exists|PATH_ALREADY_EXISTS"):
        ember.capture(job(raw), write=lambda w: w.mode("errorifexists").parquet(str(out)))
    assert {p: p.stat().st_mtime_ns for p in files(out)} == before


def test_tables_bucketed_then_inserted_into(spark: SparkSession, raw: DataFrame, out: Path) -> None:
    table = "ember_writes_bucketed"
    spark.sql(f"DROP TABLE IF EXISTS {table}")
    try:
        lin = ember.capture(
            job(raw), write=lambda w: w.bucketBy(3, "k").sortBy("id").option("path", str(out)).saveAsTable(table)
        )
        assert {local_path(f.uri) for f in lin.written} == files(out)
        assert check(lin, out, "parquet", by_id) == int((RAW.v > 1).sum())
        for f in lin.written:  # each bucket's file holds its rows sorted by id, as the table says
            ids = pq.read_table(local_path(f.uri)).column("id").to_pylist()
            assert ids == sorted(ids)
        kept = files(out)
        reordered = job(raw).where("k = 3").select("id", "dt", "s", "k", "v2")  # insertInto goes by position
        more = ember.capture(reordered, write=lambda w: w.insertInto(table))
        assert files(out) == kept | {local_path(f.uri) for f in more.written}
        assert check(more, out, "parquet", by_id) == int(((RAW.v > 1) & (RAW.k == 3)).sum())
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {table}")


def test_dynamic_partition_overwrite_replaces_only_its_partitions(spark: SparkSession, raw: DataFrame, out: Path) -> None:
    ember.capture(job(raw), write=lambda w: w.partitionBy("dt").parquet(str(out)))
    others = {p for p in files(out) if "2024-01-02" not in str(p)}
    fixed = job(raw).where("dt = '2024-01-02' AND k < 3")
    lin = ember.capture(
        fixed,
        write=lambda w: w.mode("overwrite").option("partitionOverwriteMode", "dynamic").partitionBy("dt").parquet(str(out)),
    )
    assert files(out) == others | {local_path(f.uri) for f in lin.written}
    assert all(local_path(f.uri).parent.name == "dt=2024-01-02" for f in lin.written)
    assert check(lin, out, "parquet", by_id) == int(((RAW.v > 1) & (RAW.dt == "2024-01-02") & (RAW.k < 3)).sum())


def test_a_write_runs_the_job_once_and_refuses_defer(raw: DataFrame, out: Path, spark: SparkSession) -> None:
    with pytest.raises(ember.EmberError, match="defer would run it twice"):
        ember.capture(job(raw), strategy="defer", write=lambda w: w.parquet(str(out)))
    assert not out.exists()
    with pytest.raises(ember.EmberError, match="must end with a write action"):
        ember.capture(job(raw), write=lambda w: w.mode("overwrite"))
    with pytest.raises(TypeError, match="not both"):
        ember.capture(job(raw), write=lambda w: w.parquet(str(out)), write_to=str(out))
    counted = spark.sparkContext.accumulator(0)

    def count(rows: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for batch in rows:
            counted.add(len(batch))
            yield batch

    once = job(raw).mapInPandas(count, job(raw).schema)
    lin = ember.capture(once, write=lambda w: w.parquet(str(out)))
    assert counted.value == lin.output().num_rows, "the job ran once: the write and the lineage are one run"
    assert os.listdir(out)
