"""Rows fetched by rid equal the files' own rows, however few or many and wherever they lie."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ember.errors import StaleSourceError
from ember.fetch.rows import read_rows
from ember.plan.sources import Source, SourceFile, file_facts

SIZES = (700, 0, 1300)  # rows per file: an empty file between two others


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Source, pa.Table]:
    """A source of three files in small row groups, and its rows as pyarrow reads them."""
    folder = tmp_path_factory.mktemp("fetch")
    parts, entries, offset = [], [], 0
    for n, size in enumerate(SIZES):
        ids = np.arange(offset, offset + size)
        table = pa.table({"id": ids, "tag": pa.array([None if i % 11 == 0 else f"t{i % 13}" for i in ids], pa.string())})
        path = folder / f"part-{n}.parquet"
        pq.write_table(table, path, row_group_size=64)
        entries.append(SourceFile(path.as_uri(), *file_facts(path.as_uri()), size, offset))
        parts.append(table)
        offset += size
    return Source("k", "events", "parquet", offset, tuple(entries)), pa.concat_tables(parts)


@settings(deadline=None)
@given(data=st.data())
def test_rows_fetched_by_rid_are_the_files_rows(files: tuple[Source, pa.Table], data: st.DataObject) -> None:
    source, whole = files
    kind = data.draw(st.sampled_from(["scattered", "run", "all"]))
    if kind == "scattered":
        rids = np.array(sorted(data.draw(st.sets(st.integers(0, source.rows - 1), max_size=300))), dtype=np.int64)
    elif kind == "run":
        start = data.draw(st.integers(0, source.rows - 1))
        rids = np.arange(start, min(source.rows, start + data.draw(st.integers(1, 500))), dtype=np.int64)
    else:
        rids = np.arange(source.rows, dtype=np.int64)
    got = read_rows(source, rids)
    expected = whole.take(pa.array(rids, pa.int64())).append_column("ember_rid", pa.array(rids, pa.int64()))
    assert got.to_pylist() == expected.to_pylist()


def test_rows_of_a_changed_file_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"x": [1, 2, 3]}), path)
    source = Source("k", "t", "parquet", 3, (SourceFile(path.as_uri(), *file_facts(path.as_uri()), 3, 0),))
    assert read_rows(source, np.array([1])).column("x").to_pylist() == [2]
    pq.write_table(pa.table({"x": [1, 2, 3, 4]}), path)
    with pytest.raises(StaleSourceError, match="changed since capture"):
        read_rows(source, np.array([1]))
