"""Run by test_cluster.py in its own process (one SparkContext per process): captures on a
standalone cluster and saves the stores for the test to compare with local mode.

    python -m tests.capture.cluster_job MASTER_URL TPCH_DIR OUT_DIR QUERY RETRIED_QUERY

RETRIED_QUERY is captured twice more, with no lineage allowed through the driver's result
channel (every side table is written by the executors, which build its level as parts):
cleanly, and with the first attempt of every stage's first task failing, the tasks that
write parts failing after writing theirs. What the retried capture's part folders hold,
and which parts it named, goes to parts.json. Then it is captured four more times while
an executor or a worker JVM is killed under it (`killed`). Last, in a second application
allowing each task one failure, query 6 is captured twice (Inject, Defer) while a task of
its job kills its executor, so that Spark gives up on the job.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from pyspark import TaskContext
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import ember
from devkit import tpch
from ember.capture.capture import DRIVER_RIDS, Strategy
from ember.engines.spark import faults
from ember.store.parts import Parts


def wait_for_executors(spark: SparkSession, n: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() < n + 1:  # + the driver
        if time.monotonic() > deadline:
            raise TimeoutError(f"fewer than {n} executors registered")
        time.sleep(0.5)


def session(master: str, executors: int, **conf: bool | float | int | str | None) -> SparkSession:
    """An application on the cluster, once that many executors are up."""
    builder = (
        SparkSession.builder.master(master)
        .appName("ember-cluster-test")
        .config("spark.executor.memory", "1g")
        .config("spark.cores.max", "2")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
    )
    spark = builder.config(map=conf).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    wait_for_executors(spark, executors)
    return spark


def main(master: str, data: Path, out: Path, n: int, retried: int) -> None:
    spark = session(master, 2)
    tpch.register(spark, data)
    lin = ember.capture(tpch.query(spark, n))
    lin.save(str(out / "clean"))
    trace = lin.backward_distributed(spark, oids=range(min(3, lin.output().num_rows)))
    traced = {s: sorted(r[0] for r in trace.ids(s).collect()) for s in trace.sources}
    reached = {s: sorted(r[0] for r in lin.forward_distributed(spark, s, ids=[0, 1, 2]).collect()) for s in lin.sources}
    (out / "distributed.json").write_text(json.dumps({"backward": traced, "forward": reached}))
    spark.conf.set(DRIVER_RIDS, "0")
    ember.capture(tpch.query(spark, retried)).save(str(out / "clean-retried"))

    markers = out / "failed"
    markers.mkdir()

    def flaky(x: float) -> float:
        """Fails the first attempt of every stage's first task, once."""
        ctx = TaskContext.get()
        if ctx is not None and ctx.partitionId() == 0 and ctx.attemptNumber() == 0:
            (markers / f"stage{ctx.stageId()}").touch()
            raise RuntimeError("ember test: injected task failure")
        return x

    lineitem = spark.read.parquet(str(data / "lineitem.parquet"))
    udf = F.udf(flaky, "decimal(15,2)")
    lineitem.withColumn("l_extendedprice", udf("l_extendedprice")).createOrReplaceTempView("lineitem")
    spark.conf.set(faults.FAIL_PARTS_ONCE, str(markers))
    lin = ember.capture(tpch.query(spark, retried))
    lin.save(str(out / "retried"))
    (out / "parts.json").write_text(json.dumps(part_folders(lin)))
    spark.conf.unset(faults.FAIL_PARTS_ONCE)
    killed(spark, data, out, retried)
    spark.stop()
    # spark.task.maxFailures is read once per application: a second one, allowing one failure,
    # on the worker left
    gave_up = session(master, 1, **{"spark.task.maxFailures": "1"})
    cases: tuple[Case, ...] = (("gave-up", "kill-executor", "inject"), ("gave-up-defer", "kill-executor", "defer"))
    killed(gave_up, data, out, GAVE_UP, cases, executors=1)
    gave_up.stop()


GAVE_UP = 6  # any query reading lineitem: one job, quick
Case = tuple[str, faults.Fault, Strategy]
KILLED: tuple[Case, ...] = (
    ("executor", "kill-executor", "inject"),
    ("defer", "kill-executor", "defer"),
    ("index", "kill-executor", "inject"),
    ("worker", "kill-worker", "inject"),
)


def killed(
    spark: SparkSession, data: Path, out: Path, n: int, cases: tuple[Case, ...] = KILLED, executors: int = 2
) -> None:
    """Query `n` captured while a JVM is SIGKILLed under it, once per case (each once
    `executors` are up): by default an executor in the job of an Inject capture, in Defer's
    background capture (struck only once the user's job has returned), in a task building
    the executors' index, and a worker (with its executor) last, for good. Each case's
    store goes to killed-<case>, and what happened to killed.json (the error: its type,
    message and cause's type)."""
    path = out / "killed.json"
    report: dict[str, dict[str, object]] = json.loads(path.read_text()) if path.exists() else {}
    (out / "struck").mkdir(exist_ok=True)
    for case, how, strategy in cases:
        wait_for_executors(spark, executors)
        marker, armed = out / "struck" / case, out / "struck" / f"{case}.armed"
        tpch.register(spark, data)
        if case == "index":
            spark.conf.set(faults.FAIL_PARTS_ONCE, f"{how}:{marker}")
        else:
            lineitem = spark.read.parquet(str(data / "lineitem.parquet"))
            udf = F.udf(striking(str(marker), str(armed), how), "decimal(15,2)")
            lineitem.withColumn("l_extendedprice", udf("l_extendedprice")).createOrReplaceTempView("lineitem")
        if strategy == "inject":
            armed.touch()
        entry: dict[str, object] = {"strategy": strategy}
        try:
            lin = ember.capture(tpch.query(spark, n), strategy=strategy)
            entry["ready_before"] = lin.ready
            armed.touch()
            lin.wait()
            lin.save(str(out / f"killed-{case}"))
            entry["error"] = None
        except Exception as e:  # the test says which failures are allowed
            entry["error"] = f"{type(e).__module__}.{type(e).__name__}: {e}"
            entry["cause"] = None if e.__cause__ is None else f"{type(e.__cause__).__module__}.{type(e.__cause__).__name__}"
        entry["killed"] = [gone(int(p.read_text())) for p in marker.rglob("killed")]
        report[case] = entry
        spark.conf.unset(faults.FAIL_PARTS_ONCE)
    path.write_text(json.dumps(report))


def gone(pid: int) -> bool:
    """Whether process `pid` has ended (a zombie has: only its parent has yet to reap it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def striking(marker: str, armed: str, how: faults.Fault) -> Callable[[float], float]:
    """An identity function on values that strikes in partition 0 once `armed` exists, once."""

    def strike_once(x: float) -> float:
        ctx = TaskContext.get()
        if ctx is not None and ctx.partitionId() == 0 and os.path.exists(armed) and faults.first(marker):
            faults.strike(how, marker)
        return x

    return strike_once


def part_folders(lin: ember.Lineage) -> list[dict[str, list[str]]]:
    """Per level the executors built: the files in its folder, and the files its parts name."""
    found = []
    for level in lin._index.tables:
        parts = [c for c in level.columns() if isinstance(c, Parts)]
        if parts and len(parts) == len(level.columns()):
            _, root = parts[0].folder
            folder = Path(root) / Path(parts[0].metas[0]["file"]).parent
            named = sorted(Path(m["file"]).name for c in parts for m in c.metas)
            found.append({"files": sorted(p.name for p in folder.iterdir()), "named": named})
    return found


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
