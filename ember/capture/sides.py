"""Side tables, fetched after the job, parents first, each cut to the groups its parents use.

A side table holds lineage for every row of an intermediate result (every group of an
aggregate, every probe value of a semi join), but only the groups that rows above it
point at are ever traced: an aggregate with many groups under a selective HAVING has
few that reach the output. The job's result names the groups the output needs (its ref
slots' keys), so side tables run top down (a table only points at lower ids) and each is
restricted, by a broadcast semi join on its keys, to the groups named by the output and
the tables already fetched. A semi join's witnesses are computed from those keys alone
(`ir.Keys`): the right side is joined with the referenced probe values, and the left side
is never computed again. Lineage is then as big as what it traces, not as the job.

Rows come back through the driver's result channel when the table cannot outgrow it
(`SideTable.bounded`: `annotate.INLINE_RIDS` rids, or the session's
`spark.ember.driverRids`), else the executors write them into the capture's scratch
folder and build the table's level there (`store.spark_index`); the groups such a table
needs from the tables below it stay on the cluster too, unless a table below is bounded
(its wanted keys, at most `MAX_KEYS`, come to the driver, where DuckDB may read it). Either way only successful task
attempts count: the scheduler keeps one result per task, and Spark's output committer
one file per task.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeAlias

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame

from ember.capture.annotate import input_rows
from ember.capture.local import reads as local_reads
from ember.capture.local.inputs import Inputs
from ember.capture.untie import Tied, computes_again
from ember.engines.spark.engine import Building
from ember.errors import EmberError
from ember.fetch.rows import check_unchanged
from ember.plan import ir
from ember.plan.slots import Annotated, RefSlot, RidSlot, SideTable, Slot
from ember.plan.sources import Source
from ember.pools import pool
from ember.store.build import KeyRows, SideRows, holders, inline_rows
from ember.store.columns import expand_ranges
from ember.store.later import Reader, key_rows
from ember.store.spark_index import Scratch, Staged, distributable, stage

Keys: TypeAlias = pa.Table | DataFrame | None  # wanted keys: on the driver, or on the cluster

# Past this many referenced groups, a table is not cut to them: broadcasting the keys would
# cost more than it saves. (A semi join's witnesses are always computed from the keys.)
MAX_KEYS = 1_000_000
LOCAL_ROWS = 1 << 20  # rows DuckDB may read of a table guessed too big for the driver
# Past this many rows in its scans, a table read whole beside the job is read by traces
# instead (`store.later`).
AT_TRACE_ROWS = 1 << 20



@dataclass
class _Wanted:
    """The groups of one side table that fetched rows point at."""

    whole: bool = False  # a keyless ref (a scalar subquery) wants every row
    keys: list[pa.Table] = field(default_factory=list)  # columns k0..kn, one table per referencing level
    frames: list[DataFrame] = field(default_factory=list)  # the same, from staged tables' rows

    def add(self, rows: pa.Table | Staged, slot: RefSlot) -> None:
        if isinstance(rows, Staged):
            if slot.keys:
                self.frames.append(rows.keys(slot))
            else:
                self.whole = True  # whether a row points at it would take a job to know
            return
        present = rows.column(slot.present.name).is_valid()
        if not slot.keys:
            self.whole = self.whole or bool(present.to_numpy(zero_copy_only=False).any())
            return
        keys = rows.select([k.name for k in slot.keys]).filter(present)
        self.keys.append(keys.rename_columns([f"k{i}" for i in range(len(slot.keys))]))

    def distinct(self) -> Keys:
        """The distinct referenced keys, or None when the whole table is wanted; on the
        cluster when staged tables name some of them."""
        if self.whole:
            return None
        if self.frames:
            frames = self.frames + [self.frames[0].sparkSession.createDataFrame(k) for k in self.keys if k.num_rows]
            union = frames[0]
            for f in frames[1:]:
                union = union.union(f)
            return union.distinct()
        if not self.keys:
            return pa.table({})
        keys = pa.concat_tables(self.keys, promote_options="permissive")
        return keys.group_by(keys.column_names, use_threads=False).aggregate([])


@dataclass
class Started:
    """What runs beside the job: side tables, by id, and the aggregate inputs two read."""

    tables: dict[int, Future[pa.Table | None]]
    inputs: Inputs
    same: dict[int, int]  # table id → the table whose read gives its rows (`local_reads.same_rows`)
    later: set[int]  # tables read at trace time (`read_at_trace`)


def start(builder: Building, annotated: Annotated, small: bool, at_trace: int | None = None) -> Started:
    """Side tables that can run beside the job, started: those the job's result alone points
    at without keys (scalar subqueries, global aggregates: nothing to cut them to), and
    those whose every group is wanted, whichever rows point at them (`SideTable.whole`,
    read by DuckDB: nothing cut either), whose
    rows come back through the result channel and that share no cached subplan with the
    job (the job fills the cache; run beside it, the table would compute the subplan
    again, and a nondeterministic one could give other rows). A `local` one is read by
    DuckDB (None if it cannot be, and it waits for the waves). Whether the result points
    at them at all is known after the job (`fetch` then drops their rows if not). So do
    the aggregate inputs two side tables read (`Inputs`). Tables left to
    traces (`read_at_trace`, past `at_trace` scanned rows) are not read at all: those
    only the result points at (its rows, or lists they carry), whose groups each output
    row reaches its own of. Under another side table a trace reaches them through that
    table's groups, one of which (a global aggregate's) may reach them all: the first
    trace would read them whole, and leaving them makes the capture no cheaper."""
    referrers = _referrers(annotated)
    later = (
        set()
        if small or at_trace is None
        else {t.id for t in annotated.tables if not referrers[t.id] and read_at_trace(t, builder.sources, at_trace)}
    )
    early = [
        t
        for t in annotated.tables
        if not t.inline
        and t.id not in later
        and ((not t.keys and not referrers[t.id]) or (t.whole and t.local))
        and (small or t.bounded)
        and not any(isinstance(n, ir.Shared) for n in ir.walk(t.plan))
    ]
    started: dict[int, Future[pa.Table | None]] = {}
    read: dict[str, int] = {}  # by `local_reads.same_rows`: each read once
    same: dict[int, int] = {}
    for t in early:
        if t.local:
            text = local_reads.same_rows(t, builder.sources)
            if text is not None and text in read:
                same[t.id] = read[text]
                started[t.id] = pool("side", 2).submit(_renamed, started[same[t.id]], t)
                continue
            started[t.id] = pool("side", 2).submit(local_reads.side_table, t, None, builder.sources)
            if text is not None:
                read[text] = same[t.id] = t.id
        else:  # built only if DuckDB cannot read it: each Spark plan built here delays the job
            job = builder.jvm.threaded(lambda plan=t.plan: builder.dataframe(plan).toArrow())
            started[t.id] = pool("side", 2).submit(_either, t, builder.sources, job)
    inputs = Inputs(annotated.tables, builder.sources, set(started))
    inputs.start(pool("side", 2))
    return Started(started, inputs, same, later)


def read_at_trace(table: SideTable, sources: dict[str, Source], rows: int = AT_TRACE_ROWS) -> bool:
    """Whether a table is read by the traces that reach it, not at capture (`store.later`):
    one DuckDB would read whole beside the job, over more than `rows` scanned rows, whose
    rows hold rids only (no refs to tables below, no keys to turn into rids)."""
    return (
        table.whole
        and table.local
        and table.bounded
        and bool(table.keys)
        and not table.prefixes
        and not table.order
        and all(isinstance(s, RidSlot) and s.key_column is None for s in table.slots)
        and input_rows(table.plan) > rows
        and local_reads.same_rows(table, sources) is not None
    )


def _reader(table: SideTable, sources: dict[str, Source]) -> Reader:
    """What reads a table's rows at trace time, once its sources are checked unchanged."""
    read = {n.source.key: sources[n.source.key] for n in ir.walk_all(table.plan) if isinstance(n, ir.Scan)}

    def rows(wanted: pa.Table | None) -> pa.Table:
        for source in read.values():  # each once, however many scans read it
            check_unchanged(source)
        found = local_reads.side_table(table, wanted, sources)
        if found is None:
            raise EmberError(f"DuckDB could not read the lineage of the {table.why} this trace reaches")
        return found

    return rows


def _renamed(rows: Future[pa.Table | None], table: SideTable) -> pa.Table | None:
    """Another table's rows (the same query's: `local_reads.same_rows`) under this one's names."""
    got = rows.result()
    return None if got is None else local_reads.renamed(got, table)


def _either(table: SideTable, sources: dict[str, Source], job: Callable[[], pa.Table]) -> pa.Table:
    """The table read by DuckDB where it can (a scalar subquery's groups), else
    built and computed by its Spark job."""
    local = local_reads.side_table(table, None, sources)
    if local is None:
        _unchecked(table)
    return job() if local is None else local


def _unchecked(table: SideTable) -> None:
    """Refuses to leave to Spark a table that computes a window guessed untied: Spark
    would not check the guess (`capture.untie`)."""
    if computes_again(table.plan):
        raise Tied(f"the {table.why} table of a window guessed untied was left to Spark")


def fetch(
    builder: Building,
    annotated: Annotated,
    result: pa.Table,
    staging: str | None,
    small: bool,
    started: Started | None = None,
) -> tuple[list[SideRows], dict[int, int]]:
    """Each side table's rows that the result reaches (None for a table whose rows ride in
    the result itself as a list slot; `Staged` for one the executors keep; `KeyRows` for one
    read at trace time), and which
    tables got the rows of another's read (table id → that table's id).

    Tables run in waves: every table whose referrers are all fetched runs in the same
    wave, its jobs side by side (a small side-table job is mostly scheduling latency).
    Tables `start`ed beside the job are collected first."""
    tables = annotated.tables
    wanted = {t.id: _Wanted() for t in tables}
    _note(wanted, result, annotated.slots)
    data: dict[int, pa.Table | Staged | KeyRows] = {}
    listed: set[int] = set()

    def note_lists() -> None:
        """Notes the refs of inline tables whose holders are in (the result, fetched rows)."""
        arrow = {k: v for k, v in data.items() if isinstance(v, pa.Table)}
        for tid, (rows, _) in inline_rows(result, annotated.slots, tables, arrow).items():
            if tid not in listed:
                listed.add(tid)
                _note(wanted, rows, tables[tid].slots)

    note_lists()
    same = dict(started.same) if started is not None else {}  # only for rows kept as read
    for tid, run in (started.tables if started is not None else {}).items():
        rows = run.result()
        if rows is None or not (tables[tid].keys or wanted[tid].whole):
            same.pop(tid, None)
        if rows is None:
            continue
        data[tid] = rows if tables[tid].keys or wanted[tid].whole else rows.slice(0, 0)
        _note(wanted, data[tid], tables[tid].slots)
    note_lists()
    jobs = [t for t in tables if not t.inline]
    referrers = _referrers(annotated)
    scratch = Scratch(staging) if not small and any(not t.bounded for t in jobs) else None
    reads = local_reads.Reads(
        builder.sources, started.inputs if started is not None else None, min(LOCAL_ROWS, annotated.inline_rids)
    )
    with ThreadPoolExecutor(4) as workers:
        while len(data) < len(jobs):
            wave = [t for t in jobs if t.id not in data and referrers[t.id] <= data.keys()]
            for t in wave:
                if t.reported:
                    data[t.id] = _reported(builder, t, wanted[t.id].distinct())
                    _note(wanted, data[t.id], t.slots)
            for t in wave:
                if started is not None and t.id in started.later and isinstance(k := wanted[t.id].distinct(), pa.Table):
                    data[t.id] = key_rows(t, k, _reader(t, builder.sources))
            wave = [t for t in wave if t.id not in data]
            keys = {t.id: wanted[t.id].distinct() for t in wave}
            reads.batch([(t, k) for t in wave if (small or t.bounded) and isinstance(k := keys[t.id], pa.Table) and k.num_rows])
            runs = [workers.submit(builder.jvm.threaded(job)) for job in _jobs(builder, wave, keys, small, scratch, reads)]
            for table, run in zip(wave, runs, strict=True):
                data[table.id] = run.result()
                _note(wanted, data[table.id], table.slots)
            note_lists()
    return [data.get(t.id) for t in tables], {**reads.same, **same}


def _referrers(annotated: Annotated) -> dict[int, set[int]]:
    """Side table id → the side-table jobs whose rows hold refs to it (for a ref inside an
    inline table: the job whose rows carry that table's list; none for the result's)."""
    held = holders(annotated.slots, annotated.tables)

    def job_of(tid: int | None) -> int | None:
        while tid is not None and annotated.tables[tid].inline:
            tid = held[tid][0]
        return tid

    found: dict[int, set[int]] = {t.id: set() for t in annotated.tables}
    for t in annotated.tables:
        for slot in t.slots:
            anchor = job_of(t.id)
            if isinstance(slot, RefSlot) and anchor is not None:
                found[slot.table].add(anchor)
    return found


def _jobs(
    builder: Building,
    wave: list[SideTable],
    keys: dict[int, Keys],
    small: bool,
    scratch: Scratch | None,
    reads: local_reads.Reads,
) -> list[Callable[[], pa.Table | Staged]]:
    """A wave's side tables as jobs to run: one DuckDB can answer in-process is read here
    and now; the others' plans are built together, on this thread (one message on a
    classic session: `Builder.dataframes`), each with the keys it is computed for."""
    ready: dict[int, Callable[[], pa.Table | Staged]] = {}
    spark: list[tuple[SideTable, Keys]] = []
    for table in wave:
        wanted = keys[table.id]
        bounded = small or table.bounded
        if bounded and isinstance(wanted, DataFrame):
            wanted = _collected(wanted)
        if (bounded or reads.cap > 0) and not isinstance(wanted, DataFrame):
            local = reads.side_table(table, wanted, capped=not bounded)
            if local is not None:
                ready[table.id] = functools.partial(_given, local)
                continue
        _unchecked(table)
        spark.append((table, wanted))
    built = builder.dataframes([(t.plan, k) for t, k in spark])
    for (table, wanted), side in zip(spark, built, strict=True):
        ready[table.id] = _job(builder, table, wanted, side, small, scratch)
    return [ready[t.id] for t in wave]


def _given(rows: pa.Table | Staged) -> pa.Table | Staged:
    return rows


def _job(
    builder: Building, table: SideTable, keys: Keys, side: DataFrame, small: bool, scratch: Scratch | None
) -> Callable[[], pa.Table | Staged]:
    """The built side table `side` as a job to run. A table that could outgrow the driver
    is written by the executors and, unless lists ride in its rows, stays there; DuckDB
    read it first (`_jobs`), up to `Reads.cap` rows, where its wanted keys are on the
    driver: the guess at its size counts every scan below it, so a table of few groups
    over large aggregates looks large, and Spark would compute it again, as long as the
    job itself."""
    if isinstance(keys, pa.Table) and keys.num_rows == 0:
        return side.limit(0).toArrow  # nothing points at it: an empty plan, no scan
    # A rollup's wanted groups match on a set's leading keys only: its rows are not cut here.
    cut = not table.prefixes and not any(isinstance(n, ir.Keys) for n in ir.walk(table.plan))
    if cut and (isinstance(keys, DataFrame) or (keys is not None and keys.num_rows <= MAX_KEYS)):
        side = _restricted(builder, side, table, keys)
    if small or table.bounded:
        return side.toArrow
    assert scratch is not None
    if distributable(table, side.columns):
        return lambda: stage(side, table, builder.sources, scratch)
    return lambda: stage(side, table, builder.sources, scratch, keep=False).read()


def _collected(keys: DataFrame) -> Keys:
    """Keys that a table the executors keep names, brought to the driver unless there are
    more than `MAX_KEYS`: DuckDB can then read the table for them, and a Spark job joins
    them broadcast; keys left on the cluster make each table below a full Spark job."""
    rows = keys.limit(MAX_KEYS + 1).toArrow()
    return rows if rows.num_rows <= MAX_KEYS else keys


class Unreported(Exception):
    """A partition map's output names a partition its wrapped function never reported: Spark
    stopped reading that task's output early (a LIMIT, a join whose other side ran out), so
    the task ended before the function did. The capture is run again over a cached input."""


def _reported(builder: Building, table: SideTable, keys: Keys) -> pa.Table:
    """A partition map's side table from what its wrapped function reported: a row per rid
    read, under the partition's number, in the column of its slot (the others null)."""
    reports = builder.reports[table.id].value
    numbers = np.array([key for key, *_ in reports], np.int64)
    if keys is not None:
        wanted = keys.toArrow() if isinstance(keys, DataFrame) else keys
        named = wanted.column(0).to_numpy(zero_copy_only=False) if wanted.num_columns else np.zeros(0, np.int64)
        if not np.isin(named, numbers).all():
            raise Unreported(table.why)
    names = [a.name for a in table.plan.output]
    chunks = []
    for key, column, starts, ends in reports:
        rids = expand_ranges(starts, ends)
        nulls = pa.nulls(len(rids), pa.int64())
        cells = [pa.array(rids) if j == column else nulls for j in range(len(names) - 1)]
        chunks.append(pa.table([pa.array(np.full(len(rids), key, np.int64)), *cells], names=names))
    empty = pa.table([pa.array([], pa.int64()) for _ in names], names=names)
    return pa.concat_tables([empty, *chunks])


def _note(wanted: dict[int, _Wanted], rows: pa.Table | Staged, slots: tuple[Slot, ...]) -> None:
    for slot in slots:
        if isinstance(slot, RefSlot):
            wanted[slot.table].add(rows, slot)


def _restricted(builder: Building, side: DataFrame, table: SideTable, keys: pa.Table | DataFrame) -> DataFrame:
    """The side table's rows whose keys are among `keys` (null keys match null-safely, as
    refs are resolved)."""
    wanted = keys if isinstance(keys, DataFrame) else builder.jvm.spark.createDataFrame(keys).hint("broadcast")
    at = {name: j for j, name in enumerate(side.columns)}
    cond = [side[at[k.name]].eqNullSafe(wanted[f"k{i}"]) for i, k in enumerate(table.keys)]
    on = cond[0]
    for c in cond[1:]:
        on = on & c
    return side.join(wanted, on, "left_semi")
