"""Text sources are numbered by counting each split's rows; the counts hold only while
Spark splits the files the same way, so a changed layout is counted again, and a job that
still meets one fails rather than give rows another row's rid."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.orc as orc
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import ember
from ember.engines.spark.jvm import Jvm
from ember.engines.spark.numbering import number_source
from ember.engines.spark.plan_import import import_plan
from ember.plan.sources import RID

SPLITS = ("spark.sql.files.maxPartitionBytes", "spark.sql.files.openCostInBytes")


@pytest.fixture
def layout(spark: SparkSession) -> Iterator[None]:
    """Files cut into splits of 64 bytes (a few lines), restored afterwards."""
    before = {key: spark.conf.get(key) for key in SPLITS}
    spark.conf.set(SPLITS[0], "64")
    spark.conf.set(SPLITS[1], "1")
    yield
    for key, value in before.items():
        spark.conf.set(key, value)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """Two CSV files whose row `k` is the rid: rows 0-39 and 40-79."""
    for name, low in (("a.csv", 0), ("b.csv", 40)):
        (tmp_path / name).write_text("".join(f"{i},{i % 3}\n" for i in range(low, low + 40)))
    return tmp_path


def test_rows_are_numbered_again_under_a_new_layout(spark: SparkSession, layout: None, folder: Path) -> None:
    df = spark.read.schema("k int, v int").csv(str(folder))
    jvm = Jvm(spark)
    (source,) = import_plan(jvm, df)[1].values()
    numbering = number_source(jvm, source).data
    assert len(numbering.splits) > 2
    spark.conf.set(SPLITS[0], "128")  # other splits, packed into other tasks
    rows = numbering.numbered().collect()
    assert sorted(r[RID] for r in rows) == list(range(80))
    assert all(r.k == r[RID] for r in rows)
    scanned = numbering.reading.frame()
    ided, rid = numbering.ided(scanned)  # the counts of the old layout, in a job of the new one
    with pytest.raises(Exception, match="source's rows under other Spark settings for splitting files"):
        ided.select(rid).collect()


@pytest.mark.parametrize("strategy", ["inject", "defer"])
def test_traced_rows_fetched_after_the_layout_changed(
    spark: SparkSession, layout: None, folder: Path, strategy: str
) -> None:
    df = spark.read.schema("k int, v int").csv(str(folder)).groupBy("v").count()
    lin = ember.capture(df, strategy=strategy)
    lin.backward(oids=[0])  # (Defer's capture is done)
    spark.conf.set(SPLITS[0], "128")  # the rows are read again under other splits
    for oid, row in enumerate(lin.output().to_pylist()):
        trace = lin.backward(oids=[oid])
        want = [k for k in range(80) if k % 3 == row["v"]]
        assert trace.ids(folder.name).tolist() == want
        assert trace.rows(folder.name).column("k").to_pylist() == want


@pytest.mark.parametrize("fmt", ["text", "wholetext", "orc", "xml"])
def test_text_orc_and_xml_files_are_numbered_in_file_order(
    spark: SparkSession, layout: None, tmp_path: Path, fmt: str
) -> None:
    """Log lines read with `spark.read.text` (a line a row, or a file a row), ORC files of
    several stripes and XML files, cut into splits of a few lines or stripes: a row's rid is
    its place in the files taken in path order, written here without Spark."""
    src = tmp_path / "logs"
    src.mkdir()
    lines = [f"{'error' if i % 4 == 0 else 'info'} {i}" for i in range(90)]
    for n, chunk in enumerate((lines[:50], lines[50:])):
        if fmt == "orc":
            table = pa.table({"value": chunk, "n": list(range(len(chunk)))})
            orc.write_table(table, src / f"part-{n}.orc", stripe_size=256, batch_size=8)
        elif fmt == "xml":
            rows_xml = "".join(f"<row><value>{line}</value><n>{i}</n></row>\n" for i, line in enumerate(chunk))
            (src / f"part-{n}.xml").write_text(f"<rows>\n{rows_xml}</rows>\n")
        else:
            (src / f"part-{n}.txt").write_text("".join(f"{line}\n" for line in chunk))
    if fmt in ("orc", "xml"):
        reader = spark.read.schema("value string, n int")
        df, rows = reader.orc(str(src)) if fmt == "orc" else reader.option("rowTag", "row").xml(str(src)), lines
    else:
        df = spark.read.text(str(src), wholetext=fmt == "wholetext")
        rows = lines if fmt == "text" else ["".join(f"{x}\n" for x in c) for c in (lines[:50], lines[50:])]
    job = df.filter(F.col("value").startswith("error")).groupBy(F.lit(1)).count()
    lin = ember.capture(job)
    want = [rid for rid, value in enumerate(rows) if value.startswith("error")]
    trace = lin.backward(oids=[0])
    assert trace.ids("logs").tolist() == want
    assert ember.infer(job).backward(oids=[0]).ids("logs").tolist() == want  # lazily, too
    assert trace.rows("logs").column("value").to_pylist() == [rows[rid] for rid in want]
    lin.save(str(tmp_path / "saved"))
    loaded = ember.load(str(tmp_path / "saved"), spark).backward(oids=[0])
    assert loaded.rows("logs").column("value").to_pylist() == [rows[rid] for rid in want]


@pytest.mark.jvm  # a classic session's or a Connect server's, by parameter
@pytest.mark.parametrize("session", ["spark", "remote"])
def test_binary_files_are_numbered_a_file_a_row(request: pytest.FixtureRequest, tmp_path: Path, session: str) -> None:
    """`binaryFile` reads a row per file, and Spark reads the largest files first: a row's
    rid is still its file's place in path order (over Spark Connect too, read by a reader
    the client makes for the server)."""
    spark: SparkSession = request.getfixturevalue(session)
    src = tmp_path / "blobs"
    src.mkdir()
    sizes = [(7 * i) % 11 * 10 + 5 for i in range(12)]
    for i, size in enumerate(sizes):
        (src / f"f{i:02}.bin").write_bytes(bytes([i]) * size)
    (src / "notes.txt").write_text("skipped by the glob")
    df = spark.read.format("binaryFile").option("pathGlobFilter", "*.bin").load(str(src))
    job = df.filter("length > 40").selectExpr("length % 20 AS r").groupBy("r").count()
    lin, inferred = ember.capture(job), ember.infer(job)
    lin.save(str(tmp_path / "saved"))
    loaded = ember.load(str(tmp_path / "saved"), spark)
    for oid, row in enumerate(lin.output().to_pylist()):
        want = [i for i, size in enumerate(sizes) if size > 40 and size % 20 == row["r"]]
        trace = lin.backward(oids=[oid])
        assert trace.ids("blobs").tolist() == want
        assert inferred.backward(oids=[oid]).ids("blobs").tolist() == want
        for rows in (trace.rows("blobs"), loaded.backward(oids=[oid]).rows("blobs")):
            assert rows.column("content").to_pylist() == [bytes([i]) * sizes[i] for i in want]
        assert lin.forward("blobs", ids=want[:1]).ids().tolist() == [oid]


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
@pytest.mark.parametrize("strategy", ["inject", "defer"])
def test_a_job_that_reads_metadata_fields_is_numbered_all_the_same(
    spark: SparkSession, layout: None, folder: Path, fmt: str, strategy: str
) -> None:
    """A job reading some `_metadata` fields has Spark prune that column to them, and rids
    need others (the file path, the split's start, the row index): they are added after the
    job's own, which keep their places. Rows keep the source's columns only."""
    if fmt == "parquet":
        for name in ("a", "b"):
            rows = duckdb.sql(f"SELECT column0::INT k, column1::INT v FROM read_csv('{folder / name}.csv', header = false)")
            pq.write_table(rows.to_arrow_table(), folder / f"{name}.parquet")
            (folder / f"{name}.csv").unlink()
    df = spark.read.schema("k int, v int").format(fmt).load(str(folder))
    job = df.select("k", "_metadata.file_name", "_metadata.file_size").filter("v = 1")
    workload = ember.Workload(where={folder.name: "k >= 20"}) if fmt == "parquet" else None  # rids under a predicate
    lin = ember.capture(job, strategy=strategy, workload=workload)
    out = lin.output().to_pylist()
    assert sorted(r["k"] for r in out) == [k for k in range(80) if k % 3 == 1]
    assert all(r["file_name"] == ("a" if r["k"] < 40 else "b") + f".{fmt}" for r in out)
    for oid, r in enumerate(out):  # the CSV's `k` is its rid
        want = [r["k"]] if workload is None or r["k"] >= 20 else []
        assert lin.backward(oids=[oid]).ids(folder.name).tolist() == want
    rows = lin.backward(oids=list(range(len(out)))).rows(folder.name)
    assert rows.column_names == ["k", "v", "ember_rid"]


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_a_table_read_in_some_partitions_numbers_all_of_its_files(
    spark: SparkSession, layout: None, tmp_path: Path, fmt: str
) -> None:
    """Spark lists only the partitions a job reads; the rest are counted all the same, so
    a row's rid does not depend on which partitions a job reads, and rows keep `p`."""
    table, root = f"parted_{fmt}_{uuid.uuid4().hex[:8]}", tmp_path / "table"
    rows = spark.createDataFrame([(i * 7 % 60, i % 5, i % 3) for i in range(60)], "k int, v int, p int")
    writer = rows.repartition(2).write.format(fmt).partitionBy("p").option("header", "true")
    writer.option("path", str(root)).saveAsTable(table)
    oracle = [
        {"k": r["k"], "v": r["v"], "p": int(path.parent.name.removeprefix("p=")), RID: rid}
        for rid, (path, r) in enumerate(
            (path, r)
            for path in sorted(root.glob(f"*/*.{fmt}"))
            for r in duckdb.sql(f"SELECT k::INT k, v::INT v FROM read_{fmt}('{path}', hive_partitioning = false)").to_arrow_table().to_pylist()
        )
    ]
    try:
        for where in ("v = 1", "p = 2 AND v = 1"):
            lin = ember.capture(spark.sql(f"SELECT k FROM {table} WHERE {where}"))
            traced = lin.backward(oids=list(range(lin.output().num_rows)))
            want = [r for r in oracle if r["v"] == 1 and (r["p"] == 2 or where == "v = 1")]
            assert traced.ids(table).tolist() == [r[RID] for r in want], where
            assert traced.rows(table).select(["k", "v", "p", RID]).to_pylist() == want, where
        lin.save(str(tmp_path / "saved"))
        loaded = ember.load(str(tmp_path / "saved"), spark).backward(oids=list(range(len(want))))
        assert loaded.rows(table).select(["k", "v", "p", RID]).to_pylist() == want
    finally:
        spark.sql(f"DROP TABLE {table}")
