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

import threading
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark import Accumulator
from pyspark.accumulators import AddingAccumulatorParam
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.udf import UserDefinedFunction

from ember.engines.spark import jar, maps, plan_in
from ember.engines.spark.jvm import EXPRESSIONS, LOGICAL, JObj, Jvm, iterate, output_ids
from ember.engines.spark.numbering import (
    HELPERS,
    KeyedNumbering,
    TextNumbering,
    parquet_rid,
    whole_relation,
)
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
    # Side table id → what a partition map's wrapped function reports to it (`maps.reporting`).
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

    def dataframes(self, tables: list[tuple[ir.Node, pa.Table | DataFrame | None]]) -> list[DataFrame]:
        """Side tables' plans (each with the keys it is computed for) as `dataframe` makes
        them, built together: one plan-in message of several roots, one py4j call, where
        every root is one the message holds."""
        with self.lock:
            if len(tables) < 2 or not all(plan_in.expressible(n) and id(n) not in self._unchanged for n, _ in tables):
                return [self._for_keys(n, k) for n, k in tables]
            messages = []
            for node, keys in tables:
                self.keys = keys  # the nodes the message cannot hold are built as it is written
                messages.append(plan_in.message(node, self.build, self._unchanged))
            return [DataFrame(jdf, self.jvm.spark) for jdf in plan_in.dataframes(self.jvm, messages)]

    def _for_keys(self, node: ir.Node, keys: pa.Table | DataFrame | None) -> DataFrame:
        self.keys = keys
        return self.dataframe(node)

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
        made = self._keyed_function(h, added, node.keys[0], len(inputs))
        made_attrs = (self.jvm.attribute(a.name, t, True, a.id) for a, t in zip(added, types, strict=True))
        output = self.seq([*iterate(h.output()), *made_attrs])
        kind = str(h.nodeName())
        if len(inputs) == 1:
            return self.logical(kind)(h.groupingAttributes(), made, output, inputs[0])
        return self.logical(kind)(h.leftGroupingLen(), h.rightGroupingLen(), made, output, *inputs)

    def _keyed_function(self, h: JObj, added: tuple[ir.Attr, ...], keys: tuple[ir.Attr, ...], tables: int) -> JObj:
        """The grouped map's Python UDF again, over the same columns, its function wrapped to
        return the key columns `added` (of the types of `keys`) after its own (`maps`)."""
        fn = h.functionExpr()
        types = [maps.simple_type(k.dtype) for k in keys]
        eval_type = int(fn.evalType())
        names = tuple(a.name for a in added)
        wrapped, returned = maps.group_function(_command(self.jvm, fn), eval_type, names, types, tables, maps.large_strings(self.jvm.spark))
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
        report = None
        if node.reports is not None:
            if node.reports not in self.reports:  # one for every job that runs the map (side tables too)
                self.reports[node.reports] = self.jvm.spark.sparkContext.accumulator([], AddingAccumulatorParam([]))
            report = self.reports[node.reports]
        eval_type = int(fn.evalType())
        wide = added.dtype == "bigint"
        wrapped, returned = maps.partition_function(_command(self.jvm, fn), eval_type, added.name, wide, report, len(extra))
        udf = UserDefinedFunction(wrapped, returned, str(fn.name()), eval_type, bool(fn.udfDeterministic()))
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


def _kept(rid: Column, only: str | None) -> Column:
    """Selection push-down: rows not matching the workload's predicate get no rid."""
    return rid if only is None else F.when(F.expr(only), rid)
