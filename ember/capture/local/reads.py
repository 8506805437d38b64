"""One capture's DuckDB reads of side tables, each query run once.

A table whose query is an earlier one's up to names (`Compiled.key`), for the same
wanted keys, gets that one's rows (one CTE read twice, an average read by three
branches); tables of one wave whose queries are one up to names, for other keys, are
read once for all of their keys (`batch`). A read that fails for any reason but a tie
leaves the table to Spark; a tie in a window guessed untied undoes the guess
(`capture.untie.Tied`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeAlias

import duckdb
import pyarrow as pa

from ember.capture.decided import matched_keys
from ember.capture.local.batch import Batch, batches, same_keys
from ember.capture.local.inputs import Inputs
from ember.capture.local.packing import Packing, packing
from ember.capture.local.plans import as_read, kept, keyed
from ember.capture.untie import Tied
from ember.engines import duck
from ember.engines.duck.compile import Compiled, run
from ember.engines.duck.compile import readable as duck_readable
from ember.engines.duck.ties import Tie
from ember.engines.duck.wanted import Wanted, hashable, table_rows
from ember.plan import ir
from ember.plan.slots import GROUPS, SideTable
from ember.plan.sources import Source
from ember.store.build import SORTED, order_by

Read: TypeAlias = Mapping[str, tuple[tuple[ir.Node, ...], pa.Table]]  # inputs read beside the job (`Inputs.read`)


class Reads:
    """One capture's DuckDB reads of side tables after the job."""

    def __init__(self, sources: dict[str, Source], inputs: Inputs | None = None, cap: int = 0):
        self.sources = sources
        self.inputs = inputs
        self.cap = cap  # rows of a `capped` read past which it is left to Spark
        self._done: dict[str, list[tuple[pa.Table | None, int, pa.Table | None]]] = {}
        self._batches: dict[int, Batch] = {}  # table id → the read it shares (`batch`)
        self.same: dict[int, int] = {}  # table id → the table whose read gave its rows (none if DuckDB could not)

    def batch(self, wave: Sequence[tuple[SideTable, pa.Table]]) -> None:
        """Tables to be read side by side whose queries are one up to names but whose wanted
        keys differ are read once, for all of their keys (`batch`). A rollup's group table
        (its wanted keys name grouping sets) and keys a hash would not compare alike are
        read alone."""
        read, same = self._read_inputs()
        shared: dict[str, list[tuple[SideTable, pa.Table]]] = {}
        for table, wanted in wave:
            if not table.keys or table.prefixes or not all(hashable(k.dtype) for k in table.keys):
                continue
            made = query(table, wanted, self.sources, read, same)
            if made is not None:
                shared.setdefault(made[0].key, []).append((table, wanted))
        self._batches.update(batches(list(shared.values())))

    def side_table(self, table: SideTable, wanted: pa.Table | None, capped: bool = False) -> pa.Table | None:
        """The table's rows for the `wanted` keys (columns k0..kn; None: every row), read by
        DuckDB, from the `inputs` already read where it can; None where Spark must compute it.
        `capped`: a table that may be too big to read here, read unsorted up to `cap` rows."""
        batch = self._batches.get(table.id)
        if batch is None or capped:
            return self._read(table, wanted, capped)
        with batch.lock:
            if not batch.done:
                batch.rows, batch.done = self._read(batch.first, batch.keys, False), True
        if batch.rows is None:
            return None
        self.same[table.id] = self.same[batch.first.id]
        return renamed(batch.rows, table)

    def _read(self, table: SideTable, wanted: pa.Table | None, capped: bool) -> pa.Table | None:
        read, same = self._read_inputs()
        limit = self.cap if capped else None
        made = query(table, wanted, self.sources, read, same, limit)
        if made is None:
            return None
        compiled, packed = made
        keys = wanted if table.keys else None
        done = self._done.setdefault(compiled.key, [])
        for other, owner, rows in done:
            if same_keys(other, keys):
                if rows is None:
                    return None
                self.same[table.id] = owner
                return renamed(rows, table)
        rows = _run(compiled, read, packed)
        if rows is not None and limit is not None:
            rows = None if rows.num_rows > limit else rows.replace_schema_metadata(None)
        done.append((keys, table.id, rows))
        if rows is not None:
            self.same[table.id] = table.id
        return rows

    def _read_inputs(self) -> tuple[Read, Mapping[str, str]]:
        if self.inputs is None:
            return {}, {}
        return self.inputs.read(), self.inputs.same


def query(
    table: SideTable, wanted: pa.Table | None, sources: dict[str, Source], read: Read, same: Mapping[str, str], cap: int | None = None
) -> tuple[Compiled, Packing | None] | None:
    """The query reading the table's rows (every output column, named as Spark names it)
    and how they are sorted after the read. The table is read whole if `wanted` is None (a
    keyless one, a global aggregate's one group, is read not at all if it is not None: no
    row holds its ref). Its rows come sorted for the index, or with a `cap`, unsorted and
    at most one past the cap (a LIMIT under a sort would not stop the read). Inputs read
    beside the job are read under the name of the input whose read gives their rows."""
    plan = as_read(table) if wanted is not None else table.plan  # only groups that reach the result
    if not isinstance(plan, ir.Project):
        return None
    inputs: dict[str, tuple[ir.Node, ...]] = {}
    for name, (plans, _) in read.items():
        owner = same.get(name, name)
        inputs[owner] = (*inputs.get(owner, ()), *plans)
    own = Inputs.name(table)
    if own in read:  # its own input: read whole, it holds the rows of the groups wanted here
        owner = same.get(own, own)
        inputs[owner] = (*inputs[owner], kept(plan.child))
    joined = bool(table.keys) and wanted is not None and not table.prefixes
    packed = None if cap is not None else packing(table, joined and not keyed(plan.child))
    order = order_by(table) if cap is None and packed is None else []
    restricted = None
    if wanted is not None:
        # a key the matched ones fix is not compared
        compared = matched_keys(plan, table.keys, table.unique) if table.why == GROUPS else None
        numbered = packed is not None and bool(packed.keys)
        restricted = Wanted(wanted, table.keys, compared, dict(table.prefixes) or None, numbered)
    limit = None if cap is None else cap + 1
    compiled = table_rows(plan, sources, restricted, inputs=inputs, order=order, limit=limit)
    return None if compiled is None else (compiled, packed)


def same_rows(table: SideTable, sources: dict[str, Source]) -> str | None:
    """The key of the query reading the whole table (None: DuckDB cannot read it). Tables
    with the same key have the same rows: subqueries over one table read it once."""
    made = query(table, None, sources, {}, {})
    return None if made is None else made[0].key


def readable(plan: ir.Node, sources: dict[str, Source]) -> bool:
    """Whether DuckDB could read `plan`'s rows (checked before the capture rewrite, on the
    plan an aggregate's groups would come from). Strictly: `annotate` leaves a subplan
    DuckDB reads uncached, and a side table reading a projected column or an aggregate's
    value DuckDB cannot compute would then have Spark compute the subplan again."""
    return duck_readable(plan, sources, strict=True)


def renamed(rows: pa.Table, table: SideTable) -> pa.Table:
    """Another table's rows (the same query's, up to names) under this one's names, still sorted."""
    return rows.rename_columns([a.name for a in table.plan.output]).replace_schema_metadata(rows.schema.metadata)


def side_table(table: SideTable, wanted: pa.Table | None, sources: dict[str, Source], inputs: Inputs | None = None) -> pa.Table | None:
    """One table read alone (`Reads.side_table`)."""
    return Reads(sources, inputs).side_table(table, wanted)


def _run(query: Compiled, read: Read, packed: Packing | None = None) -> pa.Table | None:
    """The query's rows, sorted (by DuckDB, or `packed`); None where DuckDB fails (an
    overflow in translated arithmetic: Spark's semantics decide)."""
    con = duck.connect()
    try:
        for name in query.inputs:
            con.register(name, read[name][1])
        rows = run(query, con)
        if packed is not None:
            rows = packed.sorted(con, rows, query.tables.get("wanted"))
        return rows.replace_schema_metadata(SORTED)  # sorted here, by DuckDB in parallel, or packed
    except Tie as e:
        raise Tied(str(e)) from e
    except duckdb.Error:
        return None
    finally:
        con.close()
