"""LineageRDD: a set of records at one trace position, moved by goBack / goNext.

A position is either a program RDD (the trace origin: `rdd.getLineage()` or the end of a
forward trace) or a set of capture points with the traced ids there. Moving builds the
trace lazily; an action (or a native transformation, which reads the raw records) runs it.
Backward steps are directed: while the traced ids are few enough for the driver
(`LOCAL_IDS`), each step is one job whose tasks run on only the partitions the ids name,
each looking its ids up in the table its capture task stored; beyond that, the ids are
shuffled to those partitions and joined there with the tables (Titian's form). Forward
steps ship the traced ids to every partition of the next point and scan its tables
(Titian keeps no forward index).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from itertools import islice
from typing import TYPE_CHECKING, Any

from pyspark import RDD

from ember.rdd.ids import SHIFT, Ref
from ember.rdd.points import Captured, Point

if TYPE_CHECKING:
    from ember.rdd.context import LineageContext, LineageId
    from ember.rdd.tracked import TrackedRDD

Refs = Callable[[], RDD[Any]]
Local = Callable[[], "list[Ref] | None"]

LOCAL_IDS = 1_000_000  # traced ids up to this many are kept on the driver between steps


def _capped(found: set[Ref]) -> list[Ref] | None:
    """Ids to keep on the driver: sorted, while they are at most `LOCAL_IDS`."""
    return sorted(found) if len(found) <= LOCAL_IDS else None


def _driver_first(lc: LineageContext, local: Local, build: Refs) -> Refs:
    """A step's ids as an RDD: from the driver while it holds them, else built on Spark."""

    def refs() -> RDD[Any]:
        known = local()
        return lc.sc.parallelize(known, 1) if known is not None else build()

    return refs


def _at(refs: RDD[Any], point: Point) -> RDD[Any]:
    low, high = point.base << SHIFT, (point.base + point.partitions) << SHIFT
    return refs.filter(lambda r: low <= r < high)


class LineageRDD:
    """Records at a trace position; native RDD methods act on their raw records."""

    def __init__(
        self,
        lc: LineageContext,
        points: tuple[Point, ...],
        refs: Refs | None,
        origin: TrackedRDD | None = None,
        local: Local | None = None,
    ) -> None:
        self.lc = lc
        self.points = points  # empty at an origin
        self._refs = refs  # None: all records of the origin
        self.origin = origin
        self._local = local  # the same ids on the driver, or None when too many

    @classmethod
    def of(cls, tracked: TrackedRDD) -> LineageRDD:
        if tracked.at_point:
            return cls(tracked.lc, tracked.points, lambda: tracked.data.map(lambda rr: rr[1]))
        return cls(tracked.lc, (), None, tracked)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.rdd(), name)

    def __repr__(self) -> str:
        where = f"origin {self.origin.data}" if self.origin else [p.kind for p in self.points]
        return f"LineageRDD({where})"

    def _pairs(self) -> RDD[Any]:
        """`(ref, raw record)` at this position."""
        local = self._local_pairs()
        if local is not None:
            return self.lc.sc.parallelize(local, 1)
        if self.origin is not None:
            data = self.origin.data
            if self._refs is not None:
                keep = self.lc.sc.broadcast(set(self._refs().collect()))
                data = data.filter(lambda rr: rr[1] in keep.value)
            return data.map(lambda rr: (rr[1], rr[0]))
        refs = self._ids()
        parts = [p.records(_at(refs, p)) for p in self.points]
        return self.lc.sc.union(parts)

    def _local_pairs(self) -> list[tuple[Ref, Any]] | None:
        """`_pairs` on the driver: while the ids are there, or at an origin whose records
        the driver has."""
        if self.origin is not None:
            return self._origin_pairs
        known = self._local_ids()
        if known is None:
            return None
        return [pair for p in self.points for pair in p.local_records([r for r in known if p.owns(r)])]

    @functools.cached_property
    def _origin_pairs(self) -> list[tuple[Ref, Any]] | None:
        """An origin's pairs from its filed records, computed once per trace object (its
        ids and its records both start from them)."""
        assert self.origin is not None
        pairs = None if self._refs is not None else self.origin.local_pairs()
        return None if pairs is None else [(ref, rec) for rec, ref in pairs]

    def _local_ids(self) -> list[Ref] | None:
        """The traced ids on the driver if there are at most `LOCAL_IDS` (one job to find out)."""
        if self._local is not None:
            return self._local()
        pairs = self._local_pairs() if self.origin is not None else None
        if pairs is not None:
            return sorted({ref for ref, _ in pairs}) if len(pairs) <= LOCAL_IDS else None
        capped = self._ids().mapPartitions(lambda it: [list(islice(it, LOCAL_IDS + 1))]).collect()
        if sum(len(part) for part in capped) > LOCAL_IDS:
            return None
        return sorted({r for part in capped for r in part})

    def rdd(self) -> RDD[Any]:
        """A native RDD of the raw records here: input lines, (key, value) pairs, outputs."""
        return self._pairs().map(lambda pair: pair[1])

    def collect(self) -> list[Any]:
        """The raw records here (no job when the trace's ids are on the driver)."""
        local = self._local_pairs()
        return [rec for _, rec in local] if local is not None else self.rdd().collect()

    def count(self) -> int:
        local = self._local_pairs()
        return len(local) if local is not None else self.rdd().count()

    def collectWithIds(self) -> list[tuple[LineageId, Any]]:
        """(lineage id, raw record) pairs, for reports and for tests of the ids themselves."""
        decode = self.lc._decoder()
        local = self._local_pairs()
        return [(decode(ref), rec) for ref, rec in (local if local is not None else self._pairs().collect())]

    def ids(self) -> RDD[Any]:
        """The traced lineage ids `(point uid, partition, n)`."""
        return self._ids().map(self.lc._decoder())

    def _ids(self) -> RDD[Any]:
        if self.origin is not None:
            return self._pairs().map(lambda pair: pair[0])
        assert self._refs is not None
        return self._refs()

    def _at_points(self) -> LineageRDD:
        if self.origin is None:
            return self
        return LineageRDD(self.lc, self.origin.points, self._ids, local=functools.cache(self._local_ids))

    def goBack(self) -> LineageRDD:
        """One capture point back; at the input this is the identity."""
        here = self._at_points()
        if self.origin is not None:
            return here
        captured = [p for p in here.points if isinstance(p, Captured)]
        if not captured:
            return here
        refs = here._ids

        @functools.cache
        def local_back() -> list[Ref] | None:
            current = here._local_ids()
            if current is None:
                return None
            found: set[Ref] = set()
            for p in here.points:
                mine = [r for r in current if p.owns(r)]
                found.update(p.local_parents(mine) if isinstance(p, Captured) else mine)
            return _capped(found)

        def back() -> RDD[Any]:
            current = refs()
            parts = [
                p.parents_of(_at(current, p))
                if isinstance(p, Captured)
                else _at(current, p)
                for p in here.points
            ]
            return self.lc.sc.union(parts)

        points = [q for p in here.points for q in (p.parents if p in captured else (p,))]
        return LineageRDD(self.lc, tuple(dict.fromkeys(points)), _driver_first(self.lc, local_back, back), local=local_back)

    def _within(self, path: set[Point]) -> LineageRDD:
        """These ids at the points `path` holds: a record of a point the target does not
        descend from reaches none of its records."""
        kept = tuple(p for p in self.points if p in path)
        if kept == self.points:
            return self
        current = self._ids
        local = self._local_ids

        def ids() -> RDD[Any]:
            return self.lc.sc.union([self.lc.sc.parallelize([], 1), *(_at(current(), p) for p in kept)])

        def local_ids() -> list[Ref] | None:
            known = local()
            return None if known is None else [r for r in known if any(p.owns(r) for p in kept)]

        return LineageRDD(self.lc, kept, ids, local=functools.cache(local_ids))

    def goBackAll(self) -> LineageRDD:
        """All the input records that contributed (repeated goBack)."""
        here = self.goBack()
        while True:
            back = here.goBack()
            if back.points == here.points:
                return back
            here = back

    def _toward(self, goal: TrackedRDD) -> tuple[LineageRDD, dict[Point, list[Point]]]:
        """These ids at the points `goal` descends from, and where each point's ids go next."""
        path = self.lc._ancestors(goal.points)
        here = self._at_points()._within(path)
        return here, {p: [c for c in self.lc._children(p) if c in path] for p in here.points}

    def _arrived(self, goal: TrackedRDD) -> LineageRDD:
        """The end of a forward trace: `goal`'s own records when it is not one capture point."""
        if goal.at_point and self.points:
            return self
        return LineageRDD(self.lc, (), self._ids, goal)

    def _moved(self, moves: dict[Point, list[Point]]) -> LineageRDD:
        """These ids moved one capture point on: to each point's children in `moves`."""
        refs = self._ids

        @functools.cache
        def local_forward() -> list[Ref] | None:
            known = self._local_ids()
            if known is None:
                return None
            found: set[Ref] = set()
            for p, children in moves.items():
                mine = {r for r in known if p.owns(r)}
                for c in children:
                    reached = c.local_children(mine) if isinstance(c, Captured) else None
                    if reached is None:
                        return None
                    found.update(reached)
            return _capped(found)

        def forward() -> RDD[Any]:
            known = self._local_ids()
            current: set[Ref] = set(known if known is not None else refs().collect())
            parts = [
                c.children_of({r for r in current if p.owns(r)})
                for p, children in moves.items()
                for c in children
                if isinstance(c, Captured)
            ]
            return self.lc.sc.union([self.lc.sc.parallelize([], 1), *parts])

        points = [c for children in moves.values() for c in children]
        return LineageRDD(self.lc, tuple(dict.fromkeys(points)), _driver_first(self.lc, local_forward, forward), local=local_forward)

    def goNext(self, target: TrackedRDD | None = None) -> LineageRDD:
        """One capture point forward towards `target` (default: the latest program output).
        Ids at a point `target` reads directly stay there as well as moving on."""
        goal = target or self.lc._output_after(self)
        if self.origin is goal:
            return self
        here, moves = self._toward(goal)
        if not any(moves.values()):
            return here._arrived(goal)
        return _union(self.lc, [here._within(set(goal.points)), here._moved(moves)])

    def goNextAll(self, target: TrackedRDD | None = None) -> LineageRDD:
        """All the outputs of `target` (default: the latest program output) these records reached.
        Each step keeps the ids at points `target` reads directly and moves the rest on, so
        ids that reach the target both directly and through a shuffle are found both ways."""
        goal = target or self.lc._output_after(self)
        if self.origin is goal:
            return self
        arrived: list[LineageRDD] = []
        here, moves = self._toward(goal)
        while any(moves.values()):
            arrived.append(here._within(set(goal.points)))
            here, moves = here._moved(moves)._toward(goal)
        return _union(self.lc, [*arrived, here])._arrived(goal)


def _union(lc: LineageContext, parts: list[LineageRDD]) -> LineageRDD:
    """Ids at any of several positions (parts at no point hold none)."""
    held = [part for part in parts if part.points]
    if len(held) == 1:
        return held[0]

    @functools.cache
    def local_ids() -> list[Ref] | None:
        found: set[Ref] = set()
        for part in held:
            known = part._local_ids()
            if known is None:
                return None
            found.update(known)
        return _capped(found)

    def ids() -> RDD[Any]:
        return lc.sc.union([lc.sc.parallelize([], 1), *(part._ids() for part in held)]).distinct()

    points = tuple(dict.fromkeys(p for part in held for p in part.points))
    return LineageRDD(lc, points, _driver_first(lc, local_ids, ids), local=local_ids)
