"""Bounded: whether lineage can come back through the driver, or the executors keep it.

Spark caps a job's result at `spark.driver.maxResultSize` (1 GiB by default). Lineage
under `inline_rids` rids comes back with the result or a side table's result; past it,
an aggregate's groups are not listed in the job's rows, and side tables are written to
files and indexed by the executors (`store.spark_index`).
"""

from __future__ import annotations

from ember.plan import ir

INLINE_RIDS = 32_000_000  # the default bound (a session sets its own: `spark.ember.driverRids`)


def input_rows(plan: ir.Node) -> int:
    """A generous guess at how many rows a plan makes: the rows of every scan in it (exact
    over one source, and a join on a key keeps its larger side's count); a text source not
    counted yet is guessed at one row per eight bytes, an in-memory one not collected yet
    at none (it is on the driver already).

    >>> from ember.capture.policy.examples import join, scan
    >>> input_rows(join(scan("t", "a", rows=5), scan("u", "c", rows=7), "a", "c"))
    12
    """
    total = 0
    for n in ir.walk(plan):
        if isinstance(n, ir.Scan):
            total += max(n.source.rows, 0) or sum(f.size for f in n.source.files) // 8
    return total


def bounded(plan: ir.Node, inline_rids: int) -> bool:
    """Whether rows made from `plan` can come back through the driver's result channel
    (else Spark writes them to files and the executors index them: `capture.sides`).

    >>> from ember.capture.policy.examples import scan
    >>> bounded(scan("t", "a", rows=5), 5), bounded(scan("t", "a", rows=5), 4), bounded(scan("t", "a"), 0)
    (True, False, False)
    """
    return inline_rids > 0 and input_rows(plan) <= inline_rids
