"""Trace results: which source rows (backward) or output rows (forward) a trace reached."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np
import pyarrow as pa

from ember.arrow import int64s
from ember.errors import EmberError, UnknownSourceError
from ember.fetch.rows import read_rows, source_keys
from ember.plan.sources import KEYED, Source
from ember.query.html import PREVIEW, render

if TYPE_CHECKING:
    from ember.query.lineage import Lineage


def source_name(name: object) -> str:
    """A source name argument, checked to be a string."""
    if not isinstance(name, str):
        raise TypeError(f"a source is named by a str (like 'lineitem'), not {type(name).__name__}")
    return name


def source_by_name(sources: Mapping[str, Source], name: str) -> Source:
    if source_name(name) not in sources:
        known = ", ".join(sorted(sources)) or "none"
        raise UnknownSourceError(f"unknown source {name!r}; this lineage has: {known}")
    return sources[name]


class Trace:
    """A backward trace: per source, the rids in the lineage of the chosen output rows."""

    def __init__(
        self,
        sources: Mapping[str, Source],
        ids_by_key: Mapping[str, np.ndarray],
        exact: bool = True,
        answers: Callable[[str], Lineage | None] | None = None,
    ):
        self._sources = dict(sources)
        self._answers = answers  # consuming queries computed at capture (`Workload.queries`)
        self._ids = {name: ids_by_key.get(src.key, np.empty(0, np.int64)) for name, src in self._sources.items()}
        self.exact = exact

    @property
    def sources(self) -> list[str]:
        """Names of the sources this trace reached (at least one row)."""
        return sorted(n for n, ids in self._ids.items() if ids.size)

    def ids(self, name: str) -> np.ndarray:
        """Sorted unique `ember_rid`s of source `name` in the lineage (a keyed source's rows
        are identified by their keys instead: `keys`)."""
        source = source_by_name(self._sources, name)
        if source.kind == KEYED:
            raise EmberError(
                f"source {name!r} has no stable row order, so its rows are identified by their key "
                f"({', '.join(source.row_key)}), not by position: t.keys({name!r}) gives them"
            )
        return self._ids[name]

    def key_columns(self, name: str) -> tuple[str, ...]:
        """The columns that identify the rows of source `name` (a keyed source's; () for a
        source whose rows are identified by `ember_rid`)."""
        return source_by_name(self._sources, name).row_key

    def keys(self, name: str) -> pa.Table:
        """The key values of the rows of keyed source `name` in the lineage (a JDBC table or
        a Python data source, keyed with `ember.source(df, name, key=[...])`), in key order."""
        source = source_by_name(self._sources, name)
        if source.kind != KEYED:
            raise EmberError(f"source {name!r} is not keyed: its rows are identified by ember_rid (t.ids({name!r}))")
        return source_keys(source).take(pa.array(self._ids[name], pa.int64()))

    def rows(self, name: str, offset: int = 0, limit: int | None = None) -> pa.Table:
        """Those source rows, read from the source, with an `ember_rid` column.

        `offset` and `limit` page through them in rid order, reading only that page.
        """
        source = source_by_name(self._sources, name)
        if not _count(offset) or not (limit is None or _count(limit)):
            raise ValueError(f"offset and limit are counts of rows (int >= 0), not {offset!r} and {limit!r}")
        stop = None if limit is None else offset + limit
        return read_rows(source, self._ids[name][offset:stop])

    def query(self, sql: str) -> Lineage:
        """Runs `sql` (one SELECT whose FROM names one source of this trace) over the traced
        rows, in-process, and returns its result as a lineage back to the source rows, so
        drill-downs chain: `lin.backward(oids=[0]).query(sql).backward(oids=[2]).query(...)`."""
        from ember.query.consume import consume

        if not isinstance(sql, str):
            raise TypeError(f"query takes one SQL SELECT (a str), not {type(sql).__name__}")
        known = self._answers(sql) if self._answers is not None else None
        return known if known is not None else consume(sql, self._sources, self.rows)

    def _repr_html_(self) -> str:
        counts = [(n, int(self._ids[n].size)) for n in self.sources]
        previews = [(n, read_rows(self._sources[n], self._ids[n][:PREVIEW])) for n in self.sources[:1]]
        return render(f"ember backward trace{'' if self.exact else ' (superset)'}", counts, previews)

    def __repr__(self) -> str:
        counts = ", ".join(f"{n}: {self._ids[n].size}" for n in self.sources) or "no rows"
        return f"<ember backward trace ({counts}){'' if self.exact else ' superset'}>"


def _count(n: object) -> bool:
    return isinstance(n, int | np.integer) and not isinstance(n, bool) and int(n) >= 0


@runtime_checkable
class AnyLineage(Protocol):
    """What every lineage answers, captured (`ember.capture`) or inferred (`ember.infer`):
    `ember.lineage` returns either, so code written against this works with both."""

    @property
    def sources(self) -> list[str]:
        """Names of the sources the job reads."""
        ...

    def output(self) -> pa.Table:
        """The job's output rows with `ember_oid`."""
        ...

    def backward(self, oids: Iterable[int] | None = None, where: str | None = None) -> Trace:
        """The source rows in the lineage of the chosen output rows."""
        ...

    def forward(self, source: str, ids: Iterable[int] | None = None, where: str | None = None) -> ForwardTrace:
        """The output rows whose lineage holds the chosen rows of `source`."""
        ...


class ForwardTrace:
    """A forward trace: the output rows whose lineage holds the chosen source rows."""

    def __init__(self, output: pa.Table, oids: np.ndarray, exact: bool = True):
        self._output = output
        self._oids = oids
        self.exact = exact

    def ids(self) -> np.ndarray:
        """Sorted unique `ember_oid`s reached."""
        return self._oids

    def rows(self) -> pa.Table:
        """The output rows reached, with `ember_oid`."""
        return self._output.take(int64s(self._oids))

    def _repr_html_(self) -> str:
        title = f"ember forward trace{'' if self.exact else ' (superset)'}"
        return render(title, [("output", int(self._oids.size))], [("output rows", self.rows())])

    def __repr__(self) -> str:
        return f"<ember forward trace ({self._oids.size} output rows){'' if self.exact else ' superset'}>"
