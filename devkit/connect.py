"""A Spark Connect server serving ember, for the tests and the benchmarks: started with
Spark's own launcher on a loopback port, in a process of its own, requiring a token."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyspark

import ember.connect

SERVER = "org.apache.spark.sql.connect.service.SparkConnectServer"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def server(log: Path, master: str = "local[2]", **settings: str) -> Iterator[str]:
    """A Connect server with `ember.connect.server_conf()` and `settings`, until the block
    ends: its URL, with the token it requires (given to it in its environment, not on its
    command line); its Python workers run this Python. Bound to 127.0.0.1; the URL names it "localhost", to which PySpark
    sends a token without TLS."""
    home = Path(pyspark.__file__).parent
    port = _free_port()
    token = secrets.token_hex(16)
    conf = {
        **ember.connect.server_conf(),
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.ui.enabled": "false",
        **settings,
    }
    flags = [x for k, v in conf.items() for x in ("--conf", f"{k}={v}")]
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_CONNECT_AUTHENTICATE_TOKEN": token}
    env.setdefault("PYSPARK_PYTHON", sys.executable)  # its Python workers: this one's, with pandas and pyarrow
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(home / "bin" / "spark-submit"), "--class", SERVER, "--master", master, *flags, "spark-internal"],
            env=env, stdout=out, stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 120
        while "Spark Connect server started" not in log.read_text(errors="replace"):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the Connect server did not start:\n{log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.5)
        yield f"sc://localhost:{port}/;token={token}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
