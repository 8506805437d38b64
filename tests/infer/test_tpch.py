"""TPC-H through `ember.infer`: exact traces equal the DuckDB oracle, superset traces contain it.

All 22 queries in Spark SQL at the test scale. Per query, a sampled output row is
traced backward in exact mode, iterative superset mode and naive superset mode, and one
lineage row of one source (a different one per query) is traced forward in exact mode. (TPC-H output rows are
distinct, so set semantics does not merge any two of them.)
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import DataFrame, SparkSession

import ember
from devkit.tpch import QUERIES
from tests.oracle.compare import (
    expected_backward,
    expected_forward,
    forward_index,
    match_rows,
    sample_oids,
)
from tests.oracle.tpch_lineage import KEYS, SOURCES
from tests.tpch.queries_sql import tpch_sql

SEED = 20261123
TRACED = 1  # output rows traced backward per query (each lazy trace re-reads the sources)


@pytest.mark.parametrize("n", sorted(QUERIES), ids=[f"q{n:02d}" for n in sorted(QUERIES)])
def test_inferred_lineage_matches_the_oracle(
    spark: SparkSession, tpch: Path, tpch_oracle: Callable[[int], pa.Table], n: int
) -> None:
    check_inferred(tpch_sql(spark, n), n, tpch_oracle(n))


def check_inferred(df: DataFrame, n: int, expected: pa.Table) -> None:
    """Exact traces equal the oracle's, both superset modes contain it, one forward trace
    (also over Spark Connect: tests/engines/spark/test_served.py)."""
    keys, sources = KEYS[n], SOURCES[n]
    exact = ember.infer(df)
    superset = ember.infer(df, exact=False)
    naive = ember.infer(df, exact=False, iterative=False)
    mapping = match_rows(exact.output(), expected, keys)
    assert exact.output().num_rows == len(mapping)
    rng = random.Random(SEED + n)
    for oid in sample_oids(sorted(mapping), TRACED, rng):
        traces = {"exact": exact.backward(oids=[oid]), "iterative": superset.backward(oids=[oid]),
                  "naive": naive.backward(oids=[oid])}
        assert traces["exact"].exact and not traces["naive"].exact
        for source in sources:
            want = expected_backward(expected, [mapping[oid]], source)
            got = traces["exact"].ids(source)
            assert np.array_equal(got, want), f"oid {oid}, {source}: {got.size} ids, oracle {want.size}"
            for mode in ("iterative", "naive"):
                missing = np.setdiff1d(want, traces[mode].ids(source))
                assert missing.size == 0, f"{mode} superset misses {missing[:5]} of {source} for oid {oid}"
    source = sources[n % len(sources)]
    index = forward_index(expected, mapping, source)
    if index:
        rid = rng.choice(sorted(index))
        got = exact.forward(source, ids=[rid]).ids()
        assert np.array_equal(got, expected_forward(index, rid)), f"forward {source} rid {rid}"
