"""Capture on a real Spark standalone cluster (one master, two workers on loopback).

The cluster is started and stopped here with `spark-class`, which ships with PySpark;
the job runs in its own process (`cluster_job.py`), in the background from the session's
start (tests/conftest.py's `cluster_run`; these tests run last). Its stores must trace exactly as a
capture of the same query in local mode, also when tasks failed and were retried, and
when an executor or a worker was killed in the middle of a capture.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path

import pyspark
import pytest
from pyspark.sql import SparkSession

import ember
from devkit import tpch as tpch_queries
from tests.conftest import ROOT

QUERY = 3  # its aggregate's lineage comes back with the job's result (a list slot)
RETRIED = 15  # side tables of its own: a scalar subquery and an aggregate under a join


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for(log: Path, text: str, count: int, proc: subprocess.Popen[bytes], timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists() and log.read_text(errors="replace").count(text) >= count:
            return
        if proc.poll() is not None:
            break
        time.sleep(0.5)
    raise RuntimeError(f"the cluster did not come up: {log}:\n{log.read_text(errors='replace')[-3000:]}")


@contextmanager
def standalone(logs: Path) -> Iterator[str]:
    """A master and two workers, until the block ends: the master's URL."""
    home = Path(pyspark.__file__).parent
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
    }
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    cls = str(home / "bin" / "spark-class")
    procs: list[subprocess.Popen[bytes]] = []

    def start(name: str, *args: str) -> subprocess.Popen[bytes]:
        log = (logs / f"{name}.log").open("wb")
        proc = subprocess.Popen([cls, *args], env=env, stdout=log, stderr=subprocess.STDOUT, cwd=logs)
        procs.append(proc)
        return proc

    try:
        master = start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                       "--port", str(port), "--webui-port", str(_free_port()))
        _wait_for(logs / "master.log", "I have been elected leader", 1, master)
        for i in range(2):
            start(f"worker{i}", "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
                  "--cores", "1", "--memory", "1g", "--webui-port", str(_free_port()),
                  "--work-dir", str(logs / f"work{i}"))
        _wait_for(logs / "master.log", "Registering worker", 2, master)
        yield url
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


def captured_on_a_cluster(tmp_path_factory: pytest.TempPathFactory, tpch: Path) -> Path:
    """The cluster started, the job run on it (its own process), the cluster stopped: the
    folder of the job's stores."""
    logs, out = tmp_path_factory.mktemp("cluster"), tmp_path_factory.mktemp("stores")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SPARK_LOCAL_IP": "127.0.0.1"}
    with standalone(logs) as url:
        done = subprocess.run(
            [sys.executable, "-m", "tests.capture.cluster_job", url, str(tpch), str(out), str(QUERY), str(RETRIED)],
            env=env, cwd=ROOT, capture_output=True, text=True, timeout=900,
        )
    assert done.returncode == 0, done.stderr[-4000:]
    assert (out / "parts.json").exists(), f"the cluster job ended without writing its stores:\n{done.stderr[-4000:]}"
    return out


@pytest.fixture(scope="module")
def cluster(cluster_run: Future[Path] | None) -> Future[Path]:
    """The cluster's run, which tests/conftest.py starts when the session begins."""
    assert cluster_run is not None, "tests/conftest.py starts the cluster's run whenever a test here is selected"
    return cluster_run


@pytest.fixture(scope="module")
def stores(cluster: Future[Path]) -> Path:
    return cluster.result()


def by_values(lin: ember.Lineage) -> dict[str, dict[str, list[int]]]:
    """Output row (as text) → its backward lineage per source: comparable across runs."""
    out = {}
    for oid, row in enumerate(lin.output().drop_columns(["ember_oid"]).to_pylist()):
        trace = lin.backward(oids=[oid])
        out[repr(sorted(row.items()))] = {s: trace.ids(s).tolist() for s in lin.sources}
    return out


def test_cluster_capture_equals_local(stores: Path, spark: SparkSession, tpch: Path) -> None:
    tpch_queries.register(spark, tpch)  # the cluster's tests run last: others named views of their own `orders`
    local = ember.capture(tpch_queries.query(spark, QUERY))
    remote = ember.load(str(stores / "clean"))
    assert remote.sources == local.sources
    assert by_values(remote) == by_values(local)
    assert by_values(remote)  # the query has output rows


def test_distributed_trace_on_the_cluster(stores: Path) -> None:
    lin = ember.load(str(stores / "clean"))
    local = lin.backward(oids=range(min(3, lin.output().num_rows)))
    remote = json.loads((stores / "distributed.json").read_text())
    assert remote["backward"] == {s: local.ids(s).tolist() for s in lin.sources}
    assert any(remote["backward"].values())
    assert remote["forward"] == {s: lin.forward(s, ids=[0, 1, 2]).ids().tolist() for s in lin.sources}


def test_retried_tasks_leave_the_same_lineage(stores: Path) -> None:
    failed = sorted(p.name for p in (stores / "failed").iterdir())
    assert len([f for f in failed if f.startswith("stage")]) >= 2, "the job and a side table should each have lost a task"
    assert any(f.startswith("index-") for f in failed), "no task writing parts failed"
    assert by_values(ember.load(str(stores / "retried"))) == by_values(ember.load(str(stores / "clean-retried")))


def test_levels_built_on_the_cluster_keep_only_committed_parts(stores: Path) -> None:
    """Every side table's level was written by the executors; a failed attempt's parts
    were written, then deleted: the folders hold exactly the parts the levels name."""
    levels = json.loads((stores / "parts.json").read_text())
    assert levels, "no level was built by the executors"
    for level in levels:
        assert level["files"] == level["named"]
    manifest = json.loads((stores / "retried" / "manifest.json").read_text())
    assert all(r["column"]["encoding"] == "parts" for lv in manifest["levels"] for r in lv["rids"])


@pytest.mark.parametrize("case", ["executor", "defer", "index", "worker"])
def test_a_jvm_killed_under_a_capture_leaves_the_lineage_of_a_clean_run(stores: Path, case: str) -> None:
    """An executor SIGKILLed in an Inject capture's job, in Defer's background capture and
    in a task building the executors' index, then a worker: Spark runs the lost tasks
    again, and the lineage is the clean run's (a failure would have to be an EmberError
    naming what died: none is expected here, the cluster keeps a live executor)."""
    report = json.loads((stores / "killed.json").read_text())[case]
    killed = report["killed"]  # per JVM struck, whether it died (the index case strikes once per level built)
    assert killed and all(killed), f"the {case} fault killed no JVM ({killed}): the test proved nothing"
    assert report["error"] is None, report["error"]
    if report["strategy"] == "defer":
        assert report["ready_before"] is False, "the background capture ended before the kill was armed"
    assert by_values(ember.load(str(stores / f"killed-{case}"))) == by_values(ember.load(str(stores / "clean-retried")))


@pytest.mark.parametrize("case", ["gave-up", "gave-up-defer"])
def test_a_capture_spark_gives_up_on_raises_an_ember_error_naming_what_died(stores: Path, case: str) -> None:
    """Under spark.task.maxFailures=1 the task SIGKILLs its executor: Spark aborts the job.
    The capture (Inject), or the wait for Defer's background capture, raises SparkJobError
    whose one line names the lost executor, Spark's error as its cause."""
    report = json.loads((stores / "killed.json").read_text())[case]
    assert report["killed"] and all(report["killed"]), f"the {case} fault killed no JVM: the test proved nothing"
    if report["strategy"] == "defer":
        assert report["ready_before"] is False, "Defer's capture raised before the user's job returned"
    error = report["error"]
    assert error is not None, "the capture ended with a lineage though Spark gave up on its job"
    assert re.fullmatch(
        r"ember\.errors\.SparkJobError: the capture's Spark job failed: executor \S+ was lost "
        r"\(ExecutorLostFailure \(executor \S+ exited caused by one of the running tasks\) Reason: [^\n]+\); "
        r"task \S+ in stage \S+ failed 1 time, as often as spark\.task\.maxFailures allows",
        error,
    ), error
    assert report["cause"] == "py4j.protocol.Py4JJavaError"
