"""Every tracked transformation: the program's result equals plain PySpark's, and the
backward (and, where the inputs feed only the picked outputs, forward) trace of a picked
output equals the input records a plain-Python reading of the operator says it came from."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from operator import add
from typing import Any

import pytest
from pyspark import StorageLevel
from pyspark.sql import SparkSession

from ember.rdd import LineageContext
from ember.rdd.points import Captured

DATA = [(i % 5, i) for i in range(40)]
OTHER = [(k, f"o{k}.{j}") for k in range(3, 8) for j in range(2)]


@dataclass
class Case:
    name: str
    build: Callable[[Any, Any], Any]
    pick: Callable[[Any], bool]
    data: Callable[[tuple[int, int]], bool]  # which DATA records the picked outputs came from
    other: Callable[[tuple[int, str]], bool] = lambda _: False
    forward: bool = True  # those DATA records feed only the picked outputs


def key_is(*keys: int) -> Callable[[Any], bool]:
    return lambda r: r[0] in keys


CASES = [
    Case("filter-map-flatMap",
         lambda d, o: d.filter(lambda kv: kv[1] % 3).map(lambda kv: (kv[0], kv[1] * 10))
         .flatMap(lambda kv: [kv] * (1 + kv[0] % 2)),
         lambda r: r == (2, 70), lambda x: x == (2, 7)),
    Case("keyBy-mapValues-flatMapValues",
         lambda d, o: d.keyBy(lambda kv: kv[1] % 4).mapValues(lambda kv: kv[1])
         .flatMapValues(lambda v: [v, -v]),
         lambda r: r[1] == -13, lambda x: x == (3, 13), forward=False),
    Case("reduceByKey", lambda d, o: d.reduceByKey(add), key_is(2), key_is(2)),
    Case("groupByKey", lambda d, o: d.groupByKey().mapValues(sorted), key_is(3), key_is(3)),
    Case("aggregateByKey",
         lambda d, o: d.aggregateByKey((0, 0), lambda a, v: (a[0] + v, a[1] + 1),
                                       lambda a, b: (a[0] + b[0], a[1] + b[1])),
         key_is(1), key_is(1)),
    Case("combineByKey",
         lambda d, o: d.combineByKey(lambda v: [v], lambda a, v: [*a, v], add).mapValues(sorted),
         key_is(4), key_is(4)),
    Case("distinct", lambda d, o: d.map(lambda kv: kv[0]).distinct(), lambda r: r == 0, key_is(0)),
    Case("join", lambda d, o: d.join(o), key_is(3), key_is(3), key_is(3)),
    Case("leftOuterJoin", lambda d, o: d.leftOuterJoin(o), key_is(0), key_is(0)),
    Case("rightOuterJoin", lambda d, o: d.rightOuterJoin(o), key_is(6), lambda _: False, key_is(6),
         forward=False),
    Case("fullOuterJoin", lambda d, o: d.fullOuterJoin(o), key_is(1, 7), key_is(1), key_is(7),
         forward=False),
    Case("cogroup",  # lambdas only in workers' code: pytest's module names do not import there
         lambda d, o: d.cogroup(o).mapValues(lambda vs: (sorted(vs[0]), sorted(vs[1]))),
         key_is(4), key_is(4), key_is(4)),
    Case("union",
         lambda d, o: d.union(o.map(lambda kv: (kv[0], len(kv[1])))).reduceByKey(add),
         key_is(3), key_is(3), key_is(3)),
    Case("sortBy", lambda d, o: d.sortBy(lambda kv: -kv[1]), lambda r: r == (2, 17),
         lambda x: x == (2, 17)),
    Case("zip", lambda d, o: d.zip(d.map(lambda kv: kv[1] * 2)), lambda r: r[0] == (0, 5),
         lambda x: x == (0, 5)),
    Case("foldByKey", lambda d, o: d.foldByKey(0, add), key_is(2), key_is(2)),
    Case("groupBy", lambda d, o: d.groupBy(lambda kv: kv[1] % 3).mapValues(sorted),
         lambda r: r[0] == 1, lambda x: x[1] % 3 == 1),
    Case("keys-values",
         lambda d, o: d.values().map(lambda v: (v % 4, 1)).union(d.keys().map(lambda k: (k, 1)))
         .reduceByKey(add),
         key_is(3), lambda x: x[1] % 4 == 3 or x[0] == 3, forward=False),
    Case("repartition-partitionBy-coalesce",
         lambda d, o: d.repartition(3).partitionBy(4).coalesce(2).filter(lambda kv: kv[1] > 30),
         key_is(1), lambda x: x[0] == 1 and x[1] > 30),
    Case("repartitionAndSortWithinPartitions",
         lambda d, o: d.repartitionAndSortWithinPartitions(2, ascending=False)
         .map(lambda kv: (kv[0], kv[1] + 1)),
         lambda r: r == (4, 25), lambda x: x == (4, 24)),
    Case("subtractByKey", lambda d, o: d.subtractByKey(o), key_is(1), key_is(1)),
    Case("subtract", lambda d, o: d.map(lambda kv: kv[0]).subtract(o.map(lambda kv: kv[0] - 2)),
         lambda r: r == 0, key_is(0)),
    Case("intersection",
         lambda d, o: d.map(lambda kv: kv[0]).intersection(o.map(lambda kv: kv[0])),
         lambda r: r == 4, key_is(4), key_is(4)),
    Case("cartesian",
         lambda d, o: d.filter(lambda kv: kv[1] < 3).cartesian(o.filter(lambda kv: kv[0] == 5)),
         lambda r: r[0] == (1, 1), lambda x: x == (1, 1), key_is(5), forward=True),
    Case("groupWith",
         lambda d, o: d.groupWith(o, d.map(lambda kv: (kv[0] + 1, kv[1])))
         .mapValues(lambda vs: tuple(sorted(v) for v in vs)),
         key_is(4), lambda x: x[0] in (3, 4), key_is(4), forward=False),
    Case("zipWithIndex", lambda d, o: d.zipWithIndex(), lambda r: r[1] == 7, lambda x: x == DATA[7]),
    Case("zipWithUniqueId", lambda d, o: d.zipWithUniqueId(), lambda r: r[0] == (2, 12),
         lambda x: x == (2, 12)),
]


@pytest.fixture
def lc(spark: SparkSession) -> Iterator[LineageContext]:
    context = LineageContext(spark.sparkContext)
    yield context
    context.clear()


def ordered(records: list[Any]) -> list[str]:
    return sorted(map(repr, records))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_operator_lineage(case: Case, lc: LineageContext, spark: SparkSession) -> None:
    sc = spark.sparkContext
    d, o = lc.parallelize(DATA, 2), lc.parallelize(OTHER, 2)
    out = case.build(d, o)
    result = out.collect()
    assert ordered(result) == ordered(case.build(sc.parallelize(DATA, 2), sc.parallelize(OTHER, 2)).collect())

    back = out.filter(case.pick).getLineage().goBackAll().collect()
    wanted = [x for x in DATA if case.data(x)] + [x for x in OTHER if case.other(x)]
    assert wanted
    assert ordered(back) == ordered(wanted)
    if case.forward:
        reached = d.filter(case.data).getLineage().goNextAll(target=out).collect()
        assert ordered(reached) == ordered([r for r in result if case.pick(r)])


def test_lineage_covers_exactly_the_rdd_and_its_element_indexes(lc: LineageContext) -> None:
    out = lc.parallelize(DATA, 4).reduceByKey(add).filter(lambda kv: kv[0] > 1)
    assert out.getLineage().count() == out.count() == 3
    ids = out.getLineage().goBackAll().collectWithIds()
    assert sorted((n, rec) for (_, _, n), rec in ids) == [(i, x) for i, x in enumerate(DATA) if x[0] > 1]


def test_zip_partitions_names_what_it_read_of_its_partition_pair(lc: LineageContext, spark: SparkSession) -> None:
    d = lc.parallelize(DATA, 3)
    firsts = d.zipPartitions(d.map(lambda kv: -kv[1]), lambda a, b: [(next(a), len(list(b)))])
    parts = spark.sparkContext.parallelize(DATA, 3).glom().collect()
    assert firsts.collect() == [(p[0], len(p)) for p in parts]
    back = firsts.filter(lambda r: r[0] == parts[1][0]).getLineage().goBackAll().collect()
    assert sorted(back) == sorted(parts[1])  # the first of one side, all of the other


def test_partition_functions_name_every_record_they_read(lc: LineageContext, spark: SparkSession) -> None:
    sc = spark.sparkContext
    d = lc.parallelize(DATA, 3)
    parts = sc.parallelize(DATA, 3).glom().collect()
    sums = d.mapPartitions(lambda it: [sum(v for _, v in it)])
    assert sums.collect() == [sum(v for _, v in p) for p in parts]
    total = sum(v for _, v in parts[1])
    assert sorted(sums.filter(lambda s: s == total).getLineage().goBackAll().collect()) == sorted(parts[1])
    assert sums.getLineage().count() == 3
    assert d.filter(lambda kv: kv == parts[2][-1]).getLineage().goNextAll(target=sums).collect() == [
        sum(v for _, v in parts[2])
    ]

    firsts = d.mapPartitionsWithIndex(lambda i, it: [(i, next(it))])  # reads one record
    assert firsts.collect() == [(i, p[0]) for i, p in enumerate(parts)]
    assert firsts.filter(lambda r: r[0] == 2).getLineage().goBackAll().collect() == [parts[2][0]]

    glommed = d.glom()
    assert glommed.collect() == parts
    assert sorted(glommed.filter(lambda p: (0, 0) in p).getLineage().goBackAll().collect()) == sorted(parts[0])

    piped = d.map(lambda kv: kv[1]).pipe("sort -rn")
    assert piped.collect() == sc.parallelize(DATA, 3).map(lambda kv: kv[1]).pipe("sort -rn").collect()
    assert sorted(piped.filter(lambda line: line == "7").getLineage().goBackAll().collect()) == sorted(
        next(p for p in parts if (2, 7) in p)
    )


def test_a_partition_function_keeps_what_it_read_once(lc: LineageContext) -> None:
    """Each of a partition's outputs names the whole partition: one list for all of them,
    not one per output (which would be 4e8 ids here)."""
    same = lc.parallelize(range(40_000), 2).mapPartitions(lambda it: it)
    assert same.count() == 40_000
    point = lc._points[-1]
    assert isinstance(point, Captured)
    tables = point.local_tables()
    assert [len(t.parents) for t in tables.values()] == [t.rows for t in tables.values()]
    assert sum(t.rows for t in tables.values()) == 40_000
    back = same.filter(lambda x: x == 25_000).getLineage().goBackAll().collect()
    assert sorted(back) == list(range(40_000 - tables[1].rows, 40_000))


def test_sampling_keeps_each_records_own_id(lc: LineageContext, spark: SparkSession) -> None:
    """Spark draws a sample per record position, so a seed picks the records it picks in the
    plain program; each is traced to itself."""
    sc = spark.sparkContext
    d, plain = lc.parallelize(DATA, 2), sc.parallelize(DATA, 2)
    fractions = {k: 0.2 * k for k in range(5)}
    pairs = [
        (d.sample(False, 0.5, 7), plain.sample(False, 0.5, 7)),
        (d.sample(True, 0.7, 3), plain.sample(True, 0.7, 3)),
        (d.sampleByKey(False, fractions, 5), plain.sampleByKey(False, fractions, 5)),
        *zip(d.randomSplit([1, 2], 11), plain.randomSplit([1, 2], 11), strict=True),
    ]
    for tracked, untracked in pairs:
        got = tracked.collect()
        assert got == untracked.collect() and got
        ids = tracked.getLineage().goBackAll().collectWithIds()
        assert sorted(rec for _, rec in ids) == sorted(set(got))
        assert all(DATA[n] == rec for (_, _, n), rec in ids)


def test_a_persisted_program_runs_its_functions_once_and_keeps_its_lineage(
    lc: LineageContext, spark: SparkSession
) -> None:
    calls = spark.sparkContext.accumulator(0)

    def double(kv: tuple[int, int]) -> tuple[int, int]:
        calls.add(1)
        return kv[0], kv[1] * 2

    doubled = lc.parallelize(DATA, 2).map(double)
    assert doubled.cache() is doubled and doubled.getStorageLevel() == StorageLevel.MEMORY_ONLY
    sums = doubled.reduceByKey(add)
    assert sorted(sums.collect()) == [(k, 2 * sum(v for kk, v in DATA if kk == k)) for k in range(5)]
    assert doubled.filter(lambda kv: kv[0] == 2).count() == 8
    assert calls.value == len(DATA)
    assert sorted(sums.filter(key_is(2)).getLineage().goBackAll().collect()) == [x for x in DATA if x[0] == 2]
    assert doubled.unpersist() is doubled and not doubled.getStorageLevel().useMemory


def test_questions_about_the_rdd_are_answered_and_untraced_methods_are_named(
    lc: LineageContext, spark: SparkSession
) -> None:
    d = lc.parallelize(DATA, 2).setName("data")
    assert d.name() == "data" and d.getNumPartitions() == 2 and isinstance(d.id(), int)
    assert d.context is spark.sparkContext and b"data" in d.toDebugString()
    with pytest.raises(AttributeError, match=r"'toDF' is not traced .*rdd\(\) gives the plain RDD"):
        d.toDF()


def test_from_dataframe_traces_to_rows(lc: LineageContext, spark: SparkSession) -> None:
    df = spark.createDataFrame(DATA, "k int, v int").repartition(3)
    sums = lc.fromDataFrame(df).map(lambda row: (row.k, row.v)).reduceByKey(add)
    assert sorted(sums.collect()) == sorted({k: sum(v for kk, v in DATA if kk == k) for k, _ in DATA}.items())
    rows = sums.filter(key_is(2)).getLineage().goBackAll().collect()
    assert sorted(tuple(r) for r in rows) == [x for x in DATA if x[0] == 2]


def test_records_the_target_does_not_descend_from_reach_nothing(lc: LineageContext) -> None:
    d, o = lc.parallelize(DATA, 2), lc.parallelize(OTHER, 2)
    sums = o.map(lambda kv: (kv[0], len(kv[1]))).reduceByKey(add)
    assert d.getLineage().goNextAll(target=sums).collect() == []
    assert d.getLineage().goNextAll(target=o).collect() == []  # a target right at its point
    both = o.union(d)  # of the two points, only `o`'s records reach `sums`
    assert sorted(both.getLineage().goNextAll(target=sums).collect()) == sorted(sums.collect())
    assert both.filter(lambda kv: kv in DATA).getLineage().goNextAll(target=sums).collect() == []


def test_records_reaching_the_target_directly_and_through_shuffles_are_found_every_way(
    lc: LineageContext,
) -> None:
    d = lc.parallelize(DATA, 2)
    sums = d.reduceByKey(add)  # key 2: the 8 records (2, 2), (2, 7), ..., (2, 37), summing to 156
    out = d.filter(lambda kv: kv[1] < 10).union(sums).union(sums.join(d).mapValues(lambda v: v[0]))
    out.collect()
    picked = d.filter(lambda kv: kv == (2, 7)).getLineage()
    # itself (no shuffle), its key's sum (one), the join's 8 pairs holding that sum (two)
    assert sorted(picked.goNextAll(target=out).collect()) == [(2, 7)] + [(2, 156)] * 9
    # one step: kept where `out` reads d, and moved on to the combiner (its partition's partial
    # sum, 2 + 7 + 12 + 17) and to the join (the pair (2, 7) is in)
    assert set(picked.goNext(target=out).collect()) == {(2, 7), (2, 38), (2, (156, 7))}
