"""Comparing a captured TPC-H lineage with the DuckDB oracle's (shared by SQL and DataFrame tests)."""

from __future__ import annotations

import random

import duckdb

import ember
from ember import tpch
from tests.oracle.tpch_oracle import Lineage

SAMPLE = 50
LIMITED = {2, 3, 10, 18, 21}  # queries with a LIMIT: ember returns only some oracle rows


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


def table_sizes(duck: duckdb.DuckDBPyConnection) -> dict[str, int]:
    return {t: int(duck.execute(f"SELECT count(*) FROM {t}").fetchone()[0]) for t in tpch.TABLES}
