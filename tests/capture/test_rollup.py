"""Rollups indexed from their expand's input (`capture.rollup`), against the pure-Python oracle.

Grouping keys hold nulls in the data, so a rolled-up null and a null value meet in one
output; `grouping_id()` is selected to tell such rows apart for the oracle."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from ember.capture.rollup import rollup
from ember.engines.spark.jvm import Jvm
from ember.engines.spark.plan_import import import_plan
from ember.plan import ir
from ember.store import build as index
from tests.capture.test_operators import check
from tests.oracle import rows as o

# (ikey, flag, sub, qty): two files, nulls in both grouping columns
PARTS = [
    [(1, "a", "x", 5), (2, "a", None, 1), (3, None, "x", 7)],
    [(4, "b", "y", 2), (5, None, None, 9), (6, "a", "x", 4), (7, "b", None, 3)],
]
ROWS = [r for part in PARTS for r in part]


@pytest.fixture(scope="module")
def views(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> SparkSession:
    root = tmp_path_factory.mktemp("rollup") / "ru_items"
    root.mkdir()
    for i, part in enumerate(PARTS):
        columns = {n: [r[j] for r in part] for j, n in enumerate(["ikey", "flag", "sub", "qty"])}
        pq.write_table(pa.table(columns), Path(root) / f"part-{i}.parquet")
    spark.read.parquet(str(root)).createOrReplaceTempView("ru_items")
    return spark


Indexed = list[tuple[tuple[tuple[int, int], ...], int]]


@pytest.fixture
def indexed(monkeypatch: pytest.MonkeyPatch) -> Iterator[Indexed]:
    """Each rollup group table indexed: its grouping sets and how many rows it holds."""
    found: Indexed = []
    grouped = index._grouped

    def noted(con: object, ordered: pa.Table, table: index.SideTable) -> pa.Table | index.Sets:
        if table.prefixes:
            found.append((table.prefixes, ordered.num_rows))
        return grouped(con, ordered, table)  # type: ignore[arg-type]

    monkeypatch.setattr(index, "_grouped", noted)
    yield found


def _sets(*keys: Callable[[o.Values], o.Values]) -> list[o.Row]:
    """The oracle's groups of each grouping set (its key: the values, then the grouping id)."""
    return [g for key in keys for g in o.group(o.scan("ru_items", ROWS), key, lambda vs: (sum(v[3] for v in vs),))]


FINE = lambda v: (v[1], v[2], 0)  # noqa: E731
BY_FLAG = lambda v: (v[1], None, 1)  # noqa: E731
TOTAL = lambda v: (None, None, 3)  # noqa: E731


def test_every_group_of_a_rollup_points_at_its_input_rows_once(views: SparkSession, indexed: Indexed) -> None:
    # Under a LIMIT its groups are a side table (not lists); all of them are wanted.
    df = views.sql(
        "SELECT flag, sub, grouping_id() AS g, sum(qty) AS q FROM ru_items GROUP BY ROLLUP(flag, sub) LIMIT 100"
    )
    check(df, _sets(FINE, BY_FLAG, TOTAL))
    assert ((0, 2), (1, 1), (3, 0)) in [p for p, _ in indexed]
    assert all(rows == len(ROWS) for _, rows in indexed)  # not once per grouping set


def test_wanted_rollup_groups_are_read_by_their_leading_keys(views: SparkSession, indexed: Indexed) -> None:
    # A HAVING keeps some groups of two sets, not the grand total: DuckDB reads the rows
    # equal on each wanted set's leading keys, a null flag among them.
    df = views.sql(
        "SELECT flag, sub, grouping_id() AS g, sum(qty) AS q FROM ru_items GROUP BY ROLLUP(flag, sub)"
        " HAVING (g = 0 AND q > 6) OR (g = 1 AND (flag IS NULL OR flag = 'b'))"
    )
    kept = [(v, lin) for v, lin in _sets(FINE, BY_FLAG) if (v[2] == 0 and v[3] > 6) or (v[2] == 1 and v[0] in (None, "b"))]
    check(df, kept)
    assert indexed and all(rows < len(ROWS) for _, rows in indexed)


def test_grouping_sets_of_leading_keys_are_indexed_so_too(views: SparkSession, indexed: Indexed) -> None:
    df = views.sql(
        "SELECT flag, sub, grouping_id() AS g, sum(qty) AS q FROM ru_items GROUP BY GROUPING SETS ((flag, sub), (flag))"
        " ORDER BY q DESC LIMIT 2"
    )
    check(df, sorted(_sets(FINE, BY_FLAG), key=lambda r: -r[0][3])[:2])
    assert [p for p, _ in indexed] == [((0, 2), (1, 1))] * 2  # Defer, then Inject


def test_a_cube_keeps_its_expand(views: SparkSession, indexed: Indexed) -> None:
    df = views.sql("SELECT flag, sub, grouping_id() AS g, sum(qty) AS q FROM ru_items GROUP BY CUBE(flag, sub)")
    check(df, _sets(FINE, BY_FLAG, lambda v: (None, v[2], 2), TOTAL))
    assert indexed == []


@pytest.mark.parametrize(
    ("grouping", "prefixes"),
    [
        ("ROLLUP(flag, sub)", ((0, 2), (1, 1), (3, 0))),
        ("ROLLUP(sub, flag, ikey)", ((0, 3), (1, 2), (3, 1), (7, 0))),
        ("GROUPING SETS ((flag, sub), ())", ((0, 2), (3, 0))),
        ("CUBE(flag, sub)", None),
        ("GROUPING SETS ((sub), (flag))", None),
    ],
)
def test_rollup_finds_grouping_sets_of_leading_keys(
    views: SparkSession, grouping: str, prefixes: tuple[tuple[int, int], ...] | None
) -> None:
    plan, _, _ = import_plan(Jvm(views), views.sql(f"SELECT sum(qty) FROM ru_items GROUP BY {grouping}"))
    aggregate = next(n for n in ir.walk(plan) if isinstance(n, ir.Aggregate))
    found = rollup(aggregate)
    assert (found and found.prefixes) == prefixes
    if found is not None:
        inputs = {a.id: a.name for a in found.expand.child.output}
        named = grouping[grouping.index("(") + 1 :].replace("(", "").replace(")", "").split(",")
        assert [inputs[k.id] for k in found.keys] == [n.strip() for n in named if n.strip()][: len(found.keys)]


def test_a_rollup_spark_computes_is_read_whole(views: SparkSession, indexed: Indexed) -> None:
    # Under a window its groups are a side table; `length` does not translate for DuckDB,
    # so Spark computes it, and does not cut it to the wanted keys (a set's leading keys).
    df = views.sql(
        "SELECT * FROM (SELECT flag, sub, grouping_id() AS g, sum(qty) AS q, count(*) OVER (PARTITION BY"
        " grouping_id(), flag) AS c FROM ru_items WHERE length(coalesce(flag, 'zz')) < 3 GROUP BY ROLLUP(flag, sub))"
        " WHERE g = 1"
    )
    check(df, [((*v, 1), lin) for v, lin in _sets(BY_FLAG)])
    assert indexed and all(rows == len(ROWS) for _, rows in indexed)
