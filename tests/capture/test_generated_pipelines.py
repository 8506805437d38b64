"""Randomly generated pipelines (hypothesis): ember's lineage equals the pure-Python oracle's.

Every relation has two int columns `k` and `v`, null at times; operators: filters, a
Python UDF, inner / left / semi / anti joins, a group-by count, the first groups of one
by key (a LIMIT), a global count, a rank within each key, union all, distinct,
intersect and except (distinct and all). Two tiny tables (one to eight rows, values
0-3) make joins and groups collide often. Over Parquet files the same plans
take the paths in-memory tables never do: scans numbered by row position, and side
tables DuckDB reads from the files beside or after the job (`capture.local_sides`).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
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


def _extend(children: st.SearchStrategy[Plan]) -> st.SearchStrategy[Plan]:
    binary = [st.tuples(st.just(op), children, children) for op in ("inner", "left", "semi", "anti", "union", "distinct", *_SET_OPS)]
    return st.one_of(
        st.tuples(st.just("filter"), children, st.sampled_from(["k", "v"]), small),
        st.tuples(st.just("udf"), children),
        st.tuples(st.just("count"), children),
        st.tuples(st.just("top"), children, st.integers(1, 3)),
        st.tuples(st.just("total"), children),
        st.tuples(st.just("rank"), children),
        *binary,
    )


plans = st.recursive(leaf, _extend, max_leaves=4)


def _mix(x: int | None) -> int | None:
    return None if x is None else (x * 3 + 1) % 5


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
    if op == "count":
        return child.groupBy("k").agg(F.count(F.lit(1)).cast("int").alias("v"))
    if op == "top":  # keys are unique after the group-by, so which groups it keeps is certain
        return child.groupBy("k").agg(F.count(F.lit(1)).cast("int").alias("v")).orderBy("k").limit(p[2])
    if op == "total":
        return child.agg(F.lit(0).alias("k"), F.count(F.lit(1)).cast("int").alias("v"))
    if op == "rank":  # ties share a rank, so the values are certain whatever the row order
        return child.select("k", F.rank().over(Window.partitionBy("k").orderBy("v")).cast("int").alias("v"))
    other = spark_plan(spark, p[2])
    if op in ("union", "distinct"):
        both = child.unionAll(other)
        return both.distinct() if op == "distinct" else both
    if op in _SET_OPS:
        return getattr(child, _SET_OPS[op])(other)
    left, right = child.alias("l"), other.alias("r")
    on = F.col("l.k") == F.col("r.k")
    if op in ("semi", "anti"):
        return left.join(right, on, f"left_{op}").select("l.k", "l.v")
    return left.join(right, on, op).select(F.col("l.k").alias("k"), F.col("r.v").alias("v"))


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
    if op == "count":
        return o.group(child, lambda v: (v[0],), lambda vs: (len(vs),))
    if op == "top":
        groups = o.group(child, lambda v: (v[0],), lambda vs: (len(vs),))
        return sorted(groups, key=lambda r: (r[0][0] is not None, r[0][0] or 0))[: p[2]]  # nulls first
    if op == "total":
        return o.group(child, lambda v: (), lambda vs: (0, len(vs)), global_=True)
    if op == "rank":
        return _ranked(child)
    other = oracle_plan(p[2], tables)
    if op in ("union", "distinct"):
        return o.distinct(child + other) if op == "distinct" else child + other
    if op in _SET_OPS:
        return o.set_op(child, other, op.split()[0], all_=op.endswith("all"))

    def same(x: o.Values, y: o.Values) -> bool:
        return x[0] is not None and x[0] == y[0]  # SQL's `=`: a null matches nothing

    if op == "semi":
        return o.semi(child, other, same)
    if op == "anti":
        return o.anti(child, other, same)
    joined = o.join(child, other, same, op, lw=2, rw=2)
    return o.select(joined, lambda v: (v[0], v[3]))


def _ranked(rows: list[o.Row]) -> list[o.Row]:
    """`rank() OVER (PARTITION BY k ORDER BY v)`, nulls first: 1 + the rows of the partition
    ordered before; a ranking function's lineage is its whole partition."""
    def before(a: int | None, b: int | None) -> bool:
        return b is not None and (a is None or a < b)

    out = []
    for v, _ in rows:
        part = [(w, lin) for w, lin in rows if w[0] == v[0]]  # nulls partition together
        rank = 1 + sum(before(w[1], v[1]) for w, _ in part)
        out.append(((v[0], rank), frozenset().union(*(lin for _, lin in part))))
    return out


def register(
    spark: SparkSession, t0: Table, t1: Table, folder: Path | None = None
) -> dict[str, Table]:
    """The two generated tables as temp views `t0` and `t1` (in memory, or two Parquet files
    each under `folder`, numbered as if concatenated in path order), and by name for the
    oracle."""
    tables = {"t0": t0, "t1": t1}
    for name, rows in tables.items():
        if folder is None:
            spark.createDataFrame(rows, "k int, v int").createOrReplaceTempView(name)
            continue
        (folder / name).mkdir()
        half = len(rows) // 2  # two files (the first empty for one row): rids run on across them
        for part, chunk in enumerate((rows[:half], rows[half:])):
            columns = {c: pa.array([r[i] for r in chunk], pa.int32()) for i, c in enumerate(("k", "v"))}
            pq.write_table(pa.table(columns), folder / name / f"part-{part}.parquet")
        spark.read.parquet(str(folder / name)).createOrReplaceTempView(name)
    return tables


def check(spark: SparkSession, plan: Plan, tables: dict[str, Table], strategy: str) -> None:
    """The job's rows, then its lineage captured and saved, equal the oracle's."""
    df = spark_plan(spark, plan)
    expected = oracle_plan(plan, tables)
    assert sorted(map(repr, (tuple(r) for r in df.collect()))) == sorted(repr(v) for v, _ in expected)
    lin = ember.capture(df, strategy=strategy)
    o.assert_same_lineage(lin, expected)
    with tempfile.TemporaryDirectory() as store:  # the saved store (encoded, read lazily) too
        lin.save(store, overwrite=True)
        o.assert_same_lineage(ember.load(store), expected)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=plans, t0=table, t1=table, strategy=st.sampled_from(["inject", "defer"]))
def test_generated_pipeline_lineage_equals_oracle(
    spark: SparkSession, plan: Plan, t0: Table, t1: Table, strategy: str
) -> None:
    check(spark, plan, register(spark, t0, t1), strategy)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=plans, t0=table, t1=table, strategy=st.sampled_from(["inject", "defer"]))
def test_generated_pipeline_over_parquet_equals_oracle(
    spark: SparkSession, plan: Plan, t0: Table, t1: Table, strategy: str
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        check(spark, plan, register(spark, t0, t1, Path(folder)), strategy)
