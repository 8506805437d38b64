"""Spark Connect: ember's requests go to the server's JVM as relations.

A Connect client has no JVM to call, so ember's jar is also a Connect server plugin
(`ConnectPlugin.java`): a relation whose extension is an ember request answers one row
holding the answer, or the rows of the plan a request builds. The plan's objects stay
on the server, held for the client's session, and the messages name them by reference.
"""

from __future__ import annotations

import base64
import json
import re
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import pyarrow as pa
from google.protobuf import any_pb2
from pyspark.sql import DataFrame
from pyspark.sql.connect import proto
from pyspark.sql.connect.dataframe import DataFrame as ConnectFrame
from pyspark.sql.connect.plan import LogicalPlan
from pyspark.sql.connect.session import SparkSession as RemoteSession
from pyspark.sql.pandas.types import from_arrow_schema

from ember.engines.spark import catalyst, jar, maps, plan_in
from ember.engines.spark.numbering import (
    KeyedNumbering,
    TextNumbering,
    keyed_shape,
    number_hive,
    number_keyed,
    number_read,
)
from ember.engines.spark.plan_import import (
    Files,
    Imported,
    declare,
    declared,
    declared_relation,
    imported_from,
    source_key,
)
from ember.errors import EmberError, UnsupportedOperatorError
from ember.plan import ir
from ember.plan.sources import COUNTED, KEYED, RID, Source
from ember.plan.trees import PlanOut, PlanTree, Reader, Tree, plans, read

T = TypeVar("T")
_RID = "__ember_rid"
_METADATA = "_metadata"
REQUEST = "type.googleapis.com/ember.Request"
VERSION = 1
# A server with no plugin for the request: Spark 4.0's text, then its error class from 4.1
_NO_HANDLER = re.compile(r"No handler found for extension|NO_HANDLER_FOR_EXTENSION")
_PLUGIN = re.compile(r"ember's Connect plugin [^\n]*")  # a refusal of the plugin's own, one line


class _Request(LogicalPlan):
    """An ember request (over a client's relation, if any), as an extension relation."""

    def __init__(self, child: LogicalPlan | None, body: dict[str, Any]) -> None:
        super().__init__(child)
        self._body = body

    def plan(self, session: Any) -> proto.Relation:
        relation = self._create_proto_relation()
        body = {"version": VERSION, **self._body}
        if self._child is not None:
            body["relation"] = base64.b64encode(self._child.plan(session).SerializeToString()).decode()
        relation.extension.CopyFrom(any_pb2.Any(type_url=REQUEST, value=json.dumps(body).encode()))
        return relation


def message(df: ConnectFrame) -> PlanOut:
    """The plan out of a Connect DataFrame, from the server's plugin in one request."""
    request = _Request(df._plan, {"command": "plan_out", "excluded": ",".join(catalyst.EXCLUDED_RULES)})
    return read(json.loads(_answer(request, df.sparkSession)), lambda ref: ref)


def files(session: RemoteSession, uris: list[str], rows: bool) -> list[tuple[int, int, int]]:
    """Each file's size, modification time (ms) and, where `rows`, Parquet row count, as the
    server's file systems see them (a missing file: size -1), in one request."""
    facts = json.loads(_answer(_Request(None, {"command": "files", "uris": uris, "rows": rows}), session))
    return [(int(size), int(mtime), int(count)) for size, mtime, count in facts]


def parallelism(session: RemoteSession) -> int:
    """The server's default parallelism, which decides how Spark splits text files."""
    return int(_answer(_Request(None, {"command": "parallelism"}), session))


def condition(df: ConnectFrame) -> Tree:
    """The condition of a filter over a plan ember built, as the server analyzed it, with a
    reference the server holds (a plan-in message can name it), in one request."""
    answer = _answer(_Request(df._plan, {"command": "condition"}), df.sparkSession)
    return Reader(lambda ref: ref).tree(json.loads(answer))


def _answer(request: _Request, session: RemoteSession) -> str:
    """The one-row answer of a request; a server without ember's plugin, or the plugin's
    refusal, in one line rather than a gRPC traceback."""
    try:
        (row,) = ConnectFrame(request, session).collect()
    except Exception as e:  # the server's refusal comes back as a gRPC error of its own kind
        if _NO_HANDLER.search(str(e)):
            raise EmberError(
                "this Spark Connect server does not serve ember: start it with the settings of "
                "ember.connect.server_conf()"
            ) from None
        refused = _PLUGIN.search(str(e))
        if refused:
            raise EmberError(refused.group(0)) from None
        raise
    return str(row[0])


def build(session: RemoteSession, message: plan_in.Message) -> ConnectFrame:
    """The DataFrame of the plan a plan-in message describes, built by the server's plugin
    from references the plan out of this session gave; its rows come as the plan was
    built, not optimized again."""
    return ConnectFrame(_Request(None, {"command": "plan_in", "message": message.body}), session)


@dataclass(frozen=True)
class Mapped:
    """What wrapping a user's grouped or partition map needs of its node: its function's
    pickled code (base64) and PySpark eval type, its function's argument count, and its
    own output's width."""

    command: str
    eval_type: int
    arguments: int
    width: int


def _maps(plan: PlanTree) -> dict[str, Mapped]:
    """The grouped and partition maps of a plan out (its subqueries' too), by reference."""
    found: dict[str, Mapped] = {}
    for p in plans(plan):
        fn = p.expr("fn")
        if "command" in p.facts and fn is not None and p.handle is not None:
            found[p.handle] = Mapped(p.facts["command"], int(p.facts["evalType"]), len(fn.children), len(p.output))
    return found


def _plan(ref: str) -> plan_in.Message:
    """The message of a plan the plan out named, as it is."""
    return plan_in.Message({"version": plan_in.VERSION, "root": {"op": "plan", "ref": ref}}, ())


class Remote:
    """The Connect server behind one client session, serving what a capture asks of an
    engine: the plan out, plans built from messages, and a referenced plan's rows."""

    def __init__(self, spark: RemoteSession, files: Files) -> None:
        jar.check_version(str(spark.version))  # the server's Spark: its plugin is ember's jar
        self.spark, self.files = spark, files
        self._columns: dict[str, tuple[ir.Attr, ...]] = {}  # a counted source's, as its scans read it
        self.maps: dict[str, Mapped] = {}  # a grouped or partition map's, by its node's reference

    def threaded(self, fn: Callable[..., T]) -> Callable[..., T]:
        """`fn` as it is: a Connect request names its session itself, on any thread."""
        return fn

    def activate(self) -> None:
        """Nothing to do: a Connect request names its session itself, on any thread."""

    def imported(self, df: DataFrame) -> Imported:
        assert isinstance(df, ConnectFrame)
        out = message(df)
        imported = imported_from(out, *declared(self.spark), files=self.files)  # type: ignore[arg-type]  # a Connect session
        if out.plan is not None:
            self.maps.update(_maps(out.plan))
        for node in ir.walk_all(imported.plan):
            if isinstance(node, ir.Scan) and node.source.kind in COUNTED:
                self._columns[node.source.key] = node.attrs
        return imported

    def declare(self, df: ConnectFrame, name: str, key: tuple[str, ...]) -> None:
        """`ember.source` over Connect: the source's relation is the DataFrame as read (the
        client plan's leaf), which must read the same source."""

        leaves = _leaves(df)

        def relation() -> DataFrame:
            leaf = df._plan
            while leaf._child is not None:
                leaf = leaf._child
            read = ConnectFrame(leaf, self.spark)
            if _source_keys(_leaves(read)) != _source_keys(leaves):
                raise EmberError(
                    "ember.source over Spark Connect: give key= on the DataFrame as read "
                    "(spark.read...load(), spark.table(...)), before any other step"
                )
            return read

        declare(self.spark, leaves, relation, name, key)  # type: ignore[arg-type]  # a Connect session

    def dataframe(self, ref: str) -> ConnectFrame:
        """The rows of a plan the plan out named (a scan, to check a predicate against)."""
        return build(self.spark, _plan(ref))

    def numbered(self, source: Source) -> Source:
        """Parquet files number their rows by their row index and a range by position, with
        no first look; an in-memory table is collected and numbered by position, and text
        formats are counted split by split, read by a reader of their files the client
        makes (`served.ServerReading`), as a classic session counts them."""
        if source.kind == "memory":
            table = self.dataframe(source.data).toArrow()
            return replace(source, rows=table.num_rows, data=table)
        if source.kind == "hive":  # read by its serde: the server reads the table by name
            from ember.engines.spark.served import TableReading

            table = source.key.split(":", 1)[1]
            return number_hive(source, TableReading(self.spark, source, {"table": table}))
        if source.kind == KEYED:
            return number_keyed(source, self._relation(source))
        if source.kind in COUNTED:
            from ember.engines.spark.served import ServerReading

            return number_read(source, ServerReading.of_scan(self.spark, source, self._columns[source.key]))
        return source

    def shaped(self, source: Source) -> Source:
        """The source as a check over none of its rows reads it (`numbering.shaped`)."""
        if source.kind == KEYED:
            return keyed_shape(source, self._relation(source))
        return self.numbered(source) if source.kind == "memory" else source  # a counted source is read as it is

    def _relation(self, source: Source) -> DataFrame:
        """The relation `ember.source` declared for a keyed source in this session."""
        relation = declared_relation(self.spark, source.key)  # type: ignore[arg-type]  # a Connect session
        assert relation is not None, "a keyed source is imported only once declared"
        return relation


def _leaves(df: ConnectFrame) -> list[PlanTree]:
    out = message(df)
    return [] if out.plan is None else [p for p in plans(out.plan) if not p.children]


def _source_keys(leaves: list[PlanTree]) -> set[str | None]:
    return {source_key(leaf) for leaf in leaves} - {None}


@dataclass
class RemoteBuilder:
    """Builds one capture's rewritten plans on the Connect server, each as one plan-in
    message. What a classic session builds through py4j beside the message goes in it
    as a node of its own (`_outside`: rows this client holds, cached subplans, wrapped
    maps, Python UDTFs); anything else is refused by name."""

    jvm: Remote  # the engine, named as the classic `Builder`'s (`capture.sides` reads either)
    sources: dict[str, Source]
    imported: ir.Node | None = field(default=None, repr=False)
    keys: pa.Table | ConnectFrame | None = None
    reports: dict[int, Any] = field(default_factory=dict)
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False)
    _unchanged: frozenset[int] = field(init=False, repr=False)
    _tag: str = field(default_factory=lambda: uuid.uuid4().hex, repr=False)  # this capture's, in cache keys
    _cached: set[str] = field(default_factory=set, repr=False)
    _shared: dict[int, ir.Shared] = field(default_factory=dict, repr=False)  # by the IR's key

    def __post_init__(self) -> None:
        self._unchanged = frozenset(map(id, ir.walk(self.imported))) if self.imported is not None else frozenset()

    def dataframe(self, node: ir.Node) -> ConnectFrame:
        return build(self.jvm.spark, plan_in.message(node, self._outside, self._unchanged))

    def dataframes(self, tables: list[tuple[ir.Node, pa.Table | ConnectFrame | None]]) -> list[ConnectFrame]:
        """Side tables' plans, each with the keys it is computed for: a Connect DataFrame
        is a request sent when it runs, so each goes as its own message."""
        made = []
        for node, keys in tables:
            self.keys = keys
            made.append(self.dataframe(node))
        return made

    def cached(self, key: int) -> ConnectFrame:
        """The rows of a cached subplan, read from the server's cache once a job filled it."""
        return build(self.jvm.spark, plan_in.Message({"version": plan_in.VERSION, "root": self._outside(self._shared[key])}, ()))

    def release(self) -> None:
        """Drops the subplans cached on the server for this capture once the job and its side
        tables have run."""
        if self._cached:
            _answer(_Request(None, {"command": "release", "keys": sorted(self._cached)}), self.jvm.spark)
            self._cached.clear()

    def _outside(self, node: ir.Node) -> plan_in.Json:
        """Rows this client holds, as a relation of its own (`rows`): an in-memory source
        numbered by position, the keys a side table is computed for; a subplan the job and
        side tables read alike, cached on the server under a key of this capture's."""
        if isinstance(node, ir.Shared):
            key = f"{self._tag}.{node.key}"
            self._shared[node.key] = node
            self._cached.add(key)
            return {"op": "cached", "key": key, "kids": [self._kid(node.child)]}
        if isinstance(node, ir.Numbered) and isinstance(node.child, ir.Scan):
            numbered = self._numbered(node, node.child)
            if numbered is not None:
                fresh, names = numbered
                if node.only is not None:  # the workload's predicate, over the source's own columns
                    fresh = fresh.selectExpr(*[f"`{c}`" for c in names], f"CASE WHEN {node.only} THEN {_RID} END AS {_RID}")
                return self._rows(fresh, (*node.child.attrs, node.rid))
        if isinstance(node, ir.GroupMap):
            return self._map(node)
        if isinstance(node, ir.Generate) and node.python:  # a Python UDTF, keeping the rid columns too
            return {"op": "udtf", "ref": node.handle, "kept": [a.id for a in node.kept], "kids": [self._kid(node.child)]}
        if isinstance(node, ir.Keys) and self.keys is not None:
            keys = self.keys if isinstance(self.keys, DataFrame) else self._frame(self.keys)
            typed = keys.selectExpr(*[f"CAST(`{c}` AS {a.dtype})" for c, a in zip(keys.columns, node.attrs, strict=True)])
            return self._rows(typed, node.attrs)
        raise UnsupportedOperatorError(
            f"over Spark Connect ember cannot capture this plan yet: its lineage needs {_needed(node)}, which a "
            "classic session builds through py4j (capture it from a classic session)"
        )

    def _kid(self, node: ir.Node) -> plan_in.Json:
        return plan_in.message(node, self._outside, self._unchanged).body["root"]

    def _map(self, node: ir.GroupMap) -> plan_in.Json:
        """A grouped or partition map whose output gained its group's keys or its
        partition's number (`annotate`), made again by the server over the function this
        client wraps (`maps`) and pickles into the message; one that did not, as it was."""
        mapped = self.jvm.maps[node.handle]
        kids = [self._kid(c) for c in node.inputs]
        if len(node.attrs) == mapped.width:
            return {"op": "same", "ref": node.handle, "kids": kids}
        added = node.attrs[mapped.width :]
        extra: list[int] = []
        if isinstance(node, ir.PartitionMap):
            assert node.reports is None, "a Connect client gets no reports from tasks"
            (given,) = node.inputs
            extra = [a.id for a in given.output[mapped.arguments :]]
            wrapped = maps.partition_function(mapped.command, mapped.eval_type, added[-1].name, added[-1].dtype == "bigint")
        else:
            names = tuple(a.name for a in added)
            types = [maps.simple_type(k.dtype) for k in node.keys[0]]
            large = maps.large_strings(self.jvm.spark)
            wrapped = maps.group_function(mapped.command, mapped.eval_type, names, types, len(node.inputs), large)
        return {
            "op": "map",
            "ref": node.handle,
            "command": maps.pickled(wrapped),
            "returns": wrapped[1].json(),
            "added": [{"name": a.name, "id": a.id} for a in added],
            "extra": extra,
            "kids": kids,
        }

    def _numbered(self, node: ir.Numbered, scan: ir.Scan) -> tuple[DataFrame, list[str]] | None:
        """The scan's rows with their rids (`__ember_rid`), made by this client, and the
        scan's column names: an in-memory table by position; a range by place (the same
        range, in as many partitions); a counted source's files as they were counted; a
        Parquet scan numbered by a message of its own, for a workload's predicate."""
        source = self.sources.get(scan.source.key, scan.source)
        names = [a.name for a in scan.attrs]
        if source.kind == "memory":
            table: pa.Table = source.data
            return self._frame(table.append_column(_RID, pa.array(range(table.num_rows), pa.int64()))), table.column_names
        if source.kind == "range":
            start, end, step = (int(x) for x in source.key.split(":")[1:])
            slices = dict(source.options).get("numPartitions")
            made = self.jvm.spark.range(start, end, step, None if slices is None else int(slices))
            return made.selectExpr("id", f"CAST((id - {start}) DIV {step} AS BIGINT) AS {_RID}"), ["id"]
        if isinstance(source.data, KeyedNumbering):
            relation = source.data.relation
            joined, rid = source.data.ided(relation)
            return joined.select(*[relation[c] for c in names], rid.alias(_RID)), names
        if isinstance(source.data, TextNumbering):
            if _METADATA in names:
                raise UnsupportedOperatorError(
                    f"over Spark Connect ember cannot number the rows of {source.name!r} where the job reads "
                    "its _metadata column (capture it from a classic session)"
                )
            numbered = source.data.numbered()  # a Hive table's whole: the scan's columns by name
            return numbered.select(*[numbered[c] for c in names], numbered[RID]).toDF(*names, _RID), names
        if source.kind == "parquet" and node.only is not None:
            plain = build(self.jvm.spark, plan_in.message(replace(node, only=None), self._outside, self._unchanged))
            return plain.toDF(*names, _RID), names
        return None

    def _frame(self, table: pa.Table) -> DataFrame:
        """The table as a DataFrame of this session (Connect infers no schema from no rows)."""
        if table.num_rows:
            return self.jvm.spark.createDataFrame(table)
        return self.jvm.spark.createDataFrame([], from_arrow_schema(table.schema))

    def _rows(self, df: DataFrame, attrs: tuple[ir.Attr, ...]) -> plan_in.Json:
        assert isinstance(df, ConnectFrame)
        relation = base64.b64encode(df._plan.plan(self.jvm.spark.client).SerializeToString()).decode()
        return {"op": "rows", "relation": relation, "as": [{"name": a.name, "id": a.id} for a in attrs]}


def _needed(node: ir.Node) -> str:
    """What a node the plan message cannot hold stands for, in words.

    >>> _needed(ir.Keys(attrs=()))
    'a Keys node'
    """
    if isinstance(node, ir.Numbered) and isinstance(node.child, ir.Scan):
        why = " under a workload's filter" if node.only is not None else ""
        return f"row numbers of source {node.child.source.name!r} ({node.child.source.kind}){why}"
    return f"a {type(node).__name__} node"
