"""Where lineage lives and what a trace moves: tables stay with the partitions that made
them, only successful task attempts leave tables, and traces ship only the traced ids."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark import StorageLevel
from pyspark.sql import SparkSession

from ember.rdd import LineageContext
from ember.rdd.ids import SHIFT
from ember.rdd.points import Captured
from ember.rdd.tables import table_rows
from tests.conftest import ROOT
from tests.rdd.logs import DSCR, program, write_log

pytestmark = pytest.mark.jvm  # test_retried_tasks_leave_the_same_lineage runs Spark in a subprocess, no fixture


@pytest.fixture
def lc(spark: SparkSession) -> Iterator[LineageContext]:
    context = LineageContext(spark.sparkContext)
    yield context
    context.clear()


def test_tables_stay_with_their_partitions_and_ids_move_to_theirs(lc: LineageContext, tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.txt", n=1500)
    reports = program(lc.textFile(str(log.path), 4))
    reports.collect()
    combiner = reports.getLineage().goBack().goBack()
    (point,) = combiner.points
    assert isinstance(point, Captured) and point.kind == "combiner"
    assert point.stored.is_cached and point.stored.getStorageLevel() == StorageLevel.MEMORY_AND_DISK
    assert point.tables.count() == point.partitions  # one table per task
    for pid, moved in enumerate(point.directed(combiner._ids()).glom().collect()):
        assert moved and {p for p, _ in moved} == {pid}
    # every combiner row names only lines of its own input split, each line once
    for table_pid, tables in enumerate(point.tables.glom().collect()):
        (table,) = tables
        rows = [[lc._decode(ref) for ref in row] for row in table_rows(table)]
        assert rows and all(len(set(row)) == len(row) for row in rows)
        assert all(pid == table_pid for row in rows for _, pid, _ in row)


def test_retried_tasks_leave_the_same_lineage(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.txt", n=1500)
    markers = tmp_path / "markers"
    markers.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run(
        [sys.executable, "-m", "tests.rdd.retry_job", str(log.path), str(markers)],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    assert sorted(p.name for p in markers.iterdir()) == ["map", "reduce"]
    runs = json.loads(done.stdout.strip().splitlines()[-1])
    assert runs["filed"] and not Path(runs["left"]).exists()  # table files removed at exit
    assert runs["retried"] == runs["clean"]
    clean = runs["clean"]
    assert sorted(line for _, line in clean["input"]) == sorted(line for line in log.lines if line.startswith("ERROR"))
    for name, n in clean["results"][:2]:
        code = next(c for c, d in DSCR.items() if d == name)
        lines = [line for line in log.lines if re.match(rf"ERROR\t{code}\t", line)]
        assert clean[repr((name, n))] == sorted(lines) and len(lines) == n


def test_driver_directed_and_shuffled_steps_agree(lc: LineageContext, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Few traced ids take driver-directed steps (tasks on the named partitions only); many
    take Titian's shuffle. Both must give the same records (forward steps scan the same way
    in both: only how the ids reach them differs)."""
    log = write_log(tmp_path / "log.txt", n=300)
    lines = lc.textFile(str(log.path), 2)
    reports = program(lines)
    reports.collect()

    def traces() -> tuple[list[object], list[object]]:
        back = reports.getLineage().goBackAll().collectWithIds()
        one = reports.getLineage().goBack().goBack().collectWithIds()
        return sorted(back), sorted(one, key=repr)

    directed_form = traces()
    assert directed_form[0] and directed_form[1]
    monkeypatch.setattr("ember.rdd.lineage_rdd.LOCAL_IDS", 0)
    assert traces() == directed_form


def test_forward_scans_only_tables_that_saw_the_parents(lc: LineageContext, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Capture tasks report which parent partitions their tables name; a forward step skips
    the others, and answers as a scan of every table would."""
    log = write_log(tmp_path / "log.txt", n=300)
    reports = program(lc.textFile(str(log.path), 3))
    reports.collect()
    first = [(uid, pid, n) for uid, pid, n in sorted(ref for ref, _ in reports.getLineage().goBackAll().collectWithIds())][:2]
    combiner = reports.getLineage().goBack().goBack().points[0]
    assert isinstance(combiner, Captured)
    assert combiner._reached({lc._encode(first[0]) >> SHIFT}) == [first[0][1]]  # map-side tables name their own split
    pruned = sorted(lc.lineage(first).goNextAll(target=reports).collect(), key=repr)
    monkeypatch.setattr(Captured, "_reached", lambda self, partitions: None)
    assert pruned and sorted(lc.lineage(first).goNextAll(target=reports).collect(), key=repr) == pruned


def test_table_files_on_the_driver_and_blocks_in_tasks_agree(lc: LineageContext, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A driver on the capture tasks' host reads their table (and records) files; elsewhere
    tasks read the persisted blocks. Both must give the same traces, both ways."""
    log = write_log(tmp_path / "log.txt", n=300)
    reports = program(lc.textFile(str(log.path), 3))
    reports.collect()
    combiner = reports.getLineage().goBack().goBack().points[0]
    assert isinstance(combiner, Captured)
    assert sorted(combiner.local_tables()) == list(range(combiner.partitions))  # one file per task
    assert len({path for _, _, path, _ in combiner.files.value}) == combiner.partitions
    assert sorted(combiner.local_outputs()) == list(range(combiner.partitions))  # few records: filed too

    def traces() -> tuple[list[object], list[object]]:
        back = sorted(reports.getLineage().goBackAll().collectWithIds())
        first = [ref for ref, _ in back[:3]]
        return back, sorted(lc.lineage(first).goNextAll(target=reports).collect(), key=repr)

    from_files = traces()
    assert from_files[0] and from_files[1]
    monkeypatch.setattr(Captured, "_local_files", lambda self: {})
    assert traces() == from_files
