"""`ember ls`, `trace` and `export` read the store and start no JVM, whatever the sources'
format; only showing rows of a CSV source starts Spark. Checked against pandas."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from pyspark.sql import SparkSession

from ember.cli import main

JOB = """\
import sys
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
spark.read.option("header", True).csv(sys.argv[1]).groupBy("k").count().orderBy("k").collect()
"""


@pytest.fixture(scope="module")
def store(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("store_only")
    csv = tmp / "events.csv"
    pd.DataFrame({"k": ["a", "b", "a", "c", "b", "a"], "v": range(6)}).to_csv(csv, index=False)
    (tmp / "job.py").write_text(JOB)
    assert main(["run", str(tmp / "job.py"), "--store", str(tmp / "s"), str(csv)]) == 0
    return tmp / "s", csv


# What a store-only command must not import: capture and inference (and the Spark plan
# code under them), and pandas, which pyarrow imports on its numpy paths: together they
# were most of these commands' start-up time.
HEAVY = ("ember.capture.capture", "ember.infer.infer", "ember.engines.spark.build", "pandas")
LIGHT = """
import sys
from ember.cli import main
code = main(sys.argv[1:])
loaded = [m for m in HEAVY if m in sys.modules]
if loaded:
    print("imported:", *loaded, file=sys.stderr)
    code = 3
sys.exit(code)
"""


def _without_java(*args: str, light: bool = False) -> subprocess.CompletedProcess[str]:
    """The CLI in a fresh process that cannot start a JVM (no java on PATH, no JAVA_HOME);
    `light`: exits 3 if it imported any of `HEAVY`."""
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "SPARK_HOME")}
    env["PATH"] = "/nonexistent"
    code = f"HEAVY = {HEAVY!r}\n{LIGHT}" if light else "import sys; from ember.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=120)


def test_ls_trace_and_export_need_no_jvm(store: tuple[Path, Path]) -> None:
    folder, csv = store
    truth = pd.read_csv(csv)  # row ids skip the header: row i of the data is ember_rid i
    listed = _without_java("ls", str(folder), "--json")
    assert listed.returncode == 0, listed.stderr
    entry = json.loads(listed.stdout)["entries"][0]["entry"]

    backward = _without_java("trace", str(folder), entry, "--backward", "--oids", "0", "--ids-only")
    assert backward.returncode == 0, backward.stderr
    (found,) = json.loads(backward.stdout)["sources"].values()
    assert found["ids"] == truth.index[truth.k == "a"].tolist()  # output row 0 is k = 'a'

    forward = _without_java("trace", str(folder), entry, "--forward", "events", "--ids", "3", "--json")
    assert forward.returncode == 0, forward.stderr
    assert json.loads(forward.stdout)["rows"] == [{"k": "c", "count": 1, "ember_oid": 2}]

    exported = _without_java("export", str(folder), entry)
    assert exported.returncode == 0, exported.stderr
    assert "JAVA" not in backward.stderr + forward.stderr + exported.stderr


def test_store_only_commands_import_no_capture_and_no_pandas(store: tuple[Path, Path]) -> None:
    folder, _ = store
    entry = json.loads(_without_java("ls", str(folder), "--json").stdout)["entries"][0]["entry"]
    for args in (
        ("ls", str(folder)),
        ("trace", str(folder), entry, "--backward", "--oids", "0", "--ids-only"),
        ("trace", str(folder), entry, "--forward", "events", "--ids", "3"),
        ("export", str(folder), entry),
    ):
        done = _without_java(*args, light=True)
        assert done.returncode == 0, (args, done.stderr)


def test_rows_of_a_csv_source_start_spark_when_shown(store: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    folder, csv = store
    entry = json.loads(_without_java("ls", str(folder), "--json").stdout)["entries"][0]["entry"]
    refused = _without_java("trace", str(folder), entry, "--backward", "--oids", "1", "--json")
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert refused.stderr.splitlines()[-1].startswith("ember: error: showing rows of a CSV")
    assert main(["trace", str(folder), entry, "--backward", "--oids", "1", "--json"]) == 0
    (rows,) = (s["rows"] for s in json.loads(capsys.readouterr().out)["sources"].values())
    truth = pd.read_csv(csv)
    assert [r["v"] for r in rows] == [str(v) for v in truth.v[truth.k == "b"]]
