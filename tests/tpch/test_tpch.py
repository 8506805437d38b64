"""TPC-H: ember's captured lineage equals an independent DuckDB oracle, backward and forward.

All 22 queries run in two styles under `ember.capture`, against one plain run of each:
Spark SQL (the texts of `devkit.tpch.QUERIES`, which the demo and benchmarks run) with
the inject strategy, and the DataFrame API (`queries_dataframe.py`) deferred, so both
strategies meet the oracle. Re-parameterized SQL variants reach lineage rules that the
validation parameters barely touch. The captured output must be the plain output; then,
for every output row (or a sample of 50), the backward trace per source must equal the
oracle's rid list for the matching oracle row, and for a sample of source rows per
source, the forward trace must be exactly the returned output rows whose oracle lineage
holds the rid. Only ember's public API is used.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import DataFrame, SparkSession

import ember
from devkit.tpch import QUERIES
from ember.capture.capture import AT_TRACE_ROWS
from tests.oracle.compare import (
    OID,
    assert_same_rows,
    assert_values_close,
    expected_backward,
    expected_forward,
    forward_index,
    match_rows,
    sample_forward_rids,
    sample_oids,
)
from tests.oracle.tpch_lineage import ANTI_ONLY, KEYS, SOURCES, oracle
from tests.tpch.queries_dataframe import DF
from tests.tpch.queries_sql import LIMITS, VARIANTS, tpch_sql

SEED = 20240522
BACKWARD_SAMPLE = 50  # output rows traced backward per query (all when fewer)
FORWARD_IN_LINEAGE = 15  # source rids per source traced forward, from returned rows' lineage
FORWARD_OUTSIDE = 5  # ... and from no returned row's lineage
MULTI_OIDS = 5  # one backward trace over several output rows at once


def check_lineage(
    df: DataFrame,
    n: int,
    expected: pa.Table,
    rows: dict[str, int],
    rng: random.Random,
    strategy: str,
    plain: pa.Table | None = None,
) -> ember.Lineage:
    """`plain`: the job's output, when another run of the query has it already (`tpch_plain`)."""
    plain = df.toArrow() if plain is None else plain
    lin = ember.capture(df, strategy=strategy)
    check_captured(lin, plain, n, expected, rows, rng)
    return lin


def check_captured(
    lin: ember.Lineage, plain: pa.Table, n: int, expected: pa.Table, rows: dict[str, int], rng: random.Random
) -> None:
    """The lineage of query `n` (captured here or elsewhere: a Connect client's, loaded)
    against the plain job's output and the oracle's."""
    keys, sources = KEYS[n], SOURCES[n]
    out = lin.output()

    # The captured job's output is the plain job's, with ember_oid = 0..n-1 appended.
    assert out.column_names[-1] == OID and out.column(OID).type == pa.int64()
    assert out.column(OID).to_pylist() == list(range(out.num_rows))
    assert_same_rows(out.drop_columns([OID]), plain, keys)

    # Output rows are the oracle's (all of them, or LIMIT many of them).
    want_rows = min(LIMITS.get(n, expected.num_rows), expected.num_rows)
    assert out.num_rows == want_rows, f"{out.num_rows} output rows, oracle says {want_rows}"
    mapping = match_rows(out, expected, keys)
    shared = [c for c in plain.column_names if c in expected.column_names]
    assert set(keys) <= set(shared)
    assert_values_close(out, expected, sorted(mapping.items()), shared)

    # Backward: every (sampled) output row, per source, equals the oracle's rid list.
    for oid in sample_oids(sorted(mapping), BACKWARD_SAMPLE, rng):
        trace = lin.backward(oids=[oid])
        reached = {s for s in sources if expected_backward(expected, [mapping[oid]], s).size}
        assert set(trace.sources) == reached, f"oid {oid}: sources {trace.sources}, oracle {sorted(reached)}"
        for source in sources:
            got = trace.ids(source)
            want = expected_backward(expected, [mapping[oid]], source)
            assert got.dtype == np.int64, f"oid {oid}, {source}: dtype {got.dtype}"
            assert np.array_equal(got, want), _diff(f"backward oid {oid}, {source}", got, want)
        for source in ANTI_ONLY.get(n, ()):
            assert source not in trace.sources, f"oid {oid}: anti-join side {source} in the lineage"

    # Backward over several rows at once: the union of their lineages.
    if len(mapping) > 1:
        oids = sample_oids(sorted(mapping), MULTI_OIDS, rng)
        trace = lin.backward(oids=oids)
        for source in sources:
            want = expected_backward(expected, [mapping[o] for o in oids], source)
            assert np.array_equal(trace.ids(source), want), _diff(f"backward {oids}, {source}", trace.ids(source), want)

    # Forward: exactly the returned output rows whose oracle lineage holds the rid.
    for source in sources:
        index = forward_index(expected, mapping, source)
        rids = sample_forward_rids(
            expected, mapping, source, rows[source], rng, FORWARD_IN_LINEAGE, FORWARD_OUTSIDE
        )
        for rid in rids:
            got = lin.forward(source, ids=[rid]).ids()
            want = expected_forward(index, rid)
            assert np.array_equal(got, want), _diff(f"forward {source} rid {rid}", got, want)


def _diff(what: str, got: np.ndarray, want: np.ndarray) -> str:
    g, w = set(got.tolist()), set(want.tolist())
    return (
        f"{what}: got {len(got)} ids, oracle {len(want)}; "
        f"extra {sorted(g - w)[:10]}, missing {sorted(w - g)[:10]}"
    )


STYLES = {"sql": ("inject", 0), "dataframe": ("defer", 100)}  # strategy, seed offset
CASES = [("sql", n) for n in sorted(QUERIES)] + [("dataframe", n) for n in sorted(DF)]


@pytest.mark.parametrize(("style", "n"), CASES, ids=[f"{s}-q{n:02d}" for s, n in CASES])
def test_tpch_lineage(
    spark: SparkSession,
    tpch: Path,
    tpch_oracle: Callable[[int], pa.Table],
    tpch_plain: Callable[[int], pa.Table],
    table_rows: dict[str, int],
    style: str,
    n: int,
) -> None:
    """Both styles' captures return the SQL text's plain output (run once for both)."""
    df = tpch_sql(spark, n) if style == "sql" else DF[n](spark)
    strategy, offset = STYLES[style]
    check_lineage(df, n, tpch_oracle(n), table_rows, random.Random(SEED + offset + n), strategy, tpch_plain(n))


AT_TRACE = [5, 7, 8, 9, 12, 13, 16]  # a table DuckDB reads whole beside the job (`store.later`)


@pytest.mark.parametrize("n", AT_TRACE)
def test_tpch_lineage_read_at_trace(
    spark: SparkSession,
    tpch: Path,
    tpch_oracle: Callable[[int], pa.Table],
    tpch_plain: Callable[[int], pa.Table],
    table_rows: dict[str, int],
    n: int,
) -> None:
    """Those tables left to the traces that reach them, however small (at SF1 the default
    leaves Q5's, Q7's, Q8's, Q9's, Q12's and Q13's)."""
    spark.conf.set(AT_TRACE_ROWS, "0")
    try:
        rng = random.Random(SEED + 300 + n)
        lin = check_lineage(tpch_sql(spark, n), n, tpch_oracle(n), table_rows, rng, "inject", tpch_plain(n))
    finally:
        spark.conf.unset(AT_TRACE_ROWS)
    assert lin._index.later


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_tpch_sql_variant_lineage(
    spark: SparkSession,
    lineage_duck: duckdb.DuckDBPyConnection,
    tpch: Path,
    table_rows: dict[str, int],
    name: str,
) -> None:
    """Re-parameterized queries whose lineage rules the validation parameters barely reach."""
    n, replacements = VARIANTS[name]
    expected = oracle(lineage_duck, tpch, n, replacements)
    rng = random.Random(SEED + 200 + n)
    check_lineage(tpch_sql(spark, n, replacements), n, expected, table_rows, rng, "inject")


def test_dataframe_queries_have_sql_columns(spark: SparkSession, tpch: Path) -> None:
    """The DataFrame versions return the SQL versions' columns, in order (analysis only)."""
    for n in sorted(DF):
        assert DF[n](spark).columns == tpch_sql(spark, n).columns, f"Q{n}"


def test_oracle_covers_every_query() -> None:
    assert sorted(QUERIES) == sorted(DF) == sorted(KEYS) == list(range(1, 23))
    assert LIMITS == {2: 100, 3: 10, 10: 20, 18: 100, 21: 100}
    for n in QUERIES:
        assert SOURCES[n] and len(set(SOURCES[n])) == len(SOURCES[n])
        assert not set(ANTI_ONLY.get(n, ())) & set(SOURCES[n])
