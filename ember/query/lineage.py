"""The lineage of one captured job: its output and the indexes that trace it."""

from __future__ import annotations

import functools
import json
import os
import threading
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, wait
from dataclasses import asdict, replace
from typing import Any, TypeAlias

import duckdb
import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from ember import progress
from ember.arrow import positions
from ember.engines import duck
from ember.engines.spark.frames import is_connect
from ember.engines.spark.numbering import KeyedNumbering, reopen_text
from ember.engines.spark.plan_import import declared_relation
from ember.errors import EmberError, IdOutOfRangeError, InvalidPredicateError, first_line
from ember.fetch.rows import check_unchanged, key_rids, live_keyed, source_relation
from ember.plan.sources import COUNTED, KEYED, OID, RID, Source, SourceFile, saved_file
from ember.pools import pool
from ember.query import distributed, grouped, links
from ember.query.distributed import SparkTrace
from ember.query.html import render
from ember.query.links import Catalog, Links
from ember.query.trace import ForwardTrace, Trace, source_by_name, source_name
from ember.store.columns import sorted_unique
from ember.store.files import Stored, filesystem, read_store, write_store
from ember.store.groupings import Grouping
from ember.store.index import LineageIndex
from ember.store.kept import KEEP_SHARE, held_copies, rows_to_keep
from ember.store.later import materialized

EXPORT_FORMAT = "ember-lineage-json"


class Lineage:
    """Row-level lineage of a job; traces are answered in-process from the index."""

    def __init__(
        self,
        output: pa.Table,
        index: LineageIndex | Future[tuple[LineageIndex, list[Source], tuple[Grouping, ...]]],
        sources: Iterable[Source],
        mode: str = "inject",
        plan: str = "",
        written: tuple[SourceFile, ...] = (),
        groupings: tuple[Grouping, ...] = (),
        columns: Sequence[tuple[str, list[tuple[str, str]]]] = (),
        hold_rows: float = 0.0,
        why: str = "",
    ):
        self._output = output.append_column(OID, positions(output.num_rows))
        self._state = index  # a Future while a deferred capture is still building it
        self._settling = threading.Lock()
        self._named = {s.name: s for s in sources if s.kind != "none"}
        self._groupings = groupings  # what the workload asked to compute at capture
        self.mode = mode  # how the lineage was made: inject, defer, consume (a query's result)
        self.why = why  # why that strategy (`strategy`)
        self.plan = plan
        self.written = written  # files the job wrote (`capture(write=)`), each with its first output row
        self.columns = list(columns)  # per output column: the (source, column) pairs it is computed from
        self.store: str | None = None  # where it was saved or loaded from
        self._holding = pool("rows").submit(self._hold, hold_rows) if hold_rows > 0 else None
        links.remember(self)

    @property
    def sources(self) -> list[str]:
        """Names of the sources the job reads."""
        return sorted(self._named)

    @property
    def ready(self) -> bool:
        """False while work after capture goes on: a deferred capture building the index
        (traces wait for it), or the copy of the rows it reaches being made (fetches read
        the source meanwhile)."""
        state = self._state  # read once: another thread may settle it meanwhile
        built = not isinstance(state, Future) or state.done()
        return built and (self._holding is None or self._holding.done())

    @property
    def strategy(self) -> str:
        """How capture ran: "inject" (lineage rode in the job) or "defer" (the result came
        first, lineage is built in the background), and why, as `"defer: ..."`."""
        return f"{self.mode}: {self.why}" if self.why else self.mode

    def wait(self, timeout: float | None = None) -> bool:
        """Waits until the lineage is `ready` (at most `timeout` seconds) and returns `ready`.
        A deferred capture that failed raises its error here."""
        pending: list[Future[Any]] = [f for f in (self._state, self._holding) if isinstance(f, Future)]
        wait(pending, timeout=timeout)
        state = self._state  # read once: another thread may settle it meanwhile
        if isinstance(state, Future) and state.done():
            self._settle()
        return self.ready

    @property
    def _index(self) -> LineageIndex:
        self._settle()
        state = self._state
        assert not isinstance(state, Future)
        return state

    @property
    def _sources(self) -> dict[str, Source]:
        self._settle()
        return self._named

    def _settle(self) -> None:
        if not isinstance(self._state, Future):  # settled: no lock to take (traces from many threads)
            return
        with self._settling:
            if isinstance(self._state, Future):
                if not self._state.done():
                    progress.note(f"ember: waiting for the background capture of {self.plan or 'the job'} (strategy defer)")
                index, sources, groupings = self._state.result()
                self._named = {s.name: s for s in sources if s.kind != "none"}
                self._groupings = groupings
                self._state = index

    def _hold(self, share: float) -> None:
        """Copies the rows the whole output reaches in local Parquet sources, where they are at
        most a `share` of them, so a trace's rows are not decoded from scattered pages. Not
        where a side table is read at trace time (`store.later`): finding what the output
        reaches would read it whole, on the cores of the user's next job."""
        index = self._index
        if index.built_remotely or index.later or not any(s.kind == "parquet" for s in self._named.values()):
            return
        reached = index.backward(np.arange(self._output.num_rows, dtype=np.int64))
        held = held_copies(self._named.values(), reached, share)
        with self._settling:
            self._named = {**self._named, **held}

    @property
    def index_bytes(self) -> int:
        """Bytes the lineage index takes (encoded; on disk for a loaded store)."""
        return self._index.nbytes

    def output(self) -> pa.Table:
        """The job's output rows with `ember_oid` (their position)."""
        return self._output

    def backward(
        self,
        oids: Iterable[int] | None = None,
        where: str | None = None,
        through: Through = None,
        source_where: Mapping[str, str] | None = None,
    ) -> Trace:
        """Source rows behind the output rows chosen by `oids` or by a SQL `where` over output columns.

        Where a source's files were written by a captured job (`capture(write=...)`), the
        trace goes on into that job's sources, to any depth: writers are found among this
        process's lineages, the catalogs `EMBER_CATALOG` names, and `through` (lineages,
        `ember.catalog`s or folders of stores). `source_where` keeps, per source name, only the traced rows satisfying a SQL
        predicate over its columns; a predicate over the workload's `partition_by` column
        reads only the matching partitions of the lineage, never the source.
        """
        linked = _links(through)
        restrict = _predicates(source_where)
        chosen = choose(self._output, "output", oids, where, OID)
        sources, found = self._trace_back(chosen, linked)
        _unlinked(linked, self)
        for name, pred in restrict.items():
            src = source_by_name(sources, name)
            found[src.key] = self._restricted(src, chosen, found.get(src.key, np.empty(0, np.int64)), pred, linked.found)
        one = chosen.size == 1 and not linked.found and not source_where
        return Trace(sources, found, answers=functools.partial(self._answer, int(chosen[0])) if one else None)

    def _restricted(
        self, src: Source, oids: np.ndarray, rids: np.ndarray, where: str, linked: bool
    ) -> np.ndarray:
        """The traced `rids` of `src` that satisfy `where`: from a partition where one fits
        (not across jobs: this job's partitions describe its own sources only)."""
        for g in () if linked else self._groupings:
            if g.column is not None and g.source == src.name:
                hit = g.skip(oids, where)
                if hit is not None:
                    return hit
        return np.intersect1d(rids, chosen_rids(src, None, where), assume_unique=True)

    def _answer(self, oid: int, sql: str) -> Lineage | None:
        """A consuming query over one output row's lineage, from the groupings made at capture."""
        if not self._groupings:
            return None
        form = grouped.shape(sql)
        for g in self._groupings:
            found = grouped.answer(g, oid, sql, form, self._sources[g.source])
            if found is not None:
                return found
        return None

    def backward_distributed(
        self, spark: SparkSession, oids: Iterable[int] | None = None, where: str | None = None
    ) -> SparkTrace:
        """The backward trace as Spark jobs over the saved store, for lineages too big for
        one process: rids and rows come back as DataFrames, and only the traced row
        numbers travel from the driver. Needs a saved (or loaded) lineage."""
        if self.store is None:
            raise EmberError("backward_distributed reads a saved store: call lin.save(path) first")
        chosen = choose(self._output, "output", oids, where, OID)
        return distributed.backward(spark, self.store, self._sources, chosen)

    def _trace_back(self, oids: np.ndarray, linked: Links) -> tuple[dict[str, Source], dict[str, np.ndarray]]:
        sources, found = dict(self._sources), self._index.backward(oids)
        for src in self._sources.values():
            for link in linked(self, src):
                up_sources, up_found = link.upstream._trace_back(link.oids(found.get(src.key, np.empty(0, np.int64))), linked)
                for name, up in up_sources.items():
                    if name in sources and sources[name].key != up.key:
                        raise EmberError(
                            f"two different sources are named {name!r} across the traced jobs; "
                            "name them apart with ember.source(df, name)"
                        )
                    sources[name] = up
                    if up.key in up_found:
                        found[up.key] = np.union1d(found.get(up.key, up_found[up.key]), up_found[up.key])
        return sources, found

    def forward(
        self,
        source: str,
        ids: Iterable[int] | None = None,
        where: str | None = None,
        through: Through = None,
        keys: KeyValues | None = None,
    ) -> ForwardTrace:
        """Output rows reached by the rows of `source` chosen by `ids`, by a SQL `where` over
        its columns, or (a keyed source) by their `keys`: a pyarrow table or a dict of the
        key's columns, or a list of values (of tuples, for a key of several columns).

        `source` may be a source of an upstream job whose written files this job read
        (writers found as `backward` finds them): the rows it reached there are followed
        into this job.
        """
        source_name(source)
        if source in self._sources:
            src = self._sources[source]
            return ForwardTrace(self._output, self._index.forward(src.key, chosen_rids(src, ids, where, keys)))
        linked = _links(through)
        reached = self._forward_from(source, ids, where, linked, keys)
        _unlinked(linked, self)
        if reached is None:
            source_by_name(self._sources, source)  # raises: no job on the way reads it
        return ForwardTrace(self._output, np.empty(0, np.int64) if reached is None else reached)

    def _forward_from(
        self, source: str, ids: Iterable[int] | None, where: str | None, linked: Links, keys: KeyValues | None = None
    ) -> np.ndarray | None:
        """Oids of this job reached by rows of `source`, read here or by a job upstream
        (None: no job on the way reads it)."""
        if source in self._sources:
            src = self._sources[source]
            return np.asarray(self._index.forward(src.key, chosen_rids(src, ids, where, keys)), np.int64)
        reached: np.ndarray | None = None
        for src in self._sources.values():
            for link in linked(self, src):
                up = link.upstream._forward_from(source, ids, where, linked, keys)
                if up is not None:
                    here = np.asarray(self._index.forward(src.key, link.rids(up)), np.int64)
                    reached = here if reached is None else np.union1d(reached, here)
        return reached

    def forward_distributed(
        self, spark: SparkSession, source: str, ids: Iterable[int] | None = None, where: str | None = None
    ) -> DataFrame:
        """The forward trace as Spark jobs over the saved store: a DataFrame of `ember_oid`s."""
        if self.store is None:
            raise EmberError("forward_distributed reads a saved store: call lin.save(path) first")
        src = source_by_name(self._sources, source_name(source))
        return distributed.forward(spark, self.store, src, chosen_rids(src, ids, where))

    def save(self, path: str, overwrite: bool = False, keep_rows: float = KEEP_SHARE) -> None:
        """Writes this lineage as a store at `path` (a folder, or any URI pyarrow can write).

        The write is atomic: a crash leaves either the old store or the new one.
        `ember.load(path, spark)` reads it back. Where the lineage reaches at most a
        `keep_rows` share of a local Parquet source's rows, the store keeps a copy of
        those rows, so traces with rows need not decode the source's pages (0 keeps none).
        A lineage whose levels the executors built keeps no copies: finding what it
        reaches would read it whole on the driver. Those levels' parts are linked into
        the store where it shares their disk, else copied. Side tables left to traces
        (`store.later`) are read whole into the store.
        """
        if self._holding is not None and keep_rows > 0:
            wait([self._holding])  # its copies are the store's: not read twice at once
        sources = tuple(self._sources.values())
        keep_rows = 0 if self._index.built_remotely else keep_rows
        reached = self._index.backward(np.arange(self._output.num_rows, dtype=np.int64)) if keep_rows > 0 else {}
        kept = {s.key: rows_to_keep(s, reached.get(s.key, np.empty(0, np.int64)), keep_rows) for s in sources}
        info = {
            "mode": self.mode,
            "plan": self.plan,
            "written": [asdict(f) for f in self.written],
            "columns": [[name, [list(o) for o in origins]] for name, origins in self.columns],
            "text": {s.key: s.data.recipe() for s in sources if s.kind in COUNTED and s.data is not None},
        }
        copies = {k: t for k, t in kept.items() if t is not None}
        index = materialized(self._index)
        stored = Stored(self._output.drop_columns([OID]), index, sources, info, self._groupings, copies)
        write_store(path, stored, overwrite)
        self.store = path

    def export_json(self, path: str, oids: Iterable[int] | None = None) -> None:
        """Writes the lineage (or only that of `oids`) as JSON for other tools.

        Format (`ember-lineage-json`, version 1): `sources` maps each source name to its
        kind, row count and files; `lineage` lists, per output row, its `oid` and per
        source the sorted `ember_rid`s it came from. Output rows with no source rows are
        listed with an empty `sources` object.
        """
        n = self._output.num_rows
        chosen = np.arange(n, dtype=np.int64) if oids is None else _ids(oids, n, "oids", "ember_oid of the output")
        pairs = self._index.backward_pairs(chosen)
        per_oid: dict[int, dict[str, list[int]]] = {int(o): {} for o in chosen}
        for name, src in sorted(self._sources.items()):
            owners, rids = pairs.get(src.key, (np.empty(0, np.int64), np.empty(0, np.int64)))
            cuts = np.flatnonzero(np.diff(owners)) + 1
            for chunk_o, chunk_r in zip(np.split(owners, cuts), np.split(rids, cuts), strict=True):
                if chunk_o.size:
                    per_oid[int(chunk_o[0])][name] = chunk_r.tolist()
        doc: dict[str, Any] = {
            "format": EXPORT_FORMAT,
            "version": 1,
            "plan": self.plan,
            "output": {"rows": self._output.num_rows, "columns": self._output.column_names[:-1]},
            "sources": {
                name: {"kind": s.kind, "rows": s.rows, "files": [f.uri for f in s.files]}
                for name, s in sorted(self._sources.items())
            },
            "lineage": [{"oid": o, "sources": srcs} for o, srcs in per_oid.items()],
        }
        fs, target = filesystem(path)
        with fs.open_output_stream(target) as out:
            out.write(json.dumps(doc).encode())

    def _repr_html_(self) -> str:
        counts = [(n, s.rows) for n, s in sorted(self._sources.items())]
        return render(f"ember lineage ({self.mode}) of {self.plan}", counts, [("output", self._output)])

    def __repr__(self) -> str:
        return f"<ember lineage: {self._output.num_rows} output rows from {', '.join(self.sources)}>"


def load(path: str | os.PathLike[str], spark: SparkSession | Callable[[], SparkSession] | None = None) -> Lineage:
    """Opens a lineage store written by `Lineage.save`.

    Traces need no Spark and start none. Fetching rows of a CSV, JSON, XML, text, ORC or
    binary-file source (or selecting them `where=`) counts its files again on Spark, at
    the first such fetch: in `spark` (or the session a callable returns), else in the
    active session (on a thread with none, the session this process made).
    """
    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"ember.load takes the path of a saved store (a str), not {type(path).__name__}")
    if spark is not None and not isinstance(spark, SparkSession) and not is_connect(spark) and not callable(spark):
        raise TypeError(f"ember.load's spark is a SparkSession (or a function returning one), not {type(spark).__name__}")
    path = os.fspath(path)
    if not isinstance(path, str):
        raise TypeError(f"ember.load takes the path of a saved store (a str), not {type(path).__name__}")
    stored = read_store(path)
    sources = [_reopen(s, stored.info.get("text", {}), spark) for s in stored.sources]
    written = tuple(saved_file(f) for f in stored.info.get("written", []))
    info = stored.info
    columns = [(name, [(s, c) for s, c in origins]) for name, origins in info.get("columns", [])]
    lin = Lineage(
        stored.output, stored.index, sources, info.get("mode", "inject"), info.get("plan", ""), written, stored.groupings, columns
    )
    lin.store = path
    return lin


def _reopen(source: Source, recipes: dict[str, Any], spark: SparkSession | Callable[[], SparkSession] | None) -> Source:
    if source.remote and source.kind not in COUNTED:
        from ember.engines.spark.served import ServerFiles

        return replace(source, data=ServerFiles(source, lambda: _connected(spark, source)))
    if source.kind == KEYED:
        return replace(source, data=_Rekeyed(source, spark))
    if source.kind not in COUNTED or source.key not in recipes:
        return source
    return replace(source, data=_Recount(source, recipes[source.key], spark))


class _Rekeyed:
    """A loaded keyed source: its keys from the store, its rows read by key through the
    relation `ember.source(df, name, key=[...])` declared for the same source again in the
    session (a store keeps no connection settings, which could hold credentials)."""

    def __init__(self, source: Source, spark: SparkSession | Callable[[], SparkSession] | None):
        self.keys: pa.Table = source.data
        self._source, self._spark = source, spark

    def _live(self) -> Any:
        spark = _resolved(self._spark)
        relation = None
        if spark is None or (relation := declared_relation(spark, self._source.key)) is None:
            name = self._source.name
            raise EmberError(
                f"source {name!r} is keyed: a loaded store holds its keys (t.keys), not the connection that reads "
                f"its rows; declare it again in this session, ember.source(df, {name!r}, key="
                f"{list(self._source.row_key)!r}) on a DataFrame that reads it, and load with ember.load(path, spark)"
            )
        return KeyedNumbering(self.keys, relation)

    def rows(self, rids: np.ndarray) -> pa.Table:
        rows: pa.Table = self._live().rows(rids)
        return rows

    def numbered(self) -> DataFrame:
        numbered: DataFrame = self._live().numbered()
        return numbered


class _Recount:
    """A loaded counted source's reader, counted again on Spark at its first use, so a
    store whose traces never fetch such rows starts no JVM."""

    def __init__(self, source: Source, recipe: dict[str, Any], spark: SparkSession | Callable[[], SparkSession] | None):
        self._source, self._recipe, self._spark = source, recipe, spark
        self._counted: Any = None
        self._lock = threading.Lock()

    def _data(self) -> Any:
        with self._lock:
            if self._counted is None:
                spark = _resolved(self._spark)
                if spark is None:
                    raise EmberError(
                        f"source {self._source.name!r} is {self._source.kind.upper()}: reading its rows needs Spark: "
                        "ember.load(path, spark)"
                    )
                if is_connect(spark):
                    from ember.engines.spark.served import recounted

                    self._counted = recounted(spark, self._source, self._recipe).data  # type: ignore[arg-type]  # a Connect session
                else:
                    self._counted = reopen_text(spark, self._source, self._recipe).data
            return self._counted

    def rows(self, rids: list[int]) -> Any:
        return self._data().rows(rids)

    def check(self) -> None:
        """A remote source's files checked by its server (`fetch.rows.check_unchanged`)."""
        self._data().check()

    def numbered(self) -> DataFrame:
        numbered: DataFrame = self._data().numbered()
        return numbered


def _connected(spark: SparkSession | Callable[[], SparkSession] | None, source: Source) -> Any:
    """The Spark Connect session a loaded remote source's rows are read through."""
    session = _resolved(spark)
    if session is None or not is_connect(session):
        raise EmberError(
            f"source {source.name!r} was read by a Spark Connect server (the capturing process could not read its "
            "files): reading its rows needs ember.load(path, spark) with a session of such a server"
        )
    return session


def _resolved(spark: SparkSession | Callable[[], SparkSession] | None) -> SparkSession | None:
    """The session `ember.load` was given (or the one its callable returns), else `_session()`."""
    return spark() if callable(spark) else spark or _session()


def _session() -> SparkSession | None:
    """The active Spark session, or on a thread that has none (a worker thread of a web app
    or a notebook server: Spark's active session is per thread), the one this process made."""
    return SparkSession.getActiveSession() or getattr(SparkSession, "_instantiatedSession", None)


# Key values that choose rows of a keyed source (`Lineage.forward(keys=)`).
KeyValues: TypeAlias = pa.Table | Mapping[str, Sequence[Any]] | Sequence[Any]


def chosen_rids(src: Source, ids: Iterable[int] | None, where: str | None, keys: KeyValues | None = None) -> np.ndarray:
    """Rids of `src` given as ids, by a SQL `where` over its columns, or (a keyed source) by
    key values (exactly one)."""
    if keys is not None:
        if ids is not None or where is not None:
            raise TypeError("give exactly one of ids, where or keys")
        if src.kind != KEYED:
            raise EmberError(f"source {src.name!r} is not keyed: choose its rows by ids or where")
        return key_rids(src, key_table(keys, src.row_key))
    if (ids is None) == (where is None):
        raise TypeError("give exactly one of ids or where")
    if ids is not None and src.kind == KEYED:
        raise EmberError(
            f"source {src.name!r} is identified by its key ({', '.join(src.row_key)}), not by row position: "
            "choose its rows by keys= (or where=)"
        )
    if where is not None and (src.kind in COUNTED or src.kind == KEYED or src.remote):
        return _select_spark(src, condition(where))
    if where is not None:
        return _select(source_relation(src), condition(where), RID, f"source {src.name!r}", src.rows)
    return _ids(ids, src.rows, "ids", f"rid of source {src.name!r}")


def key_table(keys: KeyValues, row_key: tuple[str, ...]) -> pa.Table:
    """Key values as a table of the key's columns.

    >>> key_table([1, 2], ("id",)).to_pydict()
    {'id': [1, 2]}
    >>> key_table([(1, "a")], ("id", "site")).to_pydict()
    {'id': [1], 'site': ['a']}
    """
    if isinstance(keys, pa.Table):
        return keys
    if isinstance(keys, Mapping):
        return pa.table({str(k): list(v) for k, v in keys.items()})
    if isinstance(keys, str | bytes) or not _iterable(keys):
        raise TypeError(f"keys are a pyarrow table, a dict of columns or a list of values, not {type(keys).__name__}")
    values = list(keys)
    if len(row_key) == 1:
        return pa.table({row_key[0]: values})
    if any(not isinstance(v, tuple | list) or len(v) != len(row_key) for v in values):
        raise TypeError(f"a key of {len(row_key)} columns ({', '.join(row_key)}) is given as tuples of {len(row_key)} values")
    return pa.table({c: [v[i] for v in values] for i, c in enumerate(row_key)})


def choose(table: pa.Table, what: str, ids: Iterable[int] | None, where: str | None, column: str) -> np.ndarray:
    """Row numbers of `table` given as ids or by a SQL `where` over its columns."""
    if (ids is None) == (where is None):
        raise TypeError("give exactly one of ids/oids or where")
    if where is not None:
        return _select(table, condition(where), column, what, table.num_rows)
    return _ids(ids, table.num_rows, "oids", f"ember_oid of the {what}")


_INT64 = np.iinfo(np.int64)


def as_ids(ids: object, name: str = "ids") -> np.ndarray:
    """`ids` (an iterable of integers: a list, a range, an integer numpy or Arrow array, ...)
    as a one-dimensional int64 array; anything else is refused in one line, never cast
    (a float, a boolean mask, a string). Values past int64 are `IdOutOfRangeError`.

    >>> as_ids(range(3)).tolist()
    [0, 1, 2]
    >>> as_ids([1.5])
    Traceback (most recent call last):
    ...
    TypeError: ids are integers (an iterable of int, or an integer array), not float64 values like 1.5
    """
    if isinstance(ids, str | bytes | bytearray | memoryview) or not _iterable(ids):
        raise TypeError(f"{name} are an iterable of integers (like [0, 3]), not {type(ids).__name__}")
    if isinstance(ids, pa.Array | pa.ChunkedArray) and ids.null_count:
        raise TypeError(f"{name} are integers, not nulls (the Arrow array holds {ids.null_count})")
    if not isinstance(ids, np.ndarray) and hasattr(ids, "__array__"):  # pandas, Arrow
        ids = np.asarray(ids)
    elif not isinstance(ids, np.ndarray):
        values = list(ids)  # type: ignore[call-overload]
        if any(isinstance(v, bool | np.bool_) for v in values):  # numpy would make True a 1
            raise TypeError(f"{name} are integers, not booleans (for a mask, pass np.flatnonzero(mask))")
        ids = np.asarray(values)
    assert isinstance(ids, np.ndarray)
    if ids.ndim != 1:
        if ids.ndim == 0:
            raise TypeError(f"{name} are an iterable of integers (like [0, 3]), not one {ids.dtype} value")
        raise ValueError(f"{name} are one-dimensional, not an array of shape {ids.shape}")
    if ids.size == 0:
        return np.empty(0, np.int64)
    kind = ids.dtype.kind
    if kind == "O":
        values = ids.tolist()
        bad = [v for v in values if isinstance(v, bool) or not isinstance(v, int | np.integer)]
        if bad:
            raise TypeError(f"{name} are integers, not {type(bad[0]).__name__} values like {bad[0]!r}")
        big = [int(v) for v in values if not _INT64.min <= int(v) <= _INT64.max]
        if big:
            raise IdOutOfRangeError(f"{name} out of range: {big[:5]} (past 64 bits)")
        return ids.astype(np.int64)
    if kind == "b":
        raise TypeError(f"{name} are integers, not booleans (for a mask, pass np.flatnonzero(mask))")
    if kind == "u":
        if int(ids.max()) > _INT64.max:
            raise IdOutOfRangeError(f"{name} out of range: {[int(v) for v in ids[ids > _INT64.max][:5]]} (past 64 bits)")
        return ids.astype(np.int64)
    if kind == "i":
        return ids.astype(np.int64, copy=False)
    example = ids[0].item() if kind in "fcUS" else ids[0]
    raise TypeError(
        f"{name} are integers (an iterable of int, or an integer array), not {ids.dtype} values like {example!r}"
    )


def _iterable(value: object) -> bool:
    try:
        iter(value)  # type: ignore[call-overload]
    except TypeError:
        return False
    return True


def _ids(ids: Iterable[int] | None, bound: int, name: str, what: str) -> np.ndarray:
    arr = sorted_unique([as_ids(ids, name)])
    bad = arr[(arr < 0) | (arr >= bound)]
    if bad.size:
        valid = f"valid: 0 to {bound - 1}" if bound > 0 else "there are no rows"
        raise IdOutOfRangeError(f"{what} out of range: {bad[:5].tolist()} ({valid})")
    return arr


def condition(where: object) -> str:
    """A `where=` argument checked to be a non-empty string (its SQL is checked where it runs)."""
    if not isinstance(where, str):
        raise TypeError(f"where is a SQL condition (a str), not {type(where).__name__}")
    if not where.strip():
        raise InvalidPredicateError("where is empty: give a SQL condition, such as where=\"x > 1\"")
    return where


Through = Sequence["Lineage | Catalog | str | os.PathLike[str]"] | Catalog | str | os.PathLike[str] | None


def _links(through: object) -> Links:
    """`through=`: lineages, catalogs or folders of stores to find upstream writers in,
    besides this process's lineages and the `EMBER_CATALOG` folders."""
    if through is None:
        given: tuple[object, ...] = ()
    elif isinstance(through, Catalog | str | os.PathLike):
        given = (through,)
    elif isinstance(through, Lineage | bytes) or not isinstance(through, Iterable):
        raise TypeError(f"through is a list of upstream lineages, catalogs or folders, not {type(through).__name__}")
    else:
        given = tuple(through)
    lineages, catalogs = [], []
    for item in given:
        if isinstance(item, Lineage):
            lineages.append(item)
        elif isinstance(item, Catalog):
            catalogs.append(item)
        elif isinstance(item, str | os.PathLike):
            catalogs.append(catalog(item))
        else:
            raise TypeError(
                "through lists lineages (ember.Lineage), catalogs (ember.catalog) or folders of stores, "
                f"not {type(item).__name__}"
            )
    catalogs += [catalog(p) for p in links.catalog_folders()]
    return Links(lineages, catalogs, given=bool(given))


def _unlinked(linked: Links, lin: Lineage) -> None:
    """Warns where `through=` named writers and none of them wrote a file the trace read."""
    if linked.given and not linked.found:
        warnings.warn(
            f"through= links nothing: no job it names wrote the files of {', '.join(lin.sources) or 'any source'}",
            stacklevel=3,
        )


def catalog(path: str | os.PathLike[str], spark: SparkSession | Callable[[], SparkSession] | None = None) -> Catalog:
    """The lineage stores under folder `path` (saved stores, `ember run` folders), found by
    the files their jobs wrote: pass it as `through=`, or name the folder in the
    `EMBER_CATALOG` setting, and traces continue into the job that wrote a source's files.
    Each store is opened (`ember.load(store, spark)`) when a trace first reaches it."""
    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"ember.catalog takes the path of a folder (a str), not {type(path).__name__}")
    if not os.fspath(path):
        raise EmberError("ember.catalog takes the path of a folder, not an empty string")
    return Catalog(path, lambda store: load(store, spark))


def _predicates(source_where: object) -> dict[str, str]:
    """`source_where=`: source name → SQL condition."""
    if source_where is None:
        return {}
    if not isinstance(source_where, Mapping):
        raise TypeError(f"source_where maps source names to SQL conditions (a dict), not {type(source_where).__name__}")
    return {source_name(name): condition(pred) for name, pred in source_where.items()}


def _select(relation: pa.Table | str, where: str, column: str, what: str, bound: int) -> np.ndarray:
    """Values of `column` (row numbers below `bound`) of the rows of `relation` satisfying the
    SQL condition `where`. The condition is parsed as one expression (DuckDB's relational
    `filter`), so no text of it can end the query and start another; it must be a condition
    (boolean), not a value DuckDB would cast to one."""
    con = duck.connect()
    try:
        if isinstance(relation, pa.Table):
            con.register("rel", relation)
        else:
            con.execute(f"CREATE TEMP VIEW rel AS {relation}")
        try:
            rel = con.table("rel")
            kinds = rel.project(where).types
            if len(kinds) != 1 or str(kinds[0]) not in ("BOOLEAN", '"NULL"', "NULL"):
                shown = ", ".join(str(k) for k in kinds)
                raise InvalidPredicateError(f"where={where!r} is not one condition over the {what} (it gives {shown}, not BOOLEAN)")
            res = rel.filter(where).project(column).fetchnumpy()
        except duckdb.ParserException as e:
            raise InvalidPredicateError(f"where={where!r} does not parse: {first_line(e)}") from None
        except duckdb.BinderException as e:
            raise InvalidPredicateError(f"where={where!r} does not fit the columns of the {what}: {first_line(e)}") from None
        except duckdb.Error as e:
            raise InvalidPredicateError(f"where={where!r} failed on the {what}: {first_line(e)}") from None
    finally:
        con.close()
    found = sorted_unique([res[column].astype(np.int64)])
    if found.size and (found[0] < 0 or found[-1] >= bound):  # ids come from ember's own column: never
        raise EmberError(f"where={where!r} selected rows that are not in the {what}")
    return found


def _select_spark(source: Source, where: str) -> np.ndarray:
    """Rids of a counted (CSV, JSON, XML, text, ORC, binary), keyed or remote source's rows
    matching `where`, evaluated by Spark (one job)."""
    check_unchanged(source)
    if source.data is None:
        raise EmberError(f"source {source.name!r} is {source.kind.upper()}: reading it needs ember.load(path, spark)")
    df = (live_keyed(source) if source.kind == KEYED else source.data).numbered()
    try:
        rows = df.filter(where).select(RID).toArrow()
    except Exception as e:  # Spark's parse and analysis errors share no base class worth naming
        raise InvalidPredicateError(f"where={where!r} failed on source {source.name!r}: {first_line(e)}") from None
    return sorted_unique([rows.column(RID).to_numpy().astype(np.int64)])
