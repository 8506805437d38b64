"""`ember.capture`: run a DataFrame once with lineage flowing through it."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from concurrent.futures import wait
from typing import Any, Literal, ParamSpec, TypeVar, get_args

import pyarrow as pa
from pyspark.sql import DataFrame

from ember.capture import sides
from ember.capture.align import match_rows
from ember.capture.annotate import annotate
from ember.capture.keys import rekey, unique_keys
from ember.capture.local import reads as local_reads
from ember.capture.untie import Tied, held, untied
from ember.engines.spark import engine as engines
from ember.engines.spark import writes
from ember.engines.spark.engine import Engine
from ember.engines.spark.failures import texts, what_died
from ember.engines.spark.frames import spark_frame
from ember.engines.spark.plan_import import Imported
from ember.errors import EmberError, InvalidPredicateError, SparkJobError, UnknownSourceError
from ember.fetch.rows import check_unchanged
from ember.plan import ir
from ember.plan.columns import column_lineage
from ember.plan.ir import outline, walk
from ember.plan.slots import Annotated
from ember.plan.sources import KEYED, Source, SourceFile
from ember.plan.workload import Workload
from ember.pools import pool
from ember.progress import Phases
from ember.query import grouped
from ember.query.lineage import Lineage
from ember.store.build import SideRows, build_index
from ember.store.groupings import Grouping
from ember.store.index import LineageIndex
from ember.store.kept import KEEP_SHARE
from ember.store.spark_index import Staged

Strategy = Literal["auto", "inject", "defer"]
STRATEGIES: tuple[Strategy, ...] = get_args(Strategy)
# Spark setting: how many rids of lineage may come back through the driver (default
# `annotate.INLINE_RIDS`); past it, or everywhere with 0, the executors write and index it.
DRIVER_RIDS = "spark.ember.driverRids"
# Spark setting: past how many scanned rows a side table every group of which reaches the
# result is read by the traces that reach it rather than beside the job (`store.later`;
# default `sides.AT_TRACE_ROWS`).
AT_TRACE_ROWS = "spark.ember.atTraceRows"


def capture(
    df: DataFrame,
    write_to: str | None = None,
    format: Literal["parquet"] = "parquet",
    staging: str | None = None,
    strategy: Strategy = "auto",
    workload: Workload | None = None,
    keep_rows: float = KEEP_SHARE,
    progress: bool | None = None,
    write: Callable[[Any], object] | writes.Write | None = None,
) -> Lineage:
    """Runs `df` on Spark with lineage capture built into its plan and indexes the lineage.

    An operator ember cannot trace is refused before any job runs (with "defer", once the
    job ran). The output is the job's own result; traces need no further Spark job.

    `strategy`: "inject" runs the rewritten plan, so the job's rows carry their lineage
    (aggregates, semi joins, subqueries and windows may add side-table jobs); "defer" runs
    `df` untouched, returns its result at full speed and captures in a background thread
    (traces wait for it; sources are checked unchanged); "auto" injects when the plan
    needs no side-table job or when a second run could give other rows, and defers
    otherwise. `lin.mode` says which ran.

    `write`: the job writes its output as this function of a `DataFrameWriter` says
    (`lambda w: w.partitionBy("dt").mode("overwrite").parquet(path)`; any format, mode,
    partitioning, bucketing, `saveAsTable` or `insertInto`). The write is the job: it runs
    once, with its lineage, and the output is the rows written, in the files' path order;
    `lin.written` lists the files, and a later job that reads them links to this lineage
    (`ember.catalog`). `write_to=path` is `write=lambda w: w.parquet(path)` into a new
    folder. `staging`: where the executors write lineage too big
    for the driver (session setting `spark.ember.driverRids`); a path every executor and
    the driver reach on a multi-machine cluster (default: a temporary folder).
    `workload` (`ember.Workload`): the sources and rows traces will ask about; the rest is
    left out. `keep_rows`: where the whole output reaches at most this share of a local
    Parquet source, those rows are copied into memory after the job (`lin.ready` turns
    true then; 0 copies nothing). Large side tables all of whose groups reach the result
    are read by the traces that reach them (session setting `spark.ember.atTraceRows`).
    `progress`: name ember's phases on stderr (plan, job, side tables, index) once a
    capture has run two seconds; None: in an interactive terminal or where
    `EMBER_PROGRESS=1` asks.
    """
    phases = Phases("capture", progress)
    lineage: Lineage | None = None
    try:
        lineage = _capture(df, _write_of(write, write_to, format), staging, strategy, workload, keep_rows, phases)
        return lineage
    finally:
        if lineage is None:
            phases.done("failed")
        else:
            phases.done("lineage ready" if lineage.mode == "inject" else "result back; lineage is built in the background")


T = TypeVar("T")
P = ParamSpec("P")


def _spark_gives_up(run: Callable[P, T]) -> Callable[P, T]:
    """`run` (a capture, or Defer's background half), raising `SparkJobError` where Spark
    gave up on one of its jobs, so that a capture ends with the lineage of a clean run or
    with one line naming what died, never with a py4j trace. ember's own errors, a task's
    own error (Spark raises a UDF's or an expression's error as itself) and interrupts
    pass unchanged."""

    @functools.wraps(run)
    def guarded(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return run(*args, **kwargs)
        except EmberError:
            raise
        except Exception as e:
            died = next(filter(None, map(what_died, texts(e))), None)
            if died is None:
                raise
            raise SparkJobError(f"the capture's Spark job failed: {died}") from e

    return guarded


@_spark_gives_up
def _capture(
    df: DataFrame,
    write: writes.Write | None,
    staging: str | None,
    strategy: Strategy,
    workload: Workload | None,
    keep_rows: float,
    phase: Callable[[str], None],
) -> Lineage:
    df = spark_frame(df)  # a pandas-on-Spark frame is a DataFrame underneath
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}, not {strategy!r}")
    if not 0 <= keep_rows <= 1:
        raise ValueError(f"keep_rows is a share of a source's rows, from 0 to 1, not {keep_rows!r}")
    if write is not None:
        if strategy == "defer":
            raise EmberError(
                f"a capture that writes ({write.describe()}) runs its job once, with the lineage; defer would run "
                "it twice: capture it with strategy='inject' or 'auto'"
            )
        strategy = "inject"
    jvm = engines.of(df, "ember.capture")
    bound = driver_rids(jvm)
    at_trace = _count_setting(jvm, AT_TRACE_ROWS, sides.AT_TRACE_ROWS)
    reports = engines.reports(jvm)  # a partition map's function may report the rids it read
    user: pa.Table | None = None
    if strategy == "defer":
        phase("the job (lineage is captured afterwards, in the background)")
        user, (plan, sources, clock) = _overlapped(jvm, df)
    else:
        phase("reading the plan")
        plan, sources, clock = engines.imported(jvm, df)
    workload = workload or Workload()
    sources = _in_workload(jvm, sources, workload)
    _check_predicates(jvm, plan, workload)
    # Refuses what ember cannot trace, before any job. Defer checks join keys (file reads)
    # in its background capture, off the user's path.
    # A keyed source (a database table, a Python data source) may give other rows when read again.
    keyed = [s.name for s in sources.values() if s.kind == KEYED]
    varies = strategy != "inject" and (ir.varies(plan) or clock or bool(keyed))
    if strategy == "defer":
        if keyed:
            raise EmberError(
                f"defer runs the plan again for its lineage, and source {keyed[0]!r} is a table read by key, "
                "which a second read may find changed; capture it with strategy='inject' (what 'auto' does)"
            )
        if any(isinstance(n, ir.PartitionMap) for n in ir.walk_all(plan)):
            raise EmberError(
                "defer runs the plan again for its lineage, and a partition map (mapInPandas / mapInArrow) gives "
                "each row its partition, which a second run may cut otherwise; capture it with strategy='inject' "
                "(what 'auto' does)"
            )
        if varies:
            raise EmberError(
                f"defer runs the plan again for its lineage, and this one ({outline(plan)}) samples rows or "
                "computes a random value or the time, so a second run gives other rows; capture it with "
                "strategy='inject'"
            )
        annotated = annotate(plan, workload, inline_rids=bound)  # Defer annotates again, fully, in its background capture
    else:
        # a write runs once: no guess that a failed run would have to take back (`_guessed`)
        once = write is None
        annotated = _annotated(plan, workload, sources, bound, reported=once and reports, guess=once, at_trace=at_trace)
    names = [a.name for a in plan.output]
    inline = all(t.inline or t.local for t in annotated.tables)
    why = _why(strategy, inline, varies, ir.order_bound(plan))
    if strategy == "inject" or (strategy == "auto" and (inline or varies or ir.order_bound(plan))):
        numbered = {k: engines.numbered(jvm, s) for k, s in sources.items()}
        written = Written(write)
        _, (user, index) = _guessed(
            annotated,
            lambda reported, guess: _annotated(plan, workload, sources, bound, reported and reports, guess, at_trace),
            lambda a: run_annotated(
                jvm, a, names, numbered, staging, imported=plan, at_trace=at_trace, phase=phase, collect=written
            ),
        )
        groups = _groupings(workload, numbered, index, user.num_rows)
        lineage = Lineage(
            user,
            index,
            numbered.values(),
            "inject",
            outline(plan),
            groupings=groups,
            columns=column_lineage(plan),
            hold_rows=keep_rows,
            why=why,
            written=written.files,
        )
    else:
        user = df.toArrow() if user is None else user
        job = pool("defer").submit(jvm.threaded(_deferred), jvm, plan, sources, staging, user, workload, bound, at_trace)
        lineage = Lineage(
            user, job, sources.values(), "defer", outline(plan), columns=column_lineage(plan), hold_rows=keep_rows, why=why
        )
    return lineage


def _write_of(write: Callable[[Any], object] | writes.Write | None, write_to: str | None, format: str) -> writes.Write | None:
    """The write a capture makes: `write=`'s (a function of a writer, or a write `ember run`
    recorded), or `write_to=`'s Parquet into a new folder."""
    if write is not None and write_to is not None:
        raise TypeError("give write= or write_to=, not both")
    if write_to is None:
        return write if write is None or isinstance(write, writes.Write) else writes.recorded(write)
    if format != "parquet":
        raise EmberError(f"capture(write_to=...) writes Parquet only, not {format!r} (write= takes any format)")
    if os.path.exists(write_to) and os.listdir(write_to):
        raise EmberError(f"capture(write_to={write_to!r}): the folder exists and is not empty")
    return writes.recorded(lambda w: w.parquet(write_to))


class Written:
    """How a capture's job runs: collected (`toArrow`), or written as the user's write says
    and then collected in the files' order (`writes.run`); the files it wrote, after."""

    def __init__(self, write: writes.Write | None = None) -> None:
        self.write = write
        self.files: tuple[SourceFile, ...] = ()

    def __call__(self, job: DataFrame, width: int) -> pa.Table:
        if self.write is None:
            return job.toArrow()
        rows, self.files = writes.run(job, width, self.write)
        return rows


def _why(strategy: Strategy, inline: bool, varies: bool, order_bound: bool) -> str:
    """Why `strategy` captures as it does, in words for `Lineage.strategy`.

    >>> _why("auto", inline=False, varies=False, order_bound=False)
    'the plan needs side-table jobs: the result comes first, lineage is built in the background'
    """
    if strategy != "auto":
        return "asked for"
    if inline:
        return "lineage rides in the job itself (no side-table job)"
    if varies:
        return "a second run could give other rows (sampling, a random value, the clock, a table read by key)"
    if order_bound:
        return "rows depend on the order a shuffle gives them (a grouped map, a row sequence)"
    return "the plan needs side-table jobs: the result comes first, lineage is built in the background"


def _overlapped(jvm: Engine, df: DataFrame) -> tuple[pa.Table, Imported]:
    """Defer: the user's job runs while ember imports its plan (a run of Spark's optimizer that
    would otherwise delay the job), so a refusal comes after the job, not before it."""
    imported = pool("import").submit(jvm.threaded(engines.imported), jvm, df)
    try:
        user = df.toArrow()
    finally:
        wait([imported])
    return user, imported.result()


def _in_workload(jvm: Engine, sources: dict[str, Source], workload: Workload) -> dict[str, Source]:
    """The sources the workload keeps; names it gives that the job does not read are refused,
    and so are its queries that cannot be pushed down."""
    names = {s.name for s in sources.values()}
    asked = set(workload.sources or ()) | set(workload.where) | set(workload.partition_by)
    if asked - names:
        known = ", ".join(sorted(names))
        raise UnknownSourceError(f"workload names unknown sources {sorted(asked - names)}; the job reads: {known}")
    kept = {k: s for k, s in sources.items() if workload.keeps(s.name)}
    queries = _grouping_queries(workload)
    shapes = {s.name: engines.checkable(jvm, s) for s in kept.values()} if queries else {}
    for sql, _ in queries:
        grouped.check(sql, shapes)
    return kept


def _grouping_queries(workload: Workload) -> list[tuple[str, str | None]]:
    """(query, partition column or None) for every grouping the workload asks for."""
    parts = [(grouped.partition_query(name, col), col) for name, col in sorted(workload.partition_by.items())]
    return parts + [(sql, None) for sql in workload.queries]


def _groupings(workload: Workload, sources: dict[str, Source], index: LineageIndex, outputs: int) -> tuple[Grouping, ...]:
    by_name = {s.name: s for s in sources.values()}
    return tuple(grouped.materialize(sql, by_name, index, outputs, col) for sql, col in _grouping_queries(workload))


def _check_predicates(jvm: Engine, plan: ir.Node, workload: Workload) -> None:
    """Each `where` of the workload must fit its source's columns (checked without a job)."""
    for node in walk(plan):
        if isinstance(node, ir.Scan) and node.source.name in workload.where:
            pred = workload.where[node.source.name]
            try:
                _ = jvm.dataframe(node.handle).selectExpr(pred).schema  # analyzed (a Connect frame only when asked)
            except Exception as e:  # Spark's parse and analysis errors share no base class worth naming
                raise InvalidPredicateError(f"workload where={pred!r} does not fit {node.source.name!r}: {e}") from None


def run_annotated(
    jvm: Engine,
    annotated: Annotated,
    names: list[str],
    sources: dict[str, Source],
    staging: str | None = None,
    small: bool = False,
    imported: ir.Node | None = None,
    at_trace: int | None = None,
    phase: Callable[[str], None] = lambda _: None,
    collect: Written | None = None,
) -> tuple[pa.Table, LineageIndex]:
    """Runs an annotated plan over numbered sources: its output rows and their lineage index.

    `small` side tables (a re-run over a few rows) come back through the driver, which
    costs less than a committed Parquet write when they hold a handful of rows.
    `imported`: the plan import made, which the rewrite took (`Builder.imported`).
    `at_trace`: scanned rows past which a table read whole is left to traces (None: none is).
    `phase`: told each phase as it starts (`progress.Phases`). `collect`: how the job runs
    (collected, or written as a capture's `write=` says).
    """
    run = functools.partial(collect or Written(), width=len(names))
    result, side_data, same = _run(jvm, annotated, sources, None if small else staging, small, imported, at_trace, phase, run)
    user = pa.table(result.columns[: len(names)], names=names)
    phase("building the lineage index")
    return user, _indexed(result, annotated, side_data, same)


def _indexed(result: pa.Table, annotated: Annotated, data: list[SideRows], same: dict[int, int]) -> LineageIndex:
    """The lineage index; side tables the executors kept are deleted once their levels
    (and the refs into them) are built."""
    try:
        return build_index(result, annotated.slots, annotated.tables, data, same=same)
    finally:
        for d in data:
            if isinstance(d, Staged):
                d.release()


def _run(
    jvm: Engine,
    annotated: Annotated,
    sources: dict[str, Source],
    staging: str | None,
    small: bool = False,
    imported: ir.Node | None = None,
    at_trace: int | None = None,
    phase: Callable[[str], None] = lambda _: None,
    collect: Callable[[DataFrame], pa.Table] = lambda job: job.toArrow(),
) -> tuple[pa.Table, list[SideRows], dict[int, int]]:
    """The rewritten job's rows (its columns, then the slots), each side table's rows
    (None for a table whose rows ride in the job's result, `Staged` for one the executors
    keep) and which tables got another's rows (`sides.fetch`).

    Side tables read the sources again, so the files must be as they were when the plan
    was read: checked after the last job."""
    builder = engines.builder(jvm, sources, imported)
    try:
        job = builder.dataframe(annotated.plan)
        started = sides.start(builder, annotated, small, at_trace)
        phase("the job, with its lineage")
        result = collect(job)
        if annotated.tables:
            phase(f"side tables ({len(annotated.tables)})")
        data, same = sides.fetch(builder, annotated, result, staging, small, started)
    finally:
        builder.release()
    for s in sources.values():
        check_unchanged(s)
    return (*rekey(annotated, result, data, sources), same)


@_spark_gives_up
def _deferred(
    jvm: Engine,
    plan: ir.Node,
    sources: dict[str, Source],
    staging: str | None,
    user: pa.Table,
    workload: Workload,
    bound: int | None,
    at_trace: int,
) -> tuple[LineageIndex, list[Source], tuple[Grouping, ...]]:
    """Captures after the user's job: same plan, same (unchanged) files, rows matched up."""
    for s in sources.values():
        check_unchanged(s)
    numbered = {k: engines.numbered(jvm, s) for k, s in sources.items()}
    annotated = _annotated(plan, workload, sources, bound, at_trace=at_trace)
    annotated, (result, side_data, same) = _guessed(
        annotated,
        lambda reported, guess: _annotated(plan, workload, sources, bound, reported, guess, at_trace),
        lambda a: _run(jvm, a, numbered, staging, imported=plan, at_trace=at_trace),
    )
    result = result.take(match_rows(user, result.select(list(range(user.num_columns)))))
    index = _indexed(result, annotated, side_data, same)
    return index, list(numbered.values()), _groupings(workload, numbered, index, user.num_rows)


def _annotated(
    plan: ir.Node,
    workload: Workload,
    sources: dict[str, Source],
    bound: int | None,
    reported: bool = True,
    guess: bool = True,
    at_trace: int | None = None,
) -> Annotated:
    """The capture rewrite with join keys checked and DuckDB's reach known; with `guess`,
    windows guessed untied where DuckDB checks the guess wherever it matters
    (`capture.untie`)."""
    local = functools.partial(local_reads.readable, sources=sources)
    rewrite = functools.partial(
        annotate,
        workload=workload,
        inline_rids=bound,
        keyed=unique_keys(plan),
        local=local,
        reported=reported,
        at_trace=at_trace,
    )
    guessed = untied(plan) if guess else plan
    if guessed is not plan:
        annotated = rewrite(guessed)
        if held(annotated, lambda t: local_reads.same_rows(t, sources) is not None):
            return annotated
    return rewrite(plan)


def _guessed(
    annotated: Annotated, again: Callable[[bool, bool], Annotated], run: Callable[[Annotated], T]
) -> tuple[Annotated, T]:
    """`run` over the capture rewrite (and the rewrite it ran), run again over one made
    (`again(reported, guess)`) without the guess that failed: that a partition map's
    function reports every rid its task read (its task ended first: `sides.Unreported`),
    or that a window's rows do not tie (`untie.Tied`)."""
    reported = guess = True
    while True:
        try:
            return annotated, run(annotated)
        except sides.Unreported:
            reported = False
        except Tied:
            guess = False
        annotated = again(reported, guess)


def driver_rids(jvm: Engine) -> int | None:
    """The session's `spark.ember.driverRids`, if set (None: ember's default); read once
    per capture, as Defer's background capture may run after the session changed it."""
    return _count_setting(jvm, DRIVER_RIDS, None)


def _count_setting(jvm: Engine, key: str, default: T) -> int | T:
    """A session setting that counts rows or rids (`default` where it is not set)."""
    value = jvm.spark.conf.get(key, None)
    if value is None:
        return default
    try:
        count = int(value)
    except ValueError:
        count = -1
    if count < 0:
        raise EmberError(f"{key} must be a count (0 or more), not {value!r}")
    return count
