"""All 22 TPC-H queries in Spark SQL: ember's lineage equals the DuckDB oracle's, both ways."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from pyspark.sql import DataFrame, SparkSession

import ember
from ember import tpch
from tests.oracle.tpch_oracle import KEYS, Lineage, connect, oracle

SAMPLE = 50
LIMITED = {2, 3, 10, 18, 21}  # queries with a LIMIT: ember returns only some oracle rows


@pytest.fixture(scope="session")
def duck(tpch: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    con = connect(tpch)
    yield con
    con.close()


def check_against_oracle(
    lin: ember.Lineage, expected: Lineage, keys: tuple[str, ...], limited: bool, sizes: dict[str, int]
) -> None:
    """Backward for (a sample of) every output row, forward for a sample of source rows."""
    rows = lin.output().to_pylist()
    key_of = [tuple(r[k] for k in keys) for r in rows]
    if not limited:
        assert set(key_of) == set(expected) or (not keys and not expected), "output rows differ from the oracle's"
    assert len(set(key_of)) == len(key_of), "oracle keys must identify output rows"
    rng = random.Random(7)
    oids = list(range(len(rows)))
    for oid in sorted(rng.sample(oids, SAMPLE)) if len(oids) > SAMPLE else oids:
        want = expected.get(key_of[oid], {})
        trace = lin.backward(oids=[oid])
        for source in lin.sources:
            assert trace.ids(source).tolist() == sorted(want.get(source, ())), f"backward oid {oid}, {source}"
    for source in lin.sources:
        reached = sorted({r for k in key_of for r in expected.get(k, {}).get(source, ())})
        rids = rng.sample(reached, min(10, len(reached))) + [rng.randrange(0, sizes[source]) for _ in range(5)]
        for rid in rids:
            want_oids = [o for o, k in enumerate(key_of) if rid in expected.get(k, {}).get(source, ())]
            assert lin.forward(source, ids=[rid]).ids().tolist() == want_oids, f"forward {source} rid {rid}"


def _same_rows(lin: ember.Lineage, df: DataFrame) -> None:
    out = lin.output()
    plain = df.toArrow()
    got = sorted(map(repr, out.drop_columns(["ember_oid"]).to_pylist()))
    assert got == sorted(map(repr, plain.to_pylist())), "capture changed the job's result"


@pytest.mark.parametrize("n", range(1, 23))
def test_tpch_sql_lineage_equals_oracle(spark: SparkSession, tpch: Path, duck: duckdb.DuckDBPyConnection, n: int) -> None:
    df = tpch_query(spark, n)
    lin = ember.capture(df)
    if n not in LIMITED:
        _same_rows(lin, df)
    check_against_oracle(lin, oracle(duck, n), KEYS[n], n in LIMITED, table_sizes(duck))


def tpch_query(spark: SparkSession, n: int) -> DataFrame:
    return tpch.query(spark, n)


def table_sizes(duck: duckdb.DuckDBPyConnection) -> dict[str, int]:
    return {t: int(duck.execute(f"SELECT count(*) FROM {t}").fetchone()[0]) for t in tpch.TABLES}
