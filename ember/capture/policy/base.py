"""What the placement policy is given besides the plan, and what it answers.

A *site* names a node by where the capture rewrite meets it: the child indexes from the
plan's root, with `~j` for the `j`-th scalar subquery a node's expressions run. The
rewrite walks the plan in the same order and reads each decision at its site, so a
subplan that appears twice (a subquery used twice) may be placed twice, differently.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from ember.capture.policy.bounds import INLINE_RIDS
from ember.plan import ir
from ember.plan.sources import Source
from ember.plan.workload import Workload

Site = tuple[int, ...]

# Where an aggregate's groups (a grouped map input's groups) go:
# - list: carried in the rows above it as a list column: no side table runs;
# - spark: a side table Spark computes after the job, cut to the groups the result keeps;
# - duck_after: a side table DuckDB reads after the job, cut to those groups;
# - duck_beside: a side table DuckDB reads whole while the job runs;
# - at_trace: as duck_beside, but past `at_trace` scanned rows: read by the traces that
#   reach it, not at capture, where its rows turn out to hold rids only (`sides.read_at_trace`).
Kind = Literal["list", "spark", "duck_after", "duck_beside", "at_trace"]
READ_BY_DUCKDB: tuple[Kind, ...] = ("duck_after", "duck_beside", "at_trace")
WHOLE: tuple[Kind, ...] = ("duck_beside", "at_trace")


@dataclass(frozen=True)
class Placement:
    """Where the lineage of the node at `site` goes, and why."""

    site: Site
    kind: Kind
    why: str

    @property
    def listed(self) -> bool:
        return self.kind == "list"

    @property
    def read_after(self) -> bool:
        """Read by DuckDB (from the sources, not from the job)."""
        return self.kind in READ_BY_DUCKDB

    @property
    def whole(self) -> bool:
        """Every group reaches the result: read whole, not cut to the groups it keeps."""
        return self.kind in WHOLE


@dataclass(frozen=True)
class Setting:
    """The policy's inputs besides the plan. `inline_rids`: how many rids may come back
    through the driver's result channel (0: none). `at_trace`: scanned rows past which a
    table read whole is left to traces (None: none is). `local`: whether DuckDB can read a
    subplan's rows after the job (None: nothing is read so). `keyed`: (source key, column)
    pairs unique and never null in their source. `reported`: whether a partition map's
    function may report the rids it reads."""

    workload: Workload = field(default_factory=Workload)
    inline_rids: int = INLINE_RIDS
    at_trace: int | None = None
    local: Callable[[ir.Node], bool] | None = None
    keyed: frozenset[tuple[str, str]] = frozenset()
    reported: bool = True

    def restricted(self, plan: ir.Node) -> bool:
        """Whether a workload `where` keeps only some rows of a source `plan` reads (their
        rids are computed by Spark, which DuckDB cannot)."""
        return any(isinstance(n, ir.Scan) and n.source.name in self.workload.where for n in ir.walk(plan))

    def nameable(self, source: Source, column: str) -> bool:
        """Whether `column`'s value may name `source`'s rows: unique in it, and no workload
        `where` (whose rows must keep a rid that is null outside the predicate)."""
        wl = self.workload
        return (source.key, column) in self.keyed and wl.keeps(source.name) and source.name not in wl.where

    def reads_again(self, plan: ir.Node) -> bool:
        """Whether DuckDB can read `plan` after the job and get the rows the job read: it
        can read it, a second run gives the same rows, and no workload `where` cuts a
        source it reads."""
        return self.local is not None and ir.repeatable(plan) and not self.restricted(plan) and self.local(plan)
