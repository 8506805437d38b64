"""A process killed at any point of `lin.save` leaves at its path the store that was there
before or the new one, never one that answers otherwise (`store.files.atomic_store`).

Each example saves a lineage over a path that holds another (or nothing) in a child
process, SIGKILLs it after a random share of a save's own duration, and checks what
`ember.load` then finds against both lineages' answers. Example counts come from the
Hypothesis profile (tests/conftest.py); no JVM: the lineages are built from arrays."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ember
from ember.plan.sources import Source
from ember.store.columns import encode
from ember.store.files import Stored, write_store
from ember.store.index import Level, LineageIndex

ROWS, SOURCE_ROWS = 400_000, 50_000
PROBE = np.array([0, 1, 777, ROWS // 2, ROWS - 1], dtype=np.int64)
CHILD = """
import sys
import ember
lin = ember.load(sys.argv[1])
print("loaded", flush=True)
lin.save(sys.argv[2], overwrite=True)
print("saved", flush=True)
"""


def _store(path: Path, seed: int) -> np.ndarray:
    """A lineage of ROWS output rows over one in-memory source, saved at `path`; its rids."""
    rng = np.random.default_rng(seed)
    rids = rng.integers(0, SOURCE_ROWS, ROWS).astype(np.int64)
    src = Source("memory:src", "src", "memory", SOURCE_ROWS, data=pa.table({"v": rng.integers(0, 9, SOURCE_ROWS)}))
    index = LineageIndex(Level(ROWS, ((src.key, encode(rids)),), ()), ())
    write_store(str(path), Stored(pa.table({"x": np.arange(ROWS) * seed}), index, (src,)))
    return rids


def _answers(path: Path) -> tuple[list[int], list[list[int]]]:
    lin = ember.load(str(path))
    return lin.output().column("x").to_pylist()[:3], [lin.backward(oids=[int(o)]).ids("src").tolist() for o in PROBE]


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, float]:
    """The lineage a child saves (`new`), the one it replaces (`old`), and how long a save takes."""
    root = tmp_path_factory.mktemp("killed")
    _store(root / "old", 3)
    _store(root / "new", 5)
    started = time.perf_counter()
    ember.load(str(root / "new")).save(str(root / "timed"))
    return root / "old", root / "new", time.perf_counter() - started


@settings(settings.get_profile("spark-jobs"), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(share=st.floats(0, 1.5), replacing=st.booleans())
def test_a_save_killed_anywhere_leaves_the_old_store_or_the_new(
    stores: tuple[Path, Path, float], tmp_path_factory: pytest.TempPathFactory, share: float, replacing: bool
) -> None:
    old, new, took = stores
    target = tmp_path_factory.mktemp("target") / "s"
    if replacing:
        shutil.copytree(old, target)
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(new), str(target)], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline().strip() == "loaded"
    time.sleep(share * took)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    wanted = [_answers(new)] + ([_answers(old)] if replacing else [])
    try:
        found = _answers(target)
    except ember.StoreError as e:
        assert not replacing, f"the store saved before was lost: {e}"
        assert "not an ember lineage store" in str(e)
        return
    assert found in wanted, "the path holds a store that answers as neither lineage"


def test_a_store_moved_aside_by_a_killed_save_is_put_back(tmp_path: Path) -> None:
    """The one window a kill leaves no store at the path, between `atomic_store`'s renames:
    the store it moved aside is back at the next load (and at the next save)."""
    path = tmp_path / "s"
    _store(path, 3)
    before = _answers(path)
    path.rename(tmp_path / "s.ember-old-00000000000000000001-abcd1234")
    path.with_name("s.ember-tmp-abcd1234").mkdir()  # the half-written new one, ignored
    assert _answers(path) == before
    _store(tmp_path / "other", 5)
    other = ember.load(str(tmp_path / "other"))
    path.rename(tmp_path / "s.ember-old-00000000000000000002-abcd1234")
    with pytest.raises(ember.StoreError, match="exists"):  # put back first: a save without overwrite refuses
        other.save(str(path))
    assert _answers(path) == before
