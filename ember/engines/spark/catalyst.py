"""Catalyst plans and expressions as plain Python data, read in one py4j round trip.

Walking a plan over py4j costs a round trip per node, expression and field, which
adds up to the largest fixed cost of a capture. ember's small Java class
(`PlanDump.java`, in the jar `engines.spark.jar` loads) writes the plan as JSON inside
the JVM instead, to a file (a large py4j answer stalls), and registers each
node and each expression a node holds with the py4j gateway, so Python gets handles to
them without asking.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame

from ember.engines.spark import jar
from ember.engines.spark.jvm import JObj, Jvm, gateway_of, handles
from ember.plan.trees import PlanOut, PlanTree, Reader, Tree, read

_OPT = "org.apache.spark.sql.catalyst.optimizer."
# Rules that rewrite a plan in ways that lose which row is which.
EXCLUDED_RULES = (
    _OPT + "ConvertToLocalRelation",  # evaluates operators over in-memory data at plan time
    _OPT + "RewriteNonCorrelatedExists",  # EXISTS → LIMIT 1 would keep one witness, not all
    _OPT + "InferWindowGroupLimit",  # drops rows before a window sees its whole partition
    _OPT + "LimitPushDownThroughWindow",
    # Also drops an outer join whose other side matches at most once and is not read above
    # (a count over `a LEFT JOIN (... GROUP BY k)`): the matched rows are lineage all the same.
    _OPT + "EliminateOuterJoin",
)


def message(jvm: Jvm, df: DataFrame) -> PlanOut:
    """The plan out of `df`: its optimized plan (with `excluded` rules) and what the import
    reads beside it, in one py4j call (schema: docs/design/import.md, "One message out")."""
    client = df._jdf._gateway_client
    body = _dumped(lambda path: _dumper(jvm).message(gateway_of(df._jdf), df._jdf, ",".join(EXCLUDED_RULES), path))
    return read(body, handles(client))


def plan(jvm: Jvm, p: JObj) -> PlanTree:
    """`p` with handles to its nodes and the expressions they hold."""
    return Reader(handles(p._gateway_client)).plan(
        _dumped(lambda path: _dumper(jvm).plan(gateway_of(p), p, path))
    )


def expression(jvm: Jvm, e: JObj) -> Tree:
    """One expression, with a handle, as `plan` reads those a node holds."""
    return Reader(handles(e._gateway_client)).tree(
        _dumped(lambda path: _dumper(jvm).expression(gateway_of(e), e, path))
    )


def leaves(jvm: Jvm, p: JObj) -> list[PlanTree]:
    """Every leaf of a plan (no handles)."""
    reader = Reader(handles(p._gateway_client))
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


# --- the Java side ---------------------------------------------------------------
def _dumper(jvm: Jvm) -> JObj:
    return jar.helper(jvm, "PlanDump")
