"""Catalyst plans and expressions as plain Python data, read in one py4j round trip.

Walking a plan over py4j costs a round trip per node, expression and field, which
adds up to the largest fixed cost of a capture. ember's small Java class
(`PlanDump.java`, in the jar `engines.spark.jar` loads) writes the plan as JSON inside
the JVM instead, to a file (a large py4j answer stalls), and registers each
node and each expression a node holds with the py4j gateway, so Python gets handles to
them without asking.
"""

from __future__ import annotations

import decimal
import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from py4j import protocol as proto
from py4j.java_gateway import JavaObject

from ember.engines.spark import jar
from ember.engines.spark.jvm import JObj, Jvm
from ember.plan import ir
from ember.plan.trees import OPAQUE, PlanTree, Tree


def plan(jvm: Jvm, p: JObj) -> PlanTree:
    """`p` with handles to its nodes and the expressions they hold."""
    return _Reader(p._gateway_client).plan(_dumped(lambda path: _dumper(jvm).plan(_gateway(p), p, path)))


def expression(jvm: Jvm, e: JObj) -> Tree:
    """One expression, with a handle, as `plan` reads those a node holds."""
    return _Reader(e._gateway_client).tree(_dumped(lambda path: _dumper(jvm).expression(_gateway(e), e, path)))


def views(jvm: Jvm, analyzed: JObj) -> list[tuple[str, PlanTree]]:
    """The temp views and catalog tables of an analyzed plan that are one leaf (no handles)."""
    reader = _Reader(analyzed._gateway_client)
    return [(name, reader.plan(leaf)) for name, leaf in _dumped(lambda path: _dumper(jvm).views(analyzed, path))]


def leaves(jvm: Jvm, p: JObj) -> list[PlanTree]:
    """Every leaf of a plan (no handles)."""
    reader = _Reader(p._gateway_client)
    return [reader.plan(leaf) for leaf in _dumped(lambda path: _dumper(jvm).leaves(p, path))]


def _dumped(dump: Callable[[str], None]) -> Any:
    """What `dump` writes as JSON to a file (the driver's JVM runs beside this process)."""
    fd, path = tempfile.mkstemp(prefix="ember-plan-", suffix=".json")
    os.close(fd)
    try:
        dump(path)
        return json.loads(Path(path).read_bytes())
    finally:
        os.unlink(path)


_EXPR_FIELDS = ("list", "keys", "partition", "order", "exprs")
_ONE_EXPR_FIELDS = ("cond", "gen", "fn")
_ATTR_FIELDS = ("generated", "kept", "grouping", "cogrouping")


@dataclass
class _Reader:
    client: Any

    def plan(self, d: dict[str, Any]) -> PlanTree:
        exprs = {k: tuple(self.tree(e) for e in d[k]) for k in _EXPR_FIELDS if k in d}
        exprs.update({k: (self.tree(d[k]),) for k in _ONE_EXPR_FIELDS if k in d})
        attrs = {k: _attrs(d[k]) for k in _ATTR_FIELDS if k in d}
        if "exists" in d:
            attrs["exists"] = _attrs([d["exists"]])
        skip = {"k", "h", "out", "kids", "projections", "exists", *_EXPR_FIELDS, *_ONE_EXPR_FIELDS, *_ATTR_FIELDS}
        return PlanTree(
            kind=d["k"],
            output=_attrs(d["out"]),
            children=tuple(self.plan(c) for c in d["kids"]),
            exprs=exprs,
            attrs=attrs,
            facts={k: v for k, v in d.items() if k not in skip},
            handle=self.handle(d),
            projections=tuple(tuple(self.tree(e) for e in row) for row in d.get("projections", ())),
        )

    def tree(self, d: dict[str, Any]) -> Tree:
        return Tree(
            kind=d["k"],
            text=d["t"],
            dtype=d["dt"],
            deterministic=d["det"],
            refs=frozenset(d["refs"]),
            children=tuple(self.tree(c) for c in d["c"]),
            handle=self.handle(d),
            id=d.get("id"),
            name=d.get("n"),
            nullable=d.get("nullable", True),
            value=_value(d["v"]) if "v" in d else None,
            values=tuple(_value(v) for v in d.get("set", ())),
            distinct=d.get("distinct", False),
            filtered=d.get("filtered", False),
            outer=d.get("outer", False),
            plan=self.plan(d["plan"]) if "plan" in d else None,
            frame=d.get("frame"),
        )

    def handle(self, d: dict[str, Any]) -> JObj | None:
        return JavaObject(d["h"], self.client) if "h" in d else None


def _attrs(rows: list[list[Any]]) -> tuple[ir.Attr, ...]:
    return tuple(ir.Attr(int(i), str(n), str(t), bool(null)) for i, n, t, null in rows)


def _value(v: Any) -> Any:
    if isinstance(v, dict):
        return decimal.Decimal(v["decimal"]) if "decimal" in v else OPAQUE
    return v


# --- the Java side ---------------------------------------------------------------
def _gateway(obj: JObj) -> JObj:
    return JavaObject(proto.GATEWAY_SERVER_OBJECT_ID, obj._gateway_client).getGateway()


def _dumper(jvm: Jvm) -> JObj:
    return jar.helper(jvm, "PlanDump")
