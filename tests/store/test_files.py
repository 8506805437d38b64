"""Lineage stores: a saved and loaded lineage traces exactly as the captured one; damage is caught."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession

import ember
from ember.query import lineage as query_lineage
from ember.store import files
from ember.store.index import LineageIndex, as_plain


def same_traces(a: ember.Lineage, b: ember.Lineage) -> None:
    """Every output row backward and every source row forward give the same answer."""
    assert a.sources == b.sources
    assert a.output().equals(b.output())
    n = a.output().num_rows
    for oid in range(n):
        ta, tb = a.backward(oids=[oid]), b.backward(oids=[oid])
        for s in a.sources:
            assert ta.ids(s).tolist() == tb.ids(s).tolist(), (oid, s)
    for s in a.sources:
        rows = a._sources[s].rows
        for rid in range(min(rows, 200)):
            assert a.forward(s, ids=[rid]).ids().tolist() == b.forward(s, ids=[rid]).ids().tolist(), (s, rid)


@pytest.fixture(scope="module")
def sales(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> DataFrame:
    path = tmp_path_factory.mktemp("store") / "sales.parquet"
    n = 300
    shops = np.array(["a", "b", "c"])[np.arange(n) % 7 % 3]
    pq.write_table(
        pa.table({"id": np.arange(n), "shop": shops, "amount": (np.arange(n) * 37) % 101}), path, row_group_size=64
    )
    return spark.read.parquet(str(path))


@pytest.fixture(scope="module")
def lin(spark: SparkSession, sales: DataFrame) -> ember.Lineage:
    shops = spark.createDataFrame([("a", "north"), ("b", "south"), ("c", "north")], "shop string, region string")
    totals = sales.filter("amount > 10").join(shops, "shop").groupBy("region", "shop").sum("amount")
    return ember.capture(totals.orderBy("region", "shop"))


def test_saved_store_traces_as_captured(lin: ember.Lineage, tmp_path: Path) -> None:
    lin.save(str(tmp_path / "s"))
    loaded = ember.load(str(tmp_path / "s"))
    same_traces(lin, loaded)
    t = loaded.backward(oids=[0])
    assert t.rows("sales").column("ember_rid").to_pylist() == t.ids("sales").tolist()
    assert t.rows("memory").num_rows == 1  # an in-memory source's rows travel with the store
    assert loaded.plan == lin.plan and "Aggregate" in loaded.plan


def test_compressed_index_traces_as_plain_arrays(lin: ember.Lineage) -> None:
    plain = ember.Lineage(lin.output().drop_columns(["ember_oid"]), as_plain(lin._index), lin._sources.values())
    same_traces(lin, plain)
    assert lin.index_bytes < plain.index_bytes


def test_a_filtered_scan_is_a_handful_of_runs(spark: SparkSession, sales: DataFrame, tmp_path: Path) -> None:
    lin = ember.capture(sales.filter("id >= 100 AND id < 250"))
    index: LineageIndex = lin._index
    assert index.nbytes <= 3 * 8 * 2, "150 consecutive rids should be one run"
    lin.save(str(tmp_path / "f"))
    assert ember.load(str(tmp_path / "f")).backward(oids=[0, 149]).ids("sales").tolist() == [100, 249]


def test_save_refuses_to_replace_unless_asked(lin: ember.Lineage, tmp_path: Path) -> None:
    lin.save(str(tmp_path / "s"))
    with pytest.raises(ember.StoreError, match="exists"):
        lin.save(str(tmp_path / "s"))
    lin.save(str(tmp_path / "s"), overwrite=True)
    assert sorted(os.listdir(tmp_path)) == ["s"]


def test_a_crash_mid_save_leaves_nothing_that_loads(
    lin: ember.Lineage, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def crash(self: object, name: str, col: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(files._Writer, "column", crash)
    with pytest.raises(KeyboardInterrupt):
        lin.save(str(tmp_path / "s"))
    assert os.listdir(tmp_path) == []


def _saved(lin: ember.Lineage, tmp_path: Path) -> Path:
    path = tmp_path / "s"
    lin.save(str(path))
    return path


def test_newer_format_is_refused(lin: ember.Lineage, tmp_path: Path) -> None:
    path = _saved(lin, tmp_path)
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["version"] = files.VERSION + 1
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ember.StoreError, match="newer ember"):
        ember.load(str(path))


def test_not_a_store(tmp_path: Path) -> None:
    with pytest.raises(ember.StoreError, match="not an ember lineage store"):
        ember.load(str(tmp_path))
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(ember.StoreError, match="damaged"):
        ember.load(str(tmp_path))


def _biggest_index_file(path: Path) -> Path:
    return max((path / "index").iterdir(), key=lambda p: p.stat().st_size)


def test_truncated_or_missing_index_file(lin: ember.Lineage, tmp_path: Path) -> None:
    path = _saved(lin, tmp_path)
    victim = _biggest_index_file(path)
    victim.write_bytes(victim.read_bytes()[:-10])
    with pytest.raises(ember.StoreError, match="truncated"):
        ember.load(str(path))
    victim.unlink()
    with pytest.raises(ember.StoreError, match="missing"):
        ember.load(str(path))


def test_corrupted_bytes_are_caught(lin: ember.Lineage, tmp_path: Path) -> None:
    path = _saved(lin, tmp_path)
    for victim in sorted((path / "index").iterdir()):
        data = bytearray(victim.read_bytes())
        data[4 + (len(data) - 12) // 3] ^= 0xFF  # inside the first data page, not the footer
        victim.write_bytes(bytes(data))
    with pytest.raises(ember.StoreError, match="damaged"):
        loaded = ember.load(str(path))
        for oid in range(loaded.output().num_rows):
            loaded.backward(oids=[oid])


def test_manifest_that_does_not_match_the_files(lin: ember.Lineage, tmp_path: Path) -> None:
    path = _saved(lin, tmp_path)
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["output"]["rows"] += 1
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ember.StoreError, match="checksum"):  # edited: its checksum no longer fits
        ember.load(str(path))
    manifest[files.CHECKSUM] = files.manifest_checksum(manifest)  # re-signed: the files still disagree
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ember.StoreError, match="does not match"):
        ember.load(str(path))


def test_csv_source_rows_need_spark_after_load(spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    csv = tmp_path / "people.csv"
    csv.write_text("name,age\n" + "".join(f"p{i},{i % 50}\n" for i in range(120)))
    df = spark.read.option("header", True).option("inferSchema", True).csv(str(csv))
    lin = ember.capture(df.filter("age > 40"))
    lin.save(str(tmp_path / "s"))
    bare = ember.load(str(tmp_path / "s"))
    assert bare.backward(oids=[0]).ids("people").tolist() == [41]
    monkeypatch.setattr(query_lineage, "_session", lambda: None)  # a process with no Spark session
    with pytest.raises(ember.EmberError, match=r"needs Spark: ember\.load\(path, spark\)"):
        bare.backward(oids=[0]).rows("people")
    monkeypatch.undo()  # with one, a store loaded without it reads the rows through it
    assert ember.load(str(tmp_path / "s")).backward(oids=[0]).rows("people").column("name").to_pylist() == ["p41"]
    again = ember.load(str(tmp_path / "s"), spark)
    rows = again.backward(oids=[0, 1]).rows("people")
    assert rows.column("name").to_pylist() == ["p41", "p42"]
    assert again.forward("people", where="name = 'p99'").ids().tolist() == [lin.output().column("name").to_pylist().index("p99")]


def test_export_json_lists_each_output_rows_lineage(lin: ember.Lineage, tmp_path: Path) -> None:
    lin.export_json(str(tmp_path / "l.json"))
    doc = json.loads((tmp_path / "l.json").read_text())
    assert doc["format"] == "ember-lineage-json" and doc["version"] == 1
    assert [e["oid"] for e in doc["lineage"]] == list(range(lin.output().num_rows))
    for entry in doc["lineage"]:
        trace = lin.backward(oids=[entry["oid"]])
        assert entry["sources"] == {s: trace.ids(s).tolist() for s in trace.sources}
    assert set(doc["sources"]) == set(lin.sources)
    lin.export_json(str(tmp_path / "one.json"), oids=[1])
    assert [e["oid"] for e in json.loads((tmp_path / "one.json").read_text())["lineage"]] == [1]
