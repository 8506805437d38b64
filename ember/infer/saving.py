"""Running a job that keeps its saved intermediates (the Spark edge of `infer.segments`).

The plan is rebuilt with each save point cached (`ir.Shared`), so the one job that
computes the user's rows also fills the caches; each save's needed columns are then read
from its cache (no recomputation) and kept on the driver as Arrow, numbered by position.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ember.engines.spark import engine as engines
from ember.infer.segments import Save, Segment, saved_columns, wrap
from ember.infer.spark import RID
from ember.plan import ir
from ember.plan.sources import SAVED, Source


def run_saving(engine: engines.Engine, plan: ir.Node, segment: Segment, sources: dict[str, Source]) -> tuple[pa.Table, dict[str, Source]] | None:
    """The job's output rows and, by stand-in key, each saved intermediate as a source whose
    `data` holds its rows (`__ember_rid` = position); None when a save point is not a
    subplan of `plan` (the job then runs as written)."""
    pieces = _pieces(segment)
    keys: dict[ir.Node, int] = {}  # equal subplans (a subquery planned twice) are saved once
    for _, save in pieces:
        keys.setdefault(save.node, len(keys) + 1)
    saves = {id(save.at): (keys[save.node], save.node) for _, save in pieces}
    wrapped = wrap(plan, saves)
    if sum(isinstance(n, ir.Shared) for n in ir.walk(wrapped)) != len(saves):
        return None
    if wrapped.output != plan.output:  # its top saved widened: the user's columns only
        wrapped = ir.Project(wrapped, columns=tuple(ir.Named(ir.ColumnRef(a), a) for a in plan.output))
    wanted: dict[int, set[int]] = {}
    for above, save in pieces:
        wanted.setdefault(keys[save.node], set()).update(a.id for a in saved_columns(above, save))
    builder = engines.builder(engine, sources)
    try:
        output = builder.dataframe(wrapped).toArrow()
        data = {}
        for node, key in keys.items():
            columns = [a for a in node.output if a.id in wanted[key]]
            cached = builder.cached(key)
            renamed = cached.toDF(*[f"c{i}" for i in range(len(cached.columns))])
            rows = renamed.select(*[f"c{node.output.index(a)}" for a in columns]).toArrow()
            table = pa.table(rows.columns, names=[a.name for a in columns])
            data[key] = table.append_column(RID, pa.array(np.arange(table.num_rows, dtype=np.int64)))
    finally:
        builder.release()
    saved = {}
    for _, save in pieces:
        stand_in, rows = save.scan.source, data[keys[save.node]]
        saved[stand_in.key] = Source(stand_in.key, stand_in.name, SAVED, rows.num_rows, data=rows)
    return output, saved


def _pieces(segment: Segment) -> list[tuple[Segment, Save]]:
    """Every save with the piece that reads it, outer pieces first."""
    out: list[tuple[Segment, Save]] = []
    for save in segment.saves:
        out.append((segment, save))
        out += _pieces(save.below)
    return out
