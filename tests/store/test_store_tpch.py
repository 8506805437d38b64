"""Every TPC-H query's store is lossless: the loaded, encoded index traces exactly as the
uncompressed arrays (backward for a sample of output rows, forward for a sample of each
source's rids, including rids in no lineage), and its rows (from the store's row copies
where it kept one) are the source file's rows. The in-memory encoded index itself is
checked against the DuckDB oracle by tests/tpch; encode/decode by tests/store/test_columns."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

import ember
from devkit import tpch as tpch_queries
from ember.plan.sources import local_path
from ember.store.index import as_plain

SAMPLE = 40


@pytest.mark.parametrize("n", range(1, 23))
def test_tpch_store_round_trip(spark: SparkSession, tpch: Path, tmp_path: Path, n: int) -> None:
    lin = ember.capture(tpch_queries.query(spark, n))
    lin.save(str(tmp_path / "store"))
    loaded = ember.load(str(tmp_path / "store"))
    plain = as_plain(lin._index)
    assert loaded.output().equals(lin.output())
    rng = np.random.default_rng(n)
    rows = loaded.output().num_rows
    oids = np.unique(rng.integers(0, rows, SAMPLE)) if rows > SAMPLE else np.arange(rows)
    sources = {s: loaded._sources[s] for s in loaded.sources}
    for oid in oids:
        want = plain.backward(np.array([oid]))
        trace = loaded.backward(oids=[int(oid)])
        for name, src in sources.items():
            assert trace.ids(name).tolist() == want.get(src.key, np.empty(0)).tolist(), (oid, name)
    many = loaded.backward(oids=oids.tolist())
    want_many = plain.backward(oids)
    for name, src in sources.items():
        assert many.ids(name).tolist() == want_many.get(src.key, np.empty(0)).tolist(), name
        reached = want_many.get(src.key, np.empty(0, np.int64))
        picks = list(rng.choice(reached, min(10, reached.size), replace=False)) if reached.size else []
        for rid in [*picks, *rng.integers(0, src.rows, 5)]:
            got = loaded.forward(name, ids=[int(rid)]).ids().tolist()
            assert got == plain.forward(src.key, np.array([rid])).tolist(), (name, rid)
        (file,) = src.files
        whole = pq.read_table(local_path(file.uri))
        plain_strings = [pa.field(f.name, pa.string()) if pa.types.is_string_view(f.type) else f for f in whole.schema]
        want_rows = whole.cast(pa.schema(plain_strings)).take(pa.array(many.ids(name)[:300]))
        got_rows = many.rows(name, limit=300)
        assert got_rows.drop_columns(["ember_rid"]).to_pylist() == want_rows.to_pylist(), name
