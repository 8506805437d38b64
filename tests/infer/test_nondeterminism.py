"""Operators that choose rows by chance (which row `dropDuplicates` keeps, `first`,
`collect_list`, a LIMIT over unordered rows, a window over a partition in no order): a
lazy trace may re-run the job, and the re-run may choose otherwise. Exact mode refuses
them before any job, naming the operator; a choice only the top group makes (`first(x)`
per group, its keys in the output) is traced, re-runs matched on the other columns; the
superset mode stays allowed; `ember.capture` gives the lineage of the rows its run kept.

The capture oracle is computed with pandas from the in-code tables and the job's own
output (which names the groups each output row holds: the choice the run made)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.window import Window

import ember
from ember.errors import UnsupportedOperatorError
from ember.infer import lineage as infer_lineage
from ember.infer.exact import choices, chooses
from ember.plan import ir
from ember.plan.trees import Tree
from tests.infer.test_pushdown import col, scan

# --- over hand-built plans (no Spark) --------------------------------------------------------


def attr(i: int, name: str) -> ir.Attr:
    return ir.Attr(i, name, "string")


K, V, W, FK, FV, N = attr(1, "k"), attr(2, "v"), attr(3, "w"), attr(10, "k"), attr(11, "v"), attr(12, "n")
T = scan("t", K, V, W)


def aggregate_call(kind: str, *reads: ir.Attr) -> ir.Expr:
    refs = frozenset(a.id for a in reads)
    fn = Tree(kind, f"{kind.lower()}(...)", "string", True, refs, ())
    tree = Tree("AggregateExpression", fn.text, "string", True, refs, (fn,))
    return ir.Expr(fn.text, refs, tree=tree)


def grouped(child: ir.Node, keys: tuple[ir.Attr, ...], *columns: tuple[ir.Attr, ir.AnyExpr]) -> ir.Aggregate:
    return ir.Aggregate(child, keys=tuple(col(k) for k in keys), columns=tuple(ir.Named(e, a) for a, e in columns))


DEDUPE = grouped(T, (K,), (K, col(K)), (FV, aggregate_call("First", V)))  # dropDuplicates(["k"])


def test_what_chooses_rows_by_chance() -> None:
    assert "dropDuplicates(['k'])" in (chooses(DEDUPE) or "")
    assert "collect_list()" in (chooses(grouped(T, (K,), (K, col(K)), (N, aggregate_call("CollectList", V)))) or "")
    assert chooses(grouped(T, (K,), (K, col(K)), (N, aggregate_call("Count")))) is None
    assert "LIMIT" in (chooses(ir.Limit(T)) or "")
    assert chooses(ir.Limit(ir.Project(ir.Passthrough(T, kind="sort"), columns=(ir.Named(col(K), K),)))) is None
    assert chooses(ir.Passthrough(T, kind="sort")) is None
    one = ir.Project(T, columns=(ir.Named(ir.Expr("1", frozenset()), N),))  # an uncorrelated EXISTS: SELECT 1 ... LIMIT 1
    assert chooses(ir.Limit(ir.Limit(one))) is None  # every row alike: any kept is the same


def test_only_the_top_group_may_choose() -> None:
    assert choices(DEDUPE) == (None, frozenset({1}))  # traced by k; v is matched on nothing
    over_it = grouped(DEDUPE, (FV,), (FV, col(FV)), (N, aggregate_call("Count")))  # the issue's plan
    assert "dropDuplicates" in (choices(over_it)[0] or "")
    dropped = ir.Project(DEDUPE, columns=(ir.Named(col(FV), FV),))  # the key does not reach the output
    assert "keys do not all reach" in (choices(dropped)[0] or "")
    having = ir.Filter(DEDUPE, cond=ir.Expr("v > 1", frozenset({FV.id})))
    assert "filter" in (choices(having)[0] or "")
    other = ir.Filter(DEDUPE, cond=ir.Expr("k > 1", frozenset({K.id})))
    assert choices(other) == (None, frozenset({1}))
    renamed = ir.Project(DEDUPE, columns=(ir.Named(col(FV), W), ir.Named(col(K), FK)))
    assert choices(renamed) == (None, frozenset({0}))
    assert "LIMIT" in (choices(grouped(ir.Limit(T), (K,), (K, col(K))))[0] or "")


# --- on Spark ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def people(spark: SparkSession) -> tuple[DataFrame, DataFrame]:
    a = spark.createDataFrame([(i, f"e{i % 5}", "a") for i in range(12)], "id int, email string, src string")
    b = spark.createDataFrame([(i, f"e{i % 7}", "b") for i in range(14)], "id int, email string, src string")
    return ember.source(a, "a"), ember.source(b, "b")


def sources() -> dict[str, pd.DataFrame]:
    return {
        "a": pd.DataFrame({"id": range(12), "email": [f"e{i % 5}" for i in range(12)], "src": "a"}),
        "b": pd.DataFrame({"id": range(14), "email": [f"e{i % 7}" for i in range(14)], "src": "b"}),
    }


@contextmanager
def no_job(spark: SparkSession) -> Iterator[None]:
    group = "ember-nondeterminism"
    spark.sparkContext.setJobGroup(group, "must stay empty")
    try:
        yield
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    assert list(spark.sparkContext.statusTracker().getJobIdsForGroup(group)) == []


def refused(spark: SparkSession, df: DataFrame, words: str) -> str:
    with no_job(spark), pytest.raises(UnsupportedOperatorError) as caught:
        ember.infer(df)
    text = str(caught.value)
    assert words in text and "use ember.capture" in text and "\n" not in text, text
    return text


def test_the_issue_plan_is_refused_up_front(spark: SparkSession, people: tuple[DataFrame, DataFrame]) -> None:
    a, b = people
    df = a.unionByName(b).dropDuplicates(["email"]).groupBy("src").count()
    assert "dropDuplicates(['email'])" in refused(spark, df, "dropDuplicates")
    superset = ember.infer(df, exact=False)  # the superset mode saves nothing and never re-runs
    captured = ember.capture(df)
    out = superset.output()
    for oid in range(out.num_rows):
        row = out.slice(oid, 1).drop_columns(["ember_oid"]).to_pylist()[0]
        exact = captured.backward(where=f"src = '{row['src']}'")
        found = superset.backward(oids=[oid])
        assert not found.exact
        for s in ("a", "b"):
            assert set(exact.ids(s).tolist()) <= set(found.ids(s).tolist())


def test_other_choices_are_refused(spark: SparkSession, people: tuple[DataFrame, DataFrame]) -> None:
    a, b = people
    refused(spark, a.limit(5).groupBy("src").count(), "LIMIT over rows in no order")
    refused(spark, a.groupBy("email").agg(F.collect_list("id").alias("ids")).groupBy("ids").count(), "collect_list()")
    refused(spark, a.groupBy("email").agg(F.first("id").alias("f")).select("f"), "keys do not all reach")
    refused(spark, a.groupBy("email").agg(F.max_by("id", "src").alias("m")).filter("m > 3"), "max_by()")
    whole = Window.partitionBy("email")
    refused(spark, a.withColumn("f", F.first("id").over(whole)), "window function over a partition in no order")
    refused(spark, a.unionByName(b).groupBy("email").agg(F.any_value("src").alias("s")).groupBy("s").count(), "first()")


def test_ordered_limits_and_top_choices_are_traced(spark: SparkSession, people: tuple[DataFrame, DataFrame]) -> None:
    a, _ = people
    ordered = a.orderBy("id").limit(5).groupBy("src").count()
    assert ember.infer(ordered).backward(oids=[0]).ids("a").tolist() == [0, 1, 2, 3, 4]
    top = a.groupBy("email").agg(F.first("id").alias("f"), F.count("*").alias("n"))
    lin, captured = ember.infer(top), ember.capture(top)
    for oid in range(lin.output().num_rows):
        assert lin.backward(oids=[oid]).ids("a").tolist() == captured.backward(oids=[oid]).ids("a").tolist()


def test_a_re_run_that_chooses_otherwise_still_finds_the_traced_rows(
    spark: SparkSession, people: tuple[DataFrame, DataFrame], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`first(id)` per group is traced by its key, and its re-runs (a forward trace over
    more candidates than are traced one by one) are matched without the chosen column:
    here every re-run is made to choose another `id`."""
    a, b = people
    top = a.unionByName(b).groupBy("email").agg(F.first("id").alias("f"), F.count("*").alias("n"))
    lin, captured = ember.infer(top), ember.capture(top)
    real = infer_lineage.run_annotated

    def choosing_otherwise(*args: Any, **kwargs: Any) -> tuple[pa.Table, Any]:
        out, index = real(*args, **kwargs)
        j = out.column_names.index("f")
        return out.set_column(j, "f", pa.array(np.asarray(out.column(j)) + 1000, pa.int32())), index

    monkeypatch.setattr(infer_lineage, "run_annotated", choosing_otherwise)
    monkeypatch.setattr(infer_lineage, "FORWARD_BY_BACKWARD", 0)  # every forward trace re-runs
    for source, n in (("a", 12), ("b", 14)):
        ids = list(range(n))
        assert lin.forward(source, ids=ids).ids().tolist() == captured.forward(source, ids=ids).ids().tolist()
        assert lin.forward(source, ids=[3]).ids().tolist() == captured.forward(source, ids=[3]).ids().tolist()


@pytest.mark.parametrize("strategy", ["inject", "auto", "defer"])
def test_capture_gives_the_lineage_of_the_rows_its_run_kept(
    spark: SparkSession, people: tuple[DataFrame, DataFrame], strategy: str
) -> None:
    """Whichever row per email `dropDuplicates` keeps, an output row's lineage is every
    row of the emails its run put under that `src` (the output lists them). "auto"
    injects (lineage rides in the run that chose); "defer" runs the job again, which may
    choose otherwise: then it says so, never giving another run's lineage."""
    a, b = people
    kept = a.unionByName(b).repartition(4).dropDuplicates(["email"])
    df = kept.groupBy("src").agg(F.count("*").alias("n"), F.sort_array(F.collect_list("email")).alias("emails"))
    lin = ember.capture(df, strategy=strategy)  # type: ignore[arg-type]
    assert lin.mode == ("defer" if strategy == "defer" else "inject")
    try:
        lin.wait()
    except ember.EmberError as e:
        assert strategy == "defer" and "returned other rows than the job" in str(e)
        return
    out = lin.output().to_pylist()
    assert sorted(e for row in out for e in row["emails"]) == sorted({f"e{i}" for i in range(7)})
    tables = sources()
    for row in out:
        trace = lin.backward(oids=[row["ember_oid"]])
        for name, table in tables.items():
            expected = [int(i) for i in np.flatnonzero(table.email.isin(row["emails"]).to_numpy())]
            assert trace.ids(name).tolist() == expected, (strategy, row, name)
    for name, table in tables.items():
        for rid, email in enumerate(table.email):
            owners = [row["ember_oid"] for row in out if email in row["emails"]]
            assert lin.forward(name, ids=[rid]).ids().tolist() == owners
