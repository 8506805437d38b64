"""Iterative refinement of superset answers (PredTrace's push-up / push-down, Algorithm 3).

The naive push-down leaves a scan unrestricted wherever the traced row does not pin
it (Q4's lineitem: every late line item). But the rows of a lineage pair up across
each join: a lineage row of one side joins some lineage row of the other on the
equated columns. So each side's candidates can be cut to the key values found among
the other side's candidates (the value sets PredTrace pushes up), and the cut repeated
until nothing changes. Every step keeps every lineage row, so the answer stays a
superset; on most plans it reaches the exact lineage.

Which scan columns a join column's values come from is the same question the
push-down answers, asked from the join instead of the output.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame

from ember.infer.pushdown import origins
from ember.infer.spark import column_of_frame
from ember.plan import ir
from ember.plan.ir import walk

MAX_ROUNDS = 8
SHRINKS_LEFT = {"inner", "cross", "semi", "right"}  # join kinds whose left lineage rows all have a partner
SHRINKS_RIGHT = {"inner", "cross", "semi", "left", "existence"}


@dataclass(frozen=True)
class Cut:
    """Rows of scan `target` must have `column` among the values of `by` (scan, column) pairs."""

    target: int  # id() of the scan
    column: ir.Attr
    by: tuple[tuple[int, ir.Attr], ...]


def cuts(plan: ir.Node) -> list[Cut]:
    """Every cut the joins of `plan` allow."""
    found = []
    for node in walk(plan):
        if not isinstance(node, ir.Join):
            continue
        for lid, rid in node.equi:
            left, right = origins(node.left, lid), origins(node.right, rid)
            if node.kind in SHRINKS_LEFT and right:
                found += [Cut(scan, col, right) for scan, col in left]
            if node.kind in SHRINKS_RIGHT and left:
                found += [Cut(scan, col, left) for scan, col in right]
    return found


def refine(plan: ir.Node, frames: dict[int, DataFrame | None]) -> dict[int, DataFrame | None]:
    """Cuts the scans' candidate rows until a fixpoint (or `MAX_ROUNDS`)."""
    usable = [c for c in cuts(plan) if all(frames.get(s) is not None for s in (c.target, *(b for b, _ in c.by)))]
    if not usable:
        return frames
    frames = dict(frames)
    sizes = {k: _settle(df) for k, df in frames.items() if df is not None}
    for _ in range(MAX_ROUNDS):
        for cut in usable:
            target = frames[cut.target]
            assert target is not None
            values = None
            for scan, col in cut.by:
                df = frames[scan]
                assert df is not None
                part = df.select(column_of_frame(df, col).alias("v"))
                values = part if values is None else values.unionByName(part)
            assert values is not None
            key = column_of_frame(target, cut.column)
            frames[cut.target] = target.join(values.distinct(), key == values["v"], "left_semi")
        new = {k: _settle(df) for k, df in frames.items() if df is not None}
        if new == sizes:
            break
        sizes = new
    return frames


def _settle(df: DataFrame) -> int:
    df.cache()
    return df.count()
