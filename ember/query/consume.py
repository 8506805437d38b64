"""Lineage-consuming queries: SQL over the rows a trace reached, answered in-process by
DuckDB, whose result is itself a lineage (Smoke's drill-down, query over query).

The query is parsed by DuckDB (`json_serialize_sql`) and gets one more select item:
`list(ember_rid)` when it aggregates (each result row's group), else the row's own
`ember_rid`. The lists become a two-level index: result row → range of rids.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import duckdb
import numpy as np
import pyarrow as pa

from ember.engines import duck
from ember.errors import InvalidPredicateError
from ember.plan.sources import RID, Source
from ember.store.columns import IntColumn, encode
from ember.store.index import Level, LineageIndex, Ranges

if TYPE_CHECKING:
    from ember.query.lineage import Lineage

LINEAGE = "__ember_lineage"


def consume(sql: str, sources: Mapping[str, Source], rows: Callable[[str], pa.Table]) -> Lineage:
    """Runs `sql` over the traced rows of the one source its FROM names (`rows(name)`)."""
    con = duck.connect()
    try:
        tree = parse(con, sql)
        name = source_name(tree, sources)
        source = sources[name]
        con.register(name, rows(name))
        result = _run(con, tree, name)
    finally:
        con.close()
    lists = result.column(LINEAGE).combine_chunks()
    offsets = lists.offsets.to_numpy().astype(np.int64)
    rids = lists.values.to_numpy().astype(np.int64)
    return as_lineage(result.drop_columns([LINEAGE]), offsets[:-1], offsets[1:], encode(rids), source, sql)


def as_lineage(output: pa.Table, start: np.ndarray, end: np.ndarray, rids: IntColumn, source: Source, sql: str) -> Lineage:
    """A query result whose row `i` came from `rids[start[i]:end[i]]` of `source`, as a lineage."""
    from ember.query.lineage import Lineage

    side = Level(rids.size, ((source.key, rids),), (), "lineage-consuming query")
    out = Level(output.num_rows, (), (Ranges(0, encode(start), encode(end)),))
    return Lineage(output, LineageIndex(out, (side,)), [source], mode="consume", plan=f"DuckDB({sql.strip()})")


def parse(con: duckdb.DuckDBPyConnection, sql: str) -> dict[str, Any]:
    try:
        tree: dict[str, Any] = json.loads(scalar(con, "SELECT json_serialize_sql(?)", sql))
    except duckdb.Error as e:
        raise InvalidPredicateError(f"query does not parse: {e}") from None
    if tree.get("error"):
        raise InvalidPredicateError(f"query does not parse: {tree.get('error_message', sql)}")
    if len(tree.get("statements", [])) != 1:
        raise InvalidPredicateError("a lineage-consuming query is one SELECT")
    if tree["statements"][0]["node"].get("type") != "SELECT_NODE":
        raise InvalidPredicateError("lineage-consuming queries are a single SELECT (no UNION, no CTE at the top)")
    return tree


def source_name(tree: dict[str, Any], sources: Mapping[str, Source]) -> str:
    table = tree["statements"][0]["node"].get("from_table") or {}
    name = table.get("table_name") if table.get("type") == "BASE_TABLE" else None
    if name not in sources:
        known = ", ".join(sorted(sources))
        raise InvalidPredicateError(f"a lineage-consuming query reads one traced source by name ({known}) in FROM")
    return str(name)


def _run(con: duckdb.DuckDBPyConnection, tree: dict[str, Any], name: str) -> pa.Table:
    node = tree["statements"][0]["node"]
    forms = ["list(ember_rid ORDER BY ember_rid)", "[ember_rid]"]
    if not node.get("group_expressions"):
        forms.reverse()  # no GROUP BY: a row-level query, unless it is a global aggregate
    last: Exception | None = None
    for form in forms:
        node["select_list"] = [*node["select_list"][: _width(node)], item(con, form)]
        rewritten = scalar(con, "SELECT json_deserialize_sql(?)", json.dumps(tree))
        try:
            return con.sql(rewritten).to_arrow_table()
        except duckdb.BinderException as e:
            last = e
        except duckdb.Error as e:
            raise InvalidPredicateError(f"query failed on the traced rows of {name!r}: {e}") from None
    raise InvalidPredicateError(f"query does not fit the traced rows of {name!r} (one source, {RID}): {last}")


def _width(node: dict[str, Any]) -> int:
    items = node["select_list"]
    return len(items) - 1 if items and items[-1].get("alias") == LINEAGE else len(items)


def item(con: duckdb.DuckDBPyConnection, expr: str) -> dict[str, Any]:
    tree = json.loads(scalar(con, "SELECT json_serialize_sql(?)", f"SELECT {expr} AS {LINEAGE}"))
    item: dict[str, Any] = tree["statements"][0]["node"]["select_list"][0]
    return item


def scalar(con: duckdb.DuckDBPyConnection, sql: str, param: str) -> str:
    return str(con.execute(sql, [param]).fetchall()[0][0])
