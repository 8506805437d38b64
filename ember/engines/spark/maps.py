"""The Python functions capture runs in place of a user's grouped or partition map.

Each calls the user's function as Spark's worker would and gives every row it returns
its group's keys or its partition's number, which the map's rows do not show. The
functions they return are nested, so cloudpickle ships them by value: an executor (or a
Spark Connect server's) needs no ember installed. Both engines use them: a classic
session wraps a map through py4j, a Connect client pickles the wrapper into a plan-in
message (`connect.RemoteBuilder`).
"""

from __future__ import annotations

import base64
import inspect
import itertools
import re
import secrets
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark import Accumulator
from pyspark.serializers import CloudPickleSerializer
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from ember.engines.spark.plan_import import BATCHED_GROUP_MAPS

PANDAS_MAPS = (201, 205, 206, 216)  # PythonEvalType: grouped, partition, cogrouped and iterator maps over pandas
_SIMPLE: dict[str, DataType] = {
    "tinyint": ByteType(),
    "smallint": ShortType(),
    "int": IntegerType(),
    "bigint": LongType(),
    "string": StringType(),
    "binary": BinaryType(),
    "boolean": BooleanType(),
    "date": DateType(),
    "timestamp": TimestampType(),
    "timestamp_ntz": TimestampNTZType(),
}
_DECIMAL = re.compile(r"decimal\((\d+),(\d+)\)")

Wrapped = tuple[Callable[..., Any], StructType]


def group_function(command: str, eval_type: int, names: tuple[str, ...], types: list[DataType], tables: int, large: bool) -> Wrapped:
    """A grouped map's function (pickled `command`, base64, of PySpark `eval_type`, over
    `tables` inputs) wrapped to return its group's keys after its own columns, as columns
    `names` of `types`; and its return type with them. `large`: Arrow strings are large
    (`spark.sql.execution.arrow.useLargeVarTypes`)."""
    func, returned = _unpickled(command)
    for name, dtype in zip(names, types, strict=True):
        returned.add(name, dtype, True)
    if eval_type in PANDAS_MAPS:
        append = pandas_keys(names)
    else:  # Spark checks an Arrow function's column types strictly, as its worker would make them
        append = arrow_keys(names, [arrow_type(t, large) for t in types])
    return keyed(func, tables, append, eval_type in BATCHED_GROUP_MAPS), returned


def partition_function(
    command: str, eval_type: int, name: str, wide: bool, report: Accumulator[list[Any]] | None = None, carried: int = 0
) -> Wrapped:
    """A partition map's function wrapped to return its partition's number after its own
    columns, as column `name` (`wide`: a bigint drawn per call, else Spark's int partition
    id): read off its input's last column, or drawn, with the rids of its input's last
    `carried` columns reported to `report` (`reporting`)."""
    func, returned = _unpickled(command)
    dtype = LongType() if wide else IntegerType()
    returned.add(name, dtype, True)
    pandas = eval_type in PANDAS_MAPS
    append = pandas_keys((name,)) if pandas else arrow_keys((name,), [pa.int64() if wide else pa.int32()])
    if report is None:
        return numbered(func, pandas, append), returned
    return reporting(func, pandas, append, report, carried), returned


def large_strings(spark: Any) -> bool:
    """Whether the session's Arrow strings and binaries are large ones (an Arrow map's
    appended keys must be typed as its worker's batches are)."""
    return str(spark.conf.get("spark.sql.execution.arrow.useLargeVarTypes", "false")).lower() == "true"


def pickled(wrapped: Wrapped) -> str:
    """A wrapped function and its return type as Spark ships a Python UDF's code, base64."""
    return base64.b64encode(CloudPickleSerializer().dumps(wrapped)).decode()


def simple_type(dtype: str) -> DataType:
    """The PySpark type of a grouping key's Spark type name (one of those a key comes back
    through pandas or Arrow as: `plan_import._comes_back`), made without a JVM.

    >>> simple_type("decimal(12,2)"), simple_type("date")
    (DecimalType(12,2), DateType())
    """
    decimal = _DECIMAL.fullmatch(dtype)
    if decimal:
        return DecimalType(int(decimal.group(1)), int(decimal.group(2)))
    return _SIMPLE[dtype]


def _unpickled(command: str) -> tuple[Callable[..., Any], StructType]:
    """The user's function and its return type (a fresh copy: `add` changes it in place)."""
    func, returned = CloudPickleSerializer().loads(base64.b64decode(command))
    return func, StructType.fromJson(returned.jsonValue())


def keyed(
    func: Callable[..., Any], tables: int, append: Callable[[Any, tuple[Any, ...]], Any], batched: bool
) -> Callable[..., Any]:
    """`func` (over a group's table, or a key's two cogrouped tables; `batched`: over an
    iterator of a group's batches, returning one), called as Spark's worker would call it
    (with the key too if it takes one more argument), its rows given the key by `append`.
    The wrapper takes the key always, which tells the worker to pass it. Defined in here,
    it is pickled by value: an executor need not have ember installed."""
    with_key = len(inspect.getfullargspec(func).args) == tables + 1

    def call(key: tuple[Any, ...], *data: Any) -> Any:
        out = func(key, *data) if with_key else func(*data)
        return (append(part, key) for part in out) if batched else append(out, key)

    def grouped(key: tuple[Any, ...], table: Any) -> Any:
        return call(key, table)

    def cogrouped(key: tuple[Any, ...], left: Any, right: Any) -> Any:
        return call(key, left, right)

    return grouped if tables == 1 else cogrouped


def numbered(
    func: Callable[[Iterator[Any]], Iterator[Any]], pandas: bool, append: Callable[[Any, tuple[Any, ...]], Any]
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """`func` over a partition's batches (pandas or Arrow), each of which ends with the
    partition's number (one column, the same in every row): `func` gets them without it,
    and `append` gives every batch `func` returns the number. A partition with no rows is
    numbered -1, which names no rows: what `func` makes of nothing comes from no input row.
    Pickled by value, as `keyed`."""

    def rows(batch: Any) -> int:
        return len(batch) if pandas else int(batch.num_rows)

    def strip(batch: Any) -> Any:
        return batch.iloc[:, :-1] if pandas else batch.select(list(range(batch.num_columns - 1)))

    def number(batch: Any) -> int:
        return int(batch.iloc[0, -1]) if pandas else int(batch.column(batch.num_columns - 1)[0].as_py())

    def wrapped(batches: Iterator[Any]) -> Iterator[Any]:
        batches = iter(batches)
        seen, key = [], -1
        for batch in batches:
            seen.append(batch)
            if rows(batch):
                key = number(batch)
                break
        for out in func(strip(b) for b in itertools.chain(seen, batches)):
            yield append(out, (key,))

    return wrapped


def reporting(
    func: Callable[[Iterator[Any]], Iterator[Any]],
    pandas: bool,
    append: Callable[[Any, tuple[Any, ...]], Any],
    report: Accumulator[list[Any]],
    carried: int,
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """`func` over a partition's batches (pandas or Arrow), whose last `carried` columns
    hold the rids of each row's lineage (null: none): `func` gets them without those,
    `append` gives every batch it returns a number drawn for this call, and once it is done
    the rids of its partition's rows go to `report` under that number, per column, as runs
    of consecutive values `(key, column, starts, ends)` (a function that stops reading
    early has its partition's rest read for it, as a cached input would list it). Spark merges a task's accumulator
    updates only when it succeeds, and only when the function ran to its end: a number the
    result names but `report` lacks tells that it did not (`sides`). Pickled by value."""

    def runs(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        unique = np.sort(values)  # a sort and a mask: numpy 2's np.unique hashes, far slower
        unique = unique[np.concatenate(([True], unique[1:] != unique[:-1]))] if len(unique) else unique
        cut = np.flatnonzero(np.diff(unique) != 1) + 1
        return unique[np.r_[0, cut]] if len(unique) else unique, (
            unique[np.r_[cut - 1, len(unique) - 1]] + 1 if len(unique) else unique
        )

    def wrapped(batches: Iterator[Any]) -> Iterator[Any]:
        key = secrets.randbits(62)  # forked Python workers share `random`'s state
        read: list[list[np.ndarray]] = [[] for _ in range(carried)]

        def stripped() -> Iterator[Any]:
            for batch in batches:
                width = batch.shape[1] if pandas else batch.num_columns
                for j in range(carried):
                    at = width - carried + j
                    if pandas:
                        read[j].append(batch.iloc[:, at].dropna().to_numpy(dtype=np.int64))
                    else:
                        read[j].append(pc.drop_null(batch.column(at)).to_numpy().astype(np.int64, copy=False))
                yield batch.iloc[:, : width - carried] if pandas else batch.select(list(range(width - carried)))

        feed = stripped()
        for out in func(feed):
            yield append(out, (key,))
        for _ in feed:  # a function that stopped reading early still saw its partition
            pass
        empty = np.zeros(0, np.int64)
        report.add([(key, j, *runs(np.concatenate(r) if r else empty)) for j, r in enumerate(read)])

    return wrapped


def arrow_type(dtype: Any, large: bool) -> pa.DataType:
    """The Arrow type Spark's worker gives a Spark type's column, timestamps in UTC. Spark 4.2
    renamed the argument that says so (`timestamp_utc=True` became `timezone="UTC"`)."""
    if "timezone" in inspect.signature(to_arrow_type).parameters:
        return to_arrow_type(dtype, timezone="UTC", prefers_large_types=large)
    return to_arrow_type(dtype, timestamp_utc=True, prefers_large_types=large)  # type: ignore[call-arg]


def pandas_keys(names: tuple[str, ...]) -> Callable[[Any, tuple[Any, ...]], Any]:
    """Appends the key's values to a pandas result as columns `names`."""

    def append(out: Any, key: tuple[Any, ...]) -> Any:
        if out.shape[1] == 0:  # no columns, no rows: Spark takes it as it is
            return out
        # labels of the kind the user's are: Spark matches columns by name only if some are strings
        labels = names if any(isinstance(c, str) for c in out.columns) else range(out.shape[1], out.shape[1] + len(names))
        out = out.copy()
        for label, value in zip(labels, key, strict=True):
            out[label] = value
        return out

    return append


def arrow_keys(names: tuple[str, ...], types: list[pa.DataType]) -> Callable[[Any, tuple[Any, ...]], Any]:
    """Appends the key's values (Arrow scalars) to a pyarrow table or batch, typed as Spark
    expects."""

    def append(out: Any, key: tuple[Any, ...]) -> Any:
        for name, value, dtype in zip(names, key, types, strict=True):
            out = out.append_column(name, pa.repeat(value, out.num_rows).cast(dtype))
        return out

    return append
