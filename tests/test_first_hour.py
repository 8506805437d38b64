"""A new user's first hour, as the README and the guide tell it: `make demo`'s program,
a notebook-style capture and trace, the `ember` command over an unmodified script
(run, ls, trace both ways, export) and the web page. Each step runs as the user would,
in its own process; the test fails if any step fails or prints a traceback."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.jvm  # every step but the page's starts Spark, in a process of its own

BIN = Path(sys.executable).parent
TOKEN = "first-hour"

NOTEBOOK = """
from pyspark.sql import SparkSession
import ember

spark = SparkSession.builder.master("local[2]").getOrCreate()
spark.createDataFrame(
    [(1, "alice", 12.0), (2, "bob", 30.0), (3, "alice", 8.0), (4, "carol", 20.0)],
    ["order_id", "customer", "amount"],
).createOrReplaceTempView("orders")
df = spark.sql("SELECT customer, sum(amount) AS total FROM orders GROUP BY customer ORDER BY customer")
lin = ember.capture(df, progress=True)
print(lin.strategy)
lin.wait()
t = lin.backward(where="customer = 'alice'")
assert t.ids("orders").tolist() == [0, 2], t.ids("orders")
assert lin.forward("orders", ids=[1]).rows().column("customer").to_pylist() == ["bob"]
lin.save("notebook.lineage")
assert ember.load("notebook.lineage").backward(oids=[0]).ids("orders").tolist() == [0, 2]
print("notebook ok")
"""

SCRIPT = """
from pyspark.sql import SparkSession

spark = SparkSession.builder.master("local[2]").getOrCreate()
orders = spark.createDataFrame(
    [(1, "alice", 12.0), (2, "bob", 30.0), (3, "alice", 8.0), (4, "carol", 2000.0)],
    ["order_id", "customer", "amount"],
)
orders.createOrReplaceTempView("orders")
report = spark.sql("SELECT customer, sum(amount) AS total FROM orders GROUP BY customer ORDER BY customer")
report.show()
"""


def started(args: list[str], cwd: Path) -> subprocess.Popen[str]:
    """One step, started in a process of its own."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EMBER_PROGRESS": "1"}
    return subprocess.Popen(args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finished(proc: subprocess.Popen[str], timeout: float = 600) -> str:
    """A started step's output, after checking it ended well and printed no traceback."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    said, args = out + err, " ".join(proc.args)
    assert proc.returncode == 0, f"{args} failed ({proc.returncode}):\n{said[-3000:]}"
    assert "Traceback" not in said, f"{args} printed a traceback:\n{said[-3000:]}"
    return out


def step(args: list[str], cwd: Path) -> str:
    """Runs one step; its output, checked as `finished` does."""
    return finished(started(args, cwd))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_new_users_first_hour_prints_no_traceback(tmp_path: Path, tpch_dir: Path) -> None:
    # The demo, the slowest step, shares nothing with the others (it only reads the data):
    # it runs beside them rather than before them.
    demo = started([sys.executable, "-m", "devkit.demo", "--data", str(tpch_dir)], ROOT)
    try:
        the_rest(tmp_path)
    except BaseException:
        demo.kill()
        demo.wait()
        raise
    finished(demo)


def the_rest(tmp_path: Path) -> None:
    """Every step after the demo: a notebook, the `ember` command over a script, the page."""
    (tmp_path / "notebook.py").write_text(textwrap.dedent(NOTEBOOK))
    assert "notebook ok" in step([sys.executable, "notebook.py"], tmp_path)

    (tmp_path / "report.py").write_text(textwrap.dedent(SCRIPT))
    ember = str(BIN / "ember")
    step([ember, "run", "report.py", "--store", "report.lineage"], tmp_path)
    listed = json.loads(step([ember, "ls", "report.lineage", "--json"], tmp_path))
    entry = next(e["entry"] for e in listed["entries"] if e["action"] == "show")
    assert "carol" in step([ember, "trace", "report.lineage", entry, "--backward", "--where", "total > 1000"], tmp_path)
    forward = json.loads(step([ember, "trace", "report.lineage", entry, "--forward", "orders", "--ids", "0,2", "--json"], tmp_path))
    assert forward, "a forward trace of alice's orders found no report row"
    step([ember, "export", "report.lineage", entry, "--format", "openlineage", "-o", "event.json"], tmp_path)
    assert json.loads((tmp_path / "event.json").read_text())

    port = _free_port()
    page = subprocess.Popen([ember, "ui", "report.lineage", "--port", str(port), "--token", TOKEN], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        views = _get(f"http://127.0.0.1:{port}/api/views", page)
        assert views["views"], "the page shows no view of the report"
    finally:
        page.terminate()
        said = page.communicate(timeout=30)[0]
    assert f"token={TOKEN}" in said and "Traceback" not in said, said[-3000:]


def _get(url: str, page: subprocess.Popen[str], timeout: float = 60) -> dict:
    """The page's answer to an API call with the token, once the server is up."""
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {TOKEN}"})
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return dict(json.loads(response.read()))
        except OSError:
            if page.poll() is not None or time.monotonic() > deadline:
                raise
            time.sleep(0.5)
