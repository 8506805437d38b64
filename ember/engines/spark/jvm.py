"""Thin helpers over py4j for the Catalyst objects ember reads and builds.

py4j is imported where it is used: a Spark Connect client (`pyspark-client`) has none.

Everything that touches Spark's internal (non-public) JVM API goes through here or
through the edge modules (`engines.spark.catalyst`, `engines.spark.plan_import`, `engines.spark.build`,
and the Java helpers in the jar `engines.spark.jar` loads), so a Spark upgrade has few places to check.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from pyspark.sql import Column, DataFrame, SparkSession

from ember.errors import EmberError

JObj = Any  # a py4j JavaObject; typed loosely on purpose
T = TypeVar("T")

CATALYST = "org.apache.spark.sql.catalyst"
EXPRESSIONS = CATALYST + ".expressions"
LOGICAL = CATALYST + ".plans.logical"

# Resolved JVM names per gateway. py4j resolves `jvm.org.apache...` one round trip per dot,
# and building a plan names the same few classes thousands of times.
_NAMES: dict[int, tuple[Any, dict[str, JObj]]] = {}
_GATEWAY = " gateway"  # where `Jvm.gateway` keeps it among the names (no JVM name has a space)


def _names(client: Any) -> dict[str, JObj]:
    """The names resolved through one gateway client."""
    known = _NAMES.get(id(client))
    if known is None or known[0] is not client:
        known = _NAMES[id(client)] = (client, {})
    return known[1]


def _resolved(names: dict[str, JObj], root: Any, path: str) -> JObj:
    found = names.get(path)
    if found is None:
        head, _, last = path.rpartition(".")
        found = getattr(_resolved(names, root, head) if head else root, last)
        names[path] = found
    return found


class Jvm:
    """The JVM side of one SparkSession."""

    @classmethod
    def of(cls, df: object, caller: str) -> Jvm:
        """The JVM side of a classic DataFrame's session (a Spark Connect one's engine is
        its server: `engine.of`); any other kind is refused by name rather than failing
        on the first attribute it lacks."""
        from pyspark.sql.classic.dataframe import DataFrame as ClassicDataFrame

        if isinstance(df, ClassicDataFrame):
            return cls(df.sparkSession)
        kind = type(df)
        if isinstance(df, DataFrame):
            raise EmberError(
                f"{caller} needs a DataFrame of a classic SparkSession or of a Spark Connect one, not "
                f"{kind.__module__}.{kind.__qualname__}"
            )
        raise TypeError(f"{caller} takes a PySpark DataFrame, not {kind.__module__}.{kind.__qualname__}")

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self.jvm: Any = spark._jvm
        self.jsession: JObj = spark._jsparkSession
        self._jvm_id: JObj | None = None
        self._names = _names(spark._sc._gateway._gateway_client)  # type: ignore[union-attr]
        self.activate()

    def activate(self) -> None:
        """Makes the session this thread's active one. Spark reads its settings (time zone,
        shuffle partitions, excluded optimizer rules, ...) from the thread's active
        session, and a thread that has none gets the defaults."""
        self.name("org.apache.spark.sql.classic.SparkSession.setActiveSession")(self.jsession)

    def threaded(self, fn: Callable[..., T]) -> Callable[..., T]:
        """`fn`, made to run with this session active on whatever thread calls it."""

        def run(*args: Any, **kwargs: Any) -> T:
            self.activate()
            return fn(*args, **kwargs)

        return run

    def name(self, path: str) -> JObj:
        """A JVM package, class, static method or Scala object (`Foo$.MODULE$`), resolved once."""
        return _resolved(self._names, self.jvm, path)

    def gateway(self) -> JObj:
        """The JVM's py4j gateway (its registry of the objects Python holds), fetched once."""
        found = self._names.get(_GATEWAY)
        if found is None:
            found = self._names[_GATEWAY] = gateway_of(self.jsession)
        return found

    # --- Scala collections -------------------------------------------------
    def seq(self, items: Iterable[JObj]) -> JObj:
        """A Scala Seq of `items` in about one round trip per ten items: Java's fixed-arity
        `List.of` overloads take up to ten elements each (filling an ArrayList took one
        round trip per item, and plans are built from thousands). No item may be None."""
        chunks = _chunks(list(items), _LIST_OF_ARITY)
        make = self.name("java.util.List.of")
        if len(chunks) == 1:
            jlist = make(*chunks[0])
        else:
            jlist = self.name("java.util.ArrayList")()
            for chunk in chunks:
                jlist.addAll(make(*chunk))
        return self.name("org.apache.spark.api.python.PythonUtils.toSeq")(jlist)

    def some(self, value: JObj) -> JObj:
        return self.name("scala.Some")(value)

    def none(self) -> JObj:
        return self.name("scala.None$.MODULE$")

    # --- expressions ---------------------------------------------------------
    def expr_id(self, value: int) -> JObj:
        if self._jvm_id is None:
            self._jvm_id = self.name(EXPRESSIONS + ".NamedExpression.newExprId")().jvmId()
        return self.name(EXPRESSIONS + ".ExprId")(value, self._jvm_id)

    def alias(self, expr: JObj, name: str, expr_id: int) -> JObj:
        """An Alias that keeps a chosen exprId, so parents resolve it by id."""
        empty = self.seq([])
        return self.name(EXPRESSIONS + ".Alias")(expr, name, self.expr_id(expr_id), empty, self.none(), empty)

    def attribute(self, name: str, dtype: JObj, nullable: bool, expr_id: int) -> JObj:
        metadata = self.name("org.apache.spark.sql.types.Metadata.empty")()
        make = self.name(EXPRESSIONS + ".AttributeReference")
        return make(name, dtype, nullable, metadata, self.expr_id(expr_id), self.seq([]))

    def null(self, dtype: JObj) -> JObj:
        return self.name(EXPRESSIONS + ".Literal")(None, dtype)

    def true(self) -> JObj:
        return self.name(EXPRESSIONS + ".Literal.create")(True, self.type("boolean"))

    def type(self, ddl: str) -> JObj:
        return self.name("org.apache.spark.sql.types.DataType.fromDDL")(ddl)

    def column(self, expr: JObj) -> Column:
        """Wraps a resolved Catalyst expression as a PySpark Column."""
        from pyspark.sql.classic.column import Column as ClassicColumn

        node = self.name("org.apache.spark.sql.classic.ExpressionColumnNode.apply")(expr)
        return ClassicColumn(self.name("org.apache.spark.sql.Column")(node))

    def expression(self, col: Column) -> JObj:
        """The Catalyst expression behind a Column (unresolved if built from names)."""
        return self.jsession.expression(col._jc)

    # --- plans -----------------------------------------------------------------
    def dataframe(self, plan: JObj) -> DataFrame:
        jdf = self.name("org.apache.spark.sql.classic.Dataset.ofRows")(self.jsession, plan)
        return DataFrame(jdf, self.spark)

    @staticmethod
    def analyzed(df: DataFrame) -> JObj:
        return df._jdf.queryExecution().analyzed()

    @staticmethod
    def optimized(df: DataFrame) -> JObj:
        return df._jdf.queryExecution().optimizedPlan()


def gateway_of(obj: JObj) -> JObj:
    """The py4j gateway (the JVM's registry of the objects Python holds) of `obj`'s JVM."""
    from py4j import protocol as proto
    from py4j.java_gateway import JavaObject

    return JavaObject(proto.GATEWAY_SERVER_OBJECT_ID, obj._gateway_client).getGateway()


def handles(client: Any) -> Callable[[str], JObj]:
    """The py4j object behind a gateway id, for the plan reader."""
    from py4j.java_gateway import JavaObject

    return lambda ref: JavaObject(ref, client)


_LIST_OF_ARITY = 10  # java.util.List.of has overloads of 0 to 10 elements


def _chunks(items: list[T], size: int) -> list[list[T]]:
    return [items[i : i + size] for i in range(0, len(items), size)] or [[]]


def iterate(seq: JObj) -> Iterator[JObj]:
    """Iterates a Scala Seq from Python, one round trip per element and one for its size
    (an iterator costs two per element)."""
    for i in range(seq.size()):
        yield seq.apply(i)


def class_name(obj: JObj) -> str:
    """`obj.getClass().getSimpleName()` in one round trip (commons-lang3 ships with Spark)."""
    from py4j import protocol as proto
    from py4j.java_gateway import JVMView

    client = obj._gateway_client
    root = JVMView(client, proto.DEFAULT_JVM_NAME, id=proto.DEFAULT_JVM_ID)
    return str(_resolved(_names(client), root, "org.apache.commons.lang3.ClassUtils.getSimpleName")(obj))


_ATTRIBUTE_ID = re.compile(r"#(\d+)L?(?:-T\d+ms)?$")
_SEPARATOR = "\x1f"


def texts(seq: JObj) -> list[str]:
    """How each element of a Scala Seq prints, in one round trip."""
    text = str(seq.mkString(_SEPARATOR))
    return text.split(_SEPARATOR) if text or seq.nonEmpty() else []


def output_ids(output: JObj) -> list[int]:
    """The exprIds of a plan's output attributes, in one round trip: each attribute prints
    as `name#id`, with `L` after a long's id and a watermark delay after that."""
    found = [_ATTRIBUTE_ID.search(part) for part in texts(output)]
    if not all(found):
        raise AssertionError(f"unexpected attribute names in a plan's output: {texts(output)!r}")
    return [int(m.group(1)) for m in found if m]
