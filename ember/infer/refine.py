"""Iterative refinement of superset answers (PredTrace's push-up / push-down, Algorithm 3).

The naive push-down leaves a scan unrestricted wherever the traced row does not pin
it (an EXISTS subquery's scan: every row its own filter keeps). But the rows of a
lineage pair up across each join: a lineage row of one side joins some lineage row of
the other on the equated columns. So each side's candidates can be cut to the key values found among
the other side's candidates (the value sets PredTrace pushes up), and the cut repeated
until nothing changes. Every step keeps every lineage row, so the answer stays a
superset; on most plans it reaches the exact lineage.

Which scan columns a join column's values come from is the same question the
push-down answers, asked from the join instead of the output.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from ember.infer.pushdown import origins
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


def anti_cuts(plan: ir.Node) -> list[Cut]:
    """Cuts of the rows an anti join's inner side is read for: only those sharing an
    equated key with some outer candidate can remove one. They are no lineage themselves,
    so these cuts serve reading candidates to join in-process (`infer.block`), with null
    keys kept (`NOT IN` is removed by an inner null), never `refine`."""
    found = []
    for node in walk(plan):
        if isinstance(node, ir.Join) and node.kind == "anti":
            for lid, rid in node.equi:
                left, right = origins(node.left, lid), origins(node.right, rid)
                if left:
                    found += [Cut(scan, col, left) for scan, col in right]
    return found


def needed(cut_list: list[Cut]) -> dict[int, set[ir.Attr]]:
    """Per scan, the columns the cuts read or cut on."""
    out: dict[int, set[ir.Attr]] = {}
    for c in cut_list:
        out.setdefault(c.target, set()).add(c.column)
        for scan, col in c.by:
            out.setdefault(scan, set()).add(col)
    return out


def refine(
    cut_list: list[Cut], frames: dict[int, pa.Table], drop_nulls: bool = False
) -> tuple[dict[int, pa.Table], bool]:
    """Cuts the scans' candidate rows (tables with a column `a<attr id>` per needed column)
    until nothing changes (or `MAX_ROUNDS`), in-process: only key columns travel. Returns
    the rows and whether they stopped changing. `drop_nulls`: every cut comes from a plain
    `=`, which never pairs nulls (null-safe equalities would)."""
    frames = dict(frames)
    for _ in range(MAX_ROUNDS):
        before = {k: t.num_rows for k, t in frames.items()}
        for cut in cut_list:
            kind = frames[cut.target].schema.field(f"a{cut.column.id}").type
            values = pa.chunked_array(  # scans read by Spark and by DuckDB may type a key differently
                [pc.cast(chunk, kind) for scan, col in cut.by for chunk in frames[scan].column(f"a{col.id}").chunks],
                type=kind,
            )
            target = frames[cut.target]
            keep = pc.is_in(target.column(f"a{cut.column.id}"), value_set=pc.unique(values), skip_nulls=drop_nulls)
            frames[cut.target] = target.filter(keep)
        if before == {k: t.num_rows for k, t in frames.items()}:
            return frames, True
    return frames, False
