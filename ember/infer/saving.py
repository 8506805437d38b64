"""Running a job that keeps its saved intermediates (the Spark edge of `infer.segments`).

The plan is rebuilt with each save point cached (`ir.Shared`), so the one job that
computes the user's rows also fills the caches; each save's needed columns are then read
from its cache (no recomputation) and kept on the driver as Arrow, numbered by position.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ember.capture.spark_build import Builder
from ember.infer.segments import Save, Segment, saved_columns, wrap
from ember.infer.spark import RID
from ember.plan import ir
from ember.plan.jvm import Jvm
from ember.plan.sources import SAVED, Source


def run_saving(jvm: Jvm, plan: ir.Node, segment: Segment, sources: dict[str, Source]) -> tuple[pa.Table, dict[str, Source]] | None:
    """The job's output rows and, by stand-in key, each saved intermediate as a source whose
    `data` holds its rows (`__ember_rid` = position); None when a save point is not a
    subplan of `plan` (the job then runs as written)."""
    pieces = _pieces(segment)
    saves = {id(save.at): (n, save.node) for n, (_, save) in enumerate(pieces, start=1)}
    wrapped = wrap(plan, saves)
    if sum(isinstance(n, ir.Shared) for n in ir.walk(wrapped)) != len(saves):
        return None
    builder = Builder(jvm, sources)
    try:
        output = builder.dataframe(wrapped).toArrow()
        saved = {}
        for n, (above, save) in enumerate(pieces, start=1):
            columns = saved_columns(above, save)
            positions = [save.node.output.index(a) for a in columns]
            cached = builder.shared[n][0]
            renamed = cached.toDF(*[f"c{i}" for i in range(len(cached.columns))])
            rows = renamed.select(*[f"c{i}" for i in positions]).toArrow()
            data = pa.table(rows.columns, names=[a.name for a in columns])
            data = data.append_column(RID, pa.array(np.arange(data.num_rows, dtype=np.int64)))
            stand_in = save.scan.source
            saved[stand_in.key] = Source(stand_in.key, stand_in.name, SAVED, data.num_rows, data=data)
    finally:
        builder.release()
    return output, saved


def _pieces(segment: Segment) -> list[tuple[Segment, Save]]:
    """Every save with the piece that reads it, outer pieces first."""
    out: list[tuple[Segment, Save]] = []
    for save in segment.saves:
        out.append((segment, save))
        out += _pieces(save.below)
    return out
