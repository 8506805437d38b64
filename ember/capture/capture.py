"""`ember.capture`: run a DataFrame once with lineage flowing through it."""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession

from ember.capture.annotate import annotate
from ember.capture.numbering import number_source
from ember.capture.spark_build import Builder
from ember.errors import EmberError
from ember.lineage import Lineage
from ember.plan.ir import outline
from ember.plan.jvm import Jvm
from ember.plan.sources import SourceFile, file_facts, spark_uri
from ember.plan.spark_import import import_plan
from ember.store.files import filesystem
from ember.store.index import build_index

WRITTEN_FILE = "part-00000.parquet"


def capture(
    df: DataFrame, write_to: str | None = None, format: str = "parquet", staging: str | None = None
) -> Lineage:
    """Runs `df` on Spark with lineage capture built into its plan and indexes the lineage.

    Everything that can be refused (an operator ember cannot trace) is refused before
    any job runs. The output is the job's own result; traces need no further Spark job.
    With `write_to`, the job also writes its output to that (new) folder, row `i` of the
    written file being output row `i`; a later job reading the folder links to this
    lineage (`backward(..., through=[...])`).

    Side tables (the lineage of aggregates, semi joins, subqueries, windows) are written
    by the executors into `staging` (default: a temporary folder, which suits local
    mode and one-machine clusters; give a path every executor and the driver can reach
    on a multi-machine cluster) and read back from there to build the index.
    """
    if write_to is not None:
        _check_target(write_to, format)
    jvm = Jvm(df.sparkSession)
    plan, sources = import_plan(jvm, df)
    annotated = annotate(plan)
    sources = {k: number_source(jvm, s) for k, s in sources.items()}
    builder = Builder(jvm, sources)
    main = builder.dataframe(annotated.plan)
    sides = [builder.dataframe(t.plan) for t in annotated.tables]
    try:
        result = main.toArrow()
        side_data = _side_tables(df.sparkSession, sides, staging)
    finally:
        builder.release()
    width = len(plan.output)
    user = pa.table(
        [result.column(i) for i in range(width)], names=[a.name for a in plan.output]
    )
    index = build_index(result, annotated.slots, annotated.tables, side_data)
    written = _write(user, write_to) if write_to is not None else ()
    return Lineage(user, index, sources.values(), plan=outline(plan), written=written)


def _side_tables(spark: SparkSession, sides: list[DataFrame], staging: str | None) -> list[pa.Table]:
    """Runs each side table as a job whose tasks write Parquet files into `staging`.

    Spark's output committer keeps only the files of successful task attempts, so a
    retried or speculative task leaves no duplicate or orphan lineage, and the rows do
    not pass through the driver's result channel.
    """
    if not sides:
        return []
    root = staging or tempfile.mkdtemp(prefix="ember-staging-")
    fs, base = filesystem(f"{root.rstrip('/')}/{uuid.uuid4().hex[:12]}")
    target = base if "://" in root else "file://" + base
    tables = []
    try:
        with _conf(spark, "spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS"):
            for i, side in enumerate(sides):
                names = side.columns  # may repeat a name; Parquet columns may not
                side.toDF(*[f"c{j}" for j in range(len(names))]).write.parquet(f"{target}/t{i}")
                tables.append(pq.read_table(f"{base}/t{i}", filesystem=fs).rename_columns(names))
    finally:
        if fs.get_file_info(base).type != pafs.FileType.NotFound:
            fs.delete_dir(base)
        if staging is None:
            os.rmdir(root)
    return tables


@contextmanager
def _conf(spark: SparkSession, key: str, value: str) -> Iterator[None]:
    old = spark.conf.get(key, None)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if old is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, old)


def _check_target(path: str, format: str) -> None:
    if format != "parquet":
        raise EmberError(f"capture(write_to=...) writes Parquet only, not {format!r}")
    if os.path.exists(path) and os.listdir(path):
        raise EmberError(f"capture(write_to={path!r}): the folder exists and is not empty")


def _write(table: pa.Table, folder: str) -> tuple[SourceFile, ...]:
    """Writes the output as one Parquet file and describes it as a later job will see it."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(os.path.abspath(folder), WRITTEN_FILE)
    pq.write_table(table, path)
    uri = spark_uri("file://" + path)
    size, mtime = file_facts(uri)
    return (SourceFile(uri, size, mtime, table.num_rows, 0),)
