"""IR plans compiled to DuckDB SQL (`engines.duck.compile`) read what Spark reads.

Plan mode (capture's side tables): each plan's rows, read by DuckDB from the Parquet
files, equal the rows Spark's own job gives, for every operator the compiler reads.
Lineage mode (infer's block): the combinations of input rows DuckDB joins equal the rids
Spark joins with `_metadata.row_index`. Wanted keys restrict a read as a filter on the
keys would; a window guessed untied raises `ties.Tie` where rows tie, and only there.
"""

from __future__ import annotations

import decimal
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ember.capture.untie import untied
from ember.engines import duck
from ember.engines.duck import compile as duck_compile
from ember.engines.duck import ties
from ember.engines.duck.compile import Compiled, Compiler, run
from ember.engines.duck.wanted import Wanted, table_rows
from ember.engines.spark.jvm import Jvm
from ember.engines.spark.plan_import import import_plan
from ember.infer.duck_scan import candidates
from ember.infer.pushdown import ScanPlan
from ember.plan import ir
from ember.plan.sources import Source

D = decimal.Decimal
# Two files each (rids count the rows of the files before); `okey` repeats in the items,
# `total` is null once; two items of flag 'a' tie in `okey` (order 1).
ORDERS = [[(1, D("10.50"), "hi"), (2, D("20.00"), "lo"), (3, None, "hi")], [(4, D("40.25"), "lo"), (5, D("50.00"), "hi")]]
ITEMS = [[(100, 1, 5, "a"), (101, 1, 1, "b"), (102, 2, 7, "a")], [(103, 3, 2, "a"), (104, 5, 9, "b"), (105, 5, 4, "a"), (106, 9, 3, "b"), (107, 1, 8, "a")]]
ORDER_TYPES = pa.schema([("okey", pa.int64()), ("total", pa.decimal128(10, 2)), ("prio", pa.string())])
ITEM_TYPES = pa.schema([("ikey", pa.int64()), ("okey", pa.int64()), ("qty", pa.int64()), ("flag", pa.string())])


def _write(folder: Path, parts: list[list[tuple[Any, ...]]], schema: pa.Schema) -> None:
    folder.mkdir()
    for i, part in enumerate(parts):
        columns = {f.name: [r[j] for r in part] for j, f in enumerate(schema)}
        pq.write_table(pa.table(columns, schema=schema), folder / f"part-{i}.parquet")


@pytest.fixture(scope="module")
def views(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> SparkSession:
    """`c_orders`, `c_items` (two files each); `l_orders`, `l_items` (one file each) and
    `l_orders_r`, `l_items_r`, the same rows with their rid (`rid`, the row's index)."""
    root = tmp_path_factory.mktemp("compile")
    for name, parts, schema in (("orders", ORDERS, ORDER_TYPES), ("items", ITEMS, ITEM_TYPES)):
        _write(root / f"c_{name}", parts, schema)
        _write(root / f"l_{name}", [[r for part in parts for r in part]], schema)
        spark.read.parquet(str(root / f"c_{name}")).createOrReplaceTempView(f"c_{name}")
        rows = spark.read.parquet(str(root / f"l_{name}"))
        rows.createOrReplaceTempView(f"l_{name}")
        rows.select("*", F.col("_metadata.row_index").alias("rid")).createOrReplaceTempView(f"l_{name}_r")
    return spark


def _bag(rows: list[tuple[Any, ...]]) -> Counter[tuple[Any, ...]]:
    """Rows as a multiset (equal decimals hash alike whatever their exponent)."""
    return Counter(tuple(r) for r in rows)


def _duck_rows(query: Compiled) -> list[tuple[Any, ...]]:
    con = duck.connect()
    try:
        table = run(query, con)
    finally:
        con.close()
    return [tuple(r.values()) for r in table.to_pylist()]


def _compiled(df: DataFrame, change: Callable[[ir.Node], ir.Node] = lambda p: p) -> Compiled:
    plan, sources, _ = import_plan(Jvm(df.sparkSession), df)
    compiled = duck_compile.rows(change(plan), sources)
    assert compiled is not None, ir.outline(plan)
    return compiled


PLANS = {
    "filter and computed columns": "SELECT okey, total * 2 AS t, upper(prio) AS p FROM c_orders WHERE prio = 'hi' OR total > 30",
    "groups": "SELECT prio, sum(total) AS s, count(*) AS n, max(okey) AS m FROM c_orders GROUP BY prio",
    "global aggregate": "SELECT sum(qty) AS q, count(*) AS n FROM c_items WHERE flag = 'z'",
    "inner join": "SELECT o.prio, i.ikey, i.qty + o.okey AS v FROM c_orders o JOIN c_items i ON o.okey = i.okey AND i.qty > 1",
    "left join": "SELECT o.okey, i.ikey FROM c_orders o LEFT JOIN c_items i ON o.okey = i.okey AND i.flag = 'a' AND o.prio = 'hi'",
    "right join": "SELECT i.ikey, o.prio FROM c_orders o RIGHT JOIN c_items i ON o.okey = i.okey AND o.total > 15",
    "full join of groups": (
        "SELECT coalesce(a.okey, b.okey) AS k, a.q, b.n FROM (SELECT okey, sum(qty) AS q FROM c_items WHERE flag = 'a'"
        " GROUP BY okey) a FULL OUTER JOIN (SELECT okey, count(*) AS n FROM c_items WHERE flag = 'b' GROUP BY okey) b"
        " ON a.okey = b.okey"
    ),
    "exists": "SELECT o.okey FROM c_orders o WHERE EXISTS (SELECT 1 FROM c_items i WHERE i.okey = o.okey AND i.qty > o.okey)",
    "not exists": "SELECT o.okey FROM c_orders o WHERE NOT EXISTS (SELECT 1 FROM c_items i WHERE i.okey = o.okey AND i.flag = 'b')",
    "not in": "SELECT okey FROM c_orders WHERE okey NOT IN (SELECT okey FROM c_items WHERE qty > 4)",
    "union": "SELECT prio AS f, okey AS k FROM c_orders WHERE okey > 2 UNION ALL SELECT flag, ikey FROM c_items WHERE qty < 5",
    "intersect": "SELECT okey FROM c_orders INTERSECT SELECT okey FROM c_items",
    "rank": "SELECT ikey, rank() OVER (PARTITION BY flag ORDER BY qty DESC) AS r FROM c_items",
    "partition sum": "SELECT ikey, sum(qty) OVER (PARTITION BY flag) AS s, count(*) OVER (PARTITION BY okey) AS n FROM c_items",
    "rollup": "SELECT flag, okey, sum(qty) AS q, grouping_id() AS g FROM c_items GROUP BY ROLLUP(flag, okey)",
    "cube over a join": (
        "SELECT i.flag, o.prio, count(*) AS n FROM c_items i JOIN c_orders o ON i.okey = o.okey GROUP BY CUBE(i.flag, o.prio)"
    ),
    "scalar subquery": "SELECT okey FROM c_orders WHERE total > (SELECT avg(total) FROM c_orders WHERE prio = 'hi')",
    "groups over groups": (
        "SELECT n, count(*) AS c FROM (SELECT okey, count(*) AS n FROM c_items GROUP BY okey) GROUP BY n"
    ),
}


@pytest.mark.parametrize("query", PLANS.values(), ids=PLANS.keys())
def test_plan_rows_are_sparks(views: SparkSession, query: str) -> None:
    df = views.sql(query)
    want = _bag([tuple(r) for r in df.collect()])
    assert want, f"{query} gives no row: a weak case"
    assert _bag(_duck_rows(_compiled(df))) == want


def test_a_plan_with_what_does_not_translate_does_not_compile(views: SparkSession) -> None:
    plan, sources, _ = import_plan(Jvm(views), views.sql("SELECT okey FROM c_items WHERE length(flag) = 1"))
    assert duck_compile.rows(plan, sources) is None
    plan, sources, _ = import_plan(Jvm(views), views.sql("SELECT flag, avg(double(qty)) AS q FROM c_items GROUP BY flag"))
    aggregate = next(n for n in ir.walk(plan) if isinstance(n, ir.Aggregate))
    assert duck_compile.readable(aggregate, sources, strict=False)  # its keys read, its averages not
    assert not duck_compile.readable(aggregate, sources)


def test_plans_equal_up_to_attribute_ids_compile_to_one_key(views: SparkSession) -> None:
    # Two reads of one query (new attribute ids each time) are one query; another literal,
    # or another source, is not.
    text = "SELECT flag, sum(qty) AS q FROM c_items WHERE flag <> '{}' GROUP BY flag"
    first, again, other = (_compiled(views.sql(text.format(f))) for f in ("a", "a", "c1"))
    assert first.key == again.key and first.key != other.key


# --- wanted keys -------------------------------------------------------------


def _group_table(views: SparkSession, query: str) -> tuple[ir.Project, dict[str, Source]]:
    plan, sources, _ = import_plan(Jvm(views), views.sql(query))
    if not isinstance(plan, ir.Project):  # a side table's plan is a projection of its columns
        plan = ir.Project(plan, tuple(ir.Named(ir.ColumnRef(a), a) for a in plan.output))
    return plan, sources


@pytest.mark.parametrize("numbered", [False, True])
def test_wanted_keys_restrict_a_read_as_a_filter_on_them(views: SparkSession, numbered: bool) -> None:
    # The groups of two orders, one of them with a null key (items of order 9 have none).
    query = "SELECT o.prio AS p, i.flag AS f, sum(i.qty) AS q FROM c_items i LEFT JOIN c_orders o ON i.okey = o.okey GROUP BY o.prio, i.flag"
    plan, sources = _group_table(views, query)
    keys = plan.output[:2]
    wanted = pa.table({"k0": pa.array([None, "hi"], pa.string()), "k1": ["b", "a"]})
    order = [] if numbered else [a.name for a in plan.output]  # numbered keys are sorted by their number, after the read
    compiled = table_rows(plan, sources, Wanted(wanted, keys, numbered=numbered), order=order)
    assert compiled is not None
    got = _duck_rows(compiled)
    want = [tuple(r) for r in views.sql(query).collect() if (r["p"], r["f"]) in {(None, "b"), ("hi", "a")}]
    if numbered:  # the keys come back as their row in key order: (null, 'b') first
        order = [(None, "b"), ("hi", "a")]
        got = [(*order[g], q) for g, q in got]
    assert _bag(got) == _bag(want) and len(want) == 2


def test_rows_under_a_window_are_cut_to_the_wanted_partitions(views: SparkSession) -> None:
    query = "SELECT okey, ikey, rank() OVER (PARTITION BY okey ORDER BY qty) AS r FROM c_items"
    plan, sources = _group_table(views, query)
    wanted = pa.table({"k0": [5, 1]})
    compiled = table_rows(plan, sources, Wanted(wanted, plan.output[:1]))
    assert compiled is not None and "IN (SELECT k0 FROM wanted)" in compiled.sql
    want = [tuple(r) for r in views.sql(query).collect() if r["okey"] in (1, 5)]
    assert _bag(_duck_rows(compiled)) == _bag(want)


def test_no_wanted_key_reads_no_row(views: SparkSession) -> None:
    plan, sources = _group_table(views, "SELECT sum(qty) AS q FROM c_items")
    compiled = table_rows(plan, sources, Wanted(pa.table({}), ()))
    assert compiled is not None and _duck_rows(compiled) == []


def test_anchored_compares_the_most_distinct_items_keys_alone() -> None:
    from ember.engines.duck.wanted import _anchored

    compared = {0: 'w.k0 = (s0."a")', 1: 'w.k1 IS NOT DISTINCT FROM (s2."b")', 2: 'w.k2 = (s0."c" + s2."d")'}
    reads = {0: frozenset({"s0"}), 1: frozenset({"s2"}), 2: frozenset({"s0", "s2"})}
    few_years = pa.table({"k0": [1, 2, 3], "k1": [7, 7, 7], "k2": [0, 0, 1]})
    assert _anchored(compared, reads, few_years) == (
        ['w.k0 = (s0."a")', 'coalesce(w.k0 = (s0."a") AND w.k1 IS NOT DISTINCT FROM (s2."b") AND w.k2 = (s0."c" + s2."d"), FALSE)'],
        False,
    )
    many_years = pa.table({"k0": [1, 1, 1], "k1": [7, 8, None], "k2": [0, 0, 1]})
    assert _anchored(compared, reads, many_years)[0][0] == 'w.k1 IS NOT DISTINCT FROM (s2."b")'
    one_scan = {0: 'w.k0 = (s0."a")', 1: 'w.k1 = (s0."b")'}
    assert _anchored(one_scan, {0: frozenset({"s0"}), 1: frozenset({"s0"})}, few_years) == (list(one_scan.values()), False)


# --- ties --------------------------------------------------------------------

RUNNING = "SELECT ikey, count(*) OVER (PARTITION BY flag ORDER BY {} ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS n FROM c_items"


def test_an_untied_window_is_computed_again_where_no_rows_tie(views: SparkSession) -> None:
    df = views.sql(RUNNING.format("ikey"))
    compiled = _compiled(df, untied)
    assert compiled.ties
    assert _bag(_duck_rows(compiled)) == _bag([tuple(r) for r in df.collect()])


def test_rows_that_tie_in_an_untied_window_raise_a_tie(views: SparkSession) -> None:
    compiled = _compiled(views.sql(RUNNING.format("okey")), untied)  # flag 'a' has two items of order 1
    with pytest.raises(ties.Tie):
        _duck_rows(compiled)


def test_another_failure_of_a_query_that_checks_ties_is_no_tie(views: SparkSession) -> None:
    # The run's own token was not noted: DuckDB's error stays DuckDB's (the caller leaves the
    # work to Spark), whatever its text.
    df = views.sql(RUNNING.format("ikey")).selectExpr("ikey", "CAST(n * 100 AS tinyint) AS n")
    compiled = _compiled(df, untied)
    assert compiled.ties
    with pytest.raises(duckdb.Error) as failed:
        _duck_rows(compiled)
    assert not isinstance(failed.value, ties.Tie)


def test_a_tie_is_noted_for_its_own_run_only() -> None:
    first, second = ties.token(), ties.token()
    with pytest.raises(ArithmeticError):
        ties.tie(first)
    assert not ties.tied(second)
    assert ties.tied(first) and not ties.tied(first)  # and forgotten once seen


def test_a_window_without_ties_checks_none(views: SparkSession) -> None:
    # A rank's values are the same in any order of tied rows: nothing is guessed or checked.
    compiled = _compiled(views.sql("SELECT ikey, rank() OVER (PARTITION BY flag ORDER BY okey) AS r FROM c_items"), untied)
    assert not compiled.ties and "ember_tie" not in compiled.sql


# --- lineage mode ------------------------------------------------------------


def _frames(root: ir.Node) -> dict[int, pa.Table]:
    """Each scan's candidate rows as `infer` reads them (`infer.duck_scan`): every row that
    passes the filters right over the scan, its `__ember_rid` and a column `a<attr id>` per
    attribute (lineage mode applies those filters no more)."""
    filters: dict[int, list[ir.Expr]] = {}
    for node in ir.walk(root):
        below: ir.Node = node
        while isinstance(below, ir.Filter):
            below = below.child
        if isinstance(node, ir.Filter) and isinstance(below, ir.Scan):
            filters.setdefault(id(below), []).append(node.cond)
    frames = {}
    for scan in (n for n in ir.walk(root) if isinstance(n, ir.Scan)):
        read = candidates(scan.source, ScanPlan(scan, (), tuple(filters.get(id(scan), ())), True), None, list(scan.attrs))
        assert read is not None
        frames[id(scan)] = read
    return frames


LINEAGE = {
    "theta join": (
        "SELECT o.okey FROM l_orders o JOIN l_items i ON o.okey = i.okey AND i.qty * 10 < o.total",
        "SELECT DISTINCT o.rid, i.rid FROM l_orders_r o JOIN l_items_r i ON o.okey = i.okey AND i.qty * 10 < o.total",
    ),
    "semi join's witnesses": (
        "SELECT o.okey FROM l_orders o WHERE EXISTS (SELECT 1 FROM l_items i WHERE i.okey = o.okey AND i.flag = 'a')",
        "SELECT DISTINCT o.rid, i.rid FROM l_orders_r o JOIN l_items_r i ON i.okey = o.okey AND i.flag = 'a'",
    ),
    "anti join": (
        "SELECT o.okey FROM l_orders o WHERE NOT EXISTS (SELECT 1 FROM l_items i WHERE i.okey = o.okey AND i.flag = 'b')",
        "SELECT DISTINCT o.rid FROM l_orders_r o WHERE NOT EXISTS (SELECT 1 FROM l_items_r i WHERE i.okey = o.okey AND i.flag = 'b')",
    ),
    "left join": (
        "SELECT o.okey, i.ikey FROM l_orders o LEFT JOIN l_items i ON o.okey = i.okey AND i.qty > 4",
        "SELECT DISTINCT o.rid, i.rid FROM l_orders_r o LEFT JOIN l_items_r i ON o.okey = i.okey AND i.qty > 4",
    ),
    "filter over a group's values": (
        "SELECT i.ikey FROM l_items i JOIN (SELECT okey, max(qty) AS m FROM l_items GROUP BY okey) g"
        " ON i.okey = g.okey WHERE i.qty * 2 > g.m",
        "SELECT DISTINCT i.rid, x.rid FROM l_items_r i JOIN l_items_r x ON i.okey = x.okey"
        " JOIN (SELECT okey, max(qty) AS m FROM l_items GROUP BY okey) g ON i.okey = g.okey WHERE i.qty * 2 > g.m",
    ),
}


@pytest.mark.parametrize(("query", "oracle"), LINEAGE.values(), ids=LINEAGE.keys())
def test_lineage_rows_are_the_rids_spark_joins(views: SparkSession, query: str, oracle: str) -> None:
    plan, _, _ = import_plan(Jvm(views), views.sql(query))
    root = plan.child if isinstance(plan, ir.Project) else plan
    compiler = Compiler.of({}, "lineage", frames=_frames(root))
    assert compiler.read(root), ir.outline(root)
    compiled = compiler.lineage()
    scans = [id(n) for n in ir.walk(root) if isinstance(n, ir.Scan)]
    got = _duck_rows(compiled)
    columns = sorted(compiled.rids, key=lambda r: scans.index(compiled.rids[r]))  # scans in plan order: the oracle's
    order = [list(compiled.rids).index(c) for c in columns]
    want = _bag([tuple(r) for r in views.sql(oracle).collect()])
    assert want and set(_bag([tuple(row[i] for i in order) for row in got])) == set(want)


def test_lineage_mode_reads_no_operator_beyond_a_block(views: SparkSession) -> None:
    plan, _, _ = import_plan(Jvm(views), views.sql("SELECT flag, okey, rank() OVER (PARTITION BY flag ORDER BY qty) AS r FROM l_items"))
    window = next(n for n in ir.walk(plan) if isinstance(n, ir.Window))
    assert not Compiler.of({}, "lineage", frames=_frames(window)).read(window)
