"""ember IR → one "plan in" message, which the jar's `PlanBuild` turns into a Catalyst plan.

Building the rewritten plan through py4j cost several round trips per node and per new
expression; the message builds a whole subtree in one. It is JSON (schema version 1,
docs/design/import.md): nodes by operation, expressions the import made (and plans ember
built before) by their py4j gateway id, attributes by exprId. A node the message cannot
express (Python UDF wrappers, supplied keys, numbered and cached inputs, window positions
Spark must resolve) is built by the caller first and comes in as a built plan.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ember.engines.spark import jar
from ember.engines.spark.jvm import JObj, Jvm
from ember.plan import ir

VERSION = 1

Json = dict[str, Any]


@dataclass(frozen=True)
class Message:
    """The JSON, and the objects it names by id: Python holds them until the JVM has built
    the plan, because py4j drops an object from its registry (in the background) once
    Python lets go of it, and a plan built outside is held by nothing else."""

    body: Json
    held: tuple[JObj, ...]


def expressible(node: ir.Node) -> bool:
    """Whether the message can hold `node` itself (its children may be built outside)."""
    if isinstance(node, ir.Window):
        return node.handle is not None
    if isinstance(node, ir.Scan | ir.Limit | ir.Passthrough):
        return node.handle is not None
    if isinstance(node, ir.Generate):  # a Python UDTF is made again, keeping the rid columns too
        return node.handle is not None and not node.python
    if isinstance(node, ir.Numbered):  # a Parquet scan's rids are read off its row index
        scan = node.child
        return isinstance(scan, ir.Scan) and scan.source.kind == "parquet" and node.only is None and scan.handle is not None
    return isinstance(node, ir.Filter | ir.Project | ir.Join | ir.Aggregate | ir.Union | ir.Expand)


def message(node: ir.Node, outside: Callable[[ir.Node], JObj | Json], unchanged: frozenset[int]) -> Message:
    """The message for `node` (which must be `expressible`). `outside` builds a node the
    message cannot hold (or writes it as a node of its own: a Connect client's rows); a
    node in `unchanged` (ids) is the import's own, used whole.

    >>> from types import SimpleNamespace
    >>> a = ir.Attr(1, "a", "bigint")
    >>> scan = ir.Scan(source=None, attrs=(a,), handle=SimpleNamespace(_target_id="o7"))
    >>> m = message(ir.Filter(scan, cond=ir.ColumnRef(a)), outside=None, unchanged=frozenset())
    >>> m.body["root"]
    {'op': 'filter', 'cond': {'e': 'attr', 'id': 1}, 'kids': [{'op': 'plan', 'ref': 'o7'}]}
    """
    writer = _Writer(outside, unchanged)
    root = writer.node(node)
    return Message({"version": VERSION, "root": root}, tuple(writer.held))


def build(jvm: Jvm, m: Message) -> JObj:
    """The Catalyst plan `m` describes, in one py4j call."""
    return _through_file(m.body, lambda path: jar.helper(jvm, "PlanBuild").build(jvm.gateway(), path))


def dataframes(jvm: Jvm, messages: list[Message]) -> list[JObj]:
    """The plans of several messages (side tables that run together), each ready to run
    as a Dataset that Spark does not optimize again, built in one py4j call."""
    body = {"version": VERSION, "roots": [m.body["root"] for m in messages]}
    made = _through_file(body, lambda path: jar.helper(jvm, "PlanBuild").dataframes(jvm.gateway(), jvm.jsession, path))
    return list(made)


def _through_file(body: Json, call: Callable[[str], Any]) -> Any:
    """`call` of a file holding `body`: a message goes through a file, as the plan import's
    does (large py4j messages stall)."""
    fd, path = tempfile.mkstemp(prefix="ember-plan-in-", suffix=".json")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(body, f, separators=(",", ":"))
        return call(path)
    finally:
        os.unlink(path)


class _Writer:
    def __init__(self, outside: Callable[[ir.Node], JObj | Json], unchanged: frozenset[int]) -> None:
        self.outside = outside
        self.unchanged = unchanged
        self.held: list[JObj] = []

    def node(self, n: ir.Node) -> Json:
        handle = getattr(n, "handle", None)
        if handle is not None and id(n) in self.unchanged:
            return self._plan(handle)
        if not expressible(n):
            outside = self.outside(n)
            return outside if isinstance(outside, dict) else self._plan(outside)
        made: Json = getattr(self, f"_{type(n).__name__}")(n)
        return made

    def _kids(self, n: ir.Node) -> list[Json]:
        return [self.node(c) for c in n.children]

    def _same(self, n: ir.Scan | ir.Limit | ir.Passthrough | ir.Generate | ir.Join) -> Json:
        """The node as the import made it, over its new children (a user's join, a limit)."""
        kids = self._kids(n)
        return {"op": "same", "ref": self._ref(n.handle), "kids": kids} if kids else self._plan(n.handle)

    _Scan = _same
    _Limit = _same
    _Passthrough = _same
    _Generate = _same

    def _Filter(self, n: ir.Filter) -> Json:
        return {"op": "filter", "cond": self.expr(n.cond), "kids": self._kids(n)}

    def _Project(self, n: ir.Project) -> Json:
        return {"op": "project", "list": [self.named(c) for c in n.columns], "kids": self._kids(n)}

    def _Join(self, n: ir.Join) -> Json:
        if n.handle is not None:
            return self._same(n)
        cond = None if n.cond is None else self.expr(n.cond)
        return {"op": "join", "kind": n.kind, "cond": cond, "kids": self._kids(n)}

    def _Aggregate(self, n: ir.Aggregate) -> Json:
        made: Json = {"op": "aggregate", "keys": [self.expr(k) for k in n.keys], "kids": self._kids(n)}
        made["list"] = [self.collected(c) if isinstance(c.expr, ir.Collected) else self.named(c) for c in n.columns]
        if n.handle is not None:  # the user's aggregate: its hint, if any, stays
            made["hint"] = {"ref": self._ref(n.handle)}
        return made

    def _Union(self, n: ir.Union) -> Json:
        mine = {"ref": self._ref(n.handle)} if n.handle is not None else {}  # the user's, over new inputs
        return {"op": "union", **mine, "kids": self._kids(n)}

    def _Expand(self, n: ir.Expand) -> Json:
        projections = [[self.expr(e) for e in p] for p in n.projections]
        output = [{"name": a.name, "id": a.id} for a in n.attrs]
        return {"op": "expand", "ref": self._ref(n.handle), "projections": projections, "output": output, "kids": self._kids(n)}

    def _Window(self, n: ir.Window) -> Json:
        """Over the user's own window's partition and order, with the frame counts the
        rewrite added: in the same node, or in one of their own above it where the user's
        functions run in Python (Spark evaluates a node's window functions all in Python or
        all in the JVM)."""
        ref = self._ref(n.handle)
        own = [self.named(c) for c in n.columns if not isinstance(c.expr, ir.FrameCount)]
        counts = [self.frame_count(c) for c in n.columns if isinstance(c.expr, ir.FrameCount)]
        kids = self._kids(n)
        if counts and n.python:
            kids, own = [{"op": "window", "ref": ref, "list": own, "kids": kids}], []
        return {"op": "window", "ref": ref, "list": own + counts, "kids": kids}

    def _Numbered(self, n: ir.Numbered) -> Json:
        """Each file's path and first rid, where the source has several (`RowIndex.numbered`)."""
        assert isinstance(n.child, ir.Scan)
        files = n.child.source.files
        listed = [[f.uri, f.offset] for f in files] if len(files) > 1 else []
        return {"op": "numbered", "files": listed, "rid": {"name": n.rid.name, "id": n.rid.id}, "kids": self._kids(n)}

    def expr(self, e: ir.AnyExpr) -> Json:
        if isinstance(e, ir.Expr):
            if e.handle is None:
                raise AssertionError(f"expression without an engine handle: {e.sql}")
            return {"e": "ref", "ref": self._ref(e.handle)}
        if isinstance(e, ir.ColumnRef):
            return {"e": "attr", "id": e.attr.id}
        if isinstance(e, ir.FrameCount | ir.Collected):
            raise AssertionError("frame counts and collected lists live only in window and aggregate nodes")
        if isinstance(e, ir.PartitionId):
            return {"e": "partition_id"}
        if e.value is True:
            return {"e": "true"}
        return {"e": "null", "id": e.like.id, "ddl": e.like.dtype}

    def named(self, n: ir.Named) -> Json:
        e = n.expr
        if isinstance(e, ir.ColumnRef) and e.attr.id == n.attr.id:
            return {"e": "attr", "id": e.attr.id}
        if isinstance(e, ir.Expr) and e.handle is not None and e.names == n.attr.id:
            return {"e": "ref", "ref": self._ref(e.handle)}
        return {"e": "alias", "child": self.expr(e), "name": n.attr.name, "id": n.attr.id}

    def frame_count(self, n: ir.Named) -> Json:
        """A position or frame-bound count (`ir.FrameCount`): its frame's kind and bounds,
        a bound other than "unbounded" or "current" as the user's own expression."""
        count = n.expr
        assert isinstance(count, ir.FrameCount)
        made: Json = {"e": "frame_count", "bound": count.bound, "name": n.attr.name, "id": n.attr.id}
        if count.frame is not None:
            frame = count.frame
            bounds = [b if b in ("unbounded", "current") else {"ref": self._ref(v)} for b, v in zip((frame.lower, frame.upper), frame.values, strict=True)]
            made |= {"kind": frame.kind, "lower": bounds[0], "upper": bounds[1]}
        return made

    def collected(self, n: ir.Named) -> Json:
        """`collect_list` of the columns (a struct of them if more than one), as an aggregate."""
        assert isinstance(n.expr, ir.Collected)
        return {"e": "collect_list", "ids": [a.id for a in n.expr.attrs], "name": n.attr.name, "id": n.attr.id}

    def _ref(self, handle: JObj | str) -> str:
        """A py4j object's id on the gateway, or a reference a Connect server gave (`str`):
        the JVM finds the object by it."""
        if isinstance(handle, str):
            return handle
        self.held.append(handle)
        return str(handle._target_id)

    def _plan(self, handle: JObj) -> Json:
        return {"op": "plan", "ref": self._ref(handle)}
