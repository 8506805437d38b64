"""Spark Connect: a Connect server started with `ember.connect.server_conf()` serves the
plan out of a client's DataFrame through ember's plugin, and the import reads from it
the IR the classic path reads of the same query. A server that does not know ember's
request is named in one line. A plan-in message built by the plugin runs there to the
job's rows."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.connect.session import SparkSession as RemoteSession

from ember.engines.spark import connect, plan_in
from ember.engines.spark.jvm import Jvm
from ember.engines.spark.plan_import import Importer, import_plan
from ember.errors import EmberError
from ember.plan import domains, ir
from tests.engines.spark.test_round_trip import unhandled

QUERIES = [
    "SELECT l_returnflag, count(*) AS n, sum(l_quantity) AS q FROM lineitem WHERE l_quantity > 10 GROUP BY l_returnflag",
    "SELECT o_orderpriority, count(*) AS n FROM orders WHERE EXISTS (SELECT 1 FROM lineitem WHERE l_orderkey = o_orderkey"
    " AND l_commitdate < l_receiptdate) GROUP BY o_orderpriority",
    "SELECT n_name, sum(c_acctbal) AS b FROM customer JOIN nation ON c_nationkey = n_nationkey GROUP BY n_name",
]


@pytest.mark.parametrize("query", QUERIES)
def test_the_plan_out_over_connect_is_the_classic_one(remote: RemoteSession, spark: SparkSession, tpch: Path, query: str) -> None:
    out = connect.message(remote.sql(query))
    assert out.plan is not None and not out.streaming
    importer = Importer({})
    over_connect = domains.marked(importer.node(out.plan))
    for table in ("lineitem", "orders", "customer", "nation"):
        spark.read.parquet(str(tpch / f"{table}.parquet")).createOrReplaceTempView(table)
    classic, sources, _ = import_plan(Jvm(spark), spark.sql(query))
    # expression ids differ between the two sessions; the shape, the sources and the SQL do not
    assert ir.outline(over_connect) == ir.outline(classic)
    assert importer.sources.keys() == sources.keys()
    assert [s.files for s in importer.sources.values()] == [sources[k].files for k in importer.sources]
    assert [type(n).__name__ for n in ir.walk_all(over_connect)] == [type(n).__name__ for n in ir.walk_all(classic)]


def test_a_server_that_does_not_know_the_request_is_named(remote: RemoteSession, monkeypatch: pytest.MonkeyPatch) -> None:
    """As a server without ember's plugin answers: no handler for the extension."""
    monkeypatch.setattr(connect, "REQUEST", "type.googleapis.com/other.Request")
    with pytest.raises(EmberError, match=r"ember.connect.server_conf\(\)") as raised:
        connect.message(remote.range(3))
    assert "\n" not in str(raised.value)


def test_a_client_of_another_version_is_refused_with_both_versions(remote: RemoteSession, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connect, "VERSION", connect.VERSION + 1)
    with pytest.raises(EmberError, match=rf"version {connect.VERSION - 1}, not {connect.VERSION}\b") as raised:
        connect.message(remote.range(3))
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("query", QUERIES)
def test_a_plan_built_over_connect_gives_the_job_s_rows(remote: RemoteSession, query: str) -> None:
    """The boundary's round trip on the server: the plan read out, written back as a plan-in
    message of its own operations (joins, aggregates and unions built anew) and built by
    the plugin, runs to the rows the client's own DataFrame gives."""
    df = remote.sql(query)
    out = connect.message(df)
    assert out.plan is not None
    root = domains.marked(Importer({}).node(out.plan))
    message = plan_in.message(unhandled(root), outside=_no_outside, unchanged=frozenset())
    built = connect.build(remote, message)
    assert sorted(map(tuple, built.collect())) == sorted(map(tuple, df.collect()))


def _no_outside(node: ir.Node) -> ir.Node:
    raise AssertionError(f"these plans need nothing built outside the message: {node}")


def test_the_server_refuses_a_client_without_its_token(connect_server: str) -> None:
    """The test server authenticates: a client that does not give its token gets no answer."""
    anonymous = RemoteSession.builder.remote(connect_server.split("/;")[0]).create()
    try:
        with pytest.raises(Exception, match=r"(?i)unauthenticated|token"):
            anonymous.range(1).collect()
    finally:
        anonymous.stop()
