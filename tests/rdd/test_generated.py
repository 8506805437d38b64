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
intersection's from the equal records of both sides. Equal output records are picked together, so their lineages merge. Generated text
files (UTF-8 or Latin-1, empty lines, with or without a last line end, 1-4 splits) check
that input ids are the lines' own byte offsets.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from operator import add
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from ember.rdd import LineageContext, points

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


# text files: lines of ASCII, Latin-1 or any text (never a line end), empty at times,
# written as UTF-8 or Latin-1, each ended by LF, CRLF or CR, the last at times by none,
# read in 1-4 splits
_TEXTS = {"utf-8": st.text(st.characters(exclude_characters="\r\n", exclude_categories=("Cs",)), max_size=6),
          "latin-1": st.text(st.characters(max_codepoint=0xFF, exclude_characters="\r\n"), max_size=6)}
_ENDS = st.sampled_from(["\n", "\n", "\r\n", "\r"])
texts = st.sampled_from(sorted(_TEXTS)).flatmap(
    lambda enc: st.tuples(st.just(enc), st.lists(st.tuples(_TEXTS[enc], _ENDS), min_size=1, max_size=12), st.booleans()))


def _split_lines(content: bytes) -> list[tuple[int, bytes]]:
    """(offset, bytes) of each line, as Hadoop's reader ends lines: at LF, CRLF or CR."""
    found, start, i = [], 0, 0
    while i < len(content):
        if content[i] in b"\r\n":
            found.append((start, content[start:i]))
            i += 2 if content[i : i + 2] == b"\r\n" else 1
            start = i
        else:
            i += 1
    return found + ([(start, content[start:])] if start < len(content) else [])


@settings(settings.get_profile("spark-jobs"), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=texts, splits=st.integers(1, 4), pick=st.randoms(use_true_random=False))
def test_generated_text_file_lines_are_their_byte_offsets(
    spark: SparkSession, tmp_path_factory: Any, text: tuple[str, list[tuple[str, str]], bool], splits: int, pick: Any
) -> None:
    """A line count by length over a text file: each count's lines, and the counts a line
    reaches, are the lines' own byte offsets and the lines as Spark read them."""
    encoding, lines, last_end = text
    content = "".join(line + end for line, end in lines).encode(encoding)
    if not last_end:
        content = content.removesuffix(lines[-1][1].encode())
    path = tmp_path_factory.mktemp("text") / "lines.txt"
    path.write_bytes(content)
    offsets = [offset for offset, _ in _split_lines(content)]
    read = spark.sparkContext.textFile(str(path), splits).collect()  # as Spark decodes them
    assert len(read) == len(offsets)
    assume(read)
    lc = LineageContext(spark.sparkContext)
    try:
        source = lc.textFile(str(path), splits)
        counts = source.map(lambda line: (len(line) % 3, 1)).reduceByKey(add)
        assert sorted(counts.collect()) == sorted(
            (k, sum(1 for line in read if len(line) % 3 == k)) for k in {len(line) % 3 for line in read})
        key = len(pick.choice(read)) % 3
        traced = counts.filter(lambda kv: kv[0] == key).getLineage().goBackAll().collectWithIds()
        want = [(offsets[i], line) for i, line in enumerate(read) if len(line) % 3 == key]
        assert sorted((off, line) for (_, _, off), line in traced) == want
        line = pick.choice(read)
        reached = source.filter(lambda x: x == line).getLineage().goNextAll(target=counts).collect()
        assert reached == [(len(line) % 3, sum(1 for x in read if len(x) % 3 == len(line) % 3))]
    finally:
        lc.clear()


_TRICKY = st.sampled_from([0x41, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC2, 0xDF, 0xE0, 0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xFF])


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.lists(st.one_of(_TRICKY, st.integers(0, 255)), max_size=7).map(bytes))
def test_a_re_read_line_is_decoded_as_hadoop_decodes_it(spark: SparkSession, raw: bytes) -> None:
    """Bytes that are not UTF-8 become U+FFFD as Java's decoder replaces them (`\\xed\\xa0`
    at a line's end is one, Python's own "replace" gives two)."""
    assert raw.decode(errors=points._AS_JAVA) == spark._jvm.org.apache.hadoop.io.Text(bytearray(raw)).toString()
