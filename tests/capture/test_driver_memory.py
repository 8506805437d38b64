"""Lineage bigger than the driver could hold is built by the executors: a capture with a
small driver and `spark.ember.driverRids` forced low captures, saves and traces a
generated job's lineage without an out-of-memory error, and the traces equal an oracle's
computed from the data's definition (`spark.range`: row `i` has id and rid `i`).

The job runs in a process of its own (`memory_job.py`): a driver's memory is fixed when
its JVM starts. bench/memory.py measures the same at sizes far past the driver's heap.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.jvm

ROWS = 4_000_000  # 32 MB of rids: what a minute of CI builds through the executors on two busy cores
GROUPS = 8


def test_lineage_past_driver_rids_is_built_by_the_executors_and_traces_exactly(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "tests.capture.memory_job", str(tmp_path), str(ROWS), str(GROUPS), "512m", "1000"],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    built = json.loads((tmp_path / "built.json").read_text())
    assert built["executors"], "the lineage came back through the driver: driverRids did not bound it"
    assert built["groups"] == list(range(GROUPS))  # output row g is group g (ordered by g)
    assert built["rids"] == ROWS
    counts = np.load(tmp_path / "counts.npy")
    traced = np.split(np.load(tmp_path / "backward.npy"), np.cumsum(counts)[:-1])
    for g, ids in enumerate(traced):
        assert np.array_equal(ids, np.arange(g, ROWS, GROUPS, dtype=np.int64)), f"group {g}"
    forward = json.loads((tmp_path / "forward.json").read_text())
    assert forward == {str(r): [r % GROUPS] for r in (0, ROWS // 3, ROWS - 1)}
