"""BigDebug on top of the lineage: crash culprits, skipping bad records, delta debugging.

A user function that raises inside a tracked transformation raises, on the worker, an
exception whose message carries the failing record and its lineage id; the driver turns it
into a `CulpritError`. In skip mode the record is dropped instead and reported through an
accumulator.
"""

from __future__ import annotations

import base64
import pickle
import re
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from pyspark import Accumulator, AccumulatorParam

from ember.errors import EmberError

T = TypeVar("T")

_MARK = re.compile(r"EMBER-CULPRIT:([A-Za-z0-9+/=]+):END")


class CulpritError(EmberError):
    """A user function raised on `record`; `inputs` are the input records it came from."""

    def __init__(
        self, record: Any, lineage_id: tuple[int, int, int], cause: str, inputs: list[Any]
    ) -> None:
        super().__init__(f"{cause} on record {record!r} (lineage id {lineage_id})")
        self.record = record
        self.lineage_id = lineage_id
        self.cause = cause
        self.inputs = inputs


class RecordFailure(Exception):
    """Raised on a worker; its message is all that reaches the driver."""


class _ListParam(AccumulatorParam[list[Any]]):
    def zero(self, value: list[Any]) -> list[Any]:
        return []

    def addInPlace(self, value1: list[Any], value2: list[Any]) -> list[Any]:
        value1.extend(value2)
        return value1


LIST_PARAM = _ListParam()


class _SetParam(AccumulatorParam[set[Any]]):
    """Set union: a task counted twice (a retry, a recomputed partition) changes nothing."""

    def zero(self, value: set[Any]) -> set[Any]:
        return set()

    def addInPlace(self, value1: set[Any], value2: set[Any]) -> set[Any]:
        value1 |= value2
        return value1


SET_PARAM = _SetParam()


class Guard:
    """Shipped with each tracked user function: reports or skips the record it fails on."""

    def __init__(self, skipped: Accumulator[list[Any]] | None) -> None:
        self.skipped = skipped

    def fail(self, record: Any, ref: int, exc: Exception) -> None:
        if self.skipped is not None:
            self.skipped.add([(record, ref)])
            return
        payload = pickle.dumps((record, ref, f"{type(exc).__name__}: {exc}"))
        raise RecordFailure(f"EMBER-CULPRIT:{base64.b64encode(payload).decode()}:END") from exc


def culprit(exc: BaseException) -> tuple[Any, int, str] | None:
    """The (record, internal id, cause) a worker's `Guard` packed into a failed job's message."""
    found = _MARK.search(str(exc))
    return None if found is None else pickle.loads(base64.b64decode(found.group(1)))


def ddmin(items: Sequence[T], fails: Callable[[list[T]], bool]) -> list[T]:
    """Zeller's delta debugging: a 1-minimal subset of `items` on which `fails` holds.

    Seed it with a backward trace (`lineage.goBackAll().collect()`) rather than the whole
    input, so each probe re-runs the program on a few records only.
    """
    current = list(items)
    if not fails(current):
        raise EmberError("ddmin: the seed records do not make the program fail")
    n = 2
    while len(current) >= 2:
        size = len(current) / n
        chunks = [current[round(i * size) : round((i + 1) * size)] for i in range(n)]
        complements = [
            [x for j, chunk in enumerate(chunks) if j != i for x in chunk] for i in range(n)
        ]
        smaller = next((c for c in chunks if fails(c)), None)
        if smaller is not None:
            current, n = smaller, 2
            continue
        rest = next((c for c in complements if fails(c)), None) if n > 2 else None
        if rest is not None:
            current, n = rest, max(n - 1, 2)
        elif n < len(current):
            n = min(len(current), 2 * n)
        else:
            break
    return current
