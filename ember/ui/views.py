"""Crossfilter over group-by views of one table: Smoke's BT+FT (digest section 2.8).

A view is a captured group-by read over one source. When the page starts, each view's
lineage is read once through the public API (one backward trace per group) into two
arrays: the group's rids, concatenated in group order (the backward index, BT), and
per source rid the group it fell in (the forward rid array, FT). Brushing groups of one
view then costs, per linked view, one `bincount` of that view's forward array at the
brushed rows: the forward array is a perfect hash into the view's groups.

A group-by over a join reads several sources: it becomes one view per source whose
rows its groups partition, views of one `entry`. Their groups are the same output rows,
so a brush of one reaches the others' sources too: views over the same source as any
view of the entry are tallied from that view's rows.
"""

from __future__ import annotations

import datetime
import decimal
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from ember.errors import EmberError
from ember.query.lineage import Lineage
from ember.store.columns import sorted_unique

# Spark names an unaliased aggregate after its call ("count(1)"); aliases such as
# "n" or "sum_qty" are the usual ones for the rest.
MEASURE = re.compile(r"\(|^(count|cnt|n|sum|avg|mean|min|max|total)(_|$)", re.IGNORECASE)


@dataclass
class View:
    """One group-by view: its groups' labels and sizes, and its lineage as rid arrays."""

    id: str
    name: str
    lineage: Lineage
    source: str
    keys: list[str]
    labels: list[list[Any]]
    rids: np.ndarray  # source rids of every group, concatenated in group (oid) order
    offsets: np.ndarray  # group g's rids are rids[offsets[g]:offsets[g + 1]]
    measure: str | None = None  # a source column summed per group, besides the count
    values: np.ndarray | None = field(default=None, repr=False)  # measure per rid, aligned with `rids`
    entry: str | None = None  # the lineage it reads: views of one entry have the same groups

    @property
    def groups(self) -> int:
        return self.offsets.size - 1

    @property
    def counts(self) -> np.ndarray:
        return np.diff(self.offsets)

    def sums(self) -> np.ndarray | None:
        """The measure summed per group."""
        if self.values is None:
            return None
        owner = np.repeat(np.arange(self.groups), self.counts)
        return np.bincount(owner, weights=self.values, minlength=self.groups)

    def describe(self) -> dict[str, Any]:
        kind = "heat" if len(self.keys) == 2 else "bar"
        info: dict[str, Any] = {
            "id": self.id,
            "name": self.name,
            "source": self.source,
            "keys": self.keys,
            "kind": kind,
            "labels": self.labels,
            "count": self.counts.tolist(),
            "measure": self.measure,
            "entry": self.entry,
        }
        sums = self.sums()
        if sums is not None:
            info["sum"] = sums.tolist()
        return info


@dataclass(frozen=True)
class LeftOut:
    """An entry, or one source of it, the page does not show, and why (listed on the page)."""

    name: str
    why: str


def key_columns(output: pa.Table) -> list[str]:
    """The output columns that label a group: those not named like an aggregate."""
    return [c for c in output.column_names if c != "ember_oid" and not MEASURE.search(c)]


def build_view(
    view_id: str,
    name: str,
    lin: Lineage,
    keys: Sequence[str] | None = None,
    measure: str | None = None,
    source: str | None = None,
    entry: str | None = None,
) -> View:
    """Reads a group-by lineage over `source` (its only one, if None) into rid arrays;
    refuses one whose groups do not partition that source's rows (each row in at most
    one group)."""
    if source is None:
        if len(lin.sources) != 1:
            raise EmberError(f"view {name!r}: a view reads one source, this lineage reads {lin.sources}")
        source = lin.sources[0]
    output = lin.output()
    keys = list(keys) if keys is not None else key_columns(output)
    missing = [k for k in keys if k not in output.column_names]
    if missing:
        raise EmberError(f"view {name!r}: no output column {missing}; it has {output.column_names}")
    per_group = [lin.backward(oids=[g]).ids(source) for g in range(output.num_rows)]
    offsets = np.zeros(len(per_group) + 1, dtype=np.int64)
    np.cumsum([r.size for r in per_group], out=offsets[1:])
    rids = np.concatenate(per_group) if per_group else np.empty(0, np.int64)
    if rids.size and np.bincount(rids).max() > 1:  # a row in two groups (a count, not np.unique's hashing)
        raise EmberError(f"view {name!r}: its groups share rows of {source!r}, so they do not partition it")
    labels = [[plain(v) for v in row.values()] for row in output.select(keys).to_pylist()] if keys else [
        [g] for g in range(output.num_rows)
    ]
    values = None
    if measure is not None and rids.size:
        everything = lin.backward(oids=range(output.num_rows)).rows(source)
        if measure not in everything.column_names:
            raise EmberError(f"view {name!r}: source {source!r} has no column {measure!r} to sum")
        # nulls count as 0, as SQL's sum skips them
        by_rid = np.nan_to_num(everything.column(measure).to_numpy(zero_copy_only=False).astype(np.float64))
        values = by_rid[np.searchsorted(everything.column("ember_rid").to_numpy(), rids)]
    return View(view_id, name, lin, source, keys or ["group"], labels, rids, offsets, measure, values, entry)


def plain(value: Any) -> Any:
    """A JSON-ready label value."""
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, datetime.date | datetime.datetime):
        return value.isoformat()
    return value


class Crossfilter:
    """Linked views: brushing groups of one view tallies their rows in every view over
    the same source.

    For each pair of linked views (a, z) it keeps z's forward array read at a's rids, in
    a's group order (the backward index composed with the forward array, computed once):
    a brush of a's groups then counts contiguous slices of it instead of gathering the
    forward array at scattered rids, which misses the cache.
    """

    def __init__(self, views: Sequence[View], left_out: Sequence[LeftOut] = ()):
        self.views = {v.id: v for v in views}
        self.left_out = tuple(left_out)
        if len(self.views) != len(views):
            raise EmberError("two views have the same id")
        sizes: dict[str, int] = {}
        for v in views:
            sizes[v.source] = max(sizes.get(v.source, 0), int(v.rids.max()) + 1 if v.rids.size else 0)
        self.forward = {v.id: _forward(v, sizes[v.source]) for v in views}
        weights = {v.id: _weights(v, sizes[v.source]) for v in views if v.values is not None}
        pairs = [(a, z) for a in views for z in views if a.source == z.source]
        self.hits = {(a.id, z.id): self.forward[z.id][a.rids] for a, z in pairs}
        self.measures = {(a.id, z.id): weights[z.id][a.rids] for a, z in pairs if z.id in weights}
        # each pair's tally over all of a's rows, so a brush over most of a is answered
        # from the few rows it leaves out
        self.base = {(a.id, z.id): self._tally(a, z, [(0, a.rids.size)]) for a, z in pairs}

    def linked(self, view: View) -> list[View]:
        return [z for z in self.views.values() if z.source == view.source]

    def siblings(self, view: View) -> list[View]:
        """The other views of `view`'s entry: the same groups, over other sources."""
        return [z for z in self.views.values() if view.entry is not None and z.entry == view.entry and z is not view]

    def view(self, view_id: str) -> View:
        if view_id not in self.views:
            raise EmberError(f"unknown view {view_id!r}; there are {sorted(self.views)}")
        return self.views[view_id]

    def brush(self, view_id: str, oids: Sequence[int]) -> dict[str, Any]:
        """Per linked view, the count (and sum) per group of the brushed groups' source rows."""
        a = self.view(view_id)
        chosen = _groups(a, oids)
        inside = np.zeros(a.groups, dtype=bool)
        inside[chosen] = True
        tallies: dict[str, dict[str, list[float]]] = {}
        for b in (a, *self.siblings(a)):  # the same groups brushed, over b's source
            flip = int(b.counts[inside].sum()) > b.rids.size // 2
            spans = _spans(b.offsets, ~inside if flip else inside)
            for z in self.linked(b):
                tallies[z.id] = self._brushed(b, z, spans, flip)
        rows = int(a.counts[inside].sum())
        return {"view": a.id, "groups": chosen.tolist(), "rows": rows, "views": tallies}

    def _brushed(self, a: View, z: View, spans: list[tuple[int, int]], flip: bool) -> dict[str, list[float]]:
        """View z's count (and sum) per group over a's rows in `spans`, or, `flip`ped, over
        the rest of a's rows (the spans then hold the groups left out)."""
        counts, sums = self._tally(a, z, spans)
        if flip:
            base_counts, base_sums = self.base[(a.id, z.id)]
            counts = base_counts - counts
            sums = None if sums is None or base_sums is None else base_sums - sums
        tally = {"count": counts.tolist()}
        if sums is not None:
            tally["sum"] = sums.tolist()
        return tally

    def details(self, view_id: str, oids: Sequence[int], offset: int, limit: int) -> pa.Table:
        """A page of the source rows behind the brushed groups, in rid order."""
        a = self.view(view_id)
        return a.lineage.backward(oids=_groups(a, oids)).rows(a.source, offset, limit)

    def _tally(self, a: View, z: View, spans: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray | None]:
        """Count (and sum) per group of view z over the rows of a in these spans of a's
        group order: BT+FT's aggregate update, `bincount` over z's group of each row."""
        hits = self.hits[(a.id, z.id)]
        hit = _cut(hits, spans)
        counts = np.bincount(hit, minlength=z.groups + 1)[1:]
        if (a.id, z.id) not in self.measures:
            return counts, None
        weights = _cut(self.measures[(a.id, z.id)], spans)
        return counts, np.bincount(hit, weights=weights, minlength=z.groups + 1)[1:]


def _spans(offsets: np.ndarray, chosen: np.ndarray) -> list[tuple[int, int]]:
    """The [start, end) ranges of the chosen groups' rows, adjacent groups merged."""
    edges = np.diff(np.concatenate([[0], chosen.astype(np.int8), [0]]))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    return [(int(offsets[s]), int(offsets[e])) for s, e in zip(starts, ends, strict=True)]


def _cut(values: np.ndarray, spans: list[tuple[int, int]]) -> np.ndarray:
    """The values in these spans, without a copy when there is one span."""
    if len(spans) == 1:
        return values[spans[0][0] : spans[0][1]]
    return np.concatenate([values[s:e] for s, e in spans]) if spans else values[:0]


def _forward(view: View, size: int) -> np.ndarray:
    """Source rid → 1 + the view's group holding it (0: in no group), in the narrowest dtype."""
    dtype = np.uint8 if view.groups < 255 else np.uint16 if view.groups < 65535 else np.uint32
    fw = np.zeros(size, dtype=dtype)
    fw[view.rids] = np.repeat(np.arange(1, view.groups + 1, dtype=dtype), view.counts)
    return fw


def _weights(view: View, size: int) -> np.ndarray:
    """Source rid → the view's measure (0 where the rid is in no group)."""
    assert view.values is not None
    at = np.zeros(size, dtype=np.float64)
    at[view.rids] = view.values
    return at


def _groups(view: View, oids: Sequence[int]) -> np.ndarray:
    chosen = sorted_unique([np.asarray(list(oids), dtype=np.int64)])
    if chosen.size and (chosen[0] < 0 or chosen[-1] >= view.groups):
        raise EmberError(f"view {view.id!r} has groups 0 to {view.groups - 1}, not {chosen.tolist()[:5]}")
    return chosen
