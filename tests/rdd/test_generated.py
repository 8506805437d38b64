"""Randomly generated RDD programs (hypothesis): every output record's backward trace, and
every input record's forward trace, equal a pure-Python reading of the program.

Two small pair RDDs `d` and `o` (keys and values 0-3, so keys and records repeat) go
through narrow steps (filter, map, flatMap, mapValues, sortBy, repartition, partitionBy,
coalesce), aggregations (reduceByKey, groupByKey, aggregateByKey, combineByKey, foldByKey,
groupBy, distinct), joins (inner, left, right, full, cogroup, cartesian), union, subtract,
subtractByKey and intersection. The oracle carries each record's lineage, a set of input
ids, by Titian's rules: a narrow step's or a moved record comes from its one record; an
aggregation's from every record of its key (distinct: of its equal records; groupBy: of
its value); a join's from the joined pair (an outer join's unmatched record alone);
cogroup's from every record of its key on both sides; a subtraction's from itself; an
intersection's from the equal records of both sides. Equal output records are picked together, so their lineages merge.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from operator import add
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from ember.rdd import LineageContext

Program = tuple[Any, ...]
Pair = tuple[int, int]
Lin = frozenset[tuple[str, int]]
Rec = tuple[Any, Lin]

_ANY = st.integers(0, 3)
pairs = st.lists(st.tuples(_ANY, _ANY), min_size=1, max_size=8)
_NARROW = ("filter", "map", "flatMap", "mapValues", "sortBy", "repartition", "partitionBy", "coalesce")
_WIDE = ("reduceByKey", "groupByKey", "aggregateByKey", "combineByKey", "foldByKey", "groupBy", "distinct")
_BINARY = ("join", "leftOuterJoin", "rightOuterJoin", "fullOuterJoin", "cogroup", "union",
           "subtract", "subtractByKey", "intersection", "cartesian")
_SOURCES = {0: "d", 1: "o"}  # the LineageContext's capture points, in creation order


def _extend(children: st.SearchStrategy[Program]) -> st.SearchStrategy[Program]:
    return st.one_of(
        st.tuples(st.sampled_from(_NARROW), children, _ANY),
        st.tuples(st.sampled_from(_WIDE), children),
        st.tuples(st.sampled_from(_BINARY), children, children),
    )


programs = st.recursive(st.sampled_from([("scan", "d"), ("scan", "o")]), _extend, max_leaves=3)


def build(p: Program, inputs: dict[str, Any]) -> Any:
    """The program over tracked (or plain) RDDs; each step keeps records (int key, int value)."""
    op = p[0]
    if op == "scan":
        return inputs[p[1]]
    rdd = build(p[1], inputs)
    if op in _NARROW:
        n = p[2]
        return {
            "filter": lambda: rdd.filter(lambda kv: kv[1] >= n),
            "map": lambda: rdd.map(lambda kv: ((kv[1] + n) % 4, kv[0])),
            "flatMap": lambda: rdd.flatMap(lambda kv: [kv] * ((kv[0] + kv[1] + n) % 3)),
            "mapValues": lambda: rdd.mapValues(lambda v: v * n % 4),
            "sortBy": lambda: rdd.sortBy(lambda kv: (kv[1], kv[0]), ascending=n % 2 == 0),
            "repartition": lambda: rdd.repartition(1 + n % 3),
            "partitionBy": lambda: rdd.partitionBy(1 + n % 3),
            "coalesce": lambda: rdd.coalesce(1 + n % 2),
        }[op]()
    if op in _WIDE:
        return {
            "reduceByKey": lambda: rdd.reduceByKey(add),
            "groupByKey": lambda: rdd.groupByKey().mapValues(lambda vs: len(list(vs))),
            "aggregateByKey": lambda: rdd.aggregateByKey(0, max, max),
            "combineByKey": lambda: rdd.combineByKey(lambda v: {v}, lambda a, v: a | {v}, lambda a, b: a | b)
            .mapValues(len),
            "foldByKey": lambda: rdd.foldByKey(0, add),
            "groupBy": lambda: rdd.groupBy(lambda kv: kv[1]).mapValues(lambda vs: len(list(vs))),
            "distinct": lambda: rdd.distinct(),
        }[op]()
    other = build(p[2], inputs)
    if op in ("union", "subtract", "subtractByKey", "intersection"):
        return getattr(rdd, op)(other)
    if op == "cartesian":
        return rdd.cartesian(other).map(lambda xy: (xy[0][0], xy[1][1]))
    if op == "cogroup":
        return rdd.cogroup(other).mapValues(lambda vs: len(list(vs[0])) * 4 + len(list(vs[1])))
    return getattr(rdd, op)(other).mapValues(lambda vw: (vw[0] or 0) * 4 + (vw[1] or 0))


def oracle(p: Program, tables: dict[str, list[Pair]]) -> list[Rec]:
    """The program's records, each with its lineage."""
    op = p[0]
    if op == "scan":
        return [(r, frozenset({(p[1], i)})) for i, r in enumerate(tables[p[1]])]
    recs = oracle(p[1], tables)
    if op in _NARROW:
        n = p[2]
        step: Callable[[Pair], list[Pair]] = {
            "filter": lambda kv: [kv] if kv[1] >= n else [],
            "map": lambda kv: [((kv[1] + n) % 4, kv[0])],
            "flatMap": lambda kv: [kv] * ((kv[0] + kv[1] + n) % 3),
            "mapValues": lambda kv: [(kv[0], kv[1] * n % 4)],
            "sortBy": lambda kv: [kv],
            "repartition": lambda kv: [kv],
            "partitionBy": lambda kv: [kv],
            "coalesce": lambda kv: [kv],
        }[op]
        return [(out, lin) for r, lin in recs for out in step(r)]
    if op in _WIDE:
        by = {"distinct": lambda r: r, "groupBy": lambda r: r[1]}.get(op, lambda r: r[0])
        groups = _grouped(recs, by)
        if op == "distinct":
            return [(key, lin) for key, (_, lin) in groups.items()]
        value: Callable[[list[int]], int] = {
            "reduceByKey": sum,
            "foldByKey": sum,
            "groupByKey": len,
            "groupBy": len,
            "aggregateByKey": lambda vs: max([0, *vs]),
            "combineByKey": lambda vs: len(set(vs)),
        }[op]
        return [((key, value([r[1] for r in rs])), lin) for key, (rs, lin) in groups.items()]
    others = oracle(p[2], tables)
    if op == "union":
        return recs + others
    if op in ("subtract", "subtractByKey"):  # an anti join: a kept record from itself only
        by = (lambda r: r) if op == "subtract" else (lambda r: r[0])
        return [(r, lin) for r, lin in recs if all(by(r) != by(y) for y, _ in others)]
    if op == "intersection":
        mine, theirs = _grouped(recs, lambda r: r), _grouped(others, lambda r: r)
        return [(r, lin | theirs[r][1]) for r, (_, lin) in mine.items() if r in theirs]
    if op == "cartesian":
        return [((x[0], y[1]), xl | yl) for x, xl in recs for y, yl in others]
    if op == "cogroup":
        left, right = _grouped(recs, lambda r: r[0]), _grouped(others, lambda r: r[0])
        empty: tuple[list[Any], Lin] = ([], frozenset())
        return [
            ((k, len(left.get(k, empty)[0]) * 4 + len(right.get(k, empty)[0])), left.get(k, empty)[1] | right.get(k, empty)[1])
            for k in {*left, *right}
        ]
    return _joined(op, recs, others)


def _grouped(recs: list[Rec], by: Callable[[Any], Any]) -> dict[Any, tuple[list[Any], Lin]]:
    """Key → the group's records and the union of their lineages."""
    groups: dict[Any, tuple[list[Any], Lin]] = {}
    for r, lin in recs:
        rs, seen = groups.get(by(r), ([], frozenset()))
        groups[by(r)] = ([*rs, r], seen | lin)
    return groups


def _joined(how: str, left: list[Rec], right: list[Rec]) -> list[Rec]:
    """A join's records: each matched pair, an outer side's unmatched record alone."""
    out = [((x[0], x[1] * 4 + y[1]), xl | yl) for x, xl in left for y, yl in right if x[0] == y[0]]
    if how in ("leftOuterJoin", "fullOuterJoin"):
        out += [((x[0], x[1] * 4), xl) for x, xl in left if all(y[0] != x[0] for y, _ in right)]
    if how in ("rightOuterJoin", "fullOuterJoin"):
        out += [((y[0], y[1]), yl) for y, yl in right if all(x[0] != y[0] for x, _ in left)]
    return out


@settings(settings.get_profile("spark-jobs"), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(program=programs, d=pairs, o=pairs, pick=st.randoms(use_true_random=False))
def test_generated_program_lineage_equals_oracle(
    spark: SparkSession, program: Program, d: list[Pair], o: list[Pair], pick: Any
) -> None:
    tables = {"d": d, "o": o}
    expected = oracle(program, tables)
    lc = LineageContext(spark.sparkContext)
    try:
        inputs = {name: lc.parallelize(rows, 2) for name, rows in tables.items()}
        out = build(program, inputs)
        assert sorted(map(repr, out.collect())) == sorted(repr(r) for r, _ in expected)
        merged: dict[Any, Lin] = defaultdict(frozenset)
        for r, lin in expected:
            merged[r] = merged[r] | lin
        for target in pick.sample(sorted(merged, key=repr), min(2, len(merged))):
            traced = out.filter(lambda r, t=target: r == t).getLineage().goBackAll().collectWithIds()
            assert {(_SOURCES[uid], n) for (uid, _, n), _ in traced} == merged[target], target
        name = pick.choice(sorted(tables))
        i = pick.randrange(len(tables[name]))
        rec = tables[name][i]  # forward from every input record equal to it
        reached = inputs[name].filter(lambda r, t=rec: r == t).getLineage().goNextAll(target=out).collect()
        sources = {(name, j) for j, r in enumerate(tables[name]) if r == rec}
        assert sorted(map(repr, reached)) == sorted(repr(r) for r, lin in expected if lin & sources)
    finally:
        lc.clear()
