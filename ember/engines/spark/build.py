"""ember IR → Spark logical plan (the execution edge).

Most of a rewritten plan goes to the JVM as one message (`plan_in`): a subtree the
rewrite left as the import made it is used whole (runtime filters included), nodes ember
did not change are rebuilt from their own Catalyst node with new children, and the few
it extends (projections, aggregates, unions, expands, joins) are constructed keeping
every attribute's exprId, so parents still resolve. What needs Python or Spark's
analyzer is built here through py4j and enters the message as a built plan: grouped and
partition maps over wrapped Python functions, Python UDTFs, window positions, supplied
keys, numbered scans and cached subplans. The finished plan is turned into a DataFrame
once, at the top.
"""

from __future__ import annotations

import base64
import inspect
import itertools
import json
import secrets
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark import Accumulator
from pyspark.accumulators import AddingAccumulatorParam
from pyspark.serializers import CloudPickleSerializer
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import StructType, _parse_datatype_json_string
from pyspark.sql.udf import UserDefinedFunction

from ember.engines.spark import jar, plan_in
from ember.engines.spark.jvm import EXPRESSIONS, LOGICAL, JObj, Jvm, iterate, output_ids
from ember.engines.spark.numbering import (
    HELPERS,
    KeyedNumbering,
    TextNumbering,
    parquet_rid,
    whole_relation,
)
from ember.engines.spark.plan_import import BATCHED_GROUP_MAPS
from ember.errors import UnsupportedOperatorError
from ember.plan import ir
from ember.plan.sources import Source

_LOGICAL = "org.apache.spark.sql.catalyst.plans.logical"


@dataclass
class Builder:
    jvm: Jvm
    sources: dict[str, Source]  # by key, as numbered for this capture
    attrs: dict[int, JObj] = field(default_factory=dict)  # exprId → Catalyst attribute, once fetched
    # exprId → (output Seq of the latest built node that outputs it, position), fetched on use:
    # reading every attribute of every node cost four py4j round trips each.
    outputs: dict[int, tuple[JObj, int]] = field(default_factory=dict)
    shared: dict[int, JObj] = field(default_factory=dict)  # ir.Shared key → its InMemoryRelation
    # What an `ir.Keys` node supplies: columns k0..kn (set by `capture.sides`), on the cluster
    # when staged side tables hold them.
    keys: pa.Table | DataFrame | None = None
    # Side table id → what a partition map's wrapped function reports to it (`_reporting`).
    reports: dict[int, Accumulator[list[Any]]] = field(default_factory=dict)
    # Held while a plan is built: a table run beside the job is built on its own thread
    # when DuckDB could not read it (`capture.sides`).
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False)
    # The plan import made: a node of it that the rewrite returned as it was (the same
    # object; one made again with `dataclasses.replace` keeps the handle but is not it)
    # stands for its whole subtree unchanged.
    imported: ir.Node | None = field(default=None, repr=False)
    _unchanged: frozenset[int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._unchanged = frozenset(map(id, ir.walk(self.imported))) if self.imported is not None else frozenset()

    def release(self) -> None:
        """Drops the cached subplans once the job and its side tables have run."""
        for relation in self.shared.values():
            relation.cacheBuilder().clearCache(False)
        self.shared.clear()

    def cached(self, key: int) -> DataFrame:
        """The rows of a cached subplan, read from its cache once a job filled it."""
        return self._prepared(self.shared[key])

    def logical(self, name: str) -> JObj:
        return self.jvm.name(f"{LOGICAL}.{name}")

    def dataframe(self, node: ir.Node) -> DataFrame:
        """The built plan as a DataFrame Spark neither analyzes nor optimizes again
        (`Prepared.java`): it is built resolved, of pieces Spark optimized for the import."""
        with self.lock:
            return self._prepared(self.build(node))

    def _prepared(self, plan: JObj) -> DataFrame:
        jdf = jar.helper(self.jvm, "Prepared").dataframe(self.jvm.jsession, plan)
        return DataFrame(jdf, self.jvm.spark)

    def build(self, node: ir.Node) -> JObj:
        handle = getattr(node, "handle", None)
        if handle is not None and id(node) in self._unchanged:
            plan: JObj = handle
        elif plan_in.expressible(node):  # with every expressible node under it, in one call
            plan = plan_in.build(self.jvm, plan_in.message(node, self.build, self._unchanged))
        else:
            plan = getattr(self, f"_{type(node).__name__}")(node)
        output = plan.output()
        for i, expr_id in enumerate(output_ids(output)):
            self.attrs.pop(expr_id, None)
            self.outputs[expr_id] = (output, i)
        return plan

    # --- expressions -------------------------------------------------------
    def expr(self, e: ir.AnyExpr) -> JObj:
        if isinstance(e, ir.Expr):
            if e.handle is None:
                raise AssertionError(f"expression without an engine handle: {e.sql}")
            return e.handle
        if isinstance(e, ir.ColumnRef):
            return self.attr(e.attr)
        if isinstance(e, ir.FrameCount | ir.Collected):
            raise AssertionError("frame counts and collected lists live only in window and aggregate nodes")
        if isinstance(e, ir.PartitionId):
            return self.jvm.name(EXPRESSIONS + ".SparkPartitionID")()
        if e.value is True:
            return self.jvm.true()
        return self.jvm.null(self.dtype(e.like))

    def attr(self, a: ir.Attr) -> JObj:
        found = self.attrs.get(a.id)
        if found is None:
            if a.id not in self.outputs:
                raise AssertionError(f"attribute {a.name}#{a.id} is not in any built input")
            output, i = self.outputs[a.id]
            found = self.attrs[a.id] = output.apply(i)
        return found

    def dtype(self, a: ir.Attr) -> JObj:
        if a.id in self.outputs:
            return self.attr(a).dataType()
        return self.jvm.type(a.dtype)

    def named(self, n: ir.Named) -> JObj:
        e = n.expr
        if isinstance(e, ir.ColumnRef) and e.attr.id == n.attr.id:
            return self.attr(e.attr)
        if isinstance(e, ir.Expr) and e.handle is not None and e.names == n.attr.id:
            return e.handle
        return self.jvm.alias(self.expr(e), n.attr.name, n.attr.id)

    def seq(self, items: list[JObj] | tuple[JObj, ...]) -> JObj:
        return self.jvm.seq(items)

    # --- nodes -------------------------------------------------------------
    def _same(self, node: ir.Node) -> JObj:
        handle = getattr(node, "handle", None)
        if handle is None:
            raise AssertionError(f"{type(node).__name__} has no engine node")
        children = [self.build(c) for c in node.children]
        return handle.withNewChildren(self.seq(children)) if children else handle

    _Scan = _same
    _Limit = _same
    _Passthrough = _same

    def _Generate(self, node: ir.Generate) -> JObj:
        """A Python UDTF names the child columns it keeps, so it is made again keeping the
        slots too (any other Generate keeps its child's new columns by itself: `plan_in`)."""
        kind = str(node.handle.nodeName())
        child = self.build(node.child)
        h = node.handle
        args = (h.udtf(), self.seq([self.attr(a) for a in node.kept]), h.resultAttrs(), child)
        return self.logical(kind)(*args, *((h.evalType(),) if kind == "ArrowEvalPythonUDTF" else ()))

    def _GroupMap(self, node: ir.GroupMap) -> JObj:
        """A grouped map whose output gained its group's keys (`annotate`) is made again
        over a wrapped function that appends them to the rows the user's function returns."""
        h = node.handle
        own = output_ids(h.output())
        if len(node.attrs) == len(own):
            return self._same(node)
        inputs = [self.build(c) for c in node.inputs]
        added = node.attrs[len(own) :]
        types = [self.attr(k).dataType() for k in node.keys[0]]
        made = self._keyed_function(h, added, types, len(inputs))
        made_attrs = (self.jvm.attribute(a.name, t, True, a.id) for a, t in zip(added, types, strict=True))
        output = self.seq([*iterate(h.output()), *made_attrs])
        kind = str(h.nodeName())
        if len(inputs) == 1:
            return self.logical(kind)(h.groupingAttributes(), made, output, inputs[0])
        return self.logical(kind)(h.leftGroupingLen(), h.rightGroupingLen(), made, output, *inputs)

    def _keyed_function(self, h: JObj, added: tuple[ir.Attr, ...], types: list[JObj], tables: int) -> JObj:
        """The grouped map's Python UDF again, over the same columns, its function wrapped to
        return the key columns `added` (of Spark `types`) after its own."""
        fn = h.functionExpr()
        keys = [_parse_datatype_json_string(t.json()) for t in types]
        returned = StructType.fromJson(json.loads(fn.dataType().json()))
        for a, t in zip(added, keys, strict=True):
            returned.add(a.name, t, True)
        func, _ = CloudPickleSerializer().loads(base64.b64decode(_command(self.jvm, fn)))
        names = tuple(a.name for a in added)
        if str(h.nodeName()).endswith("Pandas"):
            append = _pandas_keys(names)
        else:  # Spark checks an Arrow function's column types strictly, as its worker would make them
            large = self.jvm.spark.conf.get("spark.sql.execution.arrow.useLargeVarTypes", "false") == "true"
            append = _arrow_keys(names, [_arrow_type(t, large) for t in keys])
        eval_type = int(fn.evalType())
        wrapped = _keyed(func, tables, append, eval_type in BATCHED_GROUP_MAPS)
        udf = UserDefinedFunction(wrapped, returned, str(fn.name()), eval_type, bool(fn.udfDeterministic()))
        return self.jvm.expression(udf(*[self.jvm.column(c) for c in iterate(fn.children())]))

    def _PartitionMap(self, node: ir.PartitionMap) -> JObj:
        """A partition map whose output gained a number naming each row's partition
        (`annotate`) is made again over a wrapped function that appends the number to the
        rows the user's function returns: a number read off its input's last column (a
        cached input's partition id), or one it draws, when it reports the rids of the rows
        it read (its input's last columns) to side table `node.reports`."""
        h = node.handle
        if len(node.attrs) == len(output_ids(h.output())):
            return self._same(node)
        (given,) = node.inputs
        child = self.build(given)
        fn = h.functionExpr()
        own = list(iterate(fn.children()))
        extra = [self.attr(a) for a in given.output[len(own) :]]
        added = node.attrs[-1]
        dtype = self.jvm.type(added.dtype)
        returned = StructType.fromJson(json.loads(fn.dataType().json()))
        returned.add(added.name, _parse_datatype_json_string(dtype.json()), True)
        func, _ = CloudPickleSerializer().loads(base64.b64decode(_command(self.jvm, fn)))
        pandas = str(h.nodeName()) == "MapInPandas"
        width = pa.int64() if added.dtype == "bigint" else pa.int32()
        append = _pandas_keys((added.name,)) if pandas else _arrow_keys((added.name,), [width])
        if node.reports is None:
            wrapped = _numbered(func, pandas, append)
        else:
            if node.reports not in self.reports:  # one for every job that runs the map (side tables too)
                self.reports[node.reports] = self.jvm.spark.sparkContext.accumulator([], AddingAccumulatorParam([]))
            report = self.reports[node.reports]
            wrapped = _reporting(func, pandas, append, report, len(extra))
        udf = UserDefinedFunction(wrapped, returned, str(fn.name()), int(fn.evalType()), bool(fn.udfDeterministic()))
        made = self.jvm.expression(udf(*[self.jvm.column(c) for c in [*own, *extra]]))
        output = self.seq([*iterate(h.output()), self.jvm.attribute(added.name, dtype, True, added.id)])
        return self.logical(str(h.nodeName()))(made, output, child, h.isBarrier(), h.profile())

    def _Shared(self, node: ir.Shared) -> JObj:
        if node.key not in self.shared:
            self.shared[node.key] = jar.helper(self.jvm, "Prepared").cached(self.jvm.jsession, self.build(node.child))
        return self.shared[node.key]

    def _Keys(self, node: ir.Keys) -> JObj:
        """The supplied values as a local relation, typed and identified as the attributes
        they stand for, so the side table's join condition reads them."""
        if self.keys is None:
            raise AssertionError("a side table keyed by fetched values was built without them")
        types = [str(self.dtype(a).sql()) for a in node.attrs]
        if isinstance(self.keys, DataFrame):
            fresh = self.keys
        elif self.keys.num_rows == 0:  # nothing points at the table
            fresh = self.jvm.spark.createDataFrame([], ", ".join(f"k{i} {t}" for i, t in enumerate(types)))
        else:
            fresh = self.jvm.spark.createDataFrame(self.keys)
        typed = fresh.select(*[fresh[i].cast(t) for i, t in enumerate(types)])
        plan = self.jvm.analyzed(typed)
        made = list(iterate(plan.output()))
        aliases = [self.jvm.alias(m, a.name, a.id) for m, a in zip(made, node.attrs, strict=True)]
        return self.logical("Project")(self.seq(aliases), plan)

    def _Numbered(self, node: ir.Numbered) -> JObj:
        scan = node.child
        assert isinstance(scan, ir.Scan)
        source = self.sources.get(scan.source.key, scan.source)
        if source.kind == "parquet":  # only for a workload's `only`: the message numbers the rest
            df = self.jvm.dataframe(self._with_fields(scan, ["row_index", "file_path"]))
            rid = parquet_rid(df, source)
        elif isinstance(source.data, TextNumbering):
            df, rid = source.data.current().ided(self.jvm.dataframe(self._with_fields(scan, ["file_path", "file_block_start"])))
        elif source.kind == "range":
            df = self.jvm.dataframe(scan.handle)
            start, _, step = (int(x) for x in source.key.split(":")[1:])
            rid = ((F.col(scan.attrs[0].name) - F.lit(start)) / F.lit(step)).cast("long")
        elif source.kind == "memory":
            return self._numbered_memory(source, scan, node)
        elif isinstance(source.data, KeyedNumbering):
            df = self.jvm.dataframe(whole_relation(scan.handle))
            joined, rid = source.data.ided(df)
            alias = self.jvm.alias(self.jvm.expression(_kept(rid, node.only)), node.rid.name, node.rid.id)
            read = {a.name for a in scan.attrs}
            return self.jvm.analyzed(joined.select(*[df[c] for c in df.columns if c in read], self.jvm.column(alias)))
        else:
            raise UnsupportedOperatorError(f"ember cannot number rows of {source.kind} sources")
        alias = self.jvm.alias(self.jvm.expression(_kept(rid, node.only)), node.rid.name, node.rid.id)
        return self.jvm.analyzed(df.select(*[df[c] for c in df.columns if c not in HELPERS], self.jvm.column(alias)))

    def _with_fields(self, scan: ir.Scan, fields: list[str]) -> JObj:
        """The scan, its `_metadata` column (if the job reads one, pruned to the fields it
        reads) widened with the `fields` its rids read."""
        return jar.helper(self.jvm, "RowIndex").withFields(scan.handle, fields, False)

    def _numbered_memory(self, source: Source, scan: ir.Scan, node: ir.Numbered) -> JObj:
        table: pa.Table = source.data
        column = pa.array(range(table.num_rows), type=pa.int64())
        fresh = self.jvm.spark.createDataFrame(table.append_column("__ember_rid", column))
        if node.only is not None:  # resolved against the table's own columns
            fresh = fresh.withColumn("__ember_rid", _kept(F.col("__ember_rid"), node.only))
        plan = self.jvm.analyzed(fresh)
        fresh_attrs = list(iterate(plan.output()))
        aliases = [self.jvm.alias(f, a.name, a.id) for f, a in zip(fresh_attrs, (*scan.attrs, node.rid), strict=True)]
        return self.logical("Project")(self.seq(aliases), plan)


def _command(jvm: Jvm, fn: JObj) -> str:
    """A Python UDF's pickled code, base64 (as `PlanDump` writes it)."""
    return str(jar.helper(jvm, "PlanDump").command(fn.func()))


def _keyed(
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


def _numbered(
    func: Callable[[Iterator[Any]], Iterator[Any]], pandas: bool, append: Callable[[Any, tuple[Any, ...]], Any]
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """`func` over a partition's batches (pandas or Arrow), each of which ends with the
    partition's number (one column, the same in every row): `func` gets them without it,
    and `append` gives every batch `func` returns the number. A partition with no rows is
    numbered -1, which names no rows: what `func` makes of nothing comes from no input row.
    Pickled by value, as `_keyed`."""

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


def _reporting(
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


def _arrow_type(dtype: Any, large: bool) -> pa.DataType:
    """The Arrow type Spark's worker gives a Spark type's column, timestamps in UTC. Spark 4.2
    renamed the argument that says so (`timestamp_utc=True` became `timezone="UTC"`)."""
    if "timezone" in inspect.signature(to_arrow_type).parameters:
        return to_arrow_type(dtype, timezone="UTC", prefers_large_types=large)
    return to_arrow_type(dtype, timestamp_utc=True, prefers_large_types=large)  # type: ignore[call-arg]


def _pandas_keys(names: tuple[str, ...]) -> Callable[[Any, tuple[Any, ...]], Any]:
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


def _arrow_keys(names: tuple[str, ...], types: list[pa.DataType]) -> Callable[[Any, tuple[Any, ...]], Any]:
    """Appends the key's values (Arrow scalars) to a pyarrow table or batch, typed as Spark
    expects."""

    def append(out: Any, key: tuple[Any, ...]) -> Any:
        for name, value, dtype in zip(names, key, types, strict=True):
            out = out.append_column(name, pa.repeat(value, out.num_rows).cast(dtype))
        return out

    return append


def _kept(rid: Column, only: str | None) -> Column:
    """Selection push-down: rows not matching the workload's predicate get no rid."""
    return rid if only is None else F.when(F.expr(only), rid)
