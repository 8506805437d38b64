"""TrackedRDD: an RDD program whose every record travels with its lineage id.

The wrapped RDD holds `(record, ref)` pairs. Narrow transformations keep the ref of the
record they came from (Titian passes it through the task context; here it rides along),
shuffles keep it on the shuffled record, and aggregations and joins are capture points
that give their outputs new ids and record which ids went into each.
"""

from __future__ import annotations

import copy
import functools
import shlex
import subprocess
import threading
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import IO, TYPE_CHECKING, Any

from pyspark import RDD, StorageLevel
from pyspark.rdd import portable_hash
from pyspark.resultiterable import ResultIterable

from ember.rdd.debug import Guard
from ember.rdd.ids import SHIFT, Ref, Row
from ember.rdd.points import Captured, Point
from ember.rdd.tables import Shared

if TYPE_CHECKING:
    from ember.rdd.context import LineageContext
    from ember.rdd.lineage_rdd import LineageRDD

Emit = Callable[[Any, list[list[tuple[Any, Ref]]]], Iterator[tuple[Any, Row]]]

# Actions run on the raw records; running one marks the RDD as the program's latest output.
_ACTIONS = frozenset(
    {
        "collect", "count", "take", "first", "top", "takeOrdered", "reduce", "fold",
        "aggregate", "sum", "min", "max", "mean", "isEmpty", "countByKey",
        "countByValue", "collectAsMap", "foreach", "foreachPartition", "saveAsTextFile",
        "lookup", "takeSample", "toLocalIterator", "stats", "variance", "stdev",
        "sampleStdev", "sampleVariance", "histogram", "treeReduce", "treeAggregate",
        "countApprox", "countApproxDistinct", "sumApprox", "meanApprox", "reduceByKeyLocally",
        "saveAsPickleFile", "saveAsSequenceFile", "saveAsHadoopFile", "saveAsNewAPIHadoopFile",
        "saveAsHadoopDataset", "saveAsNewAPIHadoopDataset",
    }
)
# About the RDD rather than its records: answered by the RDD of (record, id) pairs.
_ABOUT = frozenset(
    {
        "getNumPartitions", "id", "name", "context", "getStorageLevel", "isCheckpointed",
        "isLocallyCheckpointed", "getCheckpointFile", "toDebugString", "getResourceProfile",
    }
)


Step = tuple[str, Callable[[Any], Any]]  # ("map" | "filter" | "flatMap", the user's function)
Expand = Callable[[Any, Ref], list[Any]]


def _apply(kind: str, f: Callable[[Any], Any], records: list[Any]) -> list[Any]:
    if kind == "map":
        return [f(x) for x in records]
    if kind == "filter":
        return [x for x in records if f(x)]
    return [y for x in records for y in f(x)]


def _expander(steps: Sequence[Step], guard: Guard) -> Expand:
    """One input record -> its records after a run of narrow transformations, all of which
    keep its id; fused so a record's id is not re-paired at every step. When a function
    raises, the step is redone record by record to name the one it failed on (the records
    before it see the function twice, as on a retried task)."""

    def guarded(kind: str, f: Callable[[Any], Any], records: list[Any], ref: Ref) -> list[Any]:
        kept: list[Any] = []
        for x in records:
            try:
                kept.extend(_apply(kind, f, [x]))
            except Exception as exc:
                guard.fail(x, ref, exc)
        return kept

    def expand(rec: Any, ref: Ref) -> list[Any]:
        records = [rec]
        for kind, f in steps:
            try:
                records = _apply(kind, f, records)
            except Exception:
                records = guarded(kind, f, records, ref)
        return records

    return expand


def _narrow(kind: str, f: Callable[[Any], Any], guard: Guard) -> Callable[[Iterable[Any]], Any]:
    """One narrow transformation over `(record, ref)` pairs, each output keeping its input's
    ref; cheaper per record than `_expander` where no aggregation follows."""

    def run(items: Iterable[tuple[Any, Ref]]) -> Iterator[tuple[Any, Ref]]:
        for rec, ref in items:
            try:
                out = f(rec)
                if kind == "flatMap":
                    out = list(out)
            except Exception as exc:
                guard.fail(rec, ref, exc)
                continue
            if kind == "map":
                yield out, ref
            elif kind == "filter":
                if out:
                    yield rec, ref
            else:
                yield from ((x, ref) for x in out)

    return run


def _group(
    create: Callable[[Any], Any], merge: Callable[[Any, Any], Any], expand: Expand, guard: Guard
) -> Callable[[Iterable[tuple[Any, Ref]]], tuple[list[Row], list[tuple[Any, Any]]]]:
    """Titian's combiner/reducer agent: the native hash aggregation plus, per key, the ids
    that went into it (once each: an input's records arrive together)."""

    def run(items: Iterable[tuple[Any, Ref]]) -> tuple[list[Row], list[tuple[Any, Any]]]:
        groups: dict[Any, list[Any]] = {}  # key -> [combined value, ids, last id]
        for rec, ref in items:
            for key, value in expand(rec, ref):
                entry = groups.get(key)
                try:
                    if entry is None:
                        groups[key] = [create(value), array("q", (ref,)), ref]
                    else:
                        entry[0] = merge(entry[0], value)
                        if entry[2] is not ref:
                            entry[2] = ref
                            entry[1].append(ref)
                except Exception as exc:
                    guard.fail((key, value), ref, exc)
        return [e[1] for e in groups.values()], [(k, e[0]) for k, e in groups.items()]

    return run


def _outer(left: bool, right: bool) -> Emit:
    """Join output for one key; unmatched sides are kept as in left/right/full outer joins."""

    def emit(key: Any, sides: list[list[tuple[Any, Ref]]]) -> Iterator[Any]:
        ls, rs = sides
        if ls and rs:
            for v, rv in ls:
                yield from (((key, (v, w)), (rv, rw)) for w, rw in rs)
        elif ls and left:
            yield from (((key, (v, None)), (rv,)) for v, rv in ls)
        elif rs and right:
            yield from (((key, (None, w)), (rw,)) for w, rw in rs)

    return emit


def _cogrouped(key: Any, sides: list[list[tuple[Any, Ref]]]) -> Iterator[Any]:
    values = tuple(ResultIterable([v for v, _ in side]) for side in sides)
    yield (key, values), tuple(r for side in sides for _, r in side)


def _in_all(key: Any, sides: list[list[tuple[Any, Ref]]]) -> Iterator[Any]:
    """`intersection`: a value on both sides, from every record equal to it."""
    if all(sides):
        yield key, tuple(r for side in sides for _, r in side)


def _reading(items: Iterable[tuple[Any, Ref]], read: array[int]) -> Iterator[Any]:
    """The records, noting the id of each one a partition function reads."""
    for rec, ref in items:
        read.append(ref)
        yield rec


def _paired(pid: int, pairs: Iterable[Any]) -> tuple[list[Row], list[Any]]:
    """A stage of pairs of records (`zip`, `cartesian`): each names its two records."""
    both = [((a, b), (ra, rb)) for (a, ra), (b, rb) in pairs]
    return [row for _, row in both], [rec for rec, _ in both]


def _numbered(pair: tuple[tuple[Any, Ref], int]) -> tuple[tuple[Any, int], Ref]:
    (rec, ref), n = pair
    return (rec, n), ref


def _tagged(side: int) -> Callable[[tuple[Any, Ref]], tuple[Any, tuple[int, Any, Ref]]]:
    """A join side's (record, id) pairs keyed for the shuffle, with the side they came from."""

    def tag(rr: tuple[Any, Ref]) -> tuple[Any, tuple[int, Any, Ref]]:
        return rr[0][0], (side, rr[0][1], rr[1])

    return tag


def _keyed(rr: tuple[Any, Ref]) -> tuple[Any, tuple[Any, Ref]]:
    """A (record, id) pair keyed by the record's key, for PySpark's key-partitioning methods."""
    return rr[0][0], rr


def _piped(command: str, env: dict[str, str] | None, check: bool) -> Callable[[Iterator[Any]], Iterator[str]]:
    """`RDD.pipe`'s partition function: the records as lines into `command`, its lines out."""

    def run(records: Iterator[Any]) -> Iterator[str]:
        proc = subprocess.Popen(shlex.split(command), env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert proc.stdin is not None and proc.stdout is not None

        def feed(stdin: IO[bytes]) -> None:
            with stdin:
                for rec in records:
                    stdin.write(f"{rec}\n".encode())

        writer = threading.Thread(target=feed, args=(proc.stdin,), daemon=True)
        writer.start()
        yield from (line.decode().rstrip("\n") for line in proc.stdout)
        writer.join()
        if proc.wait() and check:
            raise RuntimeError(f"pipe: {command!r} exited with status {proc.returncode}")

    return run


def _one(value: Any) -> list[Any]:
    return [value]


def _append(acc: list[Any], value: Any) -> list[Any]:
    acc.append(value)
    return acc


def _extend(acc: list[Any], more: list[Any]) -> list[Any]:
    acc.extend(more)
    return acc


def _same(value: Any) -> Any:
    return value


def _first(value: Any, _: Any) -> Any:
    return value


def _with_none(value: Any) -> tuple[Any, None]:
    return value, None


def _first_of(pair: tuple[Any, Any]) -> Any:
    return pair[0]


def _second_of(pair: tuple[Any, Any]) -> Any:
    return pair[1]


class TrackedRDD:
    """An RDD created through a `LineageContext`; same transformations, plus `getLineage()`."""

    def __init__(
        self,
        lc: LineageContext,
        source: RDD[Any],
        points: Iterable[Point],
        at_point: bool = False,
        steps: tuple[Step, ...] = (),
    ) -> None:
        self.lc = lc
        self.source = source  # (record, ref) pairs before `steps`
        self.points = tuple(dict.fromkeys(points))
        self.at_point = at_point  # the records are exactly those of its single capture point
        self.steps = steps  # narrow transformations not yet applied
        self.guard = lc._guard()  # skip mode as it was when the program was built

    @functools.cached_property
    def data(self) -> RDD[Any]:
        """(record, ref) pairs."""
        runs = [_narrow(kind, f, self.guard) for kind, f in self.steps]

        def run(items: Iterable[tuple[Any, Ref]]) -> Iterable[tuple[Any, Ref]]:
            for step in runs:
                items = step(items)
            return items

        return self.source.mapPartitions(run, True) if runs else self.source

    def __getattr__(self, name: str) -> Any:
        if name in _ABOUT:
            return getattr(self.data, name)
        if name not in _ACTIONS:
            plain = " is not traced (docs/guide/rdd.md); rdd() gives the plain RDD" if hasattr(RDD, name) else ""
            raise AttributeError(f"TrackedRDD has no attribute {name!r}{plain}")
        action = getattr(self.rdd(), name)

        def run(*args: Any, **kwargs: Any) -> Any:
            self.lc._acted.append(self)
            return self.lc._reporting(lambda: action(*args, **kwargs))

        return run

    def local_pairs(self) -> list[tuple[Any, Ref]] | None:
        """The (record, ref) pairs computed on the driver from the records its capture point
        filed, when every partition filed them (few records: a program's final counts);
        saves a job over every partition to find the records a trace starts from. The
        narrow functions after the point then run on the driver."""
        point = self.points[0] if len(self.points) == 1 else None
        if not isinstance(point, Captured) or self.source is not point.data:
            return None
        filed = point.local_outputs()
        if len(filed) < point.partitions:
            return None
        expand = _expander(self.steps, self.guard)
        pairs = []
        for pid in range(point.partitions):
            slot = (point.base + pid) << SHIFT
            pairs += [(out, slot | n) for n, rec in enumerate(filed[pid]) for out in expand(rec, slot | n)]
        return pairs

    def rdd(self) -> RDD[Any]:
        """The plain RDD of this program's records (no lineage)."""
        return self.data.map(lambda rr: rr[0])

    def getLineage(self) -> LineageRDD:
        from ember.rdd.lineage_rdd import LineageRDD

        return LineageRDD.of(self)

    def _narrowed(self, kind: str, f: Callable[[Any], Any]) -> TrackedRDD:
        steps = (*self.steps, (kind, f))
        return TrackedRDD(self.lc, self.source, self.points, steps=steps)

    def map(self, f: Callable[[Any], Any]) -> TrackedRDD:
        return self._narrowed("map", f)

    def filter(self, f: Callable[[Any], Any]) -> TrackedRDD:
        return self._narrowed("filter", f)

    def flatMap(self, f: Callable[[Any], Iterable[Any]]) -> TrackedRDD:
        return self._narrowed("flatMap", f)

    def mapValues(self, f: Callable[[Any], Any]) -> TrackedRDD:
        return self._narrowed("map", lambda kv: (kv[0], f(kv[1])))

    def flatMapValues(self, f: Callable[[Any], Iterable[Any]]) -> TrackedRDD:
        return self._narrowed("flatMap", lambda kv: [(kv[0], x) for x in f(kv[1])])

    def keyBy(self, f: Callable[[Any], Any]) -> TrackedRDD:
        return self._narrowed("map", lambda x: (f(x), x))

    def keys(self) -> TrackedRDD:
        return self._narrowed("map", _first_of)

    def values(self) -> TrackedRDD:
        return self._narrowed("map", _second_of)

    def union(self, other: TrackedRDD) -> TrackedRDD:
        return TrackedRDD(self.lc, self.data.union(other.data), self.points + other.points)

    def _moved(self, data: RDD[Any]) -> TrackedRDD:
        """The same records over other partitions, fewer of them or numbered: each keeps its
        id, so no capture point is needed."""
        return TrackedRDD(self.lc, data, self.points)

    def repartition(self, numPartitions: int) -> TrackedRDD:
        return self._moved(self.data.repartition(numPartitions))

    def coalesce(self, numPartitions: int, shuffle: bool = False) -> TrackedRDD:
        return self._moved(self.data.coalesce(numPartitions, shuffle))

    def partitionBy(
        self, numPartitions: int | None, partitionFunc: Callable[[Any], int] = portable_hash
    ) -> TrackedRDD:
        return self._moved(self.data.map(_keyed).partitionBy(numPartitions, partitionFunc).values())

    def repartitionAndSortWithinPartitions(
        self,
        numPartitions: int | None = None,
        partitionFunc: Callable[[Any], int] = portable_hash,
        ascending: bool = True,
        keyfunc: Callable[[Any], Any] = _same,
    ) -> TrackedRDD:
        keyed = self.data.map(_keyed)
        done = keyed.repartitionAndSortWithinPartitions(numPartitions, partitionFunc, ascending, keyfunc)
        return self._moved(done.values())

    def sample(self, withReplacement: bool, fraction: float, seed: int | None = None) -> TrackedRDD:
        """Spark draws per record position, not value: the same seed keeps the same records."""
        return self._moved(self.data.sample(withReplacement, fraction, seed))

    def sampleByKey(
        self, withReplacement: bool, fractions: dict[Any, float], seed: int | None = None
    ) -> TrackedRDD:
        keyed = self.data.map(_keyed)
        return self._moved(keyed.sampleByKey(withReplacement, fractions, seed).values())

    def randomSplit(self, weights: Sequence[int | float], seed: int | None = None) -> list[TrackedRDD]:
        return [self._moved(part) for part in self.data.randomSplit(weights, seed)]

    def zipWithIndex(self) -> TrackedRDD:
        return self._moved(self.data.zipWithIndex().map(_numbered))

    def zipWithUniqueId(self) -> TrackedRDD:
        return self._moved(self.data.zipWithUniqueId().map(_numbered))

    def subtractByKey(self, other: TrackedRDD, numPartitions: int | None = None) -> TrackedRDD:
        return self._anti(other, _first_of, numPartitions)

    def subtract(self, other: TrackedRDD, numPartitions: int | None = None) -> TrackedRDD:
        return self._anti(other, _same, numPartitions)

    def _anti(self, other: TrackedRDD, key: Callable[[Any], Any], partitions: int | None) -> TrackedRDD:
        """An anti join on `key` of each record: a record kept keeps its own id (no record of
        `other` made it)."""
        theirs = other.rdd().map(lambda x: (key(x), None))
        mine = self.data.map(lambda rr: (key(rr[0]), rr))
        return self._moved(mine.subtractByKey(theirs, partitions).values())

    def _settled(self) -> RDD[Any]:
        """The (record, id) pairs, from which transformations of this RDD now start (to be
        persisted or checkpointed)."""
        self.source, self.steps = self.data, ()
        return self.data

    def persist(self, storageLevel: StorageLevel = StorageLevel.MEMORY_ONLY) -> TrackedRDD:
        """Persists the (record, id) pairs; transformations of this RDD start from them."""
        self._settled().persist(storageLevel)
        return self

    def cache(self) -> TrackedRDD:
        return self.persist()

    def unpersist(self, blocking: bool = False) -> TrackedRDD:
        self.data.unpersist(blocking)
        return self

    def checkpoint(self) -> None:
        self._settled().checkpoint()

    def localCheckpoint(self) -> None:
        self._settled().localCheckpoint()

    def setName(self, name: str) -> TrackedRDD:
        self.data.setName(name)
        return self

    def sortBy(
        self, keyfunc: Callable[[Any], Any], ascending: bool = True, numPartitions: int | None = None
    ) -> TrackedRDD:
        """A reordering: every record keeps its id, so no capture point is needed."""
        data = self.data.sortBy(lambda rr: keyfunc(rr[0]), ascending, numPartitions)
        return TrackedRDD(self.lc, data, self.points)

    def sortByKey(self, ascending: bool = True, numPartitions: int | None = None) -> TrackedRDD:
        return self.sortBy(lambda kv: kv[0], ascending, numPartitions)

    def combineByKey(
        self,
        createCombiner: Callable[[Any], Any],
        mergeValue: Callable[[Any, Any], Any],
        mergeCombiners: Callable[[Any, Any], Any],
        numPartitions: int | None = None,
        partitionFunc: Callable[[Any], int] = portable_hash,
    ) -> TrackedRDD:
        return self._aggregate(
            createCombiner, mergeValue, mergeCombiners, numPartitions, partitionFunc, _same
        )

    def reduceByKey(
        self,
        func: Callable[[Any, Any], Any],
        numPartitions: int | None = None,
        partitionFunc: Callable[[Any], int] = portable_hash,
    ) -> TrackedRDD:
        return self.combineByKey(_same, func, func, numPartitions, partitionFunc)

    def aggregateByKey(
        self,
        zeroValue: Any,
        seqFunc: Callable[[Any, Any], Any],
        combFunc: Callable[[Any, Any], Any],
        numPartitions: int | None = None,
        partitionFunc: Callable[[Any], int] = portable_hash,
    ) -> TrackedRDD:
        return self.combineByKey(
            lambda v: seqFunc(copy.deepcopy(zeroValue), v),
            seqFunc,
            combFunc,
            numPartitions,
            partitionFunc,
        )

    def groupByKey(
        self, numPartitions: int | None = None, partitionFunc: Callable[[Any], int] = portable_hash
    ) -> TrackedRDD:
        return self._aggregate(
            _one, _append, _extend, numPartitions, partitionFunc,
            lambda kv: (kv[0], ResultIterable(kv[1])),
        )  # fmt: skip

    def foldByKey(
        self,
        zeroValue: Any,
        func: Callable[[Any, Any], Any],
        numPartitions: int | None = None,
        partitionFunc: Callable[[Any], int] = portable_hash,
    ) -> TrackedRDD:
        return self.aggregateByKey(zeroValue, func, func, numPartitions, partitionFunc)

    def groupBy(
        self,
        f: Callable[[Any], Any],
        numPartitions: int | None = None,
        partitionFunc: Callable[[Any], int] = portable_hash,
    ) -> TrackedRDD:
        return self.keyBy(f).groupByKey(numPartitions, partitionFunc)

    def distinct(self, numPartitions: int | None = None) -> TrackedRDD:
        keyed = self._narrowed("map", _with_none)
        return keyed._aggregate(_same, _first, _first, numPartitions, portable_hash, _first_of)

    def _aggregate(
        self,
        create: Callable[[Any], Any],
        merge_value: Callable[[Any, Any], Any],
        merge_combiners: Callable[[Any, Any], Any],
        partitions: int | None,
        partition_func: Callable[[Any], int],
        finish: Callable[[tuple[Any, Any]], Any],
    ) -> TrackedRDD:
        """Combiner agent on the map side, shuffle, reducer agent on the reduce side."""
        guard = self.lc._guard()
        combine = _group(create, merge_value, _expander(self.steps, self.guard), guard)
        reduce = _group(_same, merge_combiners, _expander((), guard), guard)

        def map_side(pid: int, items: Iterable[Any]) -> tuple[list[Row], list[Any]]:
            return combine(items)

        def reduce_side(pid: int, items: Iterable[Any]) -> tuple[list[Row], list[Any]]:
            rows, out = reduce(((key, acc), ref) for key, (acc, ref) in items)
            return rows, [finish(kv) for kv in out]

        combiner = Captured(self.lc, "combiner", self.points, self.source, map_side)
        shuffled = combiner.data.map(lambda rr: (rr[0][0], (rr[0][1], rr[1]))).partitionBy(
            partitions or self.source._defaultReducePartitions(), partition_func
        )
        reducer = Captured(self.lc, "reducer", (combiner,), shuffled, reduce_side)
        return TrackedRDD(self.lc, reducer.data, (reducer,), at_point=True)

    def _cogroup(self, others: Sequence[TrackedRDD], partitions: int | None, emit: Emit) -> TrackedRDD:
        """Titian's join agent: each output names the ids from every side under its key."""
        tagged = [side.data.map(_tagged(i)) for i, side in enumerate((self, *others))]
        both = self.lc.sc.union(tagged)
        shuffled = both.partitionBy(partitions or both._defaultReducePartitions())
        count = len(tagged)

        def run(pid: int, items: Iterable[Any]) -> tuple[list[Row], list[Any]]:
            groups: dict[Any, list[list[Any]]] = {}
            for key, (side, value, ref) in items:
                sides = groups.get(key)
                if sides is None:
                    sides = groups[key] = [[] for _ in range(count)]
                sides[side].append((value, ref))
            pairs = [out for key, sides in groups.items() for out in emit(key, sides)]
            return [row for _, row in pairs], [rec for rec, _ in pairs]

        parents = [p for side in (self, *others) for p in side.points]
        point = Captured(self.lc, "join", parents, shuffled, run)
        return TrackedRDD(self.lc, point.data, (point,), at_point=True)

    def join(self, other: TrackedRDD, numPartitions: int | None = None) -> TrackedRDD:
        return self._cogroup((other,), numPartitions, _outer(False, False))

    def leftOuterJoin(self, other: TrackedRDD, numPartitions: int | None = None) -> TrackedRDD:
        return self._cogroup((other,), numPartitions, _outer(True, False))

    def rightOuterJoin(self, other: TrackedRDD, numPartitions: int | None = None) -> TrackedRDD:
        return self._cogroup((other,), numPartitions, _outer(False, True))

    def fullOuterJoin(self, other: TrackedRDD, numPartitions: int | None = None) -> TrackedRDD:
        return self._cogroup((other,), numPartitions, _outer(True, True))

    def cogroup(self, other: TrackedRDD, numPartitions: int | None = None) -> TrackedRDD:
        return self._cogroup((other,), numPartitions, _cogrouped)

    def groupWith(self, other: TrackedRDD, *others: TrackedRDD) -> TrackedRDD:
        return self._cogroup((other, *others), None, _cogrouped)

    def intersection(self, other: TrackedRDD) -> TrackedRDD:
        keyed = self._narrowed("map", _with_none)
        return keyed._cogroup((other._narrowed("map", _with_none),), None, _in_all)

    def _stage(self, parents: Sequence[Point], upstream: RDD[Any], run: Callable[[int, Iterable[Any]], Any]) -> TrackedRDD:
        point = Captured(self.lc, "stage", parents, upstream, run)
        return TrackedRDD(self.lc, point.data, (point,), at_point=True)

    def zip(self, other: TrackedRDD) -> TrackedRDD:
        """A stage point: each pair names the ids of its two halves."""
        return self._stage(self.points + other.points, self.data.zip(other.data), _paired)

    def cartesian(self, other: TrackedRDD) -> TrackedRDD:
        """A stage point: each pair names the ids of its two records."""
        return self._stage(self.points + other.points, self.data.cartesian(other.data), _paired)

    def zipPartitions(
        self, other: TrackedRDD, f: Callable[[Iterator[Any], Iterator[Any]], Iterable[Any]]
    ) -> TrackedRDD:
        """`f` sees whole partitions, so each output names every record `f` read of its pair."""

        def run(pid: int, parts: Iterable[Any]) -> tuple[Shared, list[Any]]:
            ((left, right),) = parts
            read: array[int] = array("q")
            out = list(f(_reading(left, read), _reading(right, read)))
            return Shared(read, len(out)), out

        return self._stage(self.points + other.points, self.data.glom().zip(other.data.glom()), run)

    def mapPartitionsWithIndex(
        self, f: Callable[[int, Iterator[Any]], Iterable[Any]], preservesPartitioning: bool = False
    ) -> TrackedRDD:
        """A stage point: `f` may make any output from any record of its partition, so each
        output names every record `f` read of it (all, unless `f` stopped early). A function
        that raises fails the job as without lineage: no one record is to blame."""

        def run(pid: int, items: Iterable[Any]) -> tuple[Shared, list[Any]]:
            read: array[int] = array("q")
            out = list(f(pid, _reading(items, read)))
            return Shared(read, len(out)), out

        return self._stage(self.points, self.data, run)

    def mapPartitions(
        self, f: Callable[[Iterator[Any]], Iterable[Any]], preservesPartitioning: bool = False
    ) -> TrackedRDD:
        return self.mapPartitionsWithIndex(lambda _, records: f(records))

    def glom(self) -> TrackedRDD:
        return self.mapPartitions(lambda records: [list(records)])

    def pipe(self, command: str, env: dict[str, str] | None = None, checkCode: bool = False) -> TrackedRDD:
        return self.mapPartitions(_piped(command, env, checkCode))
