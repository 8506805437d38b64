"""Catalyst plans and expressions as plain Python data, read in one py4j round trip.

Walking a plan over py4j costs a round trip (~50 µs) per node, expression and field:
10-76 ms per TPC-H query, the largest fixed cost of a capture. ember's small Java class
(`PlanDump.java`, compiled on first use against the running JVM's own classpath and
loaded in a class loader of its own) writes the plan as JSON inside the JVM instead, to a
file (a py4j answer past 8 KB stalls ~40 ms), and registers each node and each
expression a node holds with the py4j gateway, so Python gets handles to them without
asking.
"""

from __future__ import annotations

import decimal
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from py4j import protocol as proto
from py4j.java_gateway import JavaObject

from ember.errors import EmberError
from ember.plan import ir
from ember.plan.jvm import JObj, Jvm

_SOURCE = Path(__file__).with_name("PlanDump.java")
_CLASS = "ember.jvm.PlanDump"


class Opaque:
    """A literal value with no plain JSON spelling (binary, intervals, structs, NaN, ...)."""

    def __repr__(self) -> str:
        return "<opaque>"


OPAQUE = Opaque()


@dataclass(frozen=True)
class Tree:
    """A Catalyst expression: its class's simple name, how it prints, and its children."""

    kind: str
    text: str
    dtype: str | None  # Spark's simpleString of its type (None: it has none)
    deterministic: bool
    refs: frozenset[int]
    children: tuple[Tree, ...]
    handle: JObj | None = field(default=None, compare=False, hash=False, repr=False)
    id: int | None = None  # a named expression's exprId
    name: str | None = None
    nullable: bool = True
    value: Any = None  # a literal's: int, float, bool, str, Decimal, None, or OPAQUE
    values: tuple[Any, ...] = ()  # an InSet's
    distinct: bool = False  # an AggregateExpression's
    filtered: bool = False  # an AggregateExpression's FILTER clause
    outer: bool = False  # a ScalarSubquery that reads outer columns (correlated)
    plan: PlanTree | None = None  # a ScalarSubquery's
    frame: str | None = None  # a SpecifiedWindowFrame's type: RowFrame or RangeFrame


@dataclass(frozen=True)
class PlanTree:
    """A Catalyst plan node with the fields ember's import reads (see PlanDump.java)."""

    kind: str
    output: tuple[ir.Attr, ...]
    children: tuple[PlanTree, ...]
    exprs: dict[str, tuple[Tree, ...]]  # list, keys, partition, order, exprs, cond, gen
    attrs: dict[str, tuple[ir.Attr, ...]]  # generated, kept, exists
    facts: dict[str, Any]  # join type, relation class, file format, paths, ids, range bounds
    handle: JObj | None = field(default=None, compare=False, hash=False, repr=False)
    projections: tuple[tuple[Tree, ...], ...] = ()  # an Expand's

    @property
    def child(self) -> PlanTree:
        return self.children[0]

    def expr(self, name: str) -> Tree | None:
        found = self.exprs.get(name, ())
        return found[0] if found else None


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
_ONE_EXPR_FIELDS = ("cond", "gen")
_ATTR_FIELDS = ("generated", "kept")


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
# One loaded PlanDump per gateway client (a JVM), by the client's id.
_DUMPERS: dict[int, tuple[Any, JObj]] = {}


def _gateway(obj: JObj) -> JObj:
    return JavaObject(proto.GATEWAY_SERVER_OBJECT_ID, obj._gateway_client).getGateway()


def _dumper(jvm: Jvm) -> JObj:
    client = jvm.jsession._gateway_client
    known = _DUMPERS.get(id(client))
    if known is None or known[0] is not client:
        classpath = str(jvm.name("java.lang.System.getProperty")("java.class.path"))
        jar = compiled(classpath, str(jvm.spark.version))
        urls = jvm.spark._sc._gateway.new_array(jvm.name("java.net.URL"), 1)  # type: ignore[union-attr]
        urls[0] = jvm.name("java.io.File")(str(jar)).toURI().toURL()
        loader = jvm.name("java.net.URLClassLoader")(urls, jvm.jsession.getClass().getClassLoader())
        known = _DUMPERS[id(client)] = (client, loader.loadClass(_CLASS).newInstance())
    return known[1]


def compiled(classpath: str, spark_version: str) -> Path:
    """PlanDump's jar, compiled once per source and Spark version into ember's cache."""
    source = _SOURCE.read_bytes()
    digest = hashlib.sha256(source + spark_version.encode()).hexdigest()[:16]
    cache = Path(os.environ.get("EMBER_CACHE") or Path.home() / ".cache" / "ember")
    jar = cache / "jvm" / f"plandump-{digest}.jar"
    if jar.exists():
        return jar
    javac = shutil.which("javac", path=_java_path())
    if javac is None:
        raise EmberError(
            "ember reads Spark plans with a small Java class it compiles on first use, and no javac "
            "was found: install a JDK 17 (e.g. 'apt-get install openjdk-17-jdk-headless')"
        )
    try:
        jar.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise EmberError(f"ember keeps its compiled plan reader in {jar.parent} and cannot write there ({e}): set EMBER_CACHE to a writable directory") from e
    with tempfile.TemporaryDirectory(dir=jar.parent) as work:
        built = subprocess.run(
            [javac, "-nowarn", "-cp", classpath, "-d", work, str(_SOURCE)], capture_output=True, text=True
        )
        if built.returncode != 0:
            raise EmberError(f"ember could not compile {_SOURCE.name} against this Spark: {built.stderr[-2000:]}")
        archive = shutil.make_archive(str(Path(work) / "plandump"), "zip", work, "ember")
        os.replace(archive, jar)  # atomic: a concurrent first use sees the jar whole or not at all
    return jar


def _java_path() -> str:
    """PATH with $JAVA_HOME/bin first, where Spark's own launcher looks for Java."""
    home = os.environ.get("JAVA_HOME")
    path = os.environ.get("PATH", "")
    return f"{home}/bin{os.pathsep}{path}" if home else path
