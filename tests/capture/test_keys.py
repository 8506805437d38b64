"""Dimension rows named by a unique join key (`capture.keys`), against the pure-Python oracle.

Every case checks that the key path was taken (the dimension's scan gets no rid column),
so a test cannot pass by falling back to carried rids.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql import DataFrame, SparkSession

import ember
from ember.capture.annotate import annotate
from ember.capture.keys import KeyMap, key_map, unique_keys
from ember.engines.spark.jvm import Jvm
from ember.engines.spark.plan_import import import_plan
from ember.errors import StaleSourceError
from ember.plan import ir
from ember.plan.slots import RidSlot
from ember.plan.sources import Source, SourceFile, file_facts, spark_uri
from ember.plan.workload import Workload
from tests.capture.test_operators import check
from tests.oracle import rows as o

# `dim` is two files, its ids out of order (the key map sorts them); `fact.fk` misses some
# ids and repeats others; `dup.id` repeats a value, `nully.id` holds a null.
DIM = [[(5, "e", "a"), (2, "b", "b"), (9, "i", "a")], [(7, "g", "b"), (1, "a", "a")]]
FACT = [(2, 10), (5, 20), (5, 30), (4, 40), (9, 50), (1, 60), (2, 70), (8, 80)]
DUP = [(2, "x"), (5, "y"), (2, "z")]
NULLY = [(2, "x"), (None, "y"), (5, "z")]


def _write(path: Path, rows: list[tuple[object, ...]], names: list[str]) -> None:
    pq.write_table(pa.table(dict(zip(names, map(list, zip(*rows, strict=True)), strict=True))), path)


@pytest.fixture(scope="module")
def tables(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> SparkSession:
    root = tmp_path_factory.mktemp("keys")
    (root / "dim").mkdir()
    for i, part in enumerate(DIM):
        _write(root / "dim" / f"part-{i}.parquet", part, ["id", "name", "grp"])
    _write(root / "fact.parquet", FACT, ["fk", "val"])
    _write(root / "dup.parquet", DUP, ["id", "x"])
    _write(root / "nully.parquet", NULLY, ["id", "x"])
    for name in ("dim", "fact", "dup", "nully"):
        spark.read.parquet(str(root / name if name == "dim" else root / f"{name}.parquet")).createOrReplaceTempView(name)
    return spark


def dim() -> list[o.Row]:
    return o.scan("dim", [r for part in DIM for r in part])


def fact() -> list[o.Row]:
    return o.scan("fact", FACT)


def keyed(df: DataFrame) -> set[str]:
    """Sources whose rows the capture of `df` names by key, none of them also numbered."""
    plan, _, _ = import_plan(Jvm(df.sparkSession), df)
    annotated = annotate(plan, keyed=unique_keys(plan))
    slots = [*annotated.slots, *(s for t in annotated.tables for s in t.slots)]
    by_key = {s.source for s in slots if isinstance(s, RidSlot) and s.key_column is not None}
    numbered = {n.child.source.key for n in ir.walk(annotated.plan) if isinstance(n, ir.Numbered) and isinstance(n.child, ir.Scan)}
    assert not by_key & numbered
    names = {n.source.key: n.source.name for n in ir.walk(plan) if isinstance(n, ir.Scan)}
    return {names[k] for k in by_key}


def test_inner_join_on_a_unique_key(tables: SparkSession) -> None:
    df = tables.sql("SELECT f.val, d.name FROM fact f JOIN dim d ON f.fk = d.id WHERE d.grp = 'a'")
    assert keyed(df) == {"dim"}
    check(df, o.select(o.join(fact(), o.where(dim(), lambda v: v[2] == "a"), lambda f, d: f[0] == d[0]),
                       lambda v: (v[1], v[3])))


def test_outer_joins_either_side(tables: SparkSession) -> None:
    df = tables.sql("SELECT f.val, d.name FROM fact f LEFT JOIN dim d ON f.fk = d.id")
    assert keyed(df) == {"dim"}
    check(df, o.select(o.join(fact(), dim(), lambda f, d: f[0] == d[0], "left", rw=3), lambda v: (v[1], v[3])))
    df = tables.sql("SELECT d.name, f.val FROM dim d LEFT JOIN fact f ON f.fk = d.id")
    assert keyed(df) == {"dim"}
    check(df, o.select(o.join(dim(), fact(), lambda d, f: f[0] == d[0], "left", rw=2), lambda v: (v[1], v[4])))


def test_aggregates_list_keys_in_the_result(tables: SparkSession) -> None:
    df = tables.sql("SELECT d.grp, count(*) AS n, sum(f.val) AS s FROM fact f JOIN dim d ON f.fk = d.id GROUP BY d.grp")
    assert keyed(df) == {"dim"}
    joined = o.join(fact(), dim(), lambda f, d: f[0] == d[0])
    expected = o.group(joined, lambda v: (v[4],), lambda vs: (len(vs), sum(v[1] for v in vs)))
    check(df, expected)
    # Only the dimension captured: its list holds bare key values, not structs.
    lin = ember.capture(df, strategy="inject", workload=Workload(sources=("dim",)))
    only_dim = [(v, frozenset(x for x in lin_ if x[0] == "dim")) for v, lin_ in expected]
    o.assert_same_lineage(lin, only_dim)


def test_side_tables_and_semi_joins(tables: SparkSession) -> None:
    # The aggregate feeds a join, so its groups are a side table whose rows hold keys.
    df = tables.sql(
        "SELECT g.grp, g.n, d2.name FROM (SELECT d.grp, count(*) AS n FROM fact f JOIN dim d ON f.fk = d.id"
        " GROUP BY d.grp) g JOIN dim d2 ON g.n = d2.id"
    )
    assert keyed(df) == {"dim"}
    groups = o.group(o.join(fact(), dim(), lambda f, d: f[0] == d[0]), lambda v: (v[4],), lambda vs: (len(vs),))
    check(df, o.select(o.join(groups, dim(), lambda g, d: g[1] == d[0]), lambda v: (v[0], v[1], v[3])))
    df = tables.sql("SELECT d.name FROM dim d WHERE d.id IN (SELECT fk FROM fact)")
    assert keyed(df) == {"dim"}
    check(df, o.select(o.semi(dim(), fact(), lambda d, f: f[0] == d[0]), lambda v: (v[1],)))


def test_a_semi_join_on_a_unique_key_names_its_one_witness(tables: SparkSession) -> None:
    # Each kept fact row's one witness is the dim row holding its fk: no rid, no side table.
    df = tables.sql("SELECT f.val FROM fact f WHERE f.fk IN (SELECT id FROM dim WHERE grp = 'a')")
    assert keyed(df) == {"dim"}
    plan, _, _ = import_plan(Jvm(tables), df)
    assert not annotate(plan, keyed=unique_keys(plan)).tables
    check(df, o.select(o.semi(fact(), o.where(dim(), lambda d: d[2] == "a"), lambda f, d: f[0] == d[0]), lambda v: (v[1],)))
    # Aggregated above, the witnesses ride in the groups' lists.
    df = tables.sql("SELECT count(*) AS n FROM fact f WHERE EXISTS (SELECT 1 FROM dim d WHERE d.id = f.fk AND d.grp = 'b')")
    assert keyed(df) == {"dim"}
    kept = o.semi(fact(), o.where(dim(), lambda d: d[2] == "b"), lambda f, d: f[0] == d[0])
    check(df, o.group(kept, lambda v: (), lambda vs: (len(vs),)))
    # A repeating column names no witness: the side table stays.
    df = tables.sql("SELECT f.val FROM fact f WHERE f.fk IN (SELECT id FROM dup)")
    assert keyed(df) == set()
    check(df, o.select(o.semi(fact(), o.scan("dup", DUP), lambda f, d: f[0] == d[0]), lambda v: (v[1],)))


def test_repeated_or_null_keys_keep_rids(tables: SparkSession) -> None:
    for name, rows in (("dup", DUP), ("nully", NULLY)):
        df = tables.sql(f"SELECT f.val, t.x FROM fact f JOIN {name} t ON f.fk = t.id")
        assert keyed(df) == set()
        check(df, o.select(o.join(fact(), o.scan(name, rows), lambda f, t: f[0] == t[0]), lambda v: (v[1], v[3])))


def test_key_maps_follow_file_changes(tables: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    _write(path, [(3,), (1,), (2,)], ["id"])
    _, sources, _ = import_plan(Jvm(tables), tables.read.parquet(str(path)))
    (source,) = sources.values()
    found = key_map(source, "ID")  # Spark resolves column names without regard to case
    assert found is not None
    assert found.rids_of(pa.array([2, None, 3])).to_pylist() == [2, None, 0]
    _write(path, [(3,), (1,), (3,)], ["id"])
    os.utime(path, ns=(source.files[0].mtime_ns + 1, source.files[0].mtime_ns + 1))
    _, sources, _ = import_plan(Jvm(tables), tables.read.parquet(str(path)))
    assert key_map(next(iter(sources.values())), "id") is None


def test_scan_below_a_join_named_by_the_join_above(tables: SparkSession) -> None:
    # dim's id reaches the outer join through the inner one, which joins dim to the
    # repeating `dup`: the outer join claims dim, dup keeps its rids.
    df = tables.sql(
        "SELECT f.val, de.name, de.x FROM fact f JOIN"
        " (SELECT d.id, d.name, e.x FROM dim d JOIN dup e ON d.id = e.id) de ON f.fk = de.id"
    )
    assert keyed(df) == {"dim"}
    de = o.join(dim(), o.scan("dup", DUP), lambda d, e: d[0] == e[0])
    check(df, o.select(o.join(fact(), de, lambda f, x: f[0] == x[0]), lambda v: (v[1], v[3], v[6])))


def _source(path: Path, values: list[int], group: int) -> Source:
    pq.write_table(pa.table({"id": values}), path, row_group_size=group)
    size, mtime = file_facts(spark_uri(path.as_uri()))
    return Source(str(path), path.stem, "parquet", len(values), (SourceFile(spark_uri(path.as_uri()), size, mtime, len(values), 0),))


@pytest.mark.parametrize(
    ("values", "group", "unique"),
    [
        ([1, 2, 2], 3, False),  # two values in [1, 2] for three rows: told by the statistics
        ([5, 1, 5, 9], 4, False),  # told by the first row group
        ([5, 1, 3, 5], 2, False),  # the repeat spans row groups: told by the whole column
        ([4, 1, 30, 2], 2, True),
    ],
)
def test_key_maps_rule_out_repeats(tmp_path: Path, values: list[int], group: int, unique: bool) -> None:
    found = key_map(_source(tmp_path / "k.parquet", values, group), "id")
    assert (found is not None) == unique
    if found is not None:
        assert found.rids_of(pa.array(values)).to_pylist() == list(range(len(values)))


@given(
    st.lists(st.integers(-60, 60), min_size=1, max_size=40, unique=True),
    st.lists(st.integers(-70, 70) | st.integers(-(2**63), 2**63 - 1) | st.none(), max_size=20),
    st.booleans(),
)
def test_key_maps_answer_as_a_dict(keys: list[int], asked: list[int | None], far: bool) -> None:
    """Values spread thin (`far`) go through a binary search, dense ones through a lookup
    table; both name each value's row and refuse a value no row holds."""
    values = [*keys, 2**62] if far else keys
    rows = {v: i for i, v in enumerate(values)}
    order = np.argsort(values, kind="stable")
    found = KeyMap.of(np.array(values, dtype=np.int64)[order], order.astype(np.int64))
    assert (found.table is not None) == (max(values) - min(values) < 4 * len(values))  # at most 4 slots a row
    held = [v if v is None or v in rows else values[0] for v in asked]
    assert found.rids_of(pa.array(held, type=pa.int64())).to_pylist() == [None if v is None else rows[v] for v in held]
    if any(v is not None and v not in rows for v in asked):
        with pytest.raises(StaleSourceError):
            found.rids_of(pa.array(asked, type=pa.int64()))
