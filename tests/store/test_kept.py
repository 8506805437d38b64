"""Row copies, held by a live lineage or kept in a store: fetched rows equal the source's, and
the copy is really what serves them."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession

import ember
from ember.fetch import rows as fetch_rows
from ember.fetch.rows import read_rows
from ember.store import kept
from ember.store.kept import held_copies

N = 2000


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("kept") / "events.parquet"
    ids = np.arange(N)
    table = pa.table({"id": ids, "shop": np.array(["a", "b", "c", "d"])[ids * 7 % 4], "amount": ids * 13 % 97 * 1.5})
    pq.write_table(table, path, row_group_size=128)
    return path


@pytest.fixture(scope="module")
def events(spark: SparkSession, source: Path) -> DataFrame:
    return spark.read.parquet(str(source))


def oracle_rows(source: Path, rids: np.ndarray) -> pa.Table:
    """The source rows by row number, read whole by pyarrow (no ember code on the path)."""
    table = pq.read_table(source).take(pa.array(rids, type=pa.int64()))
    return table.append_column("ember_rid", pa.array(rids, type=pa.int64()))


def saved(lin: ember.Lineage, path: Path, **options: float) -> tuple[ember.Lineage, dict]:
    lin.save(str(path), **options)
    return ember.load(str(path)), json.loads((path / "manifest.json").read_text())


def settled(lin: ember.Lineage) -> ember.Lineage:
    deadline = time.monotonic() + 60
    while not lin.ready:
        assert time.monotonic() < deadline, "the copy of the reached rows was never made"
        time.sleep(0.01)
    return lin


def no_source_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object) -> None:
        raise AssertionError("read the source file instead of the store's copy")

    monkeypatch.setattr(fetch_rows, "_parquet_rows", refuse)


def test_a_small_share_is_copied_and_serves_the_rows(
    events: DataFrame, source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lin = ember.capture(events.filter("id % 50 = 7").groupBy("shop").sum("amount").orderBy("shop"))
    loaded, manifest = saved(lin, tmp_path / "s")
    (entry,) = manifest["sources"]
    assert entry["kept"]["rows"] == N // 50
    no_source_reads(monkeypatch)
    for oid in range(loaded.output().num_rows):
        trace = loaded.backward(oids=[oid])
        ids = trace.ids("events")
        assert ids.size and ids.tolist() == lin.backward(oids=[oid]).ids("events").tolist()
        assert trace.rows("events").equals(oracle_rows(source, ids))
        assert trace.rows("events", offset=1, limit=2).equals(oracle_rows(source, ids[1:3]))


def test_a_large_share_or_keep_rows_0_copies_nothing(events: DataFrame, source: Path, tmp_path: Path) -> None:
    wide = ember.capture(events.filter("id % 2 = 0").groupBy("shop").count())
    loaded, manifest = saved(wide, tmp_path / "wide")
    assert "kept" not in manifest["sources"][0] and not os.listdir(tmp_path / "wide" / "kept")
    ids = loaded.backward(oids=[0]).ids("events")
    assert loaded.backward(oids=[0]).rows("events").equals(oracle_rows(source, ids))
    narrow = ember.capture(events.filter("id = 5"))
    _, manifest = saved(narrow, tmp_path / "none", keep_rows=0)
    assert "kept" not in manifest["sources"][0]


def test_rids_outside_the_copy_are_read_from_the_source(events: DataFrame, source: Path, tmp_path: Path) -> None:
    loaded, _ = saved(ember.capture(events.filter("id < 30")), tmp_path / "s")
    src = loaded._sources["events"]
    assert src.kept.read(np.array([5, 40])) is None
    assert read_rows(src, np.array([5, 40, 1999])).equals(oracle_rows(source, np.array([5, 40, 1999])))


def test_a_damaged_copy_is_refused(events: DataFrame, tmp_path: Path) -> None:
    lin = ember.capture(events.filter("id < 30"))
    path = tmp_path / "s"
    lin.save(str(path))
    (copy,) = (path / "kept").iterdir()
    data = bytearray(copy.read_bytes())
    data[4 + (len(data) - 12) // 3] ^= 0xFF  # inside a data page, not the footer
    copy.write_bytes(bytes(data))
    with pytest.raises(ember.StoreError, match="damaged"):
        ember.load(str(path)).backward(oids=[0]).rows("events")
    copy.write_bytes(bytes(data[:-10]))
    with pytest.raises(ember.StoreError, match="truncated"):
        ember.load(str(path))


def test_a_changed_source_is_refused_even_with_a_copy(spark: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "small.parquet"
    pq.write_table(pa.table({"id": np.arange(100)}), path)
    lin = ember.capture(spark.read.parquet(str(path)).filter("id = 3"))
    lin.save(str(tmp_path / "s"))
    pq.write_table(pa.table({"id": np.arange(101)}), path)
    with pytest.raises(ember.StaleSourceError):
        ember.load(str(tmp_path / "s")).backward(oids=[0]).rows("small")


def test_a_live_lineage_holds_a_small_share_once_ready(
    events: DataFrame, source: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lin = settled(ember.capture(events.filter("id % 50 = 7").groupBy("shop").sum("amount").orderBy("shop")))
    assert lin._sources["events"].kept.table.num_rows == N // 50
    no_source_reads(monkeypatch)
    for oid in range(lin.output().num_rows):
        trace = lin.backward(oids=[oid])
        ids = trace.ids("events")
        assert ids.size and trace.rows("events").equals(oracle_rows(source, ids))
        assert trace.rows("events", offset=1, limit=2).equals(oracle_rows(source, ids[1:3]))


@pytest.mark.parametrize("strategy", ["inject", "defer"])
def test_keep_rows_0_or_a_large_share_holds_nothing(events: DataFrame, source: Path, strategy: str) -> None:
    for lin in (
        ember.capture(events.filter("id = 5"), strategy=strategy, keep_rows=0),
        ember.capture(events.filter("id % 2 = 0").groupBy("shop").count(), strategy=strategy),
    ):
        assert settled(lin)._sources["events"].kept is None
        ids = lin.backward(oids=[0]).ids("events")
        assert lin.backward(oids=[0]).rows("events").equals(oracle_rows(source, ids))
    assert settled(ember.capture(events.filter("id = 5"), strategy=strategy))._sources["events"].kept is not None


def test_a_copy_is_not_made_of_a_changed_source_nor_past_its_row_bound(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "small.parquet"
    pq.write_table(pa.table({"id": np.arange(100)}), path)
    lin = settled(ember.capture(spark.read.parquet(str(path)).filter("id < 5"), keep_rows=0))
    (src,) = lin._sources.values()
    reached = {src.key: np.arange(5)}
    assert held_copies([src], reached, 0.1)["small"].kept.table.num_rows == 5
    monkeypatch.setattr(kept, "HOLD_ROWS", 4)
    assert held_copies([src], reached, 0.1) == {}
    monkeypatch.undo()
    pq.write_table(pa.table({"id": np.arange(101)}), path)
    assert held_copies([src], reached, 0.1) == {}


def test_a_source_changed_after_its_copy_is_refused(spark: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "small.parquet"
    pq.write_table(pa.table({"id": np.arange(100)}), path)
    lin = settled(ember.capture(spark.read.parquet(str(path)).filter("id = 3")))
    assert lin._sources["small"].kept is not None
    pq.write_table(pa.table({"id": np.arange(101)}), path)
    with pytest.raises(ember.StaleSourceError):
        lin.backward(oids=[0]).rows("small")


def test_keep_rows_is_a_share(events: DataFrame) -> None:
    with pytest.raises(ValueError, match="keep_rows"):
        ember.capture(events, keep_rows=2)


def test_save_writes_the_copy_the_lineage_holds(
    events: DataFrame, source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lin = settled(ember.capture(events.filter("id % 50 = 7")))

    def refuse(*_: object) -> None:
        raise AssertionError("read the rows again instead of writing the held copy")

    monkeypatch.setattr(kept, "read_rows", refuse)
    loaded, manifest = saved(lin, tmp_path / "s")
    assert manifest["sources"][0]["kept"]["rows"] == N // 50
    ids = loaded.backward(oids=range(loaded.output().num_rows)).ids("events")
    assert loaded.backward(oids=range(loaded.output().num_rows)).rows("events").equals(oracle_rows(source, ids))
