"""Spark's failure texts, read: whether Spark gave up on a job, and what died, in one line."""

from __future__ import annotations

import contextlib
import re


def texts(error: BaseException) -> list[str]:
    """The messages of `error` and of the errors it was raised from or while handling (pyspark
    raises a Python error in place of the `Py4JJavaError` that carries Spark's text)."""
    found: list[str] = []
    seen: BaseException | None = error
    while seen is not None and len(found) < 8:
        with contextlib.suppress(Exception):  # a Py4JJavaError asks the JVM for its text; it may be gone
            found.append(str(seen))
        seen = seen.__cause__ or seen.__context__
    return found


# Spark's message when it gives up on a job: the job aborted (a task failed as often as
# spark.task.maxFailures allows, results too big, a stage failed too often) or cancelled.
_GAVE_UP = re.compile(r"org\.apache\.spark\.SparkException: (Job aborted.*|\[SPARK_JOB_CANCELLED\] .*|Job \d+ cancelled.*)")
_LOST = re.compile(
    r"Task (?P<task>\S+) in stage (?P<stage>\S+) failed (?P<times>\d+) times, most recent failure: "
    r"Lost task \S+ in stage \S+ \(TID \d+\) \((?P<host>\S+) executor (?P<executor>[^)]+)\): (?P<reason>.*)"
)


def what_died(message: str) -> str | None:
    """What died, in one line, where `message` (a Spark error's text, JVM stack and all) says
    Spark gave up on a job; None where it does not. The first line of Spark's reason (and
    the next where it ends in a colon), never the stack.

    >>> what_died("org.apache.spark.SparkException: Job aborted due to stage failure: Total size of "
    ...           "serialized results of 1 tasks (15.5 MiB) is bigger than spark.driver.maxResultSize (1024.0 KiB)")
    'the job was aborted: Total size of serialized results of 1 tasks (15.5 MiB) is bigger than spark.driver.maxResultSize (1024.0 KiB)'
    """
    found = _GAVE_UP.search(message)
    if found is None:
        return None
    line = found.group(1).strip()
    rest = [r.strip() for r in message[found.end() :].splitlines()[1:2] if r.strip() and not r.startswith("\tat ")]
    if line.endswith(":") and rest:
        line = f"{line} {rest[0]}"
    lost = _LOST.search(line)
    if lost is not None:
        times = f"failed {lost['times']} time{'s' if lost['times'] != '1' else ''}, as often as spark.task.maxFailures allows"
        task = f"task {lost['task']} in stage {lost['stage']} {times}"
        if lost["reason"].startswith("ExecutorLostFailure"):
            return f"executor {lost['executor']} was lost ({lost['reason']}); {task}"
        return f"{task}, last on executor {lost['executor']} ({lost['host']}): {lost['reason']}"
    if line.startswith("Job aborted"):
        reason = line.removeprefix("Job aborted").removeprefix(" due to stage failure").lstrip(":. ")
        return f"the job was aborted: {reason}" if reason else "the job was aborted"
    return re.sub(r"^\[SPARK_JOB_CANCELLED\] | SQLSTATE: \w+$", "", line)
