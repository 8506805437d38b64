"""The rewritten plan goes to the JVM as one message (`engines.spark.plan_in`): a capture's
py4j calls do not grow with the plan, and a message the jar cannot read is refused by name.
Answers through the message are checked by every capture suite (operators, TPC-H, TPC-DS)
against their oracles."""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from py4j.clientserver import ClientServerConnection
from pyspark.errors import IllegalArgumentException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import ember
from ember.engines.spark import plan_in
from ember.engines.spark.jvm import Jvm, output_ids
from ember.engines.spark.plan_import import import_plan
from ember.plan import ir


@contextmanager
def _counted() -> Iterator[list[int]]:
    """Counts the py4j commands Python sends (not the gateway's memory releases, which
    follow Python's garbage collector)."""
    count = [0]
    send = ClientServerConnection.send_command

    def counting(self: ClientServerConnection, command: str) -> str:
        if not command.startswith("m\n"):
            count[0] += 1
        return send(self, command)

    ClientServerConnection.send_command = counting  # type: ignore[method-assign]
    try:
        yield count
    finally:
        ClientServerConnection.send_command = send  # type: ignore[method-assign]


@pytest.fixture(scope="module")
def tables(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> tuple[DataFrame, DataFrame]:
    folder = tmp_path_factory.mktemp("plan_in")
    n = 40
    pq.write_table(pa.table({"k": range(n), "g": [i % 4 for i in range(n)], "v": [float(i) for i in range(n)]}), folder / "a.parquet")
    pq.write_table(pa.table({"k": range(0, n, 2), "w": [float(i) for i in range(0, n, 2)]}), folder / "b.parquet")
    return spark.read.parquet(str(folder / "a.parquet")), spark.read.parquet(str(folder / "b.parquet"))


def _small(a: DataFrame, b: DataFrame) -> DataFrame:
    return a.join(b, "k").groupBy("g").agg(F.sum("v").alias("s"))


def _wide(a: DataFrame, b: DataFrame) -> DataFrame:
    """The same two scans and one join, with 24 computed columns, conditions and 12
    aggregates: a plan with many more nodes' worth of new expressions."""
    for i in range(12):
        a = a.withColumn(f"a{i}", F.when(F.col("v") > i, F.col("v") * i).otherwise(F.lit(-i)))
        b = b.withColumn(f"b{i}", F.col("w") + i)
    joined = a.filter(F.col("a3") >= 0).join(b.filter(F.col("b2") > 1), "k")
    return joined.groupBy("g").agg(*[F.sum(f"a{i}").alias(f"s{i}") for i in range(6)], *[F.max(f"b{i}").alias(f"m{i}") for i in range(6)])


def _calls(df: DataFrame) -> int:
    ember.capture(df, strategy="inject")  # the jar, the session's settings: once per session
    with _counted() as count:
        ember.capture(df, strategy="inject")
    return count[0]


def test_a_capture_s_py4j_calls_do_not_grow_with_its_plan(spark: SparkSession, tables: tuple[DataFrame, DataFrame]) -> None:
    """Built node by node through py4j (an alias, a Seq, an output read per new column
    and node), each capture took over a hundred calls, the wide one more; through the
    message both take the fixed few that settings, the import and PySpark's own job need."""
    small, wide = _calls(_small(*tables)), _calls(_wide(*tables))
    assert wide - small <= 3 and wide <= 60, (small, wide)


def test_the_wide_plan_s_answers_through_the_message(spark: SparkSession, tables: tuple[DataFrame, DataFrame]) -> None:
    """Against a pure-Python evaluation of `_wide`: its output and each group's lineage."""
    a, b = (t.toArrow().to_pylist() for t in tables)
    kept_b = {r["k"]: j for j, r in enumerate(b) if r["w"] + 2 > 1}
    kept_a = [i for i, r in enumerate(a) if (r["v"] * 3 if r["v"] > 3 else -3) >= 0 and r["k"] in kept_b]
    lin = ember.capture(_wide(*tables), strategy="inject")
    rows = lin.output().to_pylist()
    assert sorted(r["g"] for r in rows) == sorted({a[i]["g"] for i in kept_a})
    for row in rows:
        want = [i for i in kept_a if a[i]["g"] == row["g"]]
        assert row["s1"] == sum(a[i]["v"] * 1 if a[i]["v"] > 1 else -1 for i in want)
        assert row["m5"] == max(b[kept_b[a[i]["k"]]]["w"] + 5 for i in want)
        t = lin.backward(oids=[row["ember_oid"]])
        assert t.ids("a").tolist() == want
        assert t.ids("b").tolist() == sorted(kept_b[a[i]["k"]] for i in want)


def test_a_message_of_another_version_is_refused_by_name(spark: SparkSession) -> None:
    with pytest.raises(IllegalArgumentException, match="ember plan message version 99; this jar reads 1"):
        plan_in.build(Jvm(spark), plan_in.Message({"version": 99, "root": {}}, ()))


def test_an_attribute_no_built_input_has_is_refused_by_id(spark: SparkSession, tables: tuple[DataFrame, DataFrame]) -> None:
    root, _, _ = import_plan(Jvm(spark), tables[0])
    scan = next(n for n in ir.walk(root) if isinstance(n, ir.Scan))
    stray = ir.Attr(987654321, "stray", "bigint")
    node = ir.Project(scan, columns=(ir.Named(ir.ColumnRef(stray), stray),))
    with pytest.raises(IllegalArgumentException, match="attribute #987654321 is not in any built input"):
        plan_in.build(Jvm(spark), plan_in.message(node, outside=lambda n: n, unchanged=frozenset()))


def test_the_message_names_the_import_s_objects_and_new_columns(spark: SparkSession, tables: tuple[DataFrame, DataFrame]) -> None:
    root, _, _ = import_plan(Jvm(spark), tables[0].filter(F.col("v") > 3))
    scan = next(n for n in ir.walk(root) if isinstance(n, ir.Scan))
    flag = ir.Attr(123456, "flag", "boolean")
    node = ir.Project(root, columns=(*(ir.Named(ir.ColumnRef(a), a) for a in root.output), ir.Named(ir.Constant(True, flag), flag)))
    m = plan_in.message(node, outside=lambda n: n, unchanged=frozenset(map(id, ir.walk(root))))
    assert m.body["version"] == plan_in.VERSION
    (filtered,) = m.body["root"]["kids"]
    assert filtered["op"] == "filter" and filtered["cond"]["e"] == "ref"  # the user's condition, as imported
    assert filtered["kids"] == [{"op": "plan", "ref": scan.handle._target_id}]  # the import's scan, whole
    assert m.body["root"]["list"][-1] == {"e": "alias", "child": {"e": "true"}, "name": "flag", "id": 123456}
    built = plan_in.build(Jvm(spark), m)
    assert [a.id for a in root.output] + [123456] == output_ids(built.output())


def test_a_plan_built_outside_stays_on_the_gateway_until_the_jvm_built_it(
    spark: SparkSession, tables: tuple[DataFrame, DataFrame]
) -> None:
    """py4j drops an object from its registry, in the background, once Python holds no
    reference to it; the message holds what it names until the build is done."""
    jvm = Jvm(spark)
    root, _, _ = import_plan(jvm, tables[0])
    scan = next(n for n in ir.walk(root) if isinstance(n, ir.Scan))
    k = scan.attrs[0]
    node = ir.Project(ir.Shared(scan, key=1), columns=(ir.Named(ir.ColumnRef(k), k),))  # a cached input: built outside
    m = plan_in.message(node, outside=lambda n: scan.handle.clone(), unchanged=frozenset())  # held by the message only
    gc.collect()
    time.sleep(1.5)  # py4j's finalizer thread wakes every second
    built = plan_in.build(jvm, m)
    assert jvm.dataframe(built).count() == 40
