"""Sources only the Spark Connect server reads: with `spark.ember.sourceReads` = "spark"
(as for a client that cannot see the server's files), nothing reads a source's files in
the client process (DuckDB side tables, row fetches, kept copies: each is made to fail
here), and captures, inference, traces, rows, `where=` and stores still meet the oracles
of the in-process path: the 22 TPC-H queries, and a partitioned source's rows read back with
pyarrow."""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NoReturn

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql.connect.session import SparkSession as RemoteSession

import ember
from devkit.tpch import QUERIES
from ember.engines.duck import compile as duck_compile
from ember.engines.spark import connect
from ember.engines.spark.served import READS, seen_here
from ember.errors import EmberError, StaleSourceError
from ember.fetch import rows as fetch_rows
from tests.infer.test_tpch import check_inferred
from tests.tpch.queries_sql import tpch_sql
from tests.tpch.test_tpch import SEED, check_lineage


@pytest.fixture
def served(remote: RemoteSession, monkeypatch: pytest.MonkeyPatch) -> Iterator[RemoteSession]:
    """The Connect session, its captures reading no source file in this process."""

    def here(*args: object, **kwargs: object) -> NoReturn:
        raise AssertionError("a source file was read in the client process")

    monkeypatch.setattr(duck_compile, "numbered_parquet", here)  # DuckDB's side tables and scans
    monkeypatch.setattr(fetch_rows, "_parquet_rows", here)  # row fetches by rid
    remote.conf.set(READS, "spark")
    try:
        yield remote
    finally:
        remote.conf.unset(READS)


@pytest.mark.parametrize("n", sorted(QUERIES))
def test_tpch_with_every_file_read_by_the_server(
    served: RemoteSession, tpch_oracle: Callable[[int], pa.Table], table_rows: dict[str, int], n: int
) -> None:
    lin = check_lineage(tpch_sql(served, n), n, tpch_oracle(n), table_rows, random.Random(SEED + 700 + n), "inject")
    assert all(s.remote for s in lin._sources.values())


@pytest.mark.parametrize("n", sorted(QUERIES))
def test_tpch_inferred_with_every_file_read_by_the_server(served: RemoteSession, tpch_oracle: Callable[[int], pa.Table], n: int) -> None:
    """`ember.infer`'s traces, with each scan's candidates read by a Spark job on the server."""
    check_inferred(tpch_sql(served, n), n, tpch_oracle(n))


def _partitioned(folder: Path) -> pa.Table:
    """A source partitioned by year and month, a file per partition with rows of several
    keys; its rows as Spark numbers them (files in path order: "m=12" before "m=2")."""
    parts = []
    for y in (2020, 2021):
        for m in (1, 2, 12):
            part = pa.table({"k": [1, 2, 3, (y + m) % 3 + 1], "v": [m, 2 * m, 3 * m, y - 2000]})
            path = f"y={y}/m={m}/part.parquet"
            (folder / path).parent.mkdir(parents=True)
            pq.write_table(part, folder / path)
            parts.append((path, part.append_column("y", pa.repeat(pa.scalar(y, pa.int32()), 4)).append_column("m", pa.repeat(pa.scalar(m, pa.int32()), 4))))
    return pa.concat_tables([part for _, part in sorted(parts, key=lambda p: p[0])])


def test_a_partitioned_source_read_by_the_server(served: RemoteSession, tmp_path: Path) -> None:
    """Backward ids and rows, forward by where=, a saved store's rows (kept copies and not)
    and a rewritten file, against the rows pyarrow reads."""
    folder = tmp_path / "events"
    rows = _partitioned(folder)
    served.read.parquet(str(folder)).createOrReplaceTempView("served_events")
    lin = ember.capture(served.sql("SELECT k, sum(v) AS s FROM served_events WHERE v > 1 GROUP BY k"), strategy="inject")
    (name,) = lin.sources
    assert lin._sources[name].remote
    keys, values = rows.column("k").to_numpy(), rows.column("v").to_numpy()
    out = lin.output()
    for oid, k in enumerate(out.column("k").to_pylist()):
        want = np.flatnonzero((keys == k) & (values > 1))
        trace = lin.backward(oids=[oid])
        assert trace.ids(name).tolist() == want.tolist()
        got = trace.rows(name)
        assert got.column_names == ["k", "v", "y", "m", "ember_rid"]
        assert got.drop_columns(["ember_rid"]).to_pylist() == rows.take(pa.array(want)).to_pylist()
    chosen = np.flatnonzero((rows.column("y").to_numpy() == 2021) & (keys == 2))
    reached = sorted({out.column("k").to_pylist().index(k) for k in rows.column("k").take(pa.array(chosen)).to_pylist()})
    assert lin.forward(name, where="y = 2021 AND k = 2").ids().tolist() == reached

    for keep in (0.0, 1.0):  # rows from the server, or from the store's copy
        lin.save(str(tmp_path / f"store{keep}"), keep_rows=keep)
        loaded = ember.load(str(tmp_path / f"store{keep}"), served)
        want = np.flatnonzero((keys == out.column("k")[0].as_py()) & (values > 1))
        assert loaded.backward(oids=[0]).rows(name).drop_columns(["ember_rid"]).to_pylist() == rows.take(pa.array(want)).to_pylist()

    pq.write_table(pa.table({"k": [9], "v": [9]}), folder / "y=2020" / "m=1" / "part.parquet")
    with pytest.raises(StaleSourceError, match="changed since capture"):
        lin.backward(oids=[0]).rows(name)
    with pytest.raises(StaleSourceError, match="changed since capture"):
        ember.load(str(tmp_path / "store0.0"), served).backward(oids=[0]).rows(name)


def test_a_loaded_store_reads_a_served_source_through_a_connect_session(served: RemoteSession, tmp_path: Path) -> None:
    pq.write_table(pa.table({"k": [1, 2, 2]}), tmp_path / "t.parquet")
    lin = ember.capture(served.read.parquet(str(tmp_path / "t.parquet")).groupBy("k").count(), strategy="inject")
    lin.save(str(tmp_path / "store"), keep_rows=0)
    loaded = ember.load(str(tmp_path / "store"))  # no session: this process has a classic one only
    assert loaded.backward(oids=[0]).ids(loaded.sources[0]).size
    with pytest.raises(EmberError, match="read by a Spark Connect server") as raised:
        loaded.backward(oids=[0]).rows(loaded.sources[0])
    assert "\n" not in str(raised.value)


def test_files_the_client_sees_as_the_server_does_are_read_here(remote: RemoteSession, tmp_path: Path) -> None:
    """By default (auto) a local file the server lists with this machine's size and time is
    read in-process; one whose facts differ (another machine's file at the same path) is not."""
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"k": [1, 2, 2]}), path)
    lin = ember.capture(remote.read.parquet(str(path)).groupBy("k").count(), strategy="inject")
    assert not lin._sources[lin.sources[0]].remote
    st = path.stat()
    uri = path.as_uri()
    assert seen_here(uri, st.st_size, st.st_mtime_ns // 1_000_000)
    assert not seen_here(uri, st.st_size + 1, st.st_mtime_ns // 1_000_000)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    assert not seen_here(uri, st.st_size, st.st_mtime_ns // 1_000_000)
    assert not seen_here((tmp_path / "gone.parquet").as_uri(), 1, 1)


def test_the_server_tells_file_facts_and_refuses_a_malformed_uri(remote: RemoteSession, tmp_path: Path) -> None:
    """The plugin's `files` request: a Parquet file's size, time and rows as Hadoop sees
    them, a missing file as size -1, and a malformed URI refused in one line."""
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"k": [1, 2, 3]}), path)
    st = path.stat()
    found = connect.files(remote, [path.as_uri(), (tmp_path / "gone.parquet").as_uri()], True)
    assert found == [(st.st_size, st.st_mtime_ns // 1_000_000, 3), (-1, -1, 0)]
    with pytest.raises(EmberError, match="malformed file URI") as raised:
        connect.files(remote, ["file:/a b^c"], False)
    assert "\n" not in str(raised.value)


def test_an_unknown_setting_is_refused(remote: RemoteSession, tmp_path: Path) -> None:
    pq.write_table(pa.table({"k": [1]}), tmp_path / "t.parquet")
    remote.conf.set(READS, "never")
    try:
        with pytest.raises(EmberError, match=r"takes 'auto' .* or 'spark'"):
            ember.capture(remote.read.parquet(str(tmp_path / "t.parquet")).groupBy("k").count())
    finally:
        remote.conf.unset(READS)
