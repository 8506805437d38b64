"""Runs an unmodified PySpark script in-process and hands each action it performs to a handler.

PySpark's action methods (DataFrame collect/show/count/..., DataFrameWriter saves, RDD
actions) are patched for the duration of the run. A patched method first runs the
original, so the script gets exactly the result it would get without ember, then tells
the handler which DataFrame the action read. Calls made from inside pyspark or ember
(`take` calling `collect`, ember's own capture jobs) are not actions of the script.

A write is the exception where the handler takes writes (`Script(writes=True)`): the
writer's settings are recorded as the script makes them, and the handler runs the write
itself, as a capture with that write (`capture(write=...)`), so that the job runs once and
its files are linked to its lineage. Where the handler did not start the write, the
original runs after it, as the script wrote it.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import os
import runpy
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import pyspark
from pyspark.sql import DataFrame

import ember
from ember.engines.spark import writes

Params = dict[str, Any]
# (class, method, action name, the DataFrame the action reads, given the bound arguments)
Target = Callable[[Any, Params], DataFrame | None]
_INTERNAL = tuple(os.path.dirname(m.__file__ or "") + os.sep for m in (pyspark, ember))
_CLI = os.path.dirname(__file__) + os.sep
RDD_REASON = "an RDD action: `ember run` captures DataFrame actions (RDD programs: ember.LineageContext)"
TAIL_REASON = "tail: the last rows of a job have no defined order to capture"


def _whole(df: DataFrame, _: Params) -> DataFrame:
    return df


def _limit(arg: str | None, default: int) -> Target:
    """The first rows an action reads (take(num), head(n), first(), show(n))."""

    def target(df: DataFrame, params: Params) -> DataFrame:
        n = params.get(arg) if arg else None
        return df.limit(default if n is None else int(n))

    return target


def _written(writer: Any, _: Params) -> DataFrame:
    """The DataFrame a writer writes: a classic writer keeps it, a Connect one its plan."""
    df = writer._df  # pyspark keeps the written DataFrame (or plan) only here
    if isinstance(df, DataFrame):
        return df
    from pyspark.sql.connect.dataframe import DataFrame as ConnectFrame

    return ConnectFrame(df, writer._spark)


def _none(_: Any, __: Params) -> None:
    return None


def _classes(names: list[str]) -> list[type]:
    """The classes of those (module, class) names this PySpark has: a Connect client
    (`pyspark-client`) has no classic frames or RDDs, and a classic install may lack the
    packages Connect's frames need."""
    found = []
    for name in names:
        module, _, cls = name.rpartition(".")
        try:
            found.append(getattr(importlib.import_module(module), cls))
        except ImportError:
            continue
    return found


@functools.cache
def actions() -> list[tuple[type, str, str, Target]]:
    """(class, method, action name, target) for every action `ember run` reports, of the
    classes this PySpark has (looked up at the first run: Connect's client is slow to import)."""
    frames = _classes(["pyspark.sql.classic.dataframe.DataFrame", "pyspark.sql.connect.dataframe.DataFrame"])
    writers = writer_classes()
    rdds = _classes(["pyspark.core.rdd.RDD"])
    return [
        *((f, m, m, _whole) for f in frames for m in ("collect", "toPandas", "toArrow", "toLocalIterator", "count", "foreach", "foreachPartition")),
        *((f, "take", "take", _limit("num", 1)) for f in frames),
        *((f, "head", "head", _limit("n", 1)) for f in frames),
        *((f, "first", "first", _limit(None, 1)) for f in frames),
        *((f, "show", "show", _limit("n", 20)) for f in frames),
        *((f, "tail", "tail", _none) for f in frames),
        *((w, m, f"write.{m}", _written) for w in writers for m in ("save", "parquet", "csv", "json", "orc", "text", "xml", "saveAsTable", "insertInto", "jdbc")),
        *((r, m, f"rdd.{m}", _none) for r in rdds for m in ("collect", "count", "take", "first", "reduce", "fold", "aggregate", "sum", "foreach", "foreachPartition", "top", "takeOrdered", "collectAsMap", "countByKey", "countByValue", "saveAsTextFile", "saveAsPickleFile")),
    ]


@functools.cache
def writer_classes() -> tuple[type, ...]:
    """The DataFrameWriter classes this PySpark has (classic, Connect)."""
    return tuple(_classes(["pyspark.sql.readwriter.DataFrameWriter", "pyspark.sql.connect.readwriter.DataFrameWriter"]))


@dataclass
class Action:
    """One action the script performed, after it ran."""

    name: str
    line: int
    df: DataFrame | None  # the DataFrame whose rows the action read; None: ember cannot capture it
    reason: str = ""  # why not, when df is None
    target: str | None = None  # where a write action wrote
    write: writes.Write | None = None  # a write the handler is to make (else it was made)


Handler = Callable[[Action], None]


@dataclass
class Outcome:
    """How the script ended: normally, by sys.exit(code), or with its own exception."""

    code: int = 0
    error: BaseException | None = None


class Script:
    """A user script run in-process as `python script args...` would run it."""

    def __init__(self, path: Path, args: list[str], writes: bool = False):
        self.path = str(path.resolve())
        self.args = args
        self.writes = writes  # whether the handler makes the script's writes (`Action.write`)

    def run(self, handler: Handler) -> Outcome:
        """Runs the script with its actions reported to `handler`.

        The script's exceptions and sys.exit are its own and come back as the outcome;
        a handler's `Stop` (a BaseException, so the script's `except Exception` cannot
        swallow it) passes through.
        """
        saved = sys.argv[:], sys.path[:]
        sys.argv = [self.path, *self.args]
        sys.path.insert(0, os.path.dirname(self.path))
        try:
            with self._patched(handler):
                runpy.run_path(self.path, run_name="__main__")
        except SystemExit as e:
            return Outcome(code=e.code if isinstance(e.code, int) else (0 if e.code is None else 1))
        except Stop:
            raise
        except BaseException as e:  # the script's own failure, reported to the user as theirs
            if isinstance(e, KeyboardInterrupt):
                raise
            return Outcome(code=1, error=e)
        finally:
            sys.argv, sys.path[:] = saved[0], saved[1]
        return Outcome()

    def traceback(self, error: BaseException) -> str:
        """The script's traceback, from its first frame on, without ember's wrappers."""
        te = traceback.TracebackException.from_exception(error)
        frames = list(te.stack)
        start = next((i for i, f in enumerate(frames) if f.filename == self.path), 0)
        te.stack = traceback.StackSummary.from_list([f for f in frames[start:] if not f.filename.startswith(_CLI)])
        return "".join(te.format())

    @contextmanager
    def _patched(self, handler: Handler) -> Iterator[None]:
        patched = actions()
        originals = [(cls, method, cls.__dict__[method]) for cls, method, _, _ in patched]
        for (cls, method, name, target), (_, _, orig) in zip(patched, originals, strict=True):
            setattr(cls, method, self._wrap(orig, name, target, handler))
        if self.writes:
            for writer in writer_classes():
                originals += [(writer, m, writer.__dict__[m]) for m in writes.SETTINGS]
                for m in writes.SETTINGS:
                    setattr(writer, m, _noted(writer.__dict__[m]))
        try:
            yield
        finally:
            for cls, method, orig in originals:
                setattr(cls, method, orig)

    def _wrap(self, orig: Callable[..., Any], name: str, target: Target, handler: Handler) -> Callable[..., Any]:
        signature = inspect.signature(orig)

        def action(obj: Any, *args: Any, **kwargs: Any) -> Any:
            caller = sys._getframe(1)
            if caller.f_code.co_filename.startswith(_INTERNAL):
                return orig(obj, *args, **kwargs)  # pyspark or ember calling itself, not the script
            method = orig.__name__
            write = None
            if self.writes and isinstance(obj, writer_classes()) and method in writes.ACTIONS:
                write = writes.Write(tuple(obj.__dict__.get(NOTED, ())), writes.Call(method, args, tuple(kwargs.items())))
            result = None if write is not None else orig(obj, *args, **kwargs)
            bound = signature.bind(obj, *args, **kwargs)
            bound.apply_defaults()
            params = dict(bound.arguments)
            df = target(obj, params)
            reason = "" if df is not None else (TAIL_REASON if name == "tail" else RDD_REASON)
            written = next((str(params[k]) for k in ("path", "tableName", "name", "table") if params.get(k)), None)
            handler(Action(name, self._line(caller), df, reason, written if name.startswith("write.") else None, write))
            if write is not None and not write.started.is_set():
                result = orig(obj, *args, **kwargs)  # ember did not write: the script's write runs as written
            return result

        action.__wrapped__ = orig  # type: ignore[attr-defined]
        return action

    def _line(self, frame: FrameType | None) -> int:
        """The line of the script that led to this call (0 if the script is not on the stack)."""
        while frame is not None:
            if frame.f_code.co_filename == self.path:
                return frame.f_lineno
            frame = frame.f_back
        return 0


NOTED = "_ember_settings"  # a writer's settings as the script made them (`writes.Call`s)


def _noted(orig: Callable[..., Any]) -> Callable[..., Any]:
    """A writer's setting method that also notes the call on the writer."""

    @functools.wraps(orig)
    def setting(writer: Any, *args: Any, **kwargs: Any) -> Any:
        result = orig(writer, *args, **kwargs)
        writer.__dict__.setdefault(NOTED, []).append(writes.Call(orig.__name__, args, tuple(kwargs.items())))
        return result

    return setting


class Stop(BaseException):
    """Ends a script run early from inside a handler, carrying what the handler found."""

    def __init__(self, found: Any):
        super().__init__("ember stopped the script")
        self.found = found
