"""Randomly generated pipelines (hypothesis): ember's lineage equals the pure-Python oracle's.

Every relation has two int columns `k` and `v`, null at times; operators: filters, a Python
UDF, explode (inner and outer), unpivot, pivot (a count or a sum), joins (inner / left /
right / full / semi / anti on `k`, inner on both columns, and with a `v <` condition beside
or instead of the equality: inner, left, semi and anti), a filter against a scalar subquery,
NOT IN (null-aware), group-bys (count, sum, max, count distinct, count by both columns, a
pandas UDAF's max), a
grouped map (`applyInPandas`: a row per distinct `v` of the group, none for all nulls), a
cogrouped one (a row per key of either side, counting both groups), a partition map
(`mapInPandas` or `mapInArrow` doubling `v`, over one partition, so each row it returns
has every row of its input: the one lineage the oracle can know; defer refuses it), the
first groups of one by key and the first distinct rows (LIMITs, the latter after an OFFSET
of 0 or 1, with `v` kept or replaced), a repartition, a global count, correlated scalar
subqueries (a count or max of the other side's rows of the same `k`, or a count of those
with a greater `v`, as a column or in a filter), window functions (rank, dense_rank,
row_number, ntile, a count over the whole partition, a running count, a count over a range
frame, by row offsets or by a double's values in descending order, a pandas UDAF over a
range frame; over distinct rows,
whose order is then certain: lag, lead, counts and sums over row frames), union all,
distinct, intersect and except (distinct and all). Two tiny tables (one to eight rows,
values 0-3) make joins and groups collide often. Over Parquet files the same
plans take the paths in-memory tables never do: scans numbered by row position, and side
tables DuckDB reads from the files beside or after the job (`capture.local`). Over
CSV, JSON, XML and ORC files, cut into splits of a few lines or stripes each, rows are
numbered by counting.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import tempfile
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.orc as orc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, example, given, reject, settings
from hypothesis import strategies as st
from py4j.protocol import Py4JJavaError
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.window import Window

import ember
from tests.oracle import rows as o

Plan = tuple[Any, ...]
Table = list[tuple[int | None, int | None]]

small = st.integers(0, 3)
value = st.sampled_from([0, 1, 2, 3, None])
table = st.lists(st.tuples(value, value), min_size=1, max_size=8)
leaf = st.sampled_from(["t0", "t1"]).map(lambda n: ("scan", n))
# INTERSECT and EXCEPT, distinct and ALL, by the DataFrame method that spells each
_SET_OPS = {"intersect": "intersect", "except": "subtract", "intersect all": "intersectAll", "except all": "exceptAll"}


# joins by how and on what: `k` equal, both columns equal, `k` equal and `l.v < r.v`, `l.v < r.v` alone
_JOINS = [(how, "k") for how in ("inner", "left", "right", "full", "semi", "anti")] + [
    ("inner", "kv"), *((how, "k<") for how in ("inner", "left", "semi", "anti")),
    *((how, "<") for how in ("inner", "left", "semi", "anti"))]
_AGGREGATES = {"count": lambda: F.count(F.lit(1)), "sum": lambda: F.sum("v"), "max": lambda: F.max("v"),
               "distinct": lambda: F.count_distinct("v")}
_WINDOWS = ("rank", "dense rank", "row number", "ntile", "whole", "running", "moving", "pandas moving", "valued")
# a RANGE frame whose offsets are values of a double ORDER BY, descending (PySpark's own
# frames take whole numbers only): in `v`, from v + 1 (0.5 before, descending) down to v - 2
_VALUED = "count(1) OVER (PARTITION BY k ORDER BY v * 0.5D DESC RANGE BETWEEN 0.5 PRECEDING AND 1.0 FOLLOWING)"
# over distinct rows (no ties): a function, and its frame as row offsets (None: unbounded)
_ORDERED: dict[str, tuple[int | None, int | None]] = {
    "lag": (-1, -1), "lead": (2, 2), "rows": (-1, 1), "rows before": (None, -1), "rows after": (1, None)}
# correlated scalar subqueries over the right rows of the same `k`: as a column, or in a filter
_CORRELATED = ("count", "max", "below max", "count above")


_views = itertools.count()  # names of the temp views SQL subqueries are written over


def _extend(children: st.SearchStrategy[Plan]) -> st.SearchStrategy[Plan]:
    binary = [st.tuples(st.just(op), children, children)
              for op in ("union", "distinct", "above", "not in", "cogrouped map", *_SET_OPS)]
    correlated = st.tuples(st.just("correlated"), children, children, st.sampled_from(_CORRELATED))
    return st.one_of(
        st.tuples(st.just("filter"), children, st.sampled_from(["k", "v"]), small),
        st.tuples(st.just("udf"), children),
        st.tuples(st.just("explode"), children, st.booleans()),
        st.tuples(st.just("unpivot"), children),
        st.tuples(st.just("pivot"), children, small, st.sampled_from(["count", "sum"])),
        st.tuples(st.just("group"), children, st.sampled_from([*_AGGREGATES, "pairs", "pandas max"])),
        st.tuples(st.just("grouped map"), children),
        st.tuples(st.just("partition map"), children, st.booleans()),
        st.tuples(st.just("top"), children, st.integers(1, 3)),
        st.tuples(st.just("first"), children, st.integers(1, 3), st.booleans(), st.integers(0, 1)),
        st.tuples(st.just("repartition"), children),
        st.tuples(st.just("total"), children),
        st.tuples(st.just("window"), children, st.sampled_from(_WINDOWS)),
        st.tuples(st.just("ordered"), children, st.sampled_from(sorted(_ORDERED))),
        st.tuples(st.just("join"), children, children, st.sampled_from(_JOINS)),
        correlated,
        *binary,
    )


plans = st.recursive(leaf, _extend, max_leaves=4)


def _mix(x: int | None) -> int | None:
    return None if x is None else (x * 3 + 1) % 5


def _used(df: DataFrame) -> DataFrame:
    """A window's rows through a filter, always true, that reads its value: a row's lineage
    holds its frame even where a later step drops the column (Spark prunes a window nothing
    reads, and the rows it would add with it: no row used it)."""
    return df.filter(F.col("v").isNull() | (F.col("v") >= 0))


def spark_plan(spark: SparkSession, p: Plan) -> DataFrame:
    op = p[0]
    if op == "scan":
        return spark.table(p[1])
    child = spark_plan(spark, p[1])
    if op == "filter":
        return child.filter(F.col(p[2]) > p[3])
    if op == "udf":
        # a lambda, so the UDF travels by value to the Python workers (they cannot import tests)
        mix = F.udf(lambda x: None if x is None else (x * 3 + 1) % 5, "int")
        return child.select("k", mix("v").alias("v"))
    if op == "explode":  # two rows where v > 1, else none (or, outer, one with a null)
        explode = F.explode_outer if p[2] else F.explode
        return child.select("k", explode(F.when(F.col("v") > 1, F.array("v", "k"))).alias("v"))
    if op == "unpivot":  # each row twice: (k, v) and (k, v + 1)
        wide = child.select("k", "v", (F.col("v") + 1).alias("w"))
        return wide.unpivot(["k"], ["v", "w"], "name", "value").select("k", F.col("value").alias("v"))
    if op == "pivot":  # per key, the count (or sum) of its rows whose v is p[2] (null for none)
        pivoted = child.groupBy("k").pivot("v", list(range(4))).agg(F.count(F.lit(1)) if p[3] == "count" else F.sum("v"))
        return pivoted.select("k", F.col(str(p[2])).cast("int").alias("v"))
    if op == "group":
        if p[2] == "pairs":
            return child.groupBy("k", "v").agg(F.count(F.lit(1)).cast("int").alias("n")).select("k", F.col("n").alias("v"))
        if p[2] == "pandas max":  # a pandas UDAF (defined in here: it travels by value)
            @F.pandas_udf("int")  # type: ignore[call-overload]
            def most(v: pd.Series) -> int | None:
                return None if v.isna().all() else int(v.max())

            return child.groupBy("k").agg(most("v").alias("v"))
        return child.groupBy("k").agg(_AGGREGATES[p[2]]().cast("int").alias("v"))
    if op == "grouped map":  # defined in here, the function travels by value to the Python workers
        def sized(key: tuple[Any, ...], pdf: Any) -> Any:  # (k, the group's size) per distinct non-null v
            n = len(set(pdf.v.dropna().tolist()))
            return pd.DataFrame({"k": [key[0]] * n, "v": [len(pdf)] * n})

        return child.groupBy("k").applyInPandas(sized, "k int, v int")
    if op == "partition map":  # one partition, so which rows the function saw is certain: all
        def doubled(frames: Iterator[Any]) -> Iterator[Any]:
            for pdf in frames:
                yield pdf.assign(v=pdf.v * 2)

        def doubled_arrow(batches: Iterator[Any]) -> Iterator[Any]:
            for batch in batches:
                yield batch.set_column(1, "v", pc.multiply(batch.column(1), 2).cast(pa.int32()))

        one = child.coalesce(1)
        return one.mapInPandas(doubled, "k int, v int") if p[2] else one.mapInArrow(doubled_arrow, "k int, v int")
    if op == "top":  # keys are unique after the group-by, so which groups it keeps is certain
        return child.groupBy("k").agg(F.count(F.lit(1)).cast("int").alias("v")).orderBy("k").limit(p[2])
    if op == "first":  # distinct rows first, so rows the limit cuts differ from those it keeps
        first = child.distinct().orderBy("k", "v").offset(p[4]).limit(p[2])
        return first if p[3] else first.select("k", F.lit(0).alias("v"))
    if op == "repartition":
        return child.repartition(3, "v")
    if op == "total":
        return child.agg(F.lit(0).alias("k"), F.count(F.lit(1)).cast("int").alias("v"))
    if op == "window":  # ties share a rank and a range frame, so the values are certain whatever the row order
        part = Window.partitionBy("k")  # (and tied rows are equal: which gets which row number shows nowhere)

        @F.pandas_udf("int")  # type: ignore[call-overload]
        def rows_in(v: pd.Series) -> int:  # a pandas UDAF over the frame: its row count
            return len(v)

        fn, spec = {
            "rank": (F.rank(), part.orderBy("v")),
            "dense rank": (F.dense_rank(), part.orderBy("v")),
            "row number": (F.row_number(), part.orderBy("v")),
            "ntile": (F.ntile(2), part.orderBy("v")),
            "whole": (F.count(F.lit(1)), part),
            "running": (F.count(F.lit(1)), part.orderBy("v")),
            "moving": (F.count(F.lit(1)), part.orderBy("v").rangeBetween(-1, 0)),
            "pandas moving": (rows_in("v"), part.orderBy("v").rangeBetween(-1, 0)),
            "valued": (F.expr(_VALUED), None),
        }[p[2]]
        return _used(child.select("k", (fn if spec is None else fn.over(spec)).cast("int").alias("v")))
    if op == "ordered":
        spec = Window.partitionBy("k").orderBy("v")
        lo, hi = _ORDERED[p[2]]
        rows = spec.rowsBetween(Window.unboundedPreceding if lo is None else lo, Window.unboundedFollowing if hi is None else hi)
        fn = {"lag": F.lag("v").over(spec), "lead": F.lead("v", 2).over(spec), "rows": F.count(F.lit(1)).over(rows),
              "rows before": F.sum("v").over(rows), "rows after": F.max("v").over(rows)}[p[2]]
        return _used(child.distinct().select("k", fn.cast("int").alias("v")))
    other = spark_plan(spark, p[2])
    if op in ("union", "distinct"):
        both = child.unionAll(other)
        return both.distinct() if op == "distinct" else both
    if op in _SET_OPS:
        return getattr(child, _SET_OPS[op])(other)
    if op == "cogrouped map":
        def sizes(key: tuple[Any, ...], left: Any, right: Any) -> Any:  # (k, 4 * left rows + right rows)
            return pd.DataFrame({"k": [key[0]], "v": [4 * len(left) + len(right)]})

        return child.groupBy("k").cogroup(other.groupBy("k")).applyInPandas(sizes, "k int, v int")
    if op == "above":
        return child.filter(F.col("v") > other.select(F.max("v")).scalar())
    if op in ("not in", "correlated"):  # SQL over temp views of the two sides
        a, b = f"view_{next(_views)}", f"view_{next(_views)}"
        child.createOrReplaceTempView(a)  # a view right over `t0` leaves the source named `t0`
        other.createOrReplaceTempView(b)
        if op == "not in":  # null-aware: one null `k` on the right and no row passes
            return spark.sql(f"SELECT * FROM {a} WHERE k NOT IN (SELECT k FROM {b})")
        # `count above` counts the right rows whose v is greater: Spark joins them with the
        # left's distinct values (a domain join), which are no lineage
        where = f"{b}.v > {a}.v" if p[3] == "count above" else f"{b}.k = {a}.k"
        scalar = f"(SELECT {'max(v)' if 'max' in p[3] else 'count(*)'} FROM {b} WHERE {where})"
        if p[3] == "below max":
            return spark.sql(f"SELECT * FROM {a} WHERE v < {scalar}")
        # the filter, always true, uses the value: a row's lineage holds the subquery's even
        # where a later step drops the column (Spark prunes a scalar nothing reads, and the
        # rows it would add with it: no row used it)
        return spark.sql(f"SELECT k, CAST({scalar} AS INT) AS v FROM {a} WHERE {scalar} IS NULL OR {scalar} >= 0")
    how, on = p[3]
    left, right = child.alias("l"), other.alias("r")
    conditions = {
        "k": [F.col("l.k") == F.col("r.k")],
        "kv": [F.col("l.k") == F.col("r.k"), F.col("l.v") == F.col("r.v")],
        "k<": [F.col("l.k") == F.col("r.k"), F.col("l.v") < F.col("r.v")],
        "<": [F.col("l.v") < F.col("r.v")],
    }[on]
    if how in ("semi", "anti"):  # aliased: the left's own columns, cogrouped with that left, would be ambiguous
        return left.join(right, conditions, f"left_{how}").select(F.col("l.k").alias("k"), F.col("l.v").alias("v"))
    return left.join(right, conditions, how).select(F.col("l.k").alias("k"), F.col("r.v").alias("v"))


def oracle_plan(p: Plan, tables: dict[str, Table]) -> list[o.Row]:
    op = p[0]
    if op == "scan":
        return o.scan(p[1], tables[p[1]])
    child = oracle_plan(p[1], tables)
    if op == "filter":
        col = 0 if p[2] == "k" else 1
        return o.where(child, lambda v: v[col] is not None and v[col] > p[3])
    if op == "udf":
        return o.select(child, lambda v: (v[0], _mix(v[1])))
    if op == "explode":
        return [((v[0], x), lin) for v, lin in child for x in _exploded(v, p[2])]
    if op == "unpivot":
        return [(w, lin) for v, lin in child for w in ((v[0], v[1]), (v[0], None if v[1] is None else v[1] + 1))]
    if op == "pivot":  # lineage: every row of the key's group, whatever its v
        def pivoted(vs: list[o.Values]) -> o.Values:
            hits = [v[1] for v in vs if v[1] == p[2]]
            return ((len(hits) if p[3] == "count" else sum(hits)) if hits else None,)

        return o.group(child, lambda v: (v[0],), pivoted)
    if op == "group":
        if p[2] == "pairs":
            return o.select(o.group(child, lambda v: v, lambda vs: (len(vs),)), lambda v: (v[0], v[2]))
        return o.group(child, lambda v: (v[0],), _AGGREGATED[p[2]])
    if op == "grouped map":  # lineage: every row of the group, whatever rows the function returns
        groups = o.group(child, lambda v: (v[0],), lambda vs: (vs,))
        return [((k, len(vs)), lin) for (k, vs), lin in groups for _ in {v[1] for v in vs if v[1] is not None}]
    if op == "partition map":  # lineage: every row of the partition, here the whole input
        everything = frozenset().union(*(lin for _, lin in child))
        return [((k, None if v is None else v * 2), everything) for (k, v), _ in child]
    if op == "top":
        groups = o.group(child, lambda v: (v[0],), lambda vs: (len(vs),))
        return sorted(groups, key=lambda r: (r[0][0] is not None, r[0][0] or 0))[: p[2]]  # nulls first
    if op == "first":
        rows = sorted(o.distinct(child), key=lambda r: [(x is not None, x or 0) for x in r[0]])[p[4] : p[4] + p[2]]
        return rows if p[3] else o.select(rows, lambda v: (v[0], 0))
    if op == "repartition":
        return child
    if op == "total":
        return o.group(child, lambda v: (), lambda vs: (0, len(vs)), global_=True)
    if op == "window":
        return _windowed(child, p[2])
    if op == "ordered":
        return _ordered(o.distinct(child), p[2])
    other = oracle_plan(p[2], tables)
    if op in ("union", "distinct"):
        return o.distinct(child + other) if op == "distinct" else child + other
    if op in _SET_OPS:
        return o.set_op(child, other, op.split()[0], all_=op.endswith("all"))
    if op == "cogrouped map":  # a row per key of either side (null a key too), with both groups' lineage
        out = []
        for k in dict.fromkeys(v[0] for v, _ in child + other):
            group = [r for r in child if r[0][0] == k], [r for r in other if r[0][0] == k]
            out.append(((k, 4 * len(group[0]) + len(group[1])), frozenset().union(*(lin for _, lin in group[0] + group[1]))))
        return out
    if op == "not in":  # true for every row when the right is empty, else only for a non-null
        keys = [v[0] for v, _ in other]  # `k` that no right key equals, with no null among them
        return [(v, lin) for v, lin in child if not keys or (None not in keys and v[0] is not None and v[0] not in keys)]
    if op == "correlated":  # each row with the scalar over the right rows of its `k` (none for a null)
        return [row for row in (_correlated(v, lin, other, p[3]) for v, lin in child) if row is not None]
    if op == "above":  # the scalar's lineage (every row of `other`) joins each row that passed
        values = [v[1] for v, _ in other if v[1] is not None]
        scalar = frozenset().union(*(lin for _, lin in other))
        return [(v, lin | scalar) for v, lin in child if values and v[1] is not None and v[1] > max(values)]
    how, on = p[3]

    def matches(x: o.Values, y: o.Values) -> bool:  # SQL's `=` and `<`: a null matches nothing
        k = on == "<" or (x[0] is not None and x[0] == y[0])
        if on == "kv":
            return k and x[1] is not None and x[1] == y[1]
        return k and (on == "k" or (x[1] is not None and y[1] is not None and x[1] < y[1]))

    if how == "semi":
        return o.semi(child, other, matches)
    if how == "anti":
        return o.anti(child, other, matches)
    joined = o.join(child, other, matches, how, lw=2, rw=2)
    return o.select(joined, lambda v: (v[0], v[3]))


_AGGREGATED = {
    "count": lambda vs: (len(vs),),
    "sum": lambda vs: (sum(x) if (x := [v[1] for v in vs if v[1] is not None]) else None,),
    "max": lambda vs: (max(x) if (x := [v[1] for v in vs if v[1] is not None]) else None,),
    "distinct": lambda vs: (len({v[1] for v in vs if v[1] is not None}),),
}
_AGGREGATED["pandas max"] = _AGGREGATED["max"]


def _correlated(v: o.Values, lin: o.Lin, other: list[o.Row], scalar: str) -> o.Row | None:
    """The row with its scalar (count or max of the right rows' `v` where `k` equals its own,
    or the count of those whose `v` is greater), or, for the filter, the row if its `v` is
    below that max; its lineage adds those rows'."""
    if scalar == "count above":
        inner = [(w, wl) for w, wl in other if v[1] is not None and w[1] is not None and w[1] > v[1]]
    else:
        inner = [(w, wl) for w, wl in other if v[0] is not None and w[0] == v[0]]
    values = [w[1] for w, _ in inner if w[1] is not None]
    lineage = lin.union(*(wl for _, wl in inner))
    if scalar in ("count", "count above"):
        return (v[0], len(inner)), lineage
    top = max(values) if values else None
    if scalar == "max":
        return (v[0], top), lineage
    return (v, lineage) if top is not None and v[1] is not None and v[1] < top else None


def _exploded(v: o.Values, outer: bool) -> list[int | None]:
    if v[1] is not None and v[1] > 1:
        return [v[1], v[0]]
    return [None] if outer else []


def _in_frame(window: str, w: int | None, v: int | None) -> bool:
    """Whether a row ordered by `w` is in the frame of the row ordered by `v` (nulls first;
    a null's range frame is its null peers)."""
    if window in _RANKING or window == "whole":
        return True
    if v is None:
        return w is None
    if window == "running":
        return w is None or w <= v
    if window == "valued":  # descending: nulls last, a non-null row's frame holds none
        return w is not None and v - 2 <= w <= v + 1
    return w is not None and v - 1 <= w <= v


_RANKING = ("rank", "dense rank", "row number", "ntile")


def _windowed(rows: list[o.Row], window: str) -> list[o.Row]:
    """The window's value for each row, over its partition by `k` (nulls partition together),
    and its lineage: the row and every row of its frame (a ranking function's: the partition)."""
    out = []
    seen: dict[o.Values, int] = defaultdict(int)  # tied rows before this one: their row numbers come first
    for v, lin in rows:
        frame = [(w, wl) for w, wl in rows if w[0] == v[0] and _in_frame(window, w[1], v[1])]
        values = [w[1] for w, _ in frame]
        below = {w for w in values if w is not None and v[1] is not None and w < v[1]}
        nulls_before = v[1] is not None and None in values  # nulls sort first
        rank = 1 + nulls_before * values.count(None) + sum(values.count(w) for w in below)
        number = rank + seen[v]
        seen[v] += 1
        value = {
            "rank": rank,
            "dense rank": 1 + nulls_before + len(below),
            "row number": number,
            "ntile": 1 if number <= (len(frame) + 1) // 2 else 2,
        }.get(window, len(frame))
        out.append(((v[0], value), lin.union(*(wl for _, wl in frame))))
    return out


def _ordered(rows: list[o.Row], fn: str) -> list[o.Row]:
    """Each distinct row's value over its partition by `k` in `v` order (nulls first), and its
    lineage: the row and the rows of its frame (lag's and lead's: the row they read)."""
    out = []
    for v, lin in rows:
        part = sorted((r for r in rows if r[0][0] == v[0]), key=lambda r: (r[0][1] is not None, r[0][1] or 0))
        i = [w for w, _ in part].index(v)
        lo, hi = _ORDERED[fn]
        frame = part[max(0, i + lo) if lo is not None else 0 : i + hi + 1 if hi is not None else len(part)]
        values = [w[1] for w, _ in frame if w[1] is not None]
        value = {
            "rows": len(frame),
            "rows before": sum(values) if values else None,
            "rows after": max(values) if values else None,
        }.get(fn, frame[0][0][1] if frame else None)  # lag and lead: the value of the row they read
        out.append(((v[0], value), lin.union(*(wl for _, wl in frame))))
    return out


def register(
    spark: SparkSession, t0: Table, t1: Table, folder: Path | None = None, fmt: str = "parquet", layout: str = "plain"
) -> dict[str, Table]:
    """The two generated tables as temp views `t0` and `t1` (in memory, or two files each
    under `folder`, Parquet, CSV, JSON lines, XML or ORC, numbered as if concatenated in path order),
    and by name for the oracle. `layout` "flipped": each second Parquet file holds its
    columns as (v, k), which Spark reads by name; "partitioned": the files sit in folders
    p=0 and p=1, so the source has a partition column the views leave out."""
    tables = {"t0": t0, "t1": t1}
    for name, rows in tables.items():
        if folder is None:
            spark.createDataFrame(rows, "k int, v int").createOrReplaceTempView(name)
            continue
        half = len(rows) // 2  # two files (the first empty for one row): rids run on across them
        for part, chunk in enumerate((rows[:half], rows[half:])):
            inner = folder / name / (f"p={part}" if layout == "partitioned" else "")
            inner.mkdir(parents=True, exist_ok=True)
            _write(inner / f"part-{part}.{fmt}", chunk, fmt, ("v", "k") if layout == "flipped" and part else ("k", "v"))
        reader = spark.read.schema("k int, v int")
        read = (reader.option("rowTag", "row") if fmt == "xml" else reader).format(fmt).load(str(folder / name))
        read.select("k", "v").createOrReplaceTempView(name)
    return tables


def _write(path: Path, rows: Table, fmt: str, order: tuple[str, str]) -> None:
    if fmt == "parquet":
        columns = {c: pa.array([r[i] for r in rows], pa.int32()) for i, c in enumerate(("k", "v"))}
        pq.write_table(pa.table({c: columns[c] for c in order}), path)
    elif fmt == "orc":  # stripes of a few rows, so Spark's splits cut the file
        columns = {c: pa.array([r[i] for r in rows], pa.int32()) for i, c in enumerate(("k", "v"))}
        orc.write_table(pa.table(columns), path, stripe_size=64, batch_size=2)
    elif fmt == "xml":  # a missing element is a null
        elements = ("".join(f"<{c}>{x}</{c}>" for c, x in zip(("k", "v"), r, strict=True) if x is not None) for r in rows)
        path.write_text("<rows>\n" + "".join(f"<row>{e}</row>\n" for e in elements) + "</rows>\n")
    elif fmt == "csv":  # an empty field is a null
        path.write_text("".join(",".join("" if x is None else str(x) for x in r) + "\n" for r in rows))
    else:
        path.write_text("".join(json.dumps({"k": r[0], "v": r[1]}) + "\n" for r in rows))


@contextlib.contextmanager
def _small_splits(spark: SparkSession) -> Iterator[None]:
    """Spark splits each text file into several splits of a few lines (numbered apart)."""
    conf = {"spark.sql.files.maxPartitionBytes": "8", "spark.sql.files.openCostInBytes": "1"}
    before = {key: spark.conf.get(key) for key in conf}
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            spark.conf.set(key, value)


def plain_rows(df: DataFrame) -> list[tuple[Any, ...]]:
    """The job's rows, run by Spark alone; a plan Spark itself fails on is no example (Spark
    4's optimizer fails an INTERSECT ALL beside a correlated subquery: `key not found`)."""
    try:
        return [tuple(r) for r in df.collect()]
    except Py4JJavaError:
        reject()


def check(spark: SparkSession, plan: Plan, tables: dict[str, Table], strategy: str) -> None:
    """The job's rows, then its lineage captured and saved, equal the oracle's."""
    df = spark_plan(spark, plan)
    expected = oracle_plan(plan, tables)
    assert sorted(map(repr, plain_rows(df))) == sorted(repr(v) for v, _ in expected)
    if strategy == "defer" and "'partition map'" in repr(plan):
        with pytest.raises(ember.EmberError, match="partition map"):
            ember.capture(df, strategy=strategy)
        return
    lin = ember.capture(df, strategy=strategy)
    o.assert_same_lineage(lin, expected)
    with tempfile.TemporaryDirectory() as store:  # the saved store (encoded, read lazily) too
        lin.save(store, overwrite=True)
        o.assert_same_lineage(ember.load(store), expected)


@settings(settings.get_profile("spark-jobs"), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=plans, t0=table, t1=table, strategy=st.sampled_from(["inject", "defer"]))
# found by CI: a table cogrouped with its own semi join (the generator's columns were ambiguous to Spark)
@example(plan=("cogrouped map", ("scan", "t0"), ("join", ("scan", "t0"), ("scan", "t0"), ("semi", "k"))),
         t0=[(0, 0)], t1=[(0, 0)], strategy="inject")  # fmt: skip
def test_generated_pipeline_lineage_equals_oracle(
    spark: SparkSession, plan: Plan, t0: Table, t1: Table, strategy: str
) -> None:
    check(spark, plan, register(spark, t0, t1), strategy)


@settings(settings.get_profile("spark-jobs"), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    plan=plans, t0=table, t1=table, strategy=st.sampled_from(["inject", "defer"]),
    layout=st.sampled_from(["plain", "flipped", "partitioned"]),
)
def test_generated_pipeline_over_parquet_equals_oracle(
    spark: SparkSession, plan: Plan, t0: Table, t1: Table, strategy: str, layout: str
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        check(spark, plan, register(spark, t0, t1, Path(folder), layout=layout), strategy)


@settings(settings.get_profile("spark-jobs"), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    plan=plans, t0=table, t1=table, strategy=st.sampled_from(["inject", "defer"]),
    fmt=st.sampled_from(["csv", "json", "xml", "orc"]),
    layout=st.sampled_from(["plain", "partitioned"]),
)
def test_generated_pipeline_over_text_files_equals_oracle(
    spark: SparkSession, plan: Plan, t0: Table, t1: Table, strategy: str, fmt: str, layout: str
) -> None:
    with tempfile.TemporaryDirectory() as folder, _small_splits(spark):
        check(spark, plan, register(spark, t0, t1, Path(folder), fmt, layout), strategy)
