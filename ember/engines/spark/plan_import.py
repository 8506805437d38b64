"""Spark's optimized logical plan → ember IR (the import edge).

ember reads the plan Spark itself would run, so SQL and the DataFrame API are one
path and subqueries arrive decorrelated. A few optimizer rules are switched off for
the plan ember reads because they would destroy row identity or lineage (for
example, folding a filter over an in-memory table into a new in-memory table).
Anything ember cannot trace exactly raises `UnsupportedOperatorError` here, before
any job runs.
"""

from __future__ import annotations

import base64
import itertools
import json
import re
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple, Protocol

import pyarrow.parquet as pq
from pyspark.serializers import CloudPickleSerializer
from pyspark.sql import DataFrame, SparkSession

from ember.engines.duck import sql as duck_sql
from ember.engines.spark import catalyst
from ember.engines.spark.jvm import Jvm, iterate
from ember.errors import EmberError, StaleSourceError, UnsupportedOperatorError
from ember.plan import domains, ir
from ember.plan.sources import (
    COUNTED,
    KEYED,
    Source,
    SourceFile,
    file_facts,
    local_path,
    partition_of,
    path_order,
    spark_uri,
    stem,
)
from ember.plan.trees import PlanOut, PlanTree, Tree, find

_UNSUPPORTED = {
    "PythonMapInArrow": "mapInArrow",
    "FlatMapGroupsInPandasWithState": "applyInPandasWithState",
    "TransformWithStateInPandas": "transformWithStateInPandas",
    "MapPartitionsInR": "dapply",
    "MapPartitions": "mapPartitions (typed)",
    "MapElements": "map (typed)",
    "AppendColumns": "typed groupByKey",
    "MapGroups": "mapGroups (typed)",
    "CoGroup": "cogroup (typed)",
    "DeserializeToObject": "typed Dataset operators",
    "SerializeFromObject": "typed Dataset operators",
}

_JOIN_KINDS = {
    "Inner": "inner",
    "Cross": "cross",
    "LeftOuter": "left",
    "RightOuter": "right",
    "FullOuter": "full",
    "LeftSemi": "semi",
    "LeftAnti": "anti",
}

_PASSTHROUGH = {
    "Sort": "sort",
    "Repartition": "repartition",
    "RepartitionByExpression": "repartition",
    "RebalancePartitions": "repartition",
    "BatchEvalPython": "python udf",
    "ArrowEvalPython": "pandas udf",
    "CollectMetrics": "observe",
    "Sample": "sample",
}

_LIMITS = {"GlobalLimit", "LocalLimit", "Offset", "Tail", "GlobalLimitAndOffset"}
_PYTHON = {"PythonUDF", "PythonUDAF"}  # functions Spark evaluates in Python
_BELOW_TAG = {*_LIMITS, "Sort", "Filter"}  # what EXCEPT ALL's right-side tag may be pushed below

# Names given with `ember.source(df, name)`, per session, by source key: a name given in
# one session does not rename the same files read in another.
_NAMED: weakref.WeakKeyDictionary[SparkSession, dict[str, str]] = weakref.WeakKeyDictionary()


# Key columns given with `ember.source(df, name, key=[...])`, per session, by source key,
# and the relation each was declared on (a loaded store's keyed source reads rows through it).
_ROW_KEYS: weakref.WeakKeyDictionary[SparkSession, dict[str, tuple[str, ...]]] = weakref.WeakKeyDictionary()
_KEYED_RELATIONS: weakref.WeakKeyDictionary[SparkSession, dict[str, DataFrame]] = weakref.WeakKeyDictionary()
_RELATION_CLASSES = ("LogicalRelation", "DataSourceV2Relation", "DataSourceV2ScanRelation")  # the last: optimized (Connect)


def _key_columns(leaf: PlanTree, key: tuple[str, ...]) -> tuple[str, ...]:
    """The key's columns as the relation spells them; a column may be a field of the
    relation's `_metadata` (`_metadata.row_index`, a table format's `_metadata.row_id`)."""
    columns = {a.name.lower(): a.name for a in leaf.output}
    spelled = []
    for column in key:
        top, dot, field = column.partition(".")
        if top.lower() == "_metadata" and dot and leaf.kind == "LogicalRelation":
            spelled.append(f"_metadata.{field}")
        elif column.lower() in columns:
            spelled.append(columns[column.lower()])
        else:
            raise EmberError(f"ember.source: the source has no column {column!r} for its key; it has {', '.join(columns.values())}")
    return tuple(spelled)


def declared_relation(spark: SparkSession, source: str) -> DataFrame | None:
    """The relation a keyed source (by its key) was declared on in `spark`'s session."""
    return _KEYED_RELATIONS.get(spark, {}).get(source)


def name_source(jvm: Jvm, df: DataFrame, name: str, key: tuple[str, ...] = ()) -> None:
    """Names the single source `df` reads, for the lineage of `df`'s session's jobs; `key`:
    the columns whose values identify its rows (a source with no stable row order)."""

    def relation() -> DataFrame:
        [found] = [r for r in iterate(jvm.analyzed(df).collectLeaves()) if r.getClass().getSimpleName() in _RELATION_CLASSES]
        return jvm.dataframe(found)

    declare(jvm.spark, catalyst.leaves(jvm, jvm.analyzed(df)), relation, name, key)


def declare(
    spark: SparkSession, leaves: list[PlanTree], relation: Callable[[], DataFrame], name: str, key: tuple[str, ...]
) -> None:
    """Names the single source among a DataFrame's plan `leaves` for `spark`'s jobs, with
    its key columns and its `relation` (all columns, as a DataFrame of that session) where
    `key` is given."""
    keyed = {k: leaf for leaf in leaves if (k := source_key(leaf)) is not None}
    if len(keyed) != 1:
        raise EmberError(f"ember.source needs a DataFrame that reads exactly one source, not {len(keyed)}")
    source, leaf = keyed.popitem()
    if key:
        if leaf.kind not in _RELATION_CLASSES:
            raise EmberError(
                "ember.source: key= is for tables and files (a JDBC table, a Python data source, a file "
                "format with row ids of its own); ember numbers in-memory rows and ranges by position"
            )
        _ROW_KEYS.setdefault(spark, {})[source] = _key_columns(leaf, key)
        _KEYED_RELATIONS.setdefault(spark, {})[source] = relation()
    _NAMED.setdefault(spark, {})[source] = name


def declared(spark: SparkSession) -> tuple[dict[str, str], dict[str, tuple[str, ...]]]:
    """The names and key columns `ember.source` gave sources in `spark`'s session, by key."""
    return _NAMED.get(spark, {}), _ROW_KEYS.get(spark, {})


Listed = tuple[str, int, int]  # a file as the engine listed it: URI, size, modification time (ms)
Facts = tuple[int, int, int]  # a file's size, modification time (ns) and rows (Parquet's; else 0)


class Files(Protocol):
    """What tells a file source's facts: this process, or an engine that reads files it cannot."""

    def facts(self, fmt: str, listed: list[Listed]) -> tuple[list[Facts], bool]:
        """Each listed file's facts, and whether they are the engine's (files this process
        does not read: `Source.remote`)."""
        ...

    def reader(self, source: Source) -> Any:
        """What reads a remote source's rows through Spark."""
        ...


class Here:
    """Files this process reads: their facts off this machine's file system (its clock, to
    the nanosecond, as later checks read it), a Parquet file's rows off its footer."""

    def facts(self, fmt: str, listed: list[Listed]) -> tuple[list[Facts], bool]:
        found = []
        for uri, size, _ in listed:
            here, mtime = file_facts(uri)
            if size not in (-1, here):
                raise StaleSourceError(f"{local_path(uri)} changed while ember read the plan: capture again")
            rows = pq.ParquetFile(local_path(uri)).metadata.num_rows if fmt == "parquet" else 0
            found.append((here, mtime, rows))
        return found, False

    def reader(self, source: Source) -> Any:
        raise AssertionError("files this process reads need no reader")


@dataclass
class Importer:
    """Reads one optimized plan from its message alone (no calls into the engine but
    `files`' for files this process cannot read); sources are shared across the plan by
    their key and named by `names`, then by default."""

    names: dict[str, str]  # source key → name (given with `ember.source`, or its view's)
    row_keys: dict[str, tuple[str, ...]] = field(default_factory=dict)  # source key → key columns
    sources: dict[str, Source] = field(default_factory=dict)
    files: Files = field(default_factory=Here)

    # --- expressions -----------------------------------------------------
    def expr(self, e: Tree, named: ir.Attr | None = None) -> ir.Expr:
        """`named`: the attribute a named expression (an alias) makes."""
        # a subquery's plan is whole: its domain joins are marked within it
        subqueries = tuple(domains.marked(self.node(s.plan)) for s in _scalar_subqueries(e) if s.plan is not None)
        left = find(e, {"Exists", "InSubquery", "ListQuery", "LateralSubquery"})
        if left:
            raise UnsupportedOperatorError(f"ember cannot trace the subquery {left[0].text} left in {e.text}")
        dtype = named.dtype if named is not None else e.dtype or ""
        names = named.id if named is not None else None
        return ir.Expr(e.text, e.refs, e.handle, subqueries, e.deterministic, dtype, _column(e), names, tree=e)

    def named(self, e: Tree) -> ir.Named:
        if e.id is None or e.name is None or e.dtype is None:
            raise UnsupportedOperatorError(f"ember cannot read the column {e.text}")
        attr = ir.Attr(e.id, e.name, e.dtype, e.nullable)
        return ir.Named(self.expr(e, attr), attr)

    def named_list(self, seq: tuple[Tree, ...], output: tuple[ir.Attr, ...]) -> tuple[ir.Named, ...]:
        """Named expressions with the output attributes they make (a bare column makes itself)."""
        out = []
        for e, attr in zip(seq, output, strict=True):
            if e.kind == "AttributeReference":
                bare = ir.Expr(e.text, frozenset({attr.id}), e.handle, dtype=attr.dtype, column=attr.id, names=attr.id, tree=e)
                out.append(ir.Named(bare, attr))
            else:
                out.append(ir.Named(self.expr(e, attr), attr))
        return tuple(out)

    def exprs(self, seq: tuple[Tree, ...]) -> tuple[ir.Expr, ...]:
        return tuple(self.expr(e) for e in seq)

    # --- plans -------------------------------------------------------------
    def node(self, p: PlanTree) -> ir.Node:
        kind = p.kind
        if kind in _UNSUPPORTED:
            raise UnsupportedOperatorError(
                f"ember cannot trace {kind} ({_UNSUPPORTED[kind]}): its output rows have no known input rows"
            )
        if kind == "UnionLoop":
            raise UnsupportedOperatorError(
                "ember cannot trace a recursive CTE (WITH RECURSIVE) yet: each round's rows would carry "
                "the lineage of the rows they were made from, rounds deep"
            )
        method = getattr(self, f"_{kind}", None)
        if method is not None:
            node: ir.Node = method(p)
            return node
        if kind in _LIMITS:
            return ir.Limit(self.node(p.child), kind=kind, handle=p.handle)
        if kind in _PASSTHROUGH:
            child = self.node(p.child)
            added = tuple(a for a in p.output if a not in child.output)
            # observed metrics (`df.observe`) aggregate over the rows: no row's own columns
            exprs = self.exprs(p.exprs.get("exprs", ())) if kind != "CollectMetrics" else ()
            named = ir.RANDOM_SAMPLE if kind == "Sample" and not p.facts.get("seeded") else _PASSTHROUGH[kind]
            return ir.Passthrough(child, kind=named, added=added, exprs=exprs, handle=p.handle)
        raise UnsupportedOperatorError(f"ember cannot trace the operator {kind}: {p.facts.get('s', kind)}")

    def _Project(self, p: PlanTree) -> ir.Node:
        return ir.Project(self.node(p.child), columns=self.named_list(p.exprs["list"], p.output))

    def _Filter(self, p: PlanTree) -> ir.Node:
        cond = p.expr("cond")  # without Spark's runtime filters (none: it was only those)
        child = self.node(p.child)
        return child if cond is None else ir.Filter(child, cond=self.expr(cond))

    def _Join(self, p: PlanTree) -> ir.Node:
        name = p.facts["type"]
        cond = p.expr("cond")
        left, right = self.node(p.children[0]), self.node(p.children[1])
        expr = self.expr(cond) if cond is not None else None
        equi, theta = _equi(cond, left, right) if cond is not None else ((), False)
        if name == "ExistenceJoin":
            exists = p.attrs["exists"][0]
            return ir.Join("existence", left, right, expr, handle=p.handle, exists_attr=exists, equi=equi, theta=theta)
        if name not in _JOIN_KINDS:
            raise UnsupportedOperatorError(f"ember cannot trace join type {name}")
        return ir.Join(_JOIN_KINDS[name], left, right, expr, handle=p.handle, equi=equi, theta=theta)

    def _Aggregate(self, p: PlanTree) -> ir.Node:
        return ir.Aggregate(
            self.node(p.child),
            keys=self.exprs(p.exprs["keys"]),
            columns=self.named_list(p.exprs["list"], p.output),
            handle=p.handle,
            python=any(find(e, _PYTHON) for e in p.exprs["list"]),
        )

    def _Union(self, p: PlanTree) -> ir.Node:
        blind = frozenset(i for i, c in enumerate(p.children) if _is_except_all_right(c))
        return ir.Union(tuple(self.node(c) for c in p.children), p.output, blind=blind, handle=p.handle)

    def _Window(self, p: PlanTree) -> ir.Node:
        return ir.Window(
            self.node(p.child),
            columns=tuple(self.named(e) for e in p.exprs["list"]),
            frames=tuple(_frame(e) for e in p.exprs["list"]),
            partition=self.exprs(p.exprs["partition"]),
            order=self.exprs(p.exprs["order"]),
            handle=p.handle,
            python=any(find(e, _PYTHON) for e in p.exprs["list"]),
        )

    def _Generate(self, p: PlanTree, python: bool = False) -> ir.Node:
        generator = p.expr("gen")
        assert generator is not None
        return ir.Generate(
            self.node(p.child),
            generator=self.expr(generator),
            generated=p.attrs["generated"],
            kept=p.attrs["kept"],
            python=python,
            handle=p.handle,
        )

    def _python_udtf(self, p: PlanTree) -> ir.Node:
        """A Python UDTF called per input row, as a generate: the rows its `eval` yields for
        a row follow that row. Spark pins the rows a `terminate` yields, after a partition's
        last row, to that last row, though any row of the partition may have made them."""
        handler = _handler(p.facts["command"])
        name = getattr(handler, "__name__", "") if isinstance(handler, type) else ""
        if not name:
            raise UnsupportedOperatorError(
                "ember cannot trace a Python UDTF whose handler class it cannot read: it tells whether the "
                "UDTF has a terminate(), whose rows Spark gives a partition's last input row's lineage"
            )
        if hasattr(handler, "terminate"):
            raise UnsupportedOperatorError(
                f"ember cannot trace the Python UDTF {name}: it has a terminate(), and Spark gives the rows "
                "terminate() yields the lineage of a partition's last input row, whichever rows made them"
            )
        return self._Generate(p, python=True)

    _BatchEvalPythonUDTF = _python_udtf
    _ArrowEvalPythonUDTF = _python_udtf

    def _group_map(self, p: PlanTree) -> ir.Node:
        """`applyInPandas` / `applyInArrow` (of `groupBy()` or `cogroup()`): its rows carry no
        sign of their group, so capture wraps the function to add the group's keys to its
        rows; that needs the function (unpickled here) and keys that come back from pandas or
        Arrow as they went in (the same type on both sides of a cogroup)."""
        what = ("cogroup()." if "CoGroups" in p.kind else "groupBy().") + (
            "applyInPandas" if p.kind.endswith("Pandas") else "applyInArrow"
        )
        self._wrappable(p, what, GROUP_MAP_EVAL_TYPES, "group")
        keys = (p.attrs["grouping"], *(() if "cogrouping" not in p.attrs else (p.attrs["cogrouping"],)))
        for key in keys[0]:
            if not _comes_back(key.dtype):
                raise UnsupportedOperatorError(
                    f"ember cannot trace {what} grouped by {key.name} of type {key.dtype}: the function "
                    "hands the group's key back through pandas or Arrow, and only integer, decimal, string, "
                    "binary, boolean, date and timestamp keys come back as themselves (a NaN does not)"
                )
        if [k.dtype for k in keys[0]] != [k.dtype for k in keys[-1]]:
            raise UnsupportedOperatorError(f"ember cannot trace {what} over keys of other types on each side")
        inputs = tuple(self.node(c) for c in p.children)
        return ir.GroupMap(inputs, keys=keys, function=self._python_function(p), attrs=p.output, handle=p.handle)

    def _partition_map(self, p: PlanTree) -> ir.Node:
        """`mapInPandas` / `mapInArrow`: capture wraps the function to add its partition's
        number to its rows, as a grouped map's gets its group's keys."""
        self._wrappable(p, "mapInPandas" if p.kind == "MapInPandas" else "mapInArrow", PARTITION_MAP_EVAL_TYPES, "partition")
        return ir.PartitionMap((self.node(p.child),), keys=((),), function=self._python_function(p), attrs=p.output, handle=p.handle)

    @staticmethod
    def _wrappable(p: PlanTree, what: str, eval_types: tuple[int, ...], group: str) -> None:
        """Refuses a map whose function capture cannot wrap to tell each row's `group`."""
        if p.facts["evalType"] not in eval_types:
            raise UnsupportedOperatorError(
                f"ember cannot trace {what} of Python eval type {p.facts['evalType']}: it wraps the function "
                f"to tell each row's {group}, and does not know how Spark calls this kind"
            )
        command = _handler(p.facts["command"])
        if not (isinstance(command, tuple) and len(command) == 2 and callable(command[0])):
            raise UnsupportedOperatorError(
                f"ember cannot trace this {what}: it cannot read the function (a large one is shipped as a "
                f"broadcast), which it wraps to tell each output row's {group}"
            )

    def _python_function(self, p: PlanTree) -> ir.Expr:
        fn = p.expr("fn")
        assert fn is not None
        return self.expr(fn)

    def _AttachDistributedSequence(self, p: PlanTree) -> ir.Node:
        """pandas-on-Spark's default index: each row numbered in the order rows come. Spark
        puts the number first; the passthrough adds it last, so a projection puts it back."""
        child = self.node(p.child)
        (number,) = (a for a in p.output if a not in child.output)
        made = ir.Passthrough(child, kind=ir.SEQUENCE, added=(number,), handle=p.handle)
        return ir.Project(made, columns=tuple(ir.Named(ir.ColumnRef(a), a) for a in p.output))

    _FlatMapGroupsInPandas = _group_map
    _FlatMapGroupsInArrow = _group_map
    _MapInPandas = _partition_map
    _MapInArrow = _partition_map
    _FlatMapCoGroupsInPandas = _group_map
    _FlatMapCoGroupsInArrow = _group_map

    def _Expand(self, p: PlanTree) -> ir.Node:
        return ir.Expand(
            self.node(p.child),
            projections=tuple(self.exprs(row) for row in p.projections),
            attrs=p.output,
            handle=p.handle,
        )

    # --- leaves --------------------------------------------------------------
    def _scan(self, p: PlanTree, source: Source) -> ir.Node:
        source = self.sources.setdefault(source.key, source)
        return ir.Scan(source=source, attrs=p.output, handle=p.handle)

    def _LogicalRelation(self, p: PlanTree) -> ir.Node:
        if p.facts["rel"] != "HadoopFsRelation":
            return self._keyed(p)
        key = source_key(p)
        assert key is not None
        if key in self.sources:
            return self._scan(p, self.sources[key])
        roots = sorted(p.facts["roots"])
        fmt = key.split(":", 1)[0]
        if key in self.row_keys:  # files identified by a key, not by position
            return self._keyed(p, stem(roots[0]) if len(roots) == 1 else fmt)
        if fmt != "parquet" and fmt not in COUNTED:
            raise UnsupportedOperatorError(
                f"ember cannot number the rows of {fmt} files (Parquet, CSV, JSON, XML, text, ORC, binary files and "
                f"in-memory sources are); a format with row ids of its own is traced by key: ember.source(df, "
                f"{stem(roots[0])!r}, key=[\"_metadata.row_id\"]) (docs/guide/keyed.md)"
            )
        options = {str(k).lower(): str(v) for k, v in p.facts.get("options", {}).items()}
        if fmt in ("csv", "json", "xml") and options.get("mode", "").upper() == "DROPMALFORMED":
            raise UnsupportedOperatorError(
                f"ember cannot number the rows of {fmt} files read with mode DROPMALFORMED: which rows "
                "Spark drops depends on the columns a job reads; read them with mode PERMISSIVE (the "
                "default) and filter the malformed rows out"
            )
        partitioning = tuple((str(n), str(t)) for n, t in p.facts.get("partitioning", ()))
        for column, dtype in partitioning:
            if duck_sql.duck_type(dtype) is None:
                raise UnsupportedOperatorError(f"ember cannot read the partition column {column} of type {dtype}")
        listed = sorted(((spark_uri(f), int(size), int(mtime)) for f, size, mtime in p.facts["files"]), key=lambda f: path_order(f[0]))
        facts, remote = self.files.facts(fmt, listed)
        files, offset = [], 0
        for (uri, _, _), (size, mtime, rows) in zip(listed, facts, strict=True):
            # Text formats are counted by a pass over the files once capture starts (capture.numbering).
            try:
                values = partition_of(uri, tuple(n for n, _ in partitioning))
            except ValueError as e:
                raise UnsupportedOperatorError(f"ember cannot tell a file's partition: {e}") from None
            files.append(SourceFile(uri, size, mtime, rows, offset, values))
            offset += rows
        name = self._name(key, stem(roots[0]) if len(roots) == 1 else fmt)
        data = p.facts.get("bare") if fmt != "parquet" else None
        columns = tuple(str(c) for c in p.facts.get("columns", ()))
        source = Source(key, name, fmt, offset, tuple(files), partitioning, columns, data=data, remote=remote)
        if remote or fmt in COUNTED:  # what reads its files again: a Spark Connect client's reader
            kept = tuple(sorted((k, v) for k, v in options.items() if k not in ("path", "paths") and not _SECRET.search(k)))
            source = replace(source, options=kept)
        if remote:
            source = replace(source, data=self.files.reader(source))
        return self._scan(p, source)

    def _HiveTableRelation(self, p: PlanTree) -> ir.Node:
        """A metastore table Spark reads with Hive's own reader and serde (a text-serde table;
        a Parquet or ORC one the session does not convert to a file source). Its rows are
        numbered by counting them as that reader gives them (`numbering.number_hive_source`),
        so a row's values are the job's own; its files are those of all of the table's
        partitions, whichever a job reads, so a row's rid does not depend on the job."""
        key = source_key(p)
        assert key is not None
        if key in self.sources:
            return self._scan(p, self.sources[key])
        f = p.facts
        if f["handler"]:
            raise UnsupportedOperatorError(
                f"ember cannot number the rows of the Hive table {f['table']}: it is stored by the storage "
                f"handler {f['handler']}, not in files ember can list"
            )
        if f["nested"]:
            raise UnsupportedOperatorError(
                f"ember cannot number the rows of the Hive table {f['table']}: its folder holds the subfolder "
                f"{f['nested'][0]}, whose files Hive's reader reads or skips by settings ember does not follow"
            )
        partitioning = tuple((str(n), str(t)) for n, t in f["partitioning"])
        files = []
        for uri, listed, _, values in sorted(f["files"], key=lambda file: path_order(spark_uri(file[0]))):
            uri = spark_uri(uri)
            size, mtime = file_facts(uri)
            if listed != size:
                raise StaleSourceError(f"{local_path(uri)} changed while ember read the plan: capture again")
            # the values as the metastore spells them, which Hive's reader gives a string
            # partition column (a null one is `__HIVE_DEFAULT_PARTITION__`, as it reads)
            partition = tuple(None if v is None else str(v) for v in values)
            files.append(SourceFile(uri, size, mtime, 0, 0, partition))  # rows: counted once capture starts
        columns = tuple(str(c) for c in f["columns"])
        name = self._name(key, str(f["name"]))
        return self._scan(p, Source(key, name, "hive", 0, tuple(files), partitioning, columns, data=p.handle))

    def _keyed(self, p: PlanTree, default: str | None = None) -> ir.Node:
        """A relation with no stable row order (a JDBC table, a V2 data source such as a Python
        one), or files the user chose to identify by key: its rows are identified by the key
        the user named for it, and numbered in key order once capture starts
        (`numbering.number_keyed_source`); without a key, refused."""
        key = source_key(p)
        if key is None:
            raise UnsupportedOperatorError(f"ember cannot trace rows of the relation {p.facts['rel']}")
        if key in self.sources:
            return self._scan(p, self.sources[key])
        name = self._name(key, default or str(p.facts["table"]).rsplit(".", 1)[-1] or "table")
        row_key = self.row_keys.get(key)
        if row_key is None:
            raise UnsupportedOperatorError(
                f"ember cannot number the rows of {_describe(p)}: it has no stable row order. Name the "
                f"columns that identify its rows: ember.source(df, {name!r}, key=[\"id\"]) on the DataFrame "
                "that reads it, before the job (docs/guide/keyed.md)"
            )
        columns = tuple(a.name for a in p.output)
        return self._scan(p, Source(key, name, KEYED, 0, columns=columns, row_key=row_key, data=p.handle))

    _DataSourceV2ScanRelation = _DataSourceV2Relation = _keyed

    def _LocalRelation(self, p: PlanTree) -> ir.Node:
        return self._memory(p)

    def _LogicalRDD(self, p: PlanTree) -> ir.Node:
        return self._memory(p)

    def _memory(self, p: PlanTree) -> ir.Node:
        key = source_key(p)
        assert key is not None
        if key in self.sources:
            return self._scan(p, self.sources[key])
        return self._scan(p, Source(key, self._name(key, "memory"), "memory", -1, data=p.handle))

    def _Range(self, p: PlanTree) -> ir.Node:
        key = source_key(p)
        assert key is not None
        slices = p.facts.get("slices")  # what spark.range was given, which places rows in partitions
        options = () if slices is None else (("numPartitions", str(slices)),)
        return self._scan(p, Source(key, self._name(key, "range"), "range", int(p.facts["count"]), options=options))

    def _OneRowRelation(self, p: PlanTree) -> ir.Node:
        return self._scan(p, Source("none", "none", "none", 1))

    def _name(self, key: str, default: str) -> str:
        name = self.names.get(key) or default
        taken = {s.name for s in self.sources.values()}
        for n in itertools.count(2):
            if name not in taken:
                return name
            name = f"{name.rsplit('_', 1)[0] if n > 2 else name}_{n}"
        raise AssertionError("unreachable")


def source_key(leaf: PlanTree) -> str | None:
    """The key of the source a leaf reads (None: it reads none ember numbers)."""
    f = leaf.facts
    if leaf.kind == "LogicalRelation" and f["rel"] == "HadoopFsRelation":
        fmt = f["fmt"].replace("FileFormat", "").lower()
        return f"{fmt}:{','.join(sorted(f['roots']))}"
    if leaf.kind == "HiveTableRelation":
        return f"hive:{f['table']}"
    if "table" in f and leaf.kind in ("LogicalRelation", "DataSourceV2Relation", "DataSourceV2ScanRelation"):
        options = sorted((str(k).lower(), _URL_SECRET.sub(r"\1=", str(v))) for k, v in f["options"].items())
        return f"{KEYED}:{f['rel']}:{f['table']}:{json.dumps(options)}"
    if leaf.kind == "LocalRelation":
        return f"memory:{f['data']}"
    if leaf.kind == "LogicalRDD":
        return f"memory:rdd{f['rdd']}"
    if leaf.kind == "Range":
        return f"range:{f['start']}:{f['end']}:{f['step']}"
    return None


# Credentials a JDBC URL may carry (`...?user=u&password=p`): a source's key is saved with its store.
_URL_SECRET = re.compile(r"(?i)\b(user|password)=[^&;]*")
# Reader options a remote source keeps (to read its rows again) but not one that could hold
# a credential: those are the session's to supply (PlanDump writes none of a keyed one's).
_SECRET = re.compile(r"password|secret|token|credential|user|keytab")


def _describe(p: PlanTree) -> str:
    """A keyed relation as a user knows it: a JDBC table, or a data source's table."""
    if p.facts["rel"] == "JDBCRelation":
        return f"the JDBC table {p.facts['table']}"
    return f"the table {p.facts['table']} of a {p.facts['rel']} data source"


def source_keys(jvm: Jvm, df: DataFrame) -> set[str]:
    """The keys of the sources `df` reads."""
    return {k for k in (source_key(leaf) for leaf in catalyst.leaves(jvm, jvm.analyzed(df))) if k is not None}


class Imported(NamedTuple):
    plan: ir.Node
    sources: dict[str, Source]  # by key
    clock: bool  # the plan reads the clock: each run of it computes other values


def import_plan(jvm: Jvm, df: DataFrame) -> Imported:
    """The IR of `df`'s optimized plan and the sources it reads, from one plan-out message."""
    return imported_from(catalyst.message(jvm, df), *declared(jvm.spark))


def imported_from(
    out: PlanOut,
    named: dict[str, str],
    row_keys: dict[str, tuple[str, ...]] | None = None,
    files: Files | None = None,
) -> Imported:
    """The IR and the sources of a plan-out message; `named`: source names given by key,
    `row_keys`: keyed sources' key columns by key, `files`: what tells file facts (this
    process, by default)."""
    if out.plan is None:
        raise UnsupportedOperatorError(
            "ember traces batch jobs, and this DataFrame is streaming (a micro-batch's DataFrame in "
            "foreachBatch is a batch one)"
        )
    importer = Importer({**view_names(out.views), **named}, dict(row_keys or {}), files=files or Here())
    root = importer.node(out.plan)
    return Imported(domains.marked(root), importer.sources, out.clock)


def view_names(views: tuple[tuple[str, PlanTree], ...]) -> dict[str, str]:
    """Source key → temp-view or table name, for views and tables that *are* one source
    (a view defined by a query over a table names nothing); the first name of a source."""
    names: dict[str, str] = {}
    for name, leaf in views:
        key = source_key(leaf)
        if key is not None:
            names.setdefault(key, name)
    return names


def _scalar_subqueries(e: Tree) -> list[Tree]:
    found = find(e, {"ScalarSubquery"})
    correlated = next((s for s in found if s.outer), None)
    if correlated is not None:
        raise UnsupportedOperatorError(f"ember cannot trace the correlated scalar subquery {correlated.text}")
    return found


def _column(e: Tree) -> int | None:
    """The exprId of the column `e` reads, when `e` is a column or an alias of one."""
    if e.kind == "Alias":
        e = e.children[0]
    return e.id if e.kind == "AttributeReference" else None


def _equi(cond: Tree, left: ir.Node, right: ir.Node) -> tuple[tuple[tuple[int, int], ...], bool]:
    """The (left, right) column pairs a join condition's conjuncts declare equal, and whether
    it holds anything else (other conjuncts, or null-safe equalities, which pair nulls)."""
    lids, rids = {a.id for a in left.output}, {a.id for a in right.output}
    pairs = []
    conjuncts = _conjuncts(cond)
    plain = 0
    for c in conjuncts:
        if c.kind not in ("EqualTo", "EqualNullSafe"):
            continue
        a, b = _column(c.children[0]), _column(c.children[1])
        if a in rids and b in lids:
            a, b = b, a
        if a in lids and b in rids:
            pairs.append((a, b))
            plain += c.kind == "EqualTo"
    return tuple(pairs), plain < len(conjuncts)


def _conjuncts(e: Tree) -> list[Tree]:
    if e.kind == "And":
        return _conjuncts(e.children[0]) + _conjuncts(e.children[1])
    return [e]


def _is_except_all_right(p: PlanTree) -> bool:
    """The right input of Spark's EXCEPT ALL rewrite: it tags its rows with `-1 AS vcol` in a
    projection, which the optimizer may push below limits, sorts and filters and merge into
    an aggregate there."""
    while p.kind in _BELOW_TAG and p.children:
        p = p.child
    return p.kind in ("Project", "Aggregate") and any(
        e.kind == "Alias" and e.name == "vcol" and e.children[0].text == "-1" for e in p.exprs["list"]
    )


# Window functions whose value ties do not change: ranks give peers one value; these
# aggregates do not depend on the order they see rows in (a float sum's rounding aside, as
# for any aggregate).
_TIE_FREE_RANKS = frozenset({"Rank", "DenseRank", "PercentRank", "CumeDist"})
_ORDER_BLIND = frozenset({
    "Sum", "Count", "Average", "Min", "Max", "StddevSamp", "StddevPop", "VarianceSamp", "VariancePop",
})  # fmt: skip


def _frame(named: Tree) -> ir.Frame:
    """The frame of a window column `Alias(WindowExpression(fn, spec))`."""
    we = named.children[0] if named.kind == "Alias" else named
    if we.kind != "WindowExpression":
        raise UnsupportedOperatorError(f"ember cannot read the window column {named.text}")
    fn, spec = we.children
    frame = spec.children[-1]
    ranking = fn.kind in {
        "RowNumber", "Rank", "DenseRank", "PercentRank", "NTile", "CumeDist",
    }
    if frame.kind != "SpecifiedWindowFrame":
        raise UnsupportedOperatorError(f"ember cannot read the window frame {frame.text}")
    kind = "rows" if (frame.frame or "").startswith("RowFrame") else "range"
    lower, upper = (_bound(b, kind) for b in frame.children[:2])
    tie_free = fn.kind in _TIE_FREE_RANKS or (
        fn.kind == "AggregateExpression"
        and fn.children[0].kind in _ORDER_BLIND
        and (kind == "range" or lower == upper == "unbounded")
    )
    low, high = frame.children[:2]  # an offset comes with its handle (typed as Spark typed it), which frames are built from
    values = (None if lower in ("unbounded", "current") else low.handle, None if upper in ("unbounded", "current") else high.handle)
    return ir.Frame(kind, lower, upper, whole=ranking, values=values, tie_free=tie_free)


def _bound(e: Tree, kind: str) -> str:
    """A frame bound's spelling; a RANGE frame's value offset that is no integer (Spark
    compares it with the ORDER BY value, in that value's type) is "value" and its text."""
    if e.kind in ("UnboundedPreceding", "UnboundedFollowing"):
        return "unbounded"
    if e.kind == "CurrentRow":
        return "current"
    if e.kind == "Literal" and e.dtype in ("tinyint", "smallint", "int", "bigint") and isinstance(e.value, int):
        return str(e.value)
    if e.kind == "Literal" and kind == "range" and e.value is not None:
        return f"value {e.text}"
    raise UnsupportedOperatorError(f"ember cannot trace a window frame bound {e.text}")


# PythonEvalType.SQL_GROUPED_MAP_PANDAS_UDF, _ARROW_UDF, SQL_COGROUPED_MAP_PANDAS_UDF, _ARROW_UDF,
# and the iterator forms (a group's batches in, batches out): SQL_GROUPED_MAP_ARROW_ITER_UDF, _PANDAS_ITER_UDF
BATCHED_GROUP_MAPS = (215, 216)
GROUP_MAP_EVAL_TYPES = (201, 209, 206, 210, *BATCHED_GROUP_MAPS)
PARTITION_MAP_EVAL_TYPES = (205, 207)  # mapInPandas, mapInArrow
_EXACT_KEYS = re.compile(r"tinyint|smallint|int|bigint|decimal\(\d+,\d+\)|string|binary|boolean|date|timestamp|timestamp_ntz")


def _comes_back(dtype: str) -> bool:
    """Whether a key of this type survives the trip through pandas or Arrow unchanged."""
    return _EXACT_KEYS.fullmatch(dtype) is not None


def _handler(command: str) -> object:
    """Python code pickled into a plan (a UDTF's handler class; a grouped map's function
    and return type), unpickled; None if it cannot be (a large one is pickled as a
    broadcast, for instance)."""
    try:
        return CloudPickleSerializer().loads(base64.b64decode(command))
    except Exception:  # whatever unpickling the user's class raises: then it is not known
        return None
