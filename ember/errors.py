"""ember's errors: one base class so callers can catch everything ember raises."""

from __future__ import annotations


class EmberError(Exception):
    """Base class of every error ember raises on purpose."""


class UnsupportedOperatorError(EmberError):
    """The plan holds an operator ember cannot trace exactly; raised before any job runs."""


class UnknownSourceError(EmberError, KeyError):
    """A source name that the lineage does not know."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class IdOutOfRangeError(EmberError, IndexError):
    """An ember_oid or ember_rid outside the captured output or source."""


class InvalidPredicateError(EmberError, ValueError):
    """A `where=` string that does not parse or names no column."""


class StaleSourceError(EmberError):
    """A source file changed on disk (size or modification time) since capture."""


class SparkJobError(EmberError):
    """Spark gave up on a job of a capture (a task failed more often than
    `spark.task.maxFailures` allows, say as its executor was lost each time; the job was
    aborted or cancelled): the first line names what died, `__cause__` is Spark's error.
    A capture ends with the lineage of a clean run or with this, never with another."""


class StoreError(EmberError):
    """A lineage store that cannot be written or read back faithfully (missing, newer, damaged)."""


def first_line(error: BaseException) -> str:
    """The first line of an engine's error message (DuckDB and Spark add the query, a caret
    and a plan below it), for an ember error that says it in one line."""
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__
