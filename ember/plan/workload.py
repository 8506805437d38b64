"""What the user will ask of a lineage, declared before capture (Smoke's workload-aware capture)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Workload:
    """The lineage questions that will be asked, so capture keeps only what they read
    (Smoke's workload-aware capture).

    `sources`: the sources traces will name; others get no rids and no side tables
    that would hold only theirs. `where`: per source, a SQL predicate over its columns;
    only rows matching it are kept in the lineage (selection push-down).
    `partition_by`: per source, a column whose predicates traces will ask
    (`backward(source_where=...)`); each output row's lineage is kept partitioned by it,
    so such a trace reads only the matching partitions (data skipping).
    `queries`: lineage-consuming queries (aggregating SELECTs over one source) that will
    be asked of one-row traces (`Trace.query`); their result for every output row is
    computed at capture (group-by push-down).
    """

    sources: tuple[str, ...] | None = None
    where: dict[str, str] = field(default_factory=dict)
    partition_by: dict[str, str] = field(default_factory=dict)
    queries: tuple[str, ...] = ()

    def keeps(self, name: str) -> bool:
        return self.sources is None or name in self.sources
