"""ember.capture over Spark Connect: the TPC-H queries and the operator table's SQL cases,
captured from a Connect client (a server with ember's plugin, `ember.connect.server_conf()`),
meet the same oracles backward and forward as the classic session's captures do
(`tests/tpch`, `tests/capture/test_operators.py`). What the server cannot build yet is
refused by name, before any job."""

from __future__ import annotations

import functools
import inspect
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.orc as orc
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame
from pyspark.sql.connect.session import SparkSession as RemoteSession

import ember
from devkit.tpch import QUERIES
from ember.engines.spark.served import READS
from ember.errors import InvalidPredicateError, StaleSourceError
from tests.capture import test_keyed as keyed
from tests.capture import test_operators as operators
from tests.capture import test_workload as workload
from tests.capture import test_writes as writes
from tests.capture.test_keyed import orders, pg  # noqa: F401  # the keyed tests' fixtures, for their JDBC cases
from tests.tpch.queries_sql import tpch_sql
from tests.tpch.test_tpch import SEED, check_lineage


@pytest.mark.parametrize("n", sorted(QUERIES))
def test_tpch_over_connect(
    remote: RemoteSession, tpch_oracle: Callable[[int], pa.Table], table_rows: dict[str, int], n: int
) -> None:
    """The SQL texts, injected (the DataFrame API's, deferred, run from a client-only
    process: tests/test_connect.py)."""
    lin = check_lineage(tpch_sql(remote, n), n, tpch_oracle(n), table_rows, random.Random(SEED + 500 + n), "inject")
    assert lin.mode == "inject"


@pytest.mark.parametrize("strategy", ["inject", "defer"])
def test_a_workload_s_where_on_a_parquet_source_over_connect(remote: RemoteSession, tpch: Path, strategy: str) -> None:
    """Q1 with lineage kept only for lineitem rows of `l_quantity > 45`: each group traces
    back to the rows DuckDB selects with the query's own filter and that one."""
    where = "l_quantity > 45"
    lin = ember.capture(tpch_sql(remote, 1), strategy=strategy, workload=ember.Workload(where={"lineitem": where}))
    for row in lin.output().to_pylist():
        want = duckdb.sql(f"SELECT ember_rid FROM ({workload._q1_lineage(tpch, row, where)}) ORDER BY 1").fetchnumpy()["ember_rid"]
        assert lin.backward(oids=[row["ember_oid"]]).ids("lineitem").tolist() == want.tolist(), row
    with pytest.raises(InvalidPredicateError, match="does not fit 'lineitem'"):  # before any job
        ember.capture(tpch_sql(remote, 1), strategy=strategy, workload=ember.Workload(where={"lineitem": "l_nothing > 45"}))


def test_a_workload_s_partitions_over_connect(remote: RemoteSession, tpch: Path) -> None:
    """Q1 with its lineage partitioned by ship mode: a trace within one mode reads only
    that partition, and meets DuckDB's."""
    lin = ember.capture(tpch_sql(remote, 1), workload=ember.Workload(partition_by={"lineitem": "l_shipmode"}))
    pred = "l_shipmode = 'RAIL'"
    for row in lin.output().to_pylist():
        want = duckdb.sql(f"SELECT ember_rid FROM ({workload._q1_lineage(tpch, row, pred)}) ORDER BY 1").fetchnumpy()["ember_rid"]
        assert lin.backward(oids=[row["ember_oid"]], source_where={"lineitem": pred}).ids("lineitem").tolist() == want.tolist()


SPLITS = {"spark.sql.files.maxPartitionBytes": "64", "spark.sql.files.openCostInBytes": "1"}


@pytest.fixture
def small_splits(remote: RemoteSession) -> Iterator[RemoteSession]:
    """The Connect session cutting files into splits of a few rows, several to a task."""
    before = {key: remote.conf.get(key, None) for key in SPLITS}
    for key, value in SPLITS.items():
        remote.conf.set(key, value)
    yield remote
    for key, value in before.items():
        if value is None:
            remote.conf.unset(key)
        else:
            remote.conf.set(key, value)


def _text_files(folder: Path, fmt: str) -> None:
    """Rows 0-39 and 40-79 in two files, each row's `k` its place in the two taken in
    path order, `v` = k % 3."""
    folder.mkdir()
    for n, low in enumerate((0, 40)):
        rows = [(k, k % 3) for k in range(low, low + 40)]
        if fmt == "orc":
            orc.write_table(pa.table({"k": [k for k, _ in rows], "v": [v for _, v in rows]}), folder / f"part-{n}.orc",
                            stripe_size=256, batch_size=8)
        elif fmt == "json":
            (folder / f"part-{n}.json").write_text("".join(f'{{"k": {k}, "v": {v}}}\n' for k, v in rows))
        elif fmt == "xml":
            body = "".join(f"<row><k>{k}</k><v>{v}</v></row>\n" for k, v in rows)
            (folder / f"part-{n}.xml").write_text(f"<rows>\n{body}</rows>\n")
        else:  # CSV, or text lines that read as such
            (folder / f"part-{n}.{fmt}").write_text("".join(f"{k},{v}\n" for k, v in rows))


def _keys(rows: pa.Table) -> list[int]:
    """Each row's `k` (of a text line: its first field)."""
    if "k" in rows.column_names:
        return rows.column("k").to_pylist()
    return [int(line.split(",")[0]) for line in rows.column("value").to_pylist()]


@pytest.mark.parametrize("reads", ["auto", "spark"])
@pytest.mark.parametrize("fmt", ["csv", "json", "orc", "xml", "text"])
def test_text_formats_are_counted_over_connect(small_splits: RemoteSession, tmp_path: Path, fmt: str, reads: str) -> None:
    """CSV, JSON, ORC, XML and text files in splits of a few rows, several to a task, captured
    (both strategies) and inferred from a Connect client: each group traces back to the
    rows of its `v`, numbered by their place in the files; rows, forward traces and a
    saved store read back through the session. With `reads` = "spark" the client reads
    no file (the server's facts, its stale check)."""
    folder = tmp_path / "t"
    _text_files(folder, fmt)
    small_splits.conf.set(READS, reads)
    try:
        if fmt == "text":
            lines = small_splits.read.text(str(folder))
            df = lines.selectExpr(*[f"CAST(split(value, ',')[{i}] AS INT) AS {c}" for i, c in enumerate("kv")])
        else:
            reader = small_splits.read.schema("k int, v int").format(fmt)
            df = (reader.option("rowTag", "row") if fmt == "xml" else reader).load(str(folder))
        job = df.where("k > 4").groupBy("v").count()
        for lin in (ember.capture(job, strategy="inject"), ember.capture(job, strategy="defer"), ember.infer(job)):
            for oid, v in enumerate(lin.output().column("v").to_pylist()):
                want = [k for k in range(80) if k > 4 and k % 3 == v]
                trace = lin.backward(oids=[oid])
                assert trace.ids("t").tolist() == want, (lin.mode, v)
                assert _keys(trace.rows("t")) == want, (lin.mode, v)
                assert lin.forward("t", ids=[want[0]]).ids().tolist() == [oid]
        assert isinstance(lin, ember.InferredLineage)
        captured = ember.capture(job)
        assert all(s.remote == (reads == "spark") for s in captured._sources.values())
        captured.save(str(tmp_path / "saved"), keep_rows=0)
        loaded = ember.load(str(tmp_path / "saved"), small_splits)
        v = loaded.output().column("v").to_pylist()[0]
        assert _keys(loaded.backward(oids=[0]).rows("t")) == [k for k in range(80) if k > 4 and k % 3 == v]
        (folder / f"part-1.{fmt}").write_bytes((folder / f"part-0.{fmt}").read_bytes())  # another file now
        with pytest.raises(StaleSourceError):
            captured.backward(oids=[0]).rows("t")
    finally:
        small_splits.conf.unset(READS)


@pytest.mark.parametrize("strategy", ["inject", "defer"])
def test_a_range_is_numbered_by_place_over_connect(remote: RemoteSession, strategy: str) -> None:
    """`range(5, 95, 3)` in 4 partitions, rows numbered by their place in the range: the
    client makes the same range for the server, each rid computed from its id."""
    lin = ember.capture(remote.sql("SELECT id % 4 AS k, count(*) AS n FROM range(5, 95, 3, 4) WHERE id > 20 GROUP BY 1"),
                        strategy=strategy)
    ids = list(range(5, 95, 3))
    for oid, k in enumerate(lin.output().column("k").to_pylist()):
        assert lin.backward(oids=[oid]).ids("range").tolist() == [i for i, v in enumerate(ids) if v > 20 and v % 4 == k]


@pytest.fixture(scope="module")
def remote_visits(remote: RemoteSession) -> DataFrame:
    """The keyed tests' Python data source, registered with the Connect session."""
    remote.dataSource.register(keyed.Visits)
    return remote.read.format("ember_test_visits").option("rows", "30").load()


def by_name(*tests: Callable[..., None]) -> dict[str, Callable[..., None]]:
    """Tests of another module by name (without `test_`), to run as cases over Connect."""
    return {f.__name__.removeprefix("test_"): f for f in tests}


def called(test: Callable[..., None], request: pytest.FixtureRequest, **given: Any) -> None:
    """`test` called with the `given` values for the parameters it names (a string names
    the fixture to give), and the fixture of its own name for the others (but those a
    `functools.partial` gave)."""
    args = {}
    for name, parameter in inspect.signature(test).parameters.items():
        if name not in given and parameter.default is not parameter.empty:
            continue
        value = given.get(name, name)
        args[name] = request.getfixturevalue(value) if isinstance(value, str) else value
    test(**args)


# The keyed-source tests (tests/capture/test_keyed.py), over Connect: `ember.source`
# declares a source on the DataFrame as read, the key columns are read by a job on the
# server, and the job's scan is joined to their ranks there.
KEYED = by_name(
    keyed.test_python_data_source_without_a_key_is_refused_saying_how_to_declare_one,
    keyed.test_python_data_source_traced_by_a_key_of_two_columns,
    keyed.test_python_data_source_lazy_and_auto,
    keyed.test_a_key_that_does_not_identify_rows_is_refused,
    keyed.test_a_key_is_for_tables_and_files,
    keyed.test_files_keyed_by_metadata_fields,
    keyed.test_a_file_keyed_by_a_column_is_traced_after_it_is_rewritten,
    keyed.test_jdbc_table_joined_with_parquet_vs_postgres,
    keyed.test_jdbc_lineage_saved_keeps_keys_not_credentials,
    keyed.test_jdbc_table_without_a_key_is_refused,
    keyed.test_jdbc_to_parquet_to_report_traced_to_database_keys,
)


@pytest.mark.parametrize("case", sorted(KEYED))
def test_keyed_sources_over_connect(request: pytest.FixtureRequest, remote: RemoteSession, case: str) -> None:
    called(KEYED[case], request, spark=remote, visits_df="remote_visits")


def test_ember_source_over_connect_needs_the_dataframe_as_read(remote_visits: DataFrame) -> None:
    """Over Connect the declared relation is the client plan's leaf. A DataFrame whose plan
    reads one source, but not at that leaf (an empty table outer-joined to it, which the
    optimizer drops), is refused, saying what to give; a step over the read is fine."""
    empty = remote_visits.sparkSession.createDataFrame([], "site string")
    with pytest.raises(ember.EmberError, match=r"key= on the DataFrame as read"):
        ember.source(empty.join(remote_visits, "site", "right"), "visits", key=["site", "n"])
    ember.source(remote_visits.select("site", "n"), "visits", key=["site", "n"])
    lin = ember.capture(remote_visits.groupBy("site").count())
    assert sum(lin.backward(oids=[i]).keys("visits").num_rows for i in range(lin.output().num_rows)) == 30


def test_rows_of_a_source_without_a_key_are_numbered_on_the_server(remote: RemoteSession, tmp_path: Path) -> None:
    """Repeated rows over two files: no key tells them apart, so the server numbers them
    by file and row index (the plan message's numbered scan); the oracle numbers the
    files' rows in the order Spark lists them."""
    folder = tmp_path / "repeated"
    folder.mkdir()
    parts = [pa.table({"k": [1, 2, 1, 1], "v": [5, 5, 5, 7]}), pa.table({"k": [2, 1, 3], "v": [5, 5, 5]})]
    for name, part in zip(("a", "b"), parts, strict=True):
        pq.write_table(part, folder / f"{name}.parquet")
    rows = pa.concat_tables(parts)
    # (a dict, not functions.sum: beside a classic session, PySpark's functions make classic columns)
    lin = ember.capture(remote.read.parquet(str(folder)).groupBy("k").agg({"v": "sum"}), strategy="inject")
    out = lin.output()
    for oid, k in enumerate(out.column("k").to_pylist()):
        want = [i for i, key in enumerate(rows.column("k").to_pylist()) if key == k]
        assert lin.backward(oids=[oid]).ids(lin.sources[0]).tolist() == want
    for rid, k in enumerate(rows.column("k").to_pylist()):
        assert out.column("k").take(lin.forward(lin.sources[0], ids=[rid]).ids()).to_pylist() == [k]


def test_ember_lineage_over_connect_infers_or_captures_as_on_a_classic_session(remote: RemoteSession, tpch: Path) -> None:
    """`auto` infers for a trace or two and captures for many; both trace each group back
    to the nations of its region (read with pyarrow)."""
    df = remote.sql("SELECT n_regionkey, count(*) AS n FROM nation GROUP BY n_regionkey")
    regions = pq.read_table(tpch / "nation.parquet").column("n_regionkey").to_pylist()
    for traces, mode in ((1, "infer"), (None, "inject")):
        lin = ember.lineage(df, traces=traces)
        assert lin.mode == mode
        for oid, key in enumerate(lin.output().column("n_regionkey").to_pylist()):
            assert lin.backward(oids=[oid]).ids("nation").tolist() == [i for i, r in enumerate(regions) if r == key]



# The operator table's tests whose jobs use no PySpark functions but of the session's kind
# (`functions` makes classic columns in a process that holds a classic session, as these
# tests' does), each as its own case, with its parameters.
OPERATORS = by_name(
    operators.test_filter_project_computed_columns,
    operators.test_sort,
    operators.test_limit_and_top_k,
    operators.test_inner_cross_theta_joins,
    operators.test_an_outer_join_spark_could_drop_still_gives_its_matched_rows,
    operators.test_semi_joins_exists_and_in,
    operators.test_anti_joins_not_exists_and_not_in,
    operators.test_grouped_aggregate_with_having,
    operators.test_global_aggregate_also_over_no_rows,
    operators.test_aggregates_spark_would_merge_keep_their_own_rows,
    operators.test_distinct_and_count_distinct,
    operators.test_union_all_and_distinct,
    operators.test_explode_and_posexplode,
    operators.test_pivot,
    operators.test_unpivot,
    operators.test_self_join_and_a_table_read_twice_are_one_source,
    operators.test_except_all_against_an_aggregate,  # a subplan cached on the server
    operators.test_window_functions,  # positions and frame bounds built by the plugin
    operators.test_scalar_subqueries,
    operators.test_a_window_over_a_sample_drawn_anew_each_run,
    operators.test_observed_metrics,
    operators.test_rows_tagged_with_their_file,
    operators.test_parquet_rids_follow_sorted_paths,
    operators.test_csv_and_json_sources,
    # Python functions: the client wraps a map's function and the plugin makes it again
    operators.test_python_udf_and_pandas_udf,
    operators.test_pandas_aggregate_udfs,
    operators.test_pandas_window_udfs_over_bounded_frames,
    operators.test_python_udtfs_called_per_row,
    operators.test_grouped_map_in_pandas_and_arrow,
    operators.test_cogrouped_map_in_pandas_and_arrow,
    operators.test_grouped_map_keys_of_every_kind_come_back,
    operators.test_partition_map_in_pandas_and_arrow,  # over a cached input: no task reports to a client
)
OPERATORS |= {f"outer_joins_{k}": functools.partial(operators.test_outer_joins, kind=k) for k in ("left", "right", "full")}
OPERATORS |= {  # value offsets: the user's own bound expressions, by reference
    f"range_frame_{order}": functools.partial(operators.test_range_frames_with_value_offsets, order=order, lo=lo, hi=hi, frame=frame)
    for order, lo, hi, frame in (
        ("x", -1.0, 1.0, "x DESC RANGE BETWEEN 1.0 PRECEDING AND 1.0 FOLLOWING"),
        ("ts", -5, 2, "ts RANGE BETWEEN INTERVAL 5 HOURS PRECEDING AND INTERVAL 2 HOURS FOLLOWING"),
    )
}
OPERATORS |= {
    f"{op}{'_all' if all_ else ''}": functools.partial(operators.test_intersect_and_except, op=op, all_=all_)
    for op in ("intersect", "except") for all_ in (False, True)
}


@pytest.fixture(scope="module")
def remote_views(remote: RemoteSession) -> RemoteSession:
    """The operator table's in-memory tables, as temp views of the Connect session."""
    for name, rows, schema in (("a", operators.A, "k int, v string"), ("b", operators.B, "k int, w string"),
                               ("w", operators.W, "g int, o int, v int"), ("c", operators.C, "id int, c1 int, c2 int")):
        remote.createDataFrame(rows, schema).createOrReplaceTempView(name)
    return remote


@pytest.mark.parametrize("case", sorted(OPERATORS))
def test_the_operator_table_over_connect(request: pytest.FixtureRequest, remote_views: RemoteSession, case: str) -> None:
    called(OPERATORS[case], request, views=remote_views, spark=remote_views)


def test_a_partitioned_write_over_connect_links_each_row(remote: RemoteSession, tmp_path: Path) -> None:
    """`capture(write=...)` from a Connect client: the same job and file oracle as a
    classic session's (tests/capture/test_writes.py)."""
    raw = remote.read.parquet(str(writes.raw_file(tmp_path)))
    out = tmp_path / "out"
    lin = ember.capture(writes.job(raw), write=lambda w: w.partitionBy("dt").mode("overwrite").parquet(str(out)))
    assert writes.check(lin, out, "parquet", writes.by_id) == lin.output().num_rows == int((writes.RAW.v > 1).sum())
