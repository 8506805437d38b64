"""Saved workflows load back with the same answers; damaged folders raise StoreError."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from ember import arrays
from ember.arrays import files
from ember.arrays.provrc import encode
from ember.errors import StoreError


def workflow(
    forward_tables: bool = False,
) -> tuple[arrays.Workflow, arrays.TrackedArray, arrays.TrackedArray]:
    wf = arrays.Workflow(forward_tables=forward_tables)
    a = wf.track(np.random.default_rng(0).random((20, 10)), name="a")
    b = wf.track(np.ones(10), name="w")
    c = np.sort(np.cumsum(a * b, axis=0), axis=1)
    return wf, a, c


@pytest.mark.parametrize("forward_tables", [False, True])
def test_round_trip(tmp_path: Path, forward_tables: bool) -> None:
    wf, a, c = workflow(forward_tables)
    wf.save(str(tmp_path / "lin"))
    loaded = arrays.load(str(tmp_path / "lin"))
    assert loaded.lineage_bytes() == wf.lineage_bytes()
    assert all((e.forward is not None) == forward_tables for e in loaded.edges)
    assert [n.shape for n in loaded.nodes] == [n.shape for n in wf.nodes]
    for cells in ([(4, 2)], [(19, 9), (0, 0)]):
        np.testing.assert_array_equal(
            loaded.backward(c.name, cells, to="a"), wf.backward(c, cells, to=a)
        )
        np.testing.assert_array_equal(
            loaded.forward("a", cells, to=c.name), wf.forward(a, cells, to=c)
        )
    manifest = json.loads((tmp_path / "lin" / "manifest.json").read_text())
    assert manifest["format"] == "ember-array-lineage" and manifest["version"] == 1
    assert [x["name"] for x in manifest["arrays"][:2]] == ["a", "w"]
    assert not [p for p in os.listdir(tmp_path) if "ember-tmp" in p]


def test_existing_folder_needs_overwrite(tmp_path: Path) -> None:
    wf, _, _ = workflow()
    wf.save(str(tmp_path / "lin"))
    with pytest.raises(StoreError, match="exists"):
        wf.save(str(tmp_path / "lin"))
    wf.save(str(tmp_path / "lin"), overwrite=True)
    assert arrays.load(str(tmp_path / "lin")).lineage_bytes() == wf.lineage_bytes()


def test_newer_version_is_refused(tmp_path: Path) -> None:
    workflow()[0].save(str(tmp_path / "lin"))
    path = tmp_path / "lin" / "manifest.json"
    manifest = json.loads(path.read_text())
    path.write_text(json.dumps(manifest | {"version": 2}))
    with pytest.raises(StoreError, match="newer"):
        arrays.load(str(tmp_path / "lin"))


def test_truncated_and_corrupted_tables_are_refused(tmp_path: Path) -> None:
    workflow()[0].save(str(tmp_path / "lin"))
    table = tmp_path / "lin" / "tables" / "0.backward.npy"
    data = table.read_bytes()
    table.write_bytes(data[:-3])
    with pytest.raises(StoreError, match="truncated"):
        arrays.load(str(tmp_path / "lin"))
    table.write_bytes(data[:-1] + bytes([data[-1] ^ 0xFF]))
    with pytest.raises(StoreError, match="damaged"):
        arrays.load(str(tmp_path / "lin"))
    (tmp_path / "lin" / "manifest.json").write_text("{not json")
    with pytest.raises(StoreError, match="damaged"):
        arrays.load(str(tmp_path / "lin"))
    with pytest.raises(StoreError, match="no manifest"):
        arrays.load(str(tmp_path / "nothing"))


def test_uri_paths_like_the_row_store(tmp_path: Path) -> None:
    wf, a, c = workflow()
    wf.save(f"file://{tmp_path}/lin")
    loaded = arrays.load(f"file://{tmp_path}/lin")
    np.testing.assert_array_equal(
        loaded.backward(c.name, [(3, 3)], to="a"), wf.backward(c, [(3, 3)], to=a)
    )


def test_a_failed_save_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wf, _, _ = workflow()
    calls = []

    def fail_late(table: object) -> bytes:
        calls.append(table)
        if len(calls) > 2:
            raise OSError("disk full")
        return encode(table)  # type: ignore[arg-type]

    monkeypatch.setattr(files, "encode", fail_late)
    with pytest.raises(OSError, match="disk full"):
        wf.save(str(tmp_path / "lin"))
    assert os.listdir(tmp_path) == []
