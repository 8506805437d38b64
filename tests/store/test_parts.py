"""Columns made of parts (`store.parts`) answer as the one array they tile, in a store too."""

from __future__ import annotations

import json
from pathlib import Path

import hypothesis.strategies as st
import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pytest
from hypothesis import given, settings

import ember
from ember.store import files
from ember.store.columns import Plain, encode
from ember.store.files import Stored, open_column, read_store, write_column, write_store
from ember.store.index import Level, LineageIndex
from ember.store.parts import Parts, tiled


@st.composite
def parted(draw: st.DrawFn) -> tuple[np.ndarray, list[int]]:
    """A column with stretches of arithmetic runs and of noise, and where its parts start."""
    pieces = draw(st.lists(st.tuples(st.integers(1, 40), st.integers(-3, 3), st.integers(0, 10**6), st.booleans()),
                           min_size=1, max_size=8))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    chunks = [base + step * np.arange(n) if run else rng.integers(0, 10**6, n) for n, step, base, run in pieces]
    values = np.concatenate(chunks).astype(np.int64)
    cuts = draw(st.lists(st.integers(1, max(values.size - 1, 1)), max_size=6, unique=True)) if values.size > 1 else []
    return values, [0, *sorted(c for c in cuts if c < values.size)]


def write_parts(root: Path, values: np.ndarray, starts: list[int]) -> tuple[dict, dict[str, int]]:
    """Each part encoded and written as the executors write theirs; the column's manifest entry."""
    fs = pafs.LocalFileSystem()
    (root / "index").mkdir(parents=True, exist_ok=True)
    metas, sizes = [], {}
    for first, end in zip(starts, [*starts[1:], values.size], strict=True):
        meta, size = write_column(fs, str(root), f"index/{first:012d}.v.parquet", encode(values[first:end]))
        metas.append({**meta, "first": first})
        sizes[meta["file"]] = size
    return {"encoding": "parts", "rows": int(values.size), "parts": metas}, sizes


@settings(deadline=None)
@given(parted(), st.data())
def test_parts_answer_as_the_array_they_tile(tmp_path_factory: pytest.TempPathFactory, case: tuple, data: st.DataObject) -> None:
    values, starts = case
    root = tmp_path_factory.mktemp("parts")
    meta, sizes = write_parts(root, values, starts)
    column = open_column(pafs.LocalFileSystem(), str(root), meta, sizes)
    assert isinstance(column, Parts) and column.size == values.size
    plain = Plain(values)
    rows = np.array(sorted(data.draw(st.lists(st.integers(0, values.size - 1), max_size=30))), dtype=np.int64)
    assert np.array_equal(column.take(rows), plain.take(rows))
    probe = np.unique(np.concatenate([data.draw(st.sampled_from([values, values + 1])), [0, 10**6 + 7]]))
    probe = probe[probe >= 0]
    assert np.array_equal(column.hits(probe), plain.hits(probe))
    assert np.array_equal(column.decode(), values)


def test_parts_must_tile_the_rows() -> None:
    assert tiled([{"first": 0, "rows": 3}, {"first": 3, "rows": 2}], 5)
    assert not tiled([{"first": 0, "rows": 3}, {"first": 4, "rows": 1}], 5)  # a gap
    assert not tiled([{"first": 0, "rows": 3}, {"first": 2, "rows": 3}], 5)  # an overlap
    assert not tiled([{"first": 0, "rows": 3}], 5)  # short


def _parted_store(tmp_path: Path) -> Path:
    """A store whose output level's one rid column is made of parts."""
    values = np.array([5, 6, 7, 8, 1, 1, 1, 9, 2, 40], dtype=np.int64)
    meta, sizes = write_parts(tmp_path / "scratch", values, [0, 4, 7])
    column = open_column(pafs.LocalFileSystem(), str(tmp_path / "scratch"), meta, sizes)
    index = LineageIndex(Level(values.size, (("src", column),), ()), ())
    write_store(str(tmp_path / "s"), Stored(pa.table({"x": np.arange(values.size)}), index, ()))
    return tmp_path / "s"


def test_a_store_of_parts_loads_and_checks_them(tmp_path: Path) -> None:
    path = _parted_store(tmp_path)
    loaded = read_store(str(path))
    assert np.array_equal(loaded.index.backward(np.array([0, 4, 9]))["src"], [1, 5, 40])
    assert np.array_equal(loaded.index.forward("src", np.array([1])), [4, 5, 6])
    manifest = json.loads((path / "manifest.json").read_text())
    parts = manifest["output_level"]["rids"][0]["column"]["parts"]
    assert [p["first"] for p in parts] == [0, 4, 7]
    victim = path / parts[1]["file"]
    victim.write_bytes(victim.read_bytes()[:-5])
    with pytest.raises(ember.StoreError, match="truncated"):
        read_store(str(path))


def test_a_store_whose_parts_do_not_tile_is_refused(tmp_path: Path) -> None:
    path = _parted_store(tmp_path)
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["output_level"]["rids"][0]["column"]["parts"][1]["first"] = 5
    manifest[files.CHECKSUM] = files.manifest_checksum(manifest)  # signed: the parts check, not the checksum, refuses it
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ember.StoreError, match="do not cover"):
        read_store(str(path))
