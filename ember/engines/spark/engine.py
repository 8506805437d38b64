"""The engine a capture talks to: a classic session's JVM (py4j) or a Spark Connect server.

Both read a plan out as one message and build a rewritten plan from one; they differ in
how a message travels and in what can be built beside one. The Connect side is imported
only for a Connect DataFrame: its client modules need the `connect` extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Union

from pyspark.sql import DataFrame

from ember.engines.spark.build import Builder
from ember.engines.spark.frames import is_connect, spark_frame
from ember.engines.spark.jvm import Jvm
from ember.engines.spark.numbering import number_source, shaped
from ember.engines.spark.plan_import import Imported, import_plan, name_source
from ember.plan import ir
from ember.plan.sources import Source

if TYPE_CHECKING:
    from ember.engines.spark.connect import Remote, RemoteBuilder

Engine = Union[Jvm, "Remote"]
Building = Union[Builder, "RemoteBuilder"]


def of(df: object, caller: str) -> Engine:
    """The engine of `df`'s session: its JVM, or its Connect server (which must serve ember)."""
    if isinstance(df, DataFrame) and is_connect(df):
        from ember.engines.spark.connect import Remote
        from ember.engines.spark.served import Reach

        session = df.sparkSession
        return Remote(session, Reach(session))  # type: ignore[arg-type]  # a Connect frame's session is a Connect one
    return Jvm.of(df, caller)


def declare(df: object, name: str, key: tuple[str, ...]) -> None:
    """`ember.source`: names the one source `df` reads in its session, with its key."""
    frame = spark_frame(df)
    source = of(frame, "ember.source")
    if isinstance(source, Jvm):
        name_source(source, frame, name, key)
    else:
        source.declare(frame, name, key)


def imported(engine: Engine, df: DataFrame) -> Imported:
    """The IR of `df`'s optimized plan and its sources, read out through `engine`."""
    return import_plan(engine, df) if isinstance(engine, Jvm) else engine.imported(df)


def numbered(engine: Engine, source: Source) -> Source:
    """The source with its rows counted where a first look at its data must count them."""
    return number_source(engine, source) if isinstance(engine, Jvm) else engine.numbered(source)


def checkable(engine: Engine, source: Source) -> Source:
    """The source as a check over none of its rows reads it (`numbering.shaped`)."""
    return shaped(engine, source) if isinstance(engine, Jvm) else engine.shaped(source)


def reports(engine: Engine) -> bool:
    """Whether a task's Python function can report to this process: through an
    accumulator, which a classic session's SparkContext has and a Connect client lacks."""
    return isinstance(engine, Jvm)


def builder(engine: Engine, sources: dict[str, Source], imported: ir.Node | None = None) -> Building:
    """What builds the rewritten plans of one capture over `sources` (as numbered)."""
    if isinstance(engine, Jvm):
        return Builder(engine, sources, imported=imported)
    from ember.engines.spark.connect import RemoteBuilder

    return RemoteBuilder(engine, sources, imported=imported)
