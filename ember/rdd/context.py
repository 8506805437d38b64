"""LineageContext: Titian's switch for RDD programs, wrapping a SparkContext."""

from __future__ import annotations

import atexit
import bisect
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from pyspark import Accumulator, SparkContext
from pyspark.sql import DataFrame

from ember.engines.spark.frames import is_connect
from ember.errors import EmberError
from ember.rdd.debug import LIST_PARAM, CulpritError, Guard, culprit
from ember.rdd.ids import MASK, MAX_SLOTS, SHIFT, Ref
from ember.rdd.points import IndexedInput, Point, TextInput
from ember.rdd.tracked import TrackedRDD

if TYPE_CHECKING:
    from ember.rdd.lineage_rdd import LineageRDD

T = TypeVar("T")
_NO_RDDS = ": RDD lineage needs a SparkContext, which a Spark Connect session does not have"
LineageId = tuple[int, int, int]  # (point uid, partition, n): an id as users see it


class LineageContext:
    """Creates tracked RDDs; remembers their capture points and which outputs ran."""

    def __init__(self, sc: SparkContext) -> None:
        if not isinstance(sc, SparkContext):
            kind = type(sc)
            raise TypeError(
                f"ember.LineageContext wraps a SparkContext (spark.sparkContext of a classic session), not "
                f"{kind.__module__}.{kind.__qualname__}{_NO_RDDS if is_connect(sc) else ''}"
            )
        self.sc = sc
        self._points: list[Point] = []
        self._bases: list[int] = []  # first slot of each point, in uid order
        # where capture tasks write their table files, on each host
        self._folder = os.path.join(tempfile.gettempdir(), f"ember-rdd-{sc.applicationId}-{uuid.uuid4().hex[:8]}")
        atexit.register(shutil.rmtree, self._folder, ignore_errors=True)  # files outlive no driver
        self._acted: list[TrackedRDD] = []
        self._skipped: Accumulator[list[Any]] | None = None

    def textFile(self, path: str, minPartitions: int | None = None) -> TrackedRDD:
        """Lines of a local text file; ids are (partition, byte offset of the line)."""
        point = TextInput(self, path, minPartitions)
        return TrackedRDD(self, point.tagged(), (point,))

    def parallelize(self, c: Iterable[Any], numSlices: int | None = None) -> TrackedRDD:
        """A driver collection; ids are (partition, index of the element in `c`)."""
        point = IndexedInput(self, self.sc.parallelize(list(enumerate(c)), numSlices))
        return TrackedRDD(self, point.tagged(), (point,))

    def fromDataFrame(self, df: DataFrame) -> TrackedRDD:
        """`df.rdd`'s Rows; ids are (partition, position in it), so `df` must be deterministic."""
        if is_connect(df):
            raise EmberError(f"LineageContext.fromDataFrame needs a classic session's DataFrame{_NO_RDDS}")
        point = IndexedInput(self, df.rdd.mapPartitions(enumerate, True))
        return TrackedRDD(self, point.tagged(), (point,))

    def skip_failing_records(self, skip: bool = True) -> None:
        """Programs built after this call drop records their functions raise on (BigDebug's
        skip-and-resume) and list them in `skipped_records()` instead of failing the job."""
        self._skipped = self.sc.accumulator([], LIST_PARAM) if skip else None

    def skipped_records(self) -> list[tuple[Any, LineageId]]:
        """(record, lineage id) of every record skipped so far."""
        return [] if self._skipped is None else [(rec, self._decode(ref)) for rec, ref in self._skipped.value]

    def clear(self) -> None:
        """Drops every stored lineage table (and the records cached with it) and this host's
        table files (a cluster's other hosts keep theirs in their temp folder)."""
        for point in self._points:
            point.unpersist()
        self._acted.clear()
        shutil.rmtree(self._folder, ignore_errors=True)

    def _register(self, point: Point, partitions: int) -> tuple[int, int]:
        """The point's uid and first slot."""
        base = self._bases[-1] + self._points[-1].partitions if self._points else 0
        if base + partitions > MAX_SLOTS:
            raise EmberError(f"more than {MAX_SLOTS} partitions captured in one LineageContext; use a new one")
        self._points.append(point)
        self._bases.append(base)
        return len(self._points) - 1, base

    def _decoder(self) -> Callable[[Ref], LineageId]:
        """Internal id -> `(uid, partition, n)`; a plain function, so tasks can run it."""
        bases = list(self._bases)

        def decode(ref: Ref) -> LineageId:
            slot = ref >> SHIFT
            uid = bisect.bisect_right(bases, slot) - 1
            return uid, slot - bases[uid], ref & MASK

        return decode

    def _decode(self, ref: Ref) -> LineageId:
        return self._decoder()(ref)

    def _encode(self, lineage_id: LineageId) -> Ref:
        uid, pid, n = lineage_id
        if not (0 <= uid < len(self._points) and 0 <= pid < self._points[uid].partitions and 0 <= n <= MASK):
            raise EmberError(f"{lineage_id!r} is not a lineage id of this LineageContext")
        return (self._bases[uid] + pid) << SHIFT | n

    def _guard(self) -> Guard:
        return Guard(self._skipped)

    def _reporting(self, action: Callable[[], T]) -> T:
        """Runs a job; a user function's failure becomes a CulpritError naming the record."""
        try:
            return action()
        except Exception as exc:
            found = culprit(exc)
            if found is None:
                raise
            record, ref, cause = found
            lineage_id = self._decode(ref)
            inputs = self.lineage([lineage_id]).goBackAll().collectWithIds()
            raise CulpritError(record, lineage_id, cause, inputs) from None

    def lineage(self, ids: Iterable[LineageId]) -> LineageRDD:
        """A trace that starts from lineage ids (a culprit's, a saved trace's) directly."""
        from ember.rdd.lineage_rdd import LOCAL_IDS, LineageRDD

        refs = sorted({self._encode(tuple(i)) for i in ids})  # type: ignore[arg-type]
        points = tuple(dict.fromkeys(self._points[self._decode(ref)[0]] for ref in refs))
        return LineageRDD(self, points, lambda: self.sc.parallelize(refs, 1), local=lambda: refs if len(refs) <= LOCAL_IDS else None)

    def _children(self, point: Point) -> list[Point]:
        return [p for p in self._points if point in p.parents]

    def _ancestors(self, points: Iterable[Point]) -> set[Point]:
        seen: set[Point] = set()
        todo = list(points)
        while todo:
            p = todo.pop()
            if p not in seen:
                seen.add(p)
                todo.extend(p.parents)
        return seen

    def _output_after(self, lineage: LineageRDD) -> TrackedRDD:
        """The latest program output downstream of `lineage`'s position."""
        here = set(lineage.origin.points if lineage.origin else lineage.points)
        for out in reversed(self._acted):
            if out is not lineage.origin and here <= self._ancestors(out.points):
                return out
        raise EmberError("no action has run on an RDD downstream of this trace; pass target=")
