"""Side tables, fetched after the job, parents first, each cut to the groups its parents use.

A side table holds lineage for every row of an intermediate result (every group of an
aggregate, every probe value of a semi join), but only the groups that rows above it
point at are ever traced: Q18's `GROUP BY l_orderkey HAVING ...` has 1.5 M groups, of
which 57 reach the output. The job's result names the groups the output needs (its ref
slots' keys), so side tables run top down (a table only points at lower ids) and each is
restricted, by a broadcast semi join on its keys, to the groups named by the output and
the tables already fetched. A semi join's witnesses are computed from those keys alone
(`ir.Keys`): the right side is joined with the referenced probe values, and the left side
is never computed again. Lineage is then as big as what it traces, not as the job.

Rows come back through the driver's result channel when the table cannot outgrow it
(`annotate.INLINE_RIDS`), else through Parquet files the executors write into a staging
folder. Either way only successful task attempts count: the scheduler keeps one result
per task, and Spark's output committer one file per task.
"""

from __future__ import annotations

import itertools
import os
import tempfile
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import TimestampType

from ember.capture import annotate, local_sides
from ember.capture.annotate import Annotated, RefSlot, SideTable, Slot
from ember.capture.spark_build import Builder
from ember.plan import ir
from ember.store.files import filesystem
from ember.store.index import holders, inline_rows

_Reader = Callable[[DataFrame], pa.Table]

# Past this many referenced groups, a table is not cut to them: broadcasting the keys would
# cost more than it saves. (A semi join's witnesses are always computed from the keys.)
MAX_KEYS = 1_000_000

_BESIDE = ThreadPoolExecutor(max_workers=2, thread_name_prefix="ember-side")


@dataclass
class _Wanted:
    """The groups of one side table that fetched rows point at."""

    whole: bool = False  # a keyless ref (a scalar subquery) wants every row
    keys: list[pa.Table] = field(default_factory=list)  # columns k0..kn, one table per referencing level

    def add(self, rows: pa.Table, slot: RefSlot) -> None:
        present = rows.column(slot.present.name).is_valid()
        if not slot.keys:
            self.whole = self.whole or bool(present.to_numpy(zero_copy_only=False).any())
            return
        keys = rows.select([k.name for k in slot.keys]).filter(present)
        self.keys.append(keys.rename_columns([f"k{i}" for i in range(len(slot.keys))]))

    def distinct(self) -> pa.Table | None:
        """The distinct referenced keys, or None when the whole table is wanted."""
        if self.whole or not self.keys:
            return None if self.whole else pa.table({})
        keys = pa.concat_tables(self.keys, promote_options="permissive")
        return keys.group_by(keys.column_names, use_threads=False).aggregate([])


def start(
    builder: Builder, annotated: Annotated, small: bool, translations: local_sides.Translations
) -> dict[int, Future[pa.Table | None]]:
    """Side tables that can run beside the job, started: those the job's result alone points
    at without keys (scalar subqueries, global aggregates: nothing to cut them to), whose
    rows come back through the result channel and that share no cached subplan with the
    job (the job fills the cache; run beside it, the table would compute the subplan
    again, and a nondeterministic one could give other rows). A `local` one is read by
    DuckDB (None if it cannot be, and it waits for the waves). Whether the result points
    at them at all is known after the job (`fetch` then drops their rows if not)."""
    referrers = _referrers(annotated)
    early = [
        t
        for t in annotated.tables
        if not t.inline
        and not t.keys
        and not referrers[t.id]
        and (small or annotate.bounded(t.plan))
        and not any(isinstance(n, ir.Shared) for n in ir.walk(t.plan))
    ]
    started: dict[int, Future[pa.Table | None]] = {}
    for t in early:
        if t.local:
            started[t.id] = _BESIDE.submit(local_sides.side_table, t, None, builder.sources, translations)
        else:
            started[t.id] = _BESIDE.submit(builder.jvm.threaded(builder.dataframe(t.plan).toArrow))
    return started


def fetch(
    builder: Builder,
    annotated: Annotated,
    result: pa.Table,
    staging: str | None,
    small: bool,
    translations: local_sides.Translations,
    started: dict[int, Future[pa.Table | None]] | None = None,
) -> list[pa.Table | None]:
    """Each side table's rows that the result reaches (None for a table whose rows ride in
    the result itself as a list slot).

    Tables run in waves: every table whose referrers are all fetched runs in the same
    wave, its jobs side by side (a small side-table job is mostly scheduling latency).
    Tables `start`ed beside the job are collected first."""
    tables = annotated.tables
    wanted = {t.id: _Wanted() for t in tables}
    _note(wanted, result, annotated.slots)
    data: dict[int, pa.Table] = {}
    listed: set[int] = set()

    def note_lists() -> None:
        """Notes the refs of inline tables whose holders are in (the result, fetched rows)."""
        for tid, (rows, _) in inline_rows(result, annotated.slots, tables, data).items():
            if tid not in listed:
                listed.add(tid)
                _note(wanted, rows, tables[tid].slots)

    note_lists()
    for tid, run in (started or {}).items():
        rows = run.result()
        if rows is None:
            continue
        data[tid] = rows if wanted[tid].whole else rows.slice(0, 0)
        _note(wanted, data[tid], tables[tid].slots)
    note_lists()
    jobs = [t for t in tables if not t.inline]
    referrers = _referrers(annotated)
    staged = not small and any(not annotate.bounded(t.plan) for t in jobs)
    with _staging(staging, staged) as write, ThreadPoolExecutor(4) as pool:
        while len(data) < len(jobs):
            wave = [t for t in jobs if t.id not in data and referrers[t.id] <= data.keys()]
            runs = [
                pool.submit(builder.jvm.threaded(_job(builder, t, wanted[t.id].distinct(), small, write, translations)))
                for t in wave
            ]
            for table, run in zip(wave, runs, strict=True):
                data[table.id] = run.result()
                _note(wanted, data[table.id], table.slots)
            note_lists()
    return [data.get(t.id) for t in tables]


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


def _job(
    builder: Builder,
    table: SideTable,
    keys: pa.Table | None,
    small: bool,
    write: _Reader,
    translations: local_sides.Translations,
) -> Callable[[], pa.Table]:
    """The side table built (on this thread: the builder is not shared) as a job to run;
    one DuckDB can answer in-process is read here and now."""
    if small or annotate.bounded(table.plan):
        local = local_sides.side_table(table, keys, builder.sources, translations)
        if local is not None:
            return lambda: local
    builder.keys = keys
    side = builder.dataframe(table.plan)
    if keys is not None and keys.num_rows == 0:
        return side.limit(0).toArrow  # nothing points at it: an empty plan, no scan
    keyed = any(isinstance(n, ir.Keys) for n in ir.walk(table.plan))
    if not keyed and keys is not None and keys.num_rows <= MAX_KEYS:
        side = _restricted(builder, side, table, keys)
    if small or annotate.bounded(table.plan):
        return side.toArrow
    return lambda: write(side)


def _note(wanted: dict[int, _Wanted], rows: pa.Table, slots: tuple[Slot, ...]) -> None:
    for slot in slots:
        if isinstance(slot, RefSlot):
            wanted[slot.table].add(rows, slot)


def _restricted(builder: Builder, side: DataFrame, table: SideTable, keys: pa.Table) -> DataFrame:
    """The side table's rows whose keys are among `keys` (null keys match null-safely, as
    refs are resolved)."""
    wanted = F.broadcast(builder.jvm.spark.createDataFrame(keys))
    at = {name: j for j, name in enumerate(side.columns)}
    cond = [side[at[k.name]].eqNullSafe(wanted[f"k{i}"]) for i, k in enumerate(table.keys)]
    on = cond[0]
    for c in cond[1:]:
        on = on & c
    return side.join(wanted, on, "left_semi")


@contextmanager
def _staging(staging: str | None, needed: bool) -> Iterator[_Reader]:
    """Runs side-table jobs whose tasks write Parquet files into a staging folder (made if
    `needed`, removed afterwards) and reads them back."""
    if not needed:
        yield _unstaged
        return
    root = staging or tempfile.mkdtemp(prefix="ember-staging-")
    fs, base = filesystem(f"{root.rstrip('/')}/{uuid.uuid4().hex[:12]}")
    target = base if "://" in root else "file://" + base
    count = itertools.count()

    def write(side: DataFrame) -> pa.Table:
        """Timestamps travel as microseconds (Spark would write INT96, which readers turn
        into other types)."""
        i = next(count)
        names = side.columns  # may repeat a name; Parquet columns may not
        stamps = [j for j, f in enumerate(side.schema.fields) if isinstance(f.dataType, TimestampType)]
        cols = [F.unix_micros(side[j]) if j in stamps else side[j] for j in range(len(names))]
        side.select(*[c.alias(f"c{j}") for j, c in enumerate(cols)]).write.parquet(f"{target}/t{i}")
        table = pq.read_table(f"{base}/t{i}", filesystem=fs)
        for j in stamps:
            table = table.set_column(j, f"c{j}", table.column(j).cast(pa.timestamp("us", tz="UTC")))
        return table.rename_columns(names)

    try:
        yield write
    finally:
        if fs.get_file_info(base).type != pafs.FileType.NotFound:
            fs.delete_dir(base)
        if staging is None:
            os.rmdir(root)


def _unstaged(side: DataFrame) -> pa.Table:
    raise AssertionError("a side table was to be staged, but no staging folder was made")

