"""Workload-aware capture over generated pipelines (the capture suite's): pruning by source,
selection push-down and data skipping each give the oracle's lineage restricted to what
the workload reads, so they answer as the unoptimized capture does."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

import ember
from ember.engines.spark.jvm import Jvm
from ember.engines.spark.plan_import import import_plan
from ember.plan.ir import Scan, walk
from tests.capture import test_generated_pipelines as generated
from tests.oracle import rows as o

_K = 1  # the value of `k` the pushed-down and the partitioned predicates ask for


@settings(settings.get_profile("spark-jobs"), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    plan=generated.plans,
    t0=generated.table,
    t1=generated.table,
    how=st.sampled_from(["sources", "where", "partition_by"]),
    pick=st.randoms(use_true_random=False),
)
# A window over a NOT IN against a sorted LIMIT (Spark pushes the anti join below the
# window): caching that window through Spark's cache manager optimized it again and gave
# Defer's run another answer than the job (`test_spark_build`).
@example(plan=("not in", ("window", ("scan", "t0"), "rank"), ("total", ("top", ("scan", "t0"), 1))),
         t0=[(0, 0), (1, 0)], t1=[(0, 0)], how="sources", pick=random.Random(0))
def test_a_workload_keeps_exactly_the_lineage_it_reads(
    spark: SparkSession, plan: generated.Plan, t0: generated.Table, t1: generated.Table, how: str, pick: Any
) -> None:
    tables = generated.register(spark, t0, t1)
    df = generated.spark_plan(spark, plan)
    generated.plain_rows(df)
    root, _, _ = import_plan(Jvm(spark), df)
    read = sorted({n.source.name for n in walk(root) if isinstance(n, Scan) and n.source.name in tables})
    assume(read)  # else Spark found the answer without reading a table (an empty input, say)
    name = pick.choice(read)
    kept = {(name, i) for i, (k, _) in enumerate(tables[name]) if k == _K}
    expected = generated.oracle_plan(plan, tables)
    if how == "sources":
        lin = ember.capture(df, workload=ember.Workload(sources=(name,)))
        o.assert_same_lineage(lin, [(v, frozenset(x for x in lin_ if x[0] == name)) for v, lin_ in expected])
    elif how == "where":
        lin = ember.capture(df, workload=ember.Workload(where={name: f"k = {_K}"}))
        o.assert_same_lineage(lin, [(v, frozenset(x for x in lin_ if x[0] != name or x in kept)) for v, lin_ in expected])
    else:
        lin = ember.capture(df, workload=ember.Workload(partition_by={name: "k"}))
        o.assert_same_lineage(lin, expected)  # unasked, the whole lineage
        got = [lin.backward(oids=[oid], source_where={name: f"k = {_K}"}).ids(name).tolist() for oid in range(len(expected))]
        rows = o.ember_rows(lin)
        assert [sorted(r for s, r in lineage if (s, r) in kept) for _, lineage in rows] == got
