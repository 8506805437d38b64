"""ember: row-level lineage for PySpark DataFrames and Spark SQL.

    import ember
    lin = ember.capture(df)                  # run df once, capturing lineage
    lin.output()                             # pyarrow.Table of the output + ember_oid
    t = lin.backward(oids=[0])               # or where="l_returnflag = 'R'"
    t.sources, t.ids("lineitem"), t.rows("lineitem")
    lin.forward("lineitem", ids=[7]).ids()   # output oids a source row reached
    lin.save("q1.lineage"); lin = ember.load("q1.lineage", spark)   # a persisted store
    lin.export_json("q1.json")               # output oid → source rids, for other tools
    lin_a = ember.capture(df_a, write=lambda w: w.partitionBy("dt").parquet(path))   # the write is the job
    lin_b.backward(oids=[0])                 # goes on into lin_a where df_b read its files
    ember.catalog("runs/")                   # saved stores found by the files they wrote (EMBER_CATALOG)
    lin = ember.infer(df)                    # lazy: nothing captured, traces re-run restricted
    lin = ember.infer(df, exact=False)       # lazy superset: no re-run, never misses a row
    lin = ember.lineage(df, traces=2)        # eager or lazy (`AnyLineage`), from the expected traces

    $ ember run job.py; ember ls/trace/export/ui   # the command line (docs/guide/cli.md)

Two separate products share ember's store format and live beside it, imported on
their own: `ember.rdd` (`ember.LineageContext`: Titian-style lineage for RDD programs)
and `ember.arrays` (cell-level lineage for numpy pipelines, DSLog). `ember.apps` holds
applications built on lineage (`fd_violations`: functional-dependency profiling).

Everything else in the package is private.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ember.errors import (
    EmberError,
    IdOutOfRangeError,
    InvalidPredicateError,
    StaleSourceError,
    StoreError,
    UnknownSourceError,
    UnsupportedOperatorError,
)
from ember.version import __version__ as __version__

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from ember.capture.capture import capture
    from ember.infer.infer import infer
    from ember.infer.lineage import InferredLineage
    from ember.modes import lineage
    from ember.plan.workload import Workload
    from ember.query.lineage import Lineage, catalog, load
    from ember.query.trace import AnyLineage, ForwardTrace, Trace
    from ember.rdd import LineageContext

# Where each public name lives, imported on first use: `import ember` stays cheap, so the
# store-only commands (`ember ls/trace/export`) start quickly.
_LAZY = {
    "capture": "ember.capture.capture",
    "InferredLineage": "ember.infer.lineage",
    "infer": "ember.infer.infer",
    "lineage": "ember.modes",
    "Workload": "ember.plan.workload",
    "Lineage": "ember.query.lineage",
    "load": "ember.query.lineage",
    "catalog": "ember.query.lineage",
    "AnyLineage": "ember.query.trace",
    "ForwardTrace": "ember.query.trace",
    "Trace": "ember.query.trace",
    "LineageContext": "ember.rdd",
}

# `ember.capture` and `ember.infer` name a function and a subpackage both. The subpackages
# (docstrings only) are loaded here, first, because loading a package binds its name in
# its parent: later imports of their modules leave the names to the functions.
for _package in ("capture", "infer"):
    importlib.import_module(f"ember.{_package}")
    del globals()[_package]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ember' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def source(df: DataFrame, name: str, key: Sequence[str] = ()) -> DataFrame:
    """Names the single source `df` reads; lineage then reports it as `name`.

    `key`: the columns whose values identify the source's rows, for a source with no
    stable row order (a JDBC table, a Python data source), which is refused without one,
    or for files to be identified by key rather than position (a field of `_metadata`
    may be a key column); traces then give its rows' key values (`t.keys(name)`).
    """
    from ember.engines.spark import engine

    if isinstance(key, str):
        raise TypeError(f"key is a list of column names, like key=[{key!r}]")
    engine.declare(df, name, tuple(key))
    return df


__all__ = [
    "AnyLineage",
    "EmberError",
    "ForwardTrace",
    "IdOutOfRangeError",
    "InferredLineage",
    "InvalidPredicateError",
    "Lineage",
    "LineageContext",
    "StaleSourceError",
    "StoreError",
    "Trace",
    "UnknownSourceError",
    "UnsupportedOperatorError",
    "Workload",
    "capture",
    "catalog",
    "infer",
    "lineage",
    "load",
    "source",
]
