"""A captured write: the user's own `DataFrameWriter` calls, replayed over the rewritten job.

A capture with a write runs the job once: its rows (the user's columns and the lineage
slots) are cached, the user's columns are written exactly as the user's writer would
write them (format, mode, options, partitioning, bucketing, table), and the cached rows
come back to the driver for the lineage index. What links the two is where each row
landed: ember sorts every task's rows by the partition folder (and bucket) they go to and
then by their position in the job, which is the order Spark's writer needs anyway, so
Spark adds no sort of its own and a file's rows are that task's rows of its folder in
job order. The files' names give their task, bucket and sequence (`part-<task>-<job>
_<bucket>.c<seq>`); `layout` deals the rows out to them.
"""

from __future__ import annotations

import itertools
import math
import os
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ember.engines.spark.frames import is_connect
from ember.errors import EmberError
from ember.plan.sources import SourceFile, file_facts, local_path, spark_uri

TAG = "__ember_tag"  # monotonically_increasing_id(): the task in its top bits, the row's position below
PART = "__ember_part_"  # a partition column's value as the writer spells its folder
BUCKET = "__ember_bucket"
_TASK_BITS = 33  # monotonically_increasing_id's row bits
_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"  # the folder of a null or empty partition value
# part-<task>-<job uuid>[_<bucket>]{-,.}c<sequence><extension>: FileFormatWriter's file names
# (`-c` from a writer of one folder, `.c` from one of partition folders or buckets)
_FILE = re.compile(r"^part-(\d+)-([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})(?:_(\d+))?[-.]c(\d+)")

Setting = Literal["format", "mode", "option", "options", "partitionBy", "bucketBy", "sortBy"]
SETTINGS: tuple[Setting, ...] = ("format", "mode", "option", "options", "partitionBy", "bucketBy", "sortBy")
ACTIONS = ("save", "parquet", "csv", "json", "orc", "text", "xml", "saveAsTable", "insertInto")
_TABLE_ACTIONS = ("saveAsTable", "insertInto")
_FORMAT_ACTIONS = ("parquet", "csv", "json", "orc", "text", "xml")


@dataclass(frozen=True)
class Call:
    """One call on a writer: its method name and arguments."""

    name: str
    args: tuple[Any, ...] = ()
    kwargs: tuple[tuple[str, Any], ...] = ()

    def on(self, obj: Any) -> Any:
        return getattr(obj, self.name)(*self.args, **dict(self.kwargs))


@dataclass(frozen=True)
class Write:
    """A write as the user asked for it: the writer's settings, then the action that writes."""

    settings: tuple[Call, ...]
    action: Call
    started: threading.Event = field(default_factory=threading.Event, compare=False, repr=False)  # set once it writes

    def replay(self, df: Any) -> None:
        """Writes `df` as the user's writer would have written theirs."""
        writer = df.write
        for call in self.settings:
            writer = call.on(writer)
        self.started.set()
        self.action.on(writer)

    def argument(self, name: str, position: int) -> Any:
        """An argument of the action, given by name or at `position`."""
        found = dict(self.action.kwargs).get(name)
        return self.action.args[position] if found is None and len(self.action.args) > position else found

    def options(self) -> dict[str, str]:
        """The writer's options, lower-cased names (Spark reads them so), the action's own last."""
        found: dict[str, str] = {}
        for call in self.settings:
            if call.name == "option":
                found[str(call.args[0]).lower()] = str(call.args[1])
            elif call.name == "options":
                found.update({k.lower(): str(v) for k, v in dict(call.kwargs).items()})
        if self.action.name in ("save", *_FORMAT_ACTIONS):
            found.update({k.lower(): str(v) for k, v in dict(self.action.kwargs).items() if k not in ("path", "mode", "partitionBy") and v is not None})
        return found

    def mode(self) -> str:
        modes = [str(c.args[0]) for c in self.settings if c.name == "mode" and c.args]
        given = self.argument("mode", 1 if self.action.name in _FORMAT_ACTIONS else 2)
        return str(given or (modes[-1] if modes else "errorifexists")).lower()

    def partition_by(self) -> list[str]:
        cols = [c for call in self.settings if call.name == "partitionBy" for c in _names(call.args)]
        given = dict(self.action.kwargs).get("partitionBy")
        return cols + (_names((given,)) if given else [])

    def buckets(self) -> tuple[int, list[str], list[str]] | None:
        """(number of buckets, bucket columns, sort columns) of a `bucketBy` write."""
        bucketed = [c for c in self.settings if c.name == "bucketBy"]
        if not bucketed:
            return None
        call = bucketed[-1]
        sort = [c for s in self.settings if s.name == "sortBy" for c in _names(s.args)]
        return int(call.args[0]), _names(call.args[1:]), sort

    def path(self) -> str | None:
        """The folder a path write writes to (None for a table)."""
        if self.action.name in _TABLE_ACTIONS:
            return None
        given = self.argument("path", 0)
        return str(given) if given is not None else self.options().get("path")

    def table(self) -> str | None:
        return str(self.argument("tableName" if self.action.name == "insertInto" else "name", 0)) if self.action.name in _TABLE_ACTIONS else None

    def describe(self) -> str:
        where = self.path() or self.table()
        return f"{self.action.name}({where!r})"


def _names(args: Iterable[Any]) -> list[str]:
    """Column names given as names, lists of names or (one) list."""
    out: list[str] = []
    for a in args:
        out.extend(str(x) for x in a) if isinstance(a, list | tuple) else out.append(str(a))
    return out


class Recording:
    """What `ember.capture(df, write=...)` hands the user's function: it takes the same calls
    as `df.write` (settings chained, then one action) and records them."""

    def __init__(self) -> None:
        self.settings: list[Call] = []
        self.action: Call | None = None

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name in SETTINGS:
            return lambda *args, **kwargs: self._set(Call(name, args, tuple(kwargs.items())))
        if name in ACTIONS:
            return lambda *args, **kwargs: self._act(Call(name, args, tuple(kwargs.items())))
        raise AttributeError(f"ember captures writes made with {', '.join((*SETTINGS, *ACTIONS))}; not with {name}")

    def _set(self, call: Call) -> Recording:
        if self.action is not None:
            raise EmberError(f"write: {call.name} after the write action {self.action.name}")
        self.settings.append(call)
        return self

    def _act(self, call: Call) -> None:
        if self.action is not None:
            raise EmberError(f"write: two write actions ({self.action.name}, then {call.name}); a capture writes once")
        self.action = call

    def write(self) -> Write:
        if self.action is None:
            raise EmberError("write= must end with a write action (save, parquet, csv, json, orc, text, saveAsTable or insertInto)")
        return Write(tuple(self.settings), self.action)


def recorded(function: Callable[[Any], object]) -> Write:
    """The write `function` makes when handed a writer: `lambda w: w.mode("overwrite").parquet(p)`."""
    if not callable(function):
        raise TypeError(f"write= takes a function of a DataFrameWriter, not {type(function).__name__}")
    recording = Recording()
    function(recording)
    return recording.write()


@dataclass(frozen=True)
class Target:
    """Where a write lands and how it cuts its rows into folders and buckets."""

    folder: Path
    partitions: tuple[int, ...]  # the written columns' positions that name its folders, in order
    buckets: tuple[int, tuple[int, ...], tuple[int, ...]] | None  # (count, bucket columns, sort columns)
    max_rows: int  # rows per file before the writer starts another (0: no bound)


@dataclass(frozen=True)
class Table:
    """What a write into an existing table takes from it."""

    folder: Path
    columns: list[str]
    partitions: list[str]
    buckets: tuple[int, list[str], list[str]] | None  # as `Write.buckets`


def _table(spark: Any, name: str) -> Table | None:
    """The table `name` as the catalog describes it (None: no such table)."""
    if not spark.catalog.tableExists(name):
        return None
    columns = spark.catalog.listColumns(name)
    described = {str(r[0]).strip(): str(r[1]) for r in spark.sql(f"DESCRIBE TABLE EXTENDED {name}").collect()}
    if "Location" not in described:
        raise EmberError(f"write: the table {name} has no files ember can find (a view or a non-file table)")
    buckets = None
    if "Num Buckets" in described:
        buckets = (int(described["Num Buckets"]), _listed(described.get("Bucket Columns")), _listed(described.get("Sort Columns")))
    return Table(local_path(described["Location"]), [c.name for c in columns], [c.name for c in columns if c.isPartition], buckets)


def _listed(text: str | None) -> list[str]:
    """Column names as DESCRIBE lists them.

    >>> _listed("[`k`, `a b`]")
    ['k', 'a b']
    """
    return [c.strip().strip("`") for c in (text or "").strip("[]").split(",") if c.strip()]


def target(spark: Any, write: Write, names: list[str]) -> Target:
    """Where `write` puts the rows of a frame with columns `names`, as far as the files show it."""
    if write.action.name == "xml" or write.options().get("format") == "xml":
        raise EmberError("write: ember does not yet capture XML writes")
    position = {n: i for i, n in enumerate(names)}
    partitions = write.partition_by()
    spec = write.buckets()
    folder: Path | None = None
    if (name := write.table()) is not None:
        table = _table(spark, name)
        if table is None and write.action.name == "insertInto":
            raise EmberError(f"write: insertInto({name!r}): no such table")
        if table is not None:
            folder = table.folder
            if write.action.name == "insertInto":
                position = {n: i for i, n in enumerate(table.columns)}  # insertInto matches columns by position
            if write.action.name == "insertInto" or write.mode() == "append":  # the table's layout, not the writer's
                partitions, spec = table.partitions, table.buckets
    else:
        path = write.path()
        if path is None:
            raise EmberError("write: save() with no path (ember captures writes to files and tables)")
        folder = local_path(spark_uri(Path(path).resolve().as_uri()) if "://" not in path and not path.startswith("file:") else path)
    missing = [c for c in partitions if c not in position]
    if missing:
        raise EmberError(f"write: partition column {missing[0]!r} is not a column of the job ({', '.join(names)})")
    buckets = None
    if spec is not None:
        count, by, sort = spec
        buckets = (count, tuple(position[c] for c in by), tuple(position[c] for c in sort))
    limit = write.options().get("maxrecordsperfile") or spark.conf.get("spark.sql.files.maxRecordsPerFile", "0")
    return Target(folder or Path(), tuple(position[c] for c in partitions), buckets, int(limit))


def files(folder: Path) -> set[Path]:
    """The data files under a write's folder (Spark's own `_`/`.` files left out)."""
    if not folder.is_dir():
        return set()
    found: set[Path] = set()
    for root, dirs, names in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(("_", "."))]
        found.update(Path(root, n) for n in names if not n.startswith(("_", ".")))
    return found


def run(job: Any, count: int, write: Write) -> tuple[pa.Table, tuple[SourceFile, ...]]:
    """Runs `job` once, writing its first `count` columns as `write` says: the job's rows
    (all columns), in the written files' order, and those files as later jobs will read them."""
    spark = job.sparkSession
    columns = list(job.columns)
    where = target(spark, write, columns[:count])
    before = files(where.folder) if where.folder != Path() else set()
    parts = [f"CAST(`{columns[i]}` AS STRING) AS {PART}{k}" for k, i in enumerate(where.partitions)]
    extra = [f"monotonically_increasing_id() AS {TAG}", *parts]
    # the writer's own order (typed folder values, Spark's bucket id, sortBy): it then adds no sort
    order: list[Any] = [columns[i] for i in where.partitions]
    if where.buckets is not None:
        n, by, sort = where.buckets
        bucket = f"pmod(hash({', '.join(f'`{columns[i]}`' for i in by)}), {n})"
        extra.append(f"{bucket} AS {BUCKET}")
        order += [_functions(job).expr(bucket), *(columns[i] for i in sort)]
    cached = job.selectExpr("*", *extra).persist()
    try:
        ordered = cached.sortWithinPartitions(*order, TAG) if order else cached
        write.replay(ordered.select(*(ordered[i] for i in range(count))))
        rows = cached.toArrow()
        # sortBy orders a bucket's rows by their values, not their positions: read the order back
        as_written = ordered.select(TAG).toArrow().column(TAG).to_numpy() if where.buckets and where.buckets[2] else None
    finally:
        cached.unpersist()
    if where.folder == Path():  # a new table: its folder is known once it is made
        where = target(spark, write, columns[:count])
    made = sorted(files(where.folder) - before)
    if not made and write.mode() == "ignore" and before:  # the folder was there: Spark wrote nothing
        return rows.drop_columns(_helpers(rows)), ()
    named = [_parsed(where.folder, f) for f in made]
    takes = layout(
        rows.column(TAG).to_numpy(),
        [rows.column(f"{PART}{k}") for k in range(len(parts))],
        rows.column(BUCKET).to_numpy() if where.buckets is not None else None,
        named,
        where.max_rows,
        write.describe(),
        None if as_written is None else _ranks(rows.column(TAG).to_numpy(), as_written),
    )
    written, offset, picked = [], 0, []
    for (path, *_), take in zip(named, takes, strict=True):
        uri = spark_uri(path.as_uri())
        size, mtime = file_facts(uri)
        written.append(SourceFile(uri, size, mtime, int(take.size), offset))
        offset += int(take.size)
        picked.append(take)
    order_rows = np.concatenate(picked) if picked else np.empty(0, np.int64)
    return rows.drop_columns(_helpers(rows)).take(pa.array(order_rows)), tuple(written)


def _helpers(rows: pa.Table) -> list[str]:
    """The columns `run` added to place rows."""
    return [n for n in rows.column_names if n in (TAG, BUCKET) or n.startswith(PART)]


def _functions(df: Any) -> Any:
    """The functions module that makes columns for `df` (classic or Connect)."""
    if is_connect(df):
        from pyspark.sql.connect import functions as connect_functions

        return connect_functions
    from pyspark.sql import functions

    return functions


def _ranks(tags: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Each row's place in `order` (the rows' tags as written).

    >>> _ranks(np.array([5, 1, 9]), np.array([9, 5, 1])).tolist()
    [1, 2, 0]
    """
    by_tag = np.argsort(tags)
    ranks = np.empty(tags.size, np.int64)
    ranks[by_tag[np.searchsorted(tags[by_tag], order)]] = np.arange(order.size)
    return ranks


def _groups(
    tags: np.ndarray, parts: list[pa.ChunkedArray], buckets: np.ndarray | None, order: np.ndarray
) -> dict[tuple[Any, ...], np.ndarray]:
    """Rows by (task, folder values, bucket), each group's rows by `order` (vectorized:
    a write's rows are many, its groups few). An empty folder value is a null one."""
    codes, spellings = [], []
    for p in parts:
        column = p.combine_chunks()
        column = pc.if_else(pc.equal(column, ""), pa.scalar(None, column.type), column)
        encoded = pc.dictionary_encode(column)
        codes.append(encoded.indices.fill_null(-1).to_numpy().astype(np.int64))
        spellings.append(encoded.dictionary.to_pylist())
    task = np.asarray(tags, np.int64) >> _TASK_BITS
    bucket = np.full(task.size, -1, np.int64) if buckets is None else np.asarray(buckets, np.int64)
    keys = np.stack([task, *codes, bucket]) if task.size else np.empty((2 + len(codes), 0), np.int64)
    rows = np.lexsort([order, *keys[::-1]])  # the last key sorts first
    keys = keys[:, rows]
    cuts = [0, *(np.flatnonzero(np.any(keys[:, 1:] != keys[:, :-1], axis=0)) + 1).tolist(), rows.size]
    groups = {}
    for start, stop in itertools.pairwise(cuts):
        if start == stop:
            continue
        k = keys[:, start]
        values = (None if c < 0 else spellings[j][c] for j, c in enumerate(k[1:-1].tolist()))
        groups[(int(k[0]), *values, int(k[-1]))] = rows[start:stop]
    return groups


Named = tuple[Path, int, tuple[str | None, ...], int, int]  # (file, task, folder values, bucket, sequence)


def _parsed(folder: Path, file: Path) -> Named:
    """A written file's task, partition values (as its folders spell them), bucket and sequence."""
    m = _FILE.match(file.name)
    if m is None:
        raise EmberError(f"write: {file} does not have the name Spark's writer gives its files; ember cannot place its rows")
    values = []
    for part in file.parent.relative_to(folder).parts:
        _, _, value = part.partition("=")
        value = unquote(value)
        values.append(None if value == _DEFAULT_PARTITION else value)
    return file, int(m.group(1)), tuple(values), int(m.group(3) or -1), int(m.group(4))


def layout(
    tags: np.ndarray,
    parts: list[pa.ChunkedArray],
    buckets: np.ndarray | None,
    named: list[Named],
    max_rows: int,
    what: str,
    ranks: np.ndarray | None = None,
) -> list[np.ndarray]:
    """Per written file (in `named`'s order), the rows it holds, in file order.

    A task writes its rows sorted by (folder, bucket, job position); a file holds a run of
    one task's rows of one folder and bucket, `max_rows` of them before the next file of
    that run starts (or all of them). Files that do not add up to the rows are refused.
    `ranks`: the rows' written order where a bucket's sort columns set it (else their tags').

    >>> tags = np.array([0, 1, 2, 1 << 33])   # three rows of task 0, one of task 1
    >>> parts = [pa.chunked_array([["b", "a", "b", "a"]])]
    >>> named = [(Path("d=a/x"), 0, ("a",), -1, 0), (Path("d=b/y"), 0, ("b",), -1, 0), (Path("d=a/z"), 1, ("a",), -1, 0)]
    >>> [t.tolist() for t in layout(tags, parts, None, named, 0, "w")]
    [[1], [0, 2], [3]]
    """
    groups = _groups(tags, parts, buckets, tags if ranks is None else ranks)
    runs: dict[tuple[Any, ...], list[int]] = {}
    for i, (_, task, values, bucket, _) in enumerate(named):
        runs.setdefault((task, *values, bucket), []).append(i)
    takes: list[np.ndarray] = [np.empty(0, np.int64)] * len(named)
    for key, rows in groups.items():
        file_ids = sorted(runs.pop(key, []), key=lambda i: named[i][4])
        need = math.ceil(len(rows) / max_rows) if max_rows > 0 else 1
        if len(file_ids) != need:
            raise EmberError(f"{what}: {len(rows)} rows of task {key[0]} went to {len(file_ids)} files, not {need}; ember cannot place them")
        step = max_rows if max_rows > 0 else len(rows)
        for k, i in enumerate(file_ids):
            takes[i] = rows[k * step : (k + 1) * step]
    if runs and groups:  # a task with no rows writes no file (unless the whole job is empty)
        stray = named[next(iter(runs.values()))[0]][0]
        raise EmberError(f"{what}: the file {stray} holds rows ember did not see written; another writer was writing there")
    return takes
