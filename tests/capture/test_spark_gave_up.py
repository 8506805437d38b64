"""A capture whose Spark job Spark gave up on raises `SparkJobError` naming what died in one
line, Spark's error as its cause (no JVM here: the texts are Spark 4.3's own, their JVM
stacks cut short; tests/capture/test_cluster.py kills an executor for real)."""

from __future__ import annotations

import pytest

from ember.capture.capture import _spark_gives_up
from ember.engines.spark.failures import what_died
from ember.errors import SparkJobError, UnsupportedOperatorError

AWAIT = (
    "An error occurred while calling o4705.getResult.\n"
    ": org.apache.spark.SparkException: Exception thrown in awaitResult: \n"
    "\tat org.apache.spark.util.SparkThreadUtils$.awaitResult(SparkThreadUtils.scala:70)\n"
    "\tat py4j.ClientServerConnection.run(ClientServerConnection.java:108)\n"
    "\tat java.base/java.lang.Thread.run(Thread.java:840)\n"
)
STACK = "\tat org.apache.spark.scheduler.DAGScheduler.abortStage(DAGScheduler.scala:4560)\n"

EXECUTOR_LOST = (
    AWAIT + "Caused by: org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 10.0 "
    "failed 1 times, most recent failure: Lost task 0.0 in stage 10.0 (TID 10) (127.0.0.1 executor 0): "
    "ExecutorLostFailure (executor 0 exited caused by one of the running tasks) Reason: Command exited with code 137\n"
    "Driver stacktrace:\n" + STACK
)
TASK_FAILED = (
    AWAIT + "Caused by: org.apache.spark.SparkException: Job aborted due to stage failure: Task 1 in stage 2.0 "
    "failed 4 times, most recent failure: Lost task 1.3 in stage 2.0 (TID 6) (192.0.2.2 executor driver): "
    "java.lang.reflect.InvocationTargetException\n" + STACK
)
RESULT_TOO_BIG = (
    AWAIT + "Caused by: org.apache.spark.SparkException: Job aborted due to stage failure: Total size of "
    "serialized results of 1 tasks (15.5 MiB) is bigger than spark.driver.maxResultSize (1024.0 KiB)\n" + STACK
)
CANCELLED = (
    AWAIT + "Caused by: org.apache.spark.SparkException: [SPARK_JOB_CANCELLED] Job 1 cancelled as part of "
    "cancellation of all jobs SQLSTATE: XXKDA\n"
    "\tat org.apache.spark.errors.SparkCoreErrors$.sparkJobCancelled(SparkCoreErrors.scala:222)\n"
)
STAGE_FAILED = (  # Spark's reason goes on on the next line
    "An error occurred while calling o88.collectToPython.\n"
    ": org.apache.spark.SparkException: Job aborted due to stage failure: ResultStage 3 (collect at <stdin>:1) "
    "has failed the maximum allowable number of times: 4. Most recent failure reason:\n"
    "org.apache.spark.shuffle.FetchFailedException: Failed to connect to /127.0.0.1:40417\n" + STACK
)
UDF_RAISED = (  # a task's own error: Spark raises it as itself, no job abort in the text
    AWAIT + "Caused by: org.apache.spark.api.python.PythonException: [PYTHON_EXCEPTION] An exception was thrown "
    "from the Python worker: Traceback (most recent call last):\n"
    '  File "/tmp/job.py", line 8, in bad\n    raise ValueError("bad value %s" % x)\nValueError: bad value 0\n'
)


@pytest.mark.parametrize(
    ("text", "died"),
    [
        (
            EXECUTOR_LOST,
            "executor 0 was lost (ExecutorLostFailure (executor 0 exited caused by one of the running tasks) "
            "Reason: Command exited with code 137); task 0 in stage 10.0 failed 1 time, as often as "
            "spark.task.maxFailures allows",
        ),
        (
            TASK_FAILED,
            "task 1 in stage 2.0 failed 4 times, as often as spark.task.maxFailures allows, last on executor "
            "driver (192.0.2.2): java.lang.reflect.InvocationTargetException",
        ),
        (
            RESULT_TOO_BIG,
            "the job was aborted: Total size of serialized results of 1 tasks (15.5 MiB) is bigger than "
            "spark.driver.maxResultSize (1024.0 KiB)",
        ),
        (CANCELLED, "Job 1 cancelled as part of cancellation of all jobs"),
        (
            STAGE_FAILED,
            "the job was aborted: ResultStage 3 (collect at <stdin>:1) has failed the maximum allowable number of "
            "times: 4. Most recent failure reason: org.apache.spark.shuffle.FetchFailedException: Failed to "
            "connect to /127.0.0.1:40417",
        ),
        (UDF_RAISED, None),
        ("Job aborted due to stage failure: in a message of the user's own", None),
    ],
)
def test_what_died_is_the_first_line_of_sparks_reason(text: str, died: str | None) -> None:
    assert what_died(text) == died


class JavaError(Exception):
    """Stands for py4j's Py4JJavaError, whose text is Spark's."""


def test_a_job_spark_gave_up_on_raises_spark_job_error_from_sparks_error() -> None:
    @_spark_gives_up
    def capture() -> None:
        try:
            raise JavaError(EXECUTOR_LOST)
        except JavaError:  # pyspark raises its own error while handling py4j's
            raise AssertionError from None

    with pytest.raises(SparkJobError) as raised:
        capture()
    assert str(raised.value).startswith("the capture's Spark job failed: executor 0 was lost (ExecutorLostFailure")
    assert "\n" not in str(raised.value)
    assert isinstance(raised.value.__cause__, AssertionError)
    assert isinstance(raised.value.__cause__.__context__, JavaError)


@pytest.mark.parametrize(
    ("error", "during"),
    [
        (UnsupportedOperatorError("ember cannot trace ..."), EXECUTOR_LOST),  # ember's own, even then
        (KeyboardInterrupt(), EXECUTOR_LOST),
        (ValueError("bad value 0"), UDF_RAISED),  # a task's own (pyspark's PythonException)
    ],
)
def test_other_errors_pass_unchanged(error: BaseException, during: str) -> None:
    """Raised while handling py4j's error with the text `during`, as pyspark does."""

    @_spark_gives_up
    def capture() -> None:
        try:
            raise JavaError(during)
        except JavaError:
            raise error  # noqa: B904 (chained as its context, as pyspark does)

    with pytest.raises(type(error)) as raised:
        capture()
    assert raised.value is error
