"""Aggregate inputs two side tables read, read once, beside the job.

A table of groups DuckDB reads after the job reads its aggregate's input again (for the
groups that reach the result), and another side table may aggregate that same input
whole (a semi join's witnesses over a correlated sum, whose groups' rids the sum's group
table holds). Both would scan the same sources. The input's rows need no key from the
job, so they are read beside it, once, and both tables read them from memory. A
rollup's input is kept below its expand (`plans.kept`). Not for a table read beside the
job (`beside`), which reads its own input there, nor past `SHARED_ROWS` rows (whose read
stops there): each table reads its own again.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import Executor, Future

import duckdb
import pyarrow as pa

from ember.capture.annotate import input_rows
from ember.capture.local.plans import as_read, held, kept
from ember.engines import duck
from ember.engines.duck.compile import Compiled, rows, run
from ember.engines.duck.ties import Tie
from ember.plan import ir
from ember.plan.slots import SideTable
from ember.plan.sources import Source

SHARED_ROWS = 1 << 20  # past this many rows an aggregate input is not kept for two tables


class Inputs:
    """The inputs of one capture, each read once (rows a column `c<i>` per output position
    of the plan it holds, as `engines.duck.compile` reads them back)."""

    def __init__(self, tables: tuple[SideTable, ...], sources: dict[str, Source], beside: set[int]):
        self.sources = sources
        self._tables = {
            Inputs.name(t): t for t in tables if _aggregated_twice(t, tables, beside) and not _surely_large(t.aggregated)
        }
        self._rows: dict[str, Future[pa.Table | None]] = {}
        self.same: dict[str, str] = {}  # name → the input whose read gives its rows

    @staticmethod
    def name(table: SideTable) -> str:
        return f"input{table.id}"

    def start(self, pool: Executor) -> None:
        """Reads each input once, beside the job; inputs whose queries are the same up to
        names share one read (one join aggregated by several tables), and an input whose
        plan holds another's is computed from that one's rows once they are read (one scan
        for aggregates of one join, not one each). Smaller plans are read first, so a read
        waits only for reads submitted before it."""
        first: dict[str, str] = {}
        held_plans: dict[str, tuple[ir.Node, ...]] = {}
        for name, table in sorted(self._tables.items(), key=lambda item: len(ir.walk(held(item[1])))):
            own = self._query(table)
            if own is None:
                continue
            self.same[name] = first.setdefault(own.key, name)
            if self.same[name] == name:
                via = self._query(table, held_plans)
                used = sorted(via.inputs & set(held_plans)) if via is not None else []
                bases = {b: self._rows[self.same[b]] for b in used}
                self._rows[name] = (
                    pool.submit(self._read_from, via, bases, own) if via is not None and bases else pool.submit(self._read, own)
                )
            held_plans[name] = (held(table),)

    def read(self) -> dict[str, tuple[tuple[ir.Node, ...], pa.Table]]:
        """Name → (the plans whose rows it holds: what is kept of the input as the job reads
        it, its rows), for each input read."""
        found: dict[str, tuple[tuple[ir.Node, ...], pa.Table]] = {}
        for name, owner in self.same.items():
            rows = self._rows[owner].result()
            if rows is not None:
                found[name] = ((held(self._tables[name]),), rows)
        return found

    def _query(self, table: SideTable, held_plans: Mapping[str, tuple[ir.Node, ...]] | None = None) -> Compiled | None:
        """The query reading the rows of the group table's plan below its keys (its slots'
        rids with the aggregate's input columns; `plans.kept`); from the `held_plans`
        inputs' rows where its plan meets theirs."""
        assert isinstance(table.plan, ir.Project)
        return rows(kept(table.plan.child), self.sources, dict(held_plans or {}), limit=SHARED_ROWS + 1)

    @staticmethod
    def _read(query: Compiled, registered: Mapping[str, pa.Table] | None = None) -> pa.Table | None:
        """The rows, None if too many (or if DuckDB could not read them)."""
        con = duck.connect()
        try:
            for name, table in (registered or {}).items():
                con.register(name, table)
            read = run(query, con)
        except (duckdb.Error, Tie):
            return None
        finally:
            con.close()
        return read if read.num_rows <= SHARED_ROWS else None

    @staticmethod
    def _read_from(via: Compiled, bases: Mapping[str, Future[pa.Table | None]], own: Compiled) -> pa.Table | None:
        """The rows, from the `bases`' once read, or by the input's `own` query where one of
        them could not be read."""
        registered = {}
        for name, future in bases.items():
            got = future.result()
            if got is None:
                return Inputs._read(own)
            registered[name] = got
        return Inputs._read(via, registered)


def _aggregated_twice(table: SideTable, tables: tuple[SideTable, ...], beside: set[int]) -> bool:
    """Whether another side table read after the job aggregates the input `table`'s groups
    come from (not under a condition its keys decide: a semi join on the group key over
    an aggregate of a whole table is skipped by the group table's read)."""
    return table.aggregated is not None and any(
        isinstance(n, ir.Aggregate) and n.child == table.aggregated
        for other in tables
        if other.id != table.id and not other.inline and other.id not in beside
        for n in ir.walk(as_read(other))
    )


def _surely_large(plan: ir.Node | None) -> bool:
    """Whether a plan has more than `SHARED_ROWS` rows for certain: all of a scan's."""
    return (
        plan is not None
        and all(isinstance(n, (ir.Project, ir.Numbered, ir.Scan)) for n in ir.walk(plan))
        and input_rows(plan) > SHARED_ROWS
    )
