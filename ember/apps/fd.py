"""FD profiling with lineage: the bipartite graph of violating values and the rows behind them.

For X → Y over a DataFrame, ember captures the grouping query `GROUP BY X, Y` once; its
output (the distinct combinations) is small, so which X values see several Y values is
worked out in-process, and the backward index of the grouping gives, per (x, y) pair, the
source rows behind it — Smoke's CD approach, whose indexes *are* the violation graph.
A grouping over more columns serves every FD within them: the lineage of an (x, y) pair
is the lineage of all combinations that project onto it, so `FDProfiler.prepare` captures
one grouping for a whole set of FDs and each check runs no further Spark job.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame

from ember.capture.capture import capture
from ember.errors import EmberError
from ember.plan.sources import OID
from ember.query.lineage import Lineage
from ember.query.trace import Trace

FD = tuple[Sequence[str], Sequence[str]]


@dataclass(frozen=True)
class Violation:
    """One violating left-hand value: each distinct right-hand value with the rows behind it."""

    lhs: tuple[Any, ...]
    rhs: dict[tuple[Any, ...], Trace]

    def ids(self, source: str) -> dict[tuple[Any, ...], np.ndarray]:
        """Per right-hand value, the `ember_rid`s of `source` rows that hold it with `lhs`."""
        return {value: trace.ids(source) for value, trace in self.rhs.items()}


class FDViolations(Sequence[Violation]):
    """The violations of one FD, ordered by left-hand value (nulls last)."""

    def __init__(self, lhs: Sequence[str], rhs: Sequence[str], violations: list[Violation]):
        self.lhs = list(lhs)
        self.rhs = list(rhs)
        self._violations = violations

    def __getitem__(self, i: Any) -> Any:
        return self._violations[i]

    def __len__(self) -> int:
        return len(self._violations)

    def __iter__(self) -> Iterator[Violation]:
        return iter(self._violations)

    def edges(self, source: str) -> pa.Table:
        """The graph as a flat table: lhs columns, rhs columns and `ember_rid`, one row per
        source row of `source` that takes part in a violation."""
        cols: dict[str, list[Any]] = {c: [] for c in (*self.lhs, *self.rhs, "ember_rid")}
        for v in self._violations:
            for value, rids in v.ids(source).items():
                for name, x in zip((*self.lhs, *self.rhs), (*v.lhs, *value), strict=True):
                    cols[name].extend([x] * rids.size)
                cols["ember_rid"].extend(rids.tolist())
        return pa.table(cols)

    def __repr__(self) -> str:
        return f"<ember FD {', '.join(self.lhs)} → {', '.join(self.rhs)}: {len(self)} violating values>"


class FDProfiler:
    """Checks FDs over one DataFrame, capturing each grouping once and reusing its index.

    An FD whose columns all lie within an already captured grouping runs no Spark job.
    """

    def __init__(self, df: DataFrame):
        self._df = df
        self._groupings: list[tuple[frozenset[str], Lineage]] = []
        self.captures = 0  # Spark captures run so far (for tests and benchmarks)

    def prepare(self, fds: Iterable[FD]) -> None:
        """Captures one grouping over every column the FDs name, so checking them is in-process."""
        cols: list[str] = []
        for lhs, rhs in fds:
            cols.extend(c for c in _check(self._df, lhs, rhs) if c not in cols)
        if cols:
            self._grouping(cols)

    def violations(self, lhs: Sequence[str], rhs: Sequence[str]) -> FDViolations:
        """Each lhs value seen with more than one distinct rhs value (nulls count as a value,
        as in GROUP BY), with the source rows behind each (lhs, rhs) pair."""
        lin = self._grouping(_check(self._df, lhs, rhs))
        groups: dict[tuple[Any, ...], dict[tuple[Any, ...], list[int]]] = {}
        out = lin.output()
        pairs = out.group_by([*lhs, *rhs], use_threads=False).aggregate([(OID, "list")])
        for row in pairs.to_pylist():
            x = tuple(row[c] for c in lhs)
            groups.setdefault(x, {})[tuple(row[c] for c in rhs)] = row[f"{OID}_list"]
        found = [
            Violation(x, {y: lin.backward(oids=oids) for y, oids in sorted(ys.items(), key=_order)})
            for x, ys in sorted(groups.items(), key=_order)
            if len(ys) > 1
        ]
        return FDViolations(lhs, rhs, found)

    def _grouping(self, cols: Sequence[str]) -> Lineage:
        for have, lin in self._groupings:
            if have.issuperset(cols):
                return lin
        lin = capture(self._df.select(*cols).distinct(), strategy="inject")
        self.captures += 1
        self._groupings.append((frozenset(cols), lin))
        return lin


def fd_violations(df: DataFrame, lhs: list[str], rhs: list[str]) -> FDViolations:
    """The violations of the FD lhs → rhs over `df` (see `FDProfiler` to check several)."""
    return FDProfiler(df).violations(lhs, rhs)


def _check(df: DataFrame, lhs: Sequence[str], rhs: Sequence[str]) -> list[str]:
    """The FD's columns, lhs first; refuses empty sides, overlaps and unknown columns."""
    if not lhs or not rhs:
        raise EmberError("an FD needs at least one column on each side")
    if set(lhs) & set(rhs):
        raise EmberError(f"columns on both sides of the FD: {sorted(set(lhs) & set(rhs))}")
    unknown = [c for c in (*lhs, *rhs) if c not in df.columns]
    if unknown:
        raise EmberError(f"unknown columns {unknown}; the DataFrame has {df.columns}")
    return [*lhs, *rhs]


def _order(item: tuple[tuple[Any, ...], Any]) -> list[tuple[bool, Any]]:
    """Sort key for value tuples that may hold nulls (nulls last)."""
    return [(x is None, "" if x is None else x) for x in item[0]]
