"""`ember.capture`: run a DataFrame once with lineage flowing through it."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame

from ember.capture.annotate import annotate
from ember.capture.numbering import number_source
from ember.capture.spark_build import Builder
from ember.errors import EmberError
from ember.lineage import Lineage
from ember.plan.ir import outline
from ember.plan.jvm import Jvm
from ember.plan.sources import SourceFile, file_facts, spark_uri
from ember.plan.spark_import import import_plan
from ember.store.index import build_index

WRITTEN_FILE = "part-00000.parquet"


def capture(df: DataFrame, write_to: str | None = None, format: str = "parquet") -> Lineage:
    """Runs `df` on Spark with lineage capture built into its plan and indexes the lineage.

    Everything that can be refused (an operator ember cannot trace) is refused before
    any job runs. The output is the job's own result; traces need no further Spark job.
    With `write_to`, the job also writes its output to that (new) folder, row `i` of the
    written file being output row `i`; a later job reading the folder links to this
    lineage (`backward(..., through=[...])`).
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
        side_data = [s.toArrow() for s in sides]
    finally:
        builder.release()
    width = len(plan.output)
    user = pa.table(
        [result.column(i) for i in range(width)], names=[a.name for a in plan.output]
    )
    index = build_index(result, annotated.slots, annotated.tables, side_data)
    written = _write(user, write_to) if write_to is not None else ()
    return Lineage(user, index, sources.values(), plan=outline(plan), written=written)


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
