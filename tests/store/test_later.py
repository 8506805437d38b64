"""Side tables read by the traces that reach them (`store.later`): the same lineage as a
capture that reads them, read only for the groups a trace reaches, never at capture."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession

import ember
from ember.capture.capture import AT_TRACE_ROWS
from ember.capture.local import reads as local_reads
from ember.errors import EmberError, StaleSourceError
from tests.oracle import rows as o

# TPC-H Q13's shape: customers with their count of orders whose note passes a filter, then
# customers per count. Customer 6 has no order, customer 5 only a filtered one.
CUSTOMERS = [(k, f"c{k}") for k in range(1, 7)]
ORDERS = [
    (10, 1, "ok"), (11, 1, "ok"), (12, 2, "special"), (13, 2, "ok"), (14, 3, "ok"), (15, 3, "ok"),
    (16, 3, "ok"), (17, 4, "ok"), (18, 5, "special"),
]  # fmt: skip
COUNTS = (
    "SELECT c_count, count(*) AS custdist FROM ("
    "  SELECT c.ck, count(o.ok) AS c_count FROM lt_customers c"
    "  LEFT JOIN lt_orders o ON c.ck = o.ck AND o.note NOT LIKE '%special%' GROUP BY c.ck"
    ") GROUP BY c_count"
)


@pytest.fixture(scope="module")
def files(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("later")
    pq.write_table(pa.table({"ck": [c[0] for c in CUSTOMERS], "name": [c[1] for c in CUSTOMERS]}), root / "c.parquet")
    columns = {"ok": [r[0] for r in ORDERS], "ck": [r[1] for r in ORDERS], "note": [r[2] for r in ORDERS]}
    pq.write_table(pa.table(columns), root / "o.parquet")
    spark.read.parquet(str(root / "c.parquet")).createOrReplaceTempView("lt_customers")
    spark.read.parquet(str(root / "o.parquet")).createOrReplaceTempView("lt_orders")
    return root


@pytest.fixture
def at_trace(spark: SparkSession, files: Path) -> Iterator[SparkSession]:
    """Every table read whole beside the job is left to traces, however small."""
    spark.conf.set(AT_TRACE_ROWS, "0")
    yield spark
    spark.conf.unset(AT_TRACE_ROWS)


def counts(spark: SparkSession) -> DataFrame:
    return spark.sql(COUNTS)


def expected() -> list[o.Row]:
    kept = o.where(o.scan("lt_orders", ORDERS), lambda v: "special" not in v[2])
    joined = o.join(o.scan("lt_customers", CUSTOMERS), kept, lambda c, r: c[0] == r[1], "left", rw=3)
    per_customer = o.group(joined, lambda v: (v[0],), lambda vs: (sum(v[2] is not None for v in vs),))
    return o.group(per_customer, lambda v: (v[1],), lambda vs: (len(vs),))


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[int | None]:
    """The wanted keys (None: all) of each DuckDB read of a side table."""
    found: list[int | None] = []
    read = local_reads.Reads.side_table

    def counted(
        self: local_reads.Reads, table: local_reads.SideTable, wanted: pa.Table | None, capped: bool = False
    ) -> pa.Table | None:
        found.append(None if wanted is None else wanted.num_rows)
        return read(self, table, wanted, capped)

    monkeypatch.setattr(local_reads.Reads, "side_table", counted)
    return found


def test_a_table_left_to_traces_gives_the_oracles_lineage(at_trace: SparkSession) -> None:
    lin = ember.capture(counts(at_trace), strategy="inject")
    assert list(lin._index.later) == [0]
    o.assert_same_lineage(lin, expected())


def test_the_capture_reads_none_of_it_and_a_trace_reads_its_groups_only(
    at_trace: SparkSession, reads: list[int | None]
) -> None:
    lin = ember.capture(counts(at_trace), strategy="inject")
    assert reads == []
    assert not lin.backward(oids=[]).sources
    assert reads == []  # a walk of no output rows reads nothing
    out = lin.output().to_pylist()
    one = next(r["ember_oid"] for r in out if r["c_count"] == 3)  # customer 3 alone
    assert lin.backward(oids=[one]).ids("lt_orders").tolist() == [4, 5, 6]
    assert reads == [1]
    lin.backward(oids=[r["ember_oid"] for r in out])  # every group: read whole, and kept
    lin.backward(oids=[one])
    lin.forward("lt_orders", ids=[0])
    assert reads == [1, None]


def test_a_forward_trace_reads_it_whole_once(at_trace: SparkSession, reads: list[int | None]) -> None:
    lin = ember.capture(counts(at_trace), strategy="inject")
    two = [r["ember_oid"] for r in lin.output().to_pylist() if r["c_count"] == 2]
    assert lin.forward("lt_orders", ids=[0]).ids().tolist() == two  # customer 1's orders: 2 of them
    assert lin.forward("lt_orders", ids=[2]).ids().tolist() == []  # filtered out
    assert reads == [None]


def test_a_saved_store_holds_it_read(at_trace: SparkSession, tmp_path: Path) -> None:
    lin = ember.capture(counts(at_trace), strategy="inject")
    lin.save(str(tmp_path / "store"))
    loaded = ember.load(str(tmp_path / "store"), at_trace)
    assert not loaded._index.later
    o.assert_same_lineage(loaded, expected())


def test_a_trace_refuses_sources_changed_since_capture(at_trace: SparkSession, files: Path) -> None:
    lin = ember.capture(counts(at_trace), strategy="inject")
    path = files / "o.parquet"
    before = path.stat()
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))
    try:
        with pytest.raises(StaleSourceError, match="changed since capture"):
            lin.backward(oids=[0])
    finally:
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert lin.backward(oids=[0]).sources


def test_a_table_under_another_side_table_is_read_at_capture(at_trace: SparkSession) -> None:
    """Its groups are reached through the other table's: here one global count's group
    reaches every one of them, so any trace would read it whole."""
    df = at_trace.sql("SELECT count(*) AS n FROM (SELECT ck, count(*) AS c FROM lt_orders GROUP BY ck)")
    lin = ember.capture(df, strategy="inject")
    assert not lin._index.later
    per_customer = o.group(o.scan("lt_orders", ORDERS), lambda v: (v[1],), lambda vs: (len(vs),))
    o.assert_same_lineage(lin, o.group(per_customer, lambda v: (), lambda vs: (len(vs),), global_=True))


def test_small_tables_are_read_at_capture_by_default(spark: SparkSession, files: Path) -> None:
    lin = ember.capture(counts(spark), strategy="inject")
    assert not lin._index.later
    o.assert_same_lineage(lin, expected())


def test_defer_leaves_it_to_traces_too(at_trace: SparkSession) -> None:
    lin = ember.capture(counts(at_trace), strategy="defer")
    o.assert_same_lineage(lin, expected())
    assert list(lin._index.later) == [0]


def test_a_setting_that_is_no_count_is_refused(spark: SparkSession, files: Path) -> None:
    spark.conf.set(AT_TRACE_ROWS, "some")
    try:
        with pytest.raises(EmberError, match="atTraceRows must be a count"):
            ember.capture(counts(spark))
    finally:
        spark.conf.unset(AT_TRACE_ROWS)


def test_backward_pairs_keep_each_output_rows_own_lineage(at_trace: SparkSession) -> None:
    lin = ember.capture(counts(at_trace), strategy="inject")
    out = o.value_rows(lin.output().drop_columns(["ember_oid"]))
    want = dict(expected())
    assert len(want) == len(out)  # every output row's values name it
    owners, rids = lin._index.backward_pairs(np.arange(len(out), dtype=np.int64))[lin._sources["lt_orders"].key]
    for oid, values in enumerate(out):
        got = {("lt_orders", int(r)) for r in rids[owners == oid]}
        assert got == {x for x in want[values] if x[0] == "lt_orders"}, values
