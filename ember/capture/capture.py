"""`ember.capture`: run a DataFrame once with lineage flowing through it."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import DataFrame

from ember.capture.annotate import annotate
from ember.capture.numbering import number_source
from ember.capture.spark_build import Builder
from ember.lineage import Lineage
from ember.plan.jvm import Jvm
from ember.plan.spark_import import import_plan
from ember.store.index import build_index


def capture(df: DataFrame) -> Lineage:
    """Runs `df` on Spark with lineage capture built into its plan and indexes the lineage.

    Everything that can be refused (an operator ember cannot trace) is refused before
    any job runs. The output is the job's own result; traces need no further Spark job.
    """
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
    return Lineage(user, index, sources.values())
