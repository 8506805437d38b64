"""Run by test_driver_memory.py in its own process (the driver's memory is fixed when its JVM
starts): captures `spark.range(ROWS)` grouped by `id % GROUPS` on local[2] with a small
driver and `spark.ember.driverRids` forced low, saves the store, loads it back and traces.

    python -m tests.capture.memory_job OUT_DIR ROWS GROUPS DRIVER_MEMORY DRIVER_RIDS

Writes to OUT_DIR: backward.npy (the traced rids of every output row, concatenated, and
their counts in counts.npy), forward.json (the output rows each probed rid reached) and
built.json (whether the executors built the lineage, and its rids).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from pyspark.sql import functions as F

import ember
from ember.capture.capture import DRIVER_RIDS
from ember.engines.spark.session import local_spark


def main(out: Path, rows: int, groups: int, memory: str, driver_rids: str) -> None:
    spark = local_spark("ember-memory-test", **{"spark.driver.memory": memory})
    if driver_rids:
        spark.conf.set(DRIVER_RIDS, driver_rids)
    df = spark.range(0, rows, 1, 4).groupBy((F.col("id") % groups).alias("g")).agg(F.count("*").alias("n")).orderBy("g")
    ember.capture(df, strategy="inject").save(str(out / "store"))
    lin = ember.load(str(out / "store"), spark)
    index = lin._index
    traced = [lin.backward(oids=[oid]).ids("range") for oid in range(lin.output().num_rows)]
    np.save(out / "backward.npy", np.concatenate(traced))
    np.save(out / "counts.npy", np.array([t.size for t in traced]))
    probes = [0, rows // 3, rows - 1]
    (out / "forward.json").write_text(json.dumps({r: lin.forward("range", ids=[r]).ids().tolist() for r in probes}))
    rids = sum(lv.rows * len(lv.rids) for lv in (index.output, *index.tables))
    (out / "built.json").write_text(json.dumps({"executors": index.built_remotely, "rids": rids, "groups": lin.output()["g"].to_pylist()}))
    spark.stop()


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5])
