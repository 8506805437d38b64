"""Damaged stores: random byte flips and truncations in any file of a saved lineage store
(`lin.save`) or of a run store's `ember-run.json` (`ember run`) make loading and tracing
fail with a `StoreError` (or another `EmberError`), in one line, or give exactly the answers
of the undamaged store: never other answers.

One tiny lineage (a Parquet source with a kept copy of its reached rows, an in-memory
source, groupings for `source_where`) is captured and saved once per module; each example
damages a fresh copy. Example counts come from the Hypothesis profile (tests/conftest.py)."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from rich.console import Console

import ember
from ember.cli.runner import open_entry
from ember.cli.runstore import RUN_FILE, Entry, Run, read_run, write_run
from ember.errors import EmberError
from ember.store import files
from tests.query.test_fuzz_api import check_clean

DAMAGE = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
ENTRY = "job.py-7-collect"


def answers(lin: ember.Lineage) -> dict[str, Any]:
    """Everything a user could read from the lineage: output, sources, traces both ways,
    the traced rows, a trace restricted by a grouping."""
    out: dict[str, Any] = {"output": lin.output().to_pylist(), "sources": lin.sources}
    n = lin.output().num_rows
    for oid in range(n):
        t = lin.backward(oids=[oid])
        out[f"back {oid}"] = {s: t.ids(s).tolist() for s in lin.sources}
    every = lin.backward(oids=range(n))
    out["rows"] = {s: every.rows(s).to_pylist() for s in lin.sources}
    for s in lin.sources:
        for rid in range(lin._sources[s].rows):
            out[f"fwd {s} {rid}"] = lin.forward(s, ids=[rid]).ids().tolist()
    out["restricted"] = lin.backward(oids=[0], source_where={"orders": "cid = 1"}).ids("orders").tolist()
    return out


@pytest.fixture(scope="module")
def pristine(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    root = tmp_path_factory.mktemp("corrupt")
    oid = np.arange(60)
    pq.write_table(pa.table({"oid": oid, "cid": oid % 7, "amount": (oid * 13) % 17}), root / "orders.parquet", row_group_size=16)
    orders = spark.read.parquet(str(root / "orders.parquet"))
    customers = ember.source(spark.createDataFrame([(i, ["n", "s", "e"][i % 3]) for i in range(7)], "cid long, region string"), "customers")
    job = orders.filter("amount < 2").join(customers, "cid").groupBy("region").agg(F.sum("amount").alias("total")).orderBy("region")
    lin = ember.capture(job, workload=ember.Workload(partition_by={"orders": "cid"}))
    store = root / "store"
    lin.save(str(store), keep_rows=0.5)
    names = {p.relative_to(store).as_posix() for p in store.rglob("*") if p.is_file()}
    assert {"manifest.json", "output.parquet"} <= names
    assert any(n.startswith("kept/") for n in names) and any(n.startswith("groups/") for n in names)
    assert any(n.startswith("sources/") for n in names) and any(n.startswith("index/") for n in names)
    expected = answers(ember.load(str(store)))
    assert expected == answers(lin)
    return store, expected


@pytest.fixture(scope="module")
def run_store(pristine: tuple[Path, dict[str, Any]], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run store (`ember run`'s folder) with one eager entry: the lineage store above."""
    folder = tmp_path_factory.mktemp("run") / "runs"
    folder.mkdir()
    shutil.copytree(pristine[0], folder / ENTRY)
    entry = Entry(ENTRY, "collect", 7, 0, "eager", rows=3, sources=["customers", "orders"], seconds=0.5, time="2026-01-01T00:00:00Z")
    write_run(folder, Run("job.py", ["--n", "3"], "auto", "0" * 64, "r1", "2026-01-01T00:00:00Z", "ok", [entry]))
    return folder


@pytest.fixture()
def scratch() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="ember-damage-") as d:
        yield Path(d)


def damaged(data: bytes, draw: st.DataObject) -> bytes:
    """`data` with some bytes flipped, or cut short, or both."""
    out = bytearray(data)
    if draw.draw(st.booleans(), label="flip"):
        for _ in range(draw.draw(st.integers(1, 4), label="flips")):
            at = draw.draw(st.integers(0, len(out) - 1), label="at")
            out[at] ^= draw.draw(st.integers(1, 255), label="xor")
    if draw.draw(st.booleans(), label="truncate") or out == bytearray(data):
        out = out[: draw.draw(st.integers(0, len(out) - 1), label="length")]
    return bytes(out)


def store_files(store: Path) -> list[str]:
    return sorted(p.relative_to(store).as_posix() for p in store.rglob("*") if p.is_file())


def same_or_refused(load: Any, expected: dict[str, Any]) -> str:
    """Loads and traces: "refused" (a clean `EmberError`) or "same" (the undamaged answers)."""
    try:
        got = answers(load())
    except EmberError as e:
        check_clean(e)
        return "refused"
    assert got == expected, "a damaged store gave other answers"
    return "same"


@DAMAGE
@given(data=st.data())
def test_any_damaged_file_is_refused_or_harmless(pristine: tuple[Path, dict[str, Any]], data: st.DataObject) -> None:
    store, expected = pristine
    name = data.draw(st.sampled_from(store_files(store)), label="file")
    with tempfile.TemporaryDirectory(prefix="ember-damage-") as scratch:
        copy = Path(scratch) / "store"
        shutil.copytree(store, copy)
        victim = copy / name
        victim.write_bytes(damaged(victim.read_bytes(), data))
        same_or_refused(lambda: ember.load(str(copy)), expected)


def test_every_file_is_covered_by_a_checksum(pristine: tuple[Path, dict[str, Any]], scratch: Path) -> None:
    """A flip in any file of the store, the manifest included, is refused: none reads as
    the undamaged store (here in the middle of each file, where Parquet keeps its pages
    and its footer, which its own page checksums do not cover)."""
    store, expected = pristine
    manifest = json.loads((store / "manifest.json").read_text())
    assert set(manifest["checksums"]) == set(manifest["files"]) == set(store_files(store)) - {"manifest.json"}
    for name in store_files(store):
        for where in (0.5, 0.97):
            copy = scratch / f"{name.replace('/', '_')}-{where}"
            shutil.copytree(store, copy)
            data = bytearray((copy / name).read_bytes())
            at = int(len(data) * where)
            while name.endswith(".json") and chr(data[at]) in " \n":  # JSON's layout is no damage
                at += 1
            data[at] ^= 0x01
            (copy / name).write_bytes(bytes(data))
            assert same_or_refused(lambda: ember.load(str(copy)), expected) == "refused", (name, where)  # noqa: B023


def test_a_store_saved_before_checksums_still_loads(pristine: tuple[Path, dict[str, Any]], scratch: Path) -> None:
    store, expected = pristine
    copy = scratch / "v2"
    shutil.copytree(store, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    del manifest["checksums"], manifest[files.CHECKSUM]
    manifest["version"] = 2
    (copy / "manifest.json").write_text(json.dumps(manifest))
    assert answers(ember.load(str(copy))) == expected
    manifest["version"] = 3  # a current store without its checksum: damaged
    (copy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ember.StoreError, match="no checksum"):
        ember.load(str(copy))


def open_run(folder: Path) -> ember.Lineage:
    run = read_run(folder)
    lin = open_entry(folder, run, run.entry(ENTRY), Console(stderr=True))
    assert isinstance(lin, ember.Lineage)
    return lin


@DAMAGE
@given(data=st.data())
def test_a_damaged_run_manifest_is_refused_or_harmless(
    run_store: Path, pristine: tuple[Path, dict[str, Any]], data: st.DataObject
) -> None:
    expected = pristine[1]
    with tempfile.TemporaryDirectory(prefix="ember-damage-") as scratch:
        copy = Path(scratch) / "runs"
        shutil.copytree(run_store, copy)
        text = (copy / RUN_FILE).read_bytes()
        (copy / RUN_FILE).write_bytes(damaged(text, data))
        if same_or_refused(lambda: open_run(copy), expected) == "same":
            assert read_run(copy) == read_run(run_store), "a damaged run manifest read as another run"


def test_a_run_manifest_edited_by_hand_is_refused(run_store: Path, scratch: Path) -> None:
    """Edits that keep valid JSON (another entry status, other arguments) fail its
    checksum; a record of the wrong shape is refused even without one."""
    copy = scratch / "runs"
    shutil.copytree(run_store, copy)
    doc = json.loads((copy / RUN_FILE).read_text())
    for field, value in (("args", ["--n", "4"]), ("status", "failed")):
        (copy / RUN_FILE).write_text(json.dumps({**doc, field: value}))
        with pytest.raises(EmberError, match="damaged"):
            read_run(copy)
    old = {k: v for k, v in doc.items() if k != "checksum"} | {"version": 1}
    for entry in ({**doc["entries"][0], "status": "eagerly"}, {**doc["entries"][0], "name": "../x"}, {**doc["entries"][0], "rows": "3"}, {"x": 1}):
        (copy / RUN_FILE).write_text(json.dumps({**old, "entries": [entry]}))
        with pytest.raises(EmberError, match="damaged") as caught:
            read_run(copy)
        check_clean(caught.value)
    (copy / RUN_FILE).write_text(json.dumps(old))  # a manifest from before checksums
    assert read_run(copy) == read_run(run_store)
