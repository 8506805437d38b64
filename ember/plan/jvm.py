"""Thin helpers over py4j for the Catalyst objects ember reads and builds.

Everything that touches Spark's internal (non-public) JVM API goes through here or
through the two edge modules (`plan.spark_import`, `capture.spark_build`), so a
Spark upgrade has few places to check.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession

JObj = Any  # a py4j JavaObject; typed loosely on purpose

CATALYST = "org.apache.spark.sql.catalyst"


class Jvm:
    """The JVM side of one SparkSession."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self.jvm: Any = spark._jvm
        self.jsession: JObj = spark._jsparkSession
        self._jvm_id: JObj | None = None

    # --- Scala collections -------------------------------------------------
    def seq(self, items: Iterable[JObj]) -> JObj:
        jlist = self.jvm.java.util.ArrayList()
        for item in items:
            jlist.add(item)
        return self.jvm.org.apache.spark.api.python.PythonUtils.toSeq(jlist)

    def some(self, value: JObj) -> JObj:
        return self.jvm.scala.Some(value)

    def none(self) -> JObj:
        return getattr(getattr(self.jvm.scala, "None$"), "MODULE$")

    # --- expressions ---------------------------------------------------------
    def expr_id(self, value: int) -> JObj:
        if self._jvm_id is None:
            self._jvm_id = self.jvm.org.apache.spark.sql.catalyst.expressions.NamedExpression.newExprId().jvmId()
        return self.jvm.org.apache.spark.sql.catalyst.expressions.ExprId(value, self._jvm_id)

    def alias(self, expr: JObj, name: str, expr_id: int) -> JObj:
        """An Alias that keeps a chosen exprId, so parents resolve it by id."""
        e = self.jvm.org.apache.spark.sql.catalyst.expressions
        return e.Alias(expr, name, self.expr_id(expr_id), self.seq([]), self.none(), self.seq([]))

    def attribute(self, name: str, dtype: JObj, nullable: bool, expr_id: int) -> JObj:
        e = self.jvm.org.apache.spark.sql.catalyst.expressions
        metadata = self.jvm.org.apache.spark.sql.types.Metadata.empty()
        return e.AttributeReference(name, dtype, nullable, metadata, self.expr_id(expr_id), self.seq([]))

    def null(self, dtype: JObj) -> JObj:
        return self.jvm.org.apache.spark.sql.catalyst.expressions.Literal(None, dtype)

    def true(self) -> JObj:
        return self.jvm.org.apache.spark.sql.catalyst.expressions.Literal.create(True, self.type("boolean"))

    def type(self, ddl: str) -> JObj:
        return self.jvm.org.apache.spark.sql.types.DataType.fromDDL(ddl)

    def column(self, expr: JObj) -> Column:
        """Wraps a resolved Catalyst expression as a PySpark Column."""
        from pyspark.sql.classic.column import Column as ClassicColumn

        node = self.jvm.org.apache.spark.sql.classic.ExpressionColumnNode.apply(expr)
        return ClassicColumn(self.jvm.org.apache.spark.sql.Column(node))

    def expression(self, col: Column) -> JObj:
        """The Catalyst expression behind a Column (unresolved if built from names)."""
        return self.jsession.expression(col._jc)

    # --- plans -----------------------------------------------------------------
    def dataframe(self, plan: JObj) -> DataFrame:
        jdf = self.jvm.org.apache.spark.sql.classic.Dataset.ofRows(self.jsession, plan)
        return DataFrame(jdf, self.spark)

    @staticmethod
    def analyzed(df: DataFrame) -> JObj:
        return df._jdf.queryExecution().analyzed()

    @staticmethod
    def optimized(df: DataFrame) -> JObj:
        return df._jdf.queryExecution().optimizedPlan()


def iterate(seq: JObj) -> Iterator[JObj]:
    """Iterates a Scala Seq (or anything with an iterator()) from Python."""
    it = seq.iterator()
    while it.hasNext():
        yield it.next()


def class_name(obj: JObj) -> str:
    return str(obj.getClass().getSimpleName())


def option(opt: JObj) -> JObj | None:
    return opt.get() if opt.isDefined() else None
