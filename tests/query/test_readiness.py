"""A lineage says whether it is ready, waits on request, and says why it captured as it did."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

import ember
from ember.errors import EmberError
from ember.query.lineage import Lineage


def _pending() -> tuple[Lineage, Future[Any]]:
    job: Future[Any] = Future()
    return Lineage(pa.table({"x": [1]}), job, [], "defer", "Scan t", why="test"), job


def test_wait_times_out_then_a_trace_that_waits_says_so(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("EMBER_PROGRESS", "1")
    lin, job = _pending()
    assert not lin.ready and lin.wait(timeout=0.01) is False
    threading.Timer(0.2, lambda: job.set_result((SimpleNamespace(nbytes=7), [], ()))).start()
    assert lin.index_bytes == 7  # waits for the background capture
    assert "waiting for the background capture of Scan t (strategy defer)" in capsys.readouterr().err
    assert lin.ready and lin.wait() is True


def test_no_line_unless_asked_or_in_a_terminal(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("EMBER_PROGRESS", "0")
    lin, job = _pending()
    threading.Timer(0.05, lambda: job.set_result((SimpleNamespace(nbytes=1), [], ()))).start()
    assert lin.index_bytes == 1
    assert capsys.readouterr().err == ""


def test_wait_raises_what_the_background_capture_raised() -> None:
    lin, job = _pending()
    job.set_exception(EmberError("the background capture failed"))
    with pytest.raises(EmberError, match="background capture failed"):
        lin.wait()


def test_strategy_says_what_ran_and_why(spark: SparkSession) -> None:
    rows = spark.createDataFrame([(1, "a"), (2, "b"), (1, "c")], "k int, v string")
    assert ember.capture(rows.filter("k = 1")).strategy == "inject: lineage rides in the job itself (no side-table job)"
    assert ember.capture(rows.filter("k = 1"), strategy="inject").strategy == "inject: asked for"
    deferred = ember.capture(rows.join(rows.groupBy("k").count(), "k").groupBy("v").count())
    assert deferred.wait() and deferred.strategy == (
        "defer: the plan needs side-table jobs: the result comes first, lineage is built in the background"
    )
