"""Group-by push-down and data skipping (Smoke sections 4.3, 4.4), computed once at capture.

A *grouping* holds, for every output row, its lineage rows of one source grouped by the
GROUP BY keys of a declared lineage-consuming query, with the query's aggregates and each
group's rids. Asking that query of a one-row trace (`Trace.query`) then reads the
output row's slice of the grouping instead of fetching the rows and aggregating them
(group-by push-down). A *partition* is the grouping of `SELECT col FROM source GROUP BY
col`: a trace restricted by a predicate over `col` (`backward(source_where=...)`) keeps
the groups whose value satisfies it, without reading the source (data skipping).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import duckdb
import numpy as np
import pyarrow as pa

from ember.engines import duck
from ember.errors import InvalidPredicateError
from ember.fetch.rows import read_rows, source_relation
from ember.plan.sources import OID, RID, Source
from ember.query.consume import LINEAGE, as_lineage, item, parse, scalar, source_name
from ember.store.columns import Plain, encode, sorted_unique
from ember.store.groupings import Grouping
from ember.store.index import LineageIndex

if TYPE_CHECKING:
    from ember.query.lineage import Lineage


def answer(g: Grouping, oid: int, sql: str, form: str, source: Source) -> Lineage | None:
    """`sql` (of shape `form`) over output row `oid`'s lineage, if it is this grouping's
    query and the row has groups (a global aggregate over no rows still has one: that
    is asked the slow way)."""
    if g.column is not None or form != shape(g.query):
        return None
    rows = g.rows(np.array([oid], dtype=np.int64))
    if rows.size == 0:
        return None
    lengths = g.end[rows] - g.start[rows]
    ends = np.cumsum(lengths)
    output = g.result.take(pa.array(rows)).drop_columns([OID])
    return as_lineage(output, ends - lengths, ends, Plain(g.rids_of(rows)), source, sql)



@functools.lru_cache(maxsize=256)
def shape(sql: str) -> str:
    """The query's parse tree without source positions: equal for equal queries however spelled."""
    con = duck.connect()
    try:
        return json.dumps(_unplaced(parse(con, sql)), sort_keys=True)
    finally:
        con.close()


def _unplaced(tree: Any) -> Any:
    if isinstance(tree, dict):
        return {k: _unplaced(v) for k, v in tree.items() if not k.startswith("query_location")}
    if isinstance(tree, list):
        return [_unplaced(v) for v in tree]
    return tree


def partition_query(source: str, column: str) -> str:
    return f'SELECT "{column}" FROM "{source}" GROUP BY "{column}"'


def materialize(
    sql: str, sources: Mapping[str, Source], index: LineageIndex, outputs: int, column: str | None = None
) -> Grouping:
    """Runs `sql` once over every output row's lineage at the same time (grouped by output row too)."""
    key = sources[check(sql, sources)].key
    pairs = index.backward_pairs(np.arange(outputs, dtype=np.int64))
    owners, rids = pairs.get(key, (np.empty(0, np.int64), np.empty(0, np.int64)))
    name, result = _grouped(sql, sources, owners, rids)
    lists = result.column(LINEAGE).combine_chunks()
    offsets = lists.offsets.to_numpy().astype(np.int64)
    values = lists.values.to_numpy().astype(np.int64)
    return Grouping(name, sql, column, result.drop_columns([LINEAGE]), offsets[:-1], offsets[1:], encode(values))


def check(sql: str, sources: Mapping[str, Source]) -> str:
    """The source `sql` reads, once it is known to push down (run over no rows of a file or
    in-memory source, so before any job)."""
    return _grouped(sql, sources, np.empty(0, np.int64), np.empty(0, np.int64), probe=True)[0]


def _grouped(
    sql: str, sources: Mapping[str, Source], owners: np.ndarray, rids: np.ndarray, probe: bool = False
) -> tuple[str, pa.Table]:
    con = duck.connect()
    try:
        tree = parse(con, sql)
        name = source_name(tree, sources)
        node = tree["statements"][0]["node"]
        if node.get("modifiers"):
            raise InvalidPredicateError(f"workload query {sql!r}: ORDER BY, LIMIT and DISTINCT are not pushed down")
        if probe and sources[name].kind not in ("memory", "parquet", "range"):
            return name, pa.table({})  # a counted source's rows are numbered by the capture job itself
        _register_rows(con, sources[name], owners, rids, probe)
        con.execute(f'CREATE TEMP VIEW "{name}" AS SELECT * FROM __ember_pairs JOIN __ember_source USING ({RID})')
        oid = item(con, OID)
        node["group_expressions"] = [{**oid, "alias": ""}, *node.get("group_expressions", [])]
        node["group_sets"] = [[0, *(i + 1 for i in g)] for g in node.get("group_sets") or [[]]]
        node["select_list"] = [{**oid, "alias": OID}, *node["select_list"], item(con, f"list({RID} ORDER BY {RID})")]
        rewritten = scalar(con, "SELECT json_deserialize_sql(?)", json.dumps(tree))
        try:
            result = con.sql(f"SELECT * FROM ({rewritten}) ORDER BY {OID}").to_arrow_table()
        except duckdb.Error as e:
            raise InvalidPredicateError(
                f"workload query {sql!r} cannot be pushed down (one aggregating SELECT over one source): {e}"
            ) from None
    finally:
        con.close()
    return name, result


def _register_rows(
    con: duckdb.DuckDBPyConnection, source: Source, owners: np.ndarray, rids: np.ndarray, probe: bool
) -> None:
    """`__ember_pairs` (output row, rid) and `__ember_source` (the source's rows with rids),
    read by DuckDB straight from the files where it can, so only the query's columns are read."""
    con.register("__ember_pairs", pa.table({OID: owners, RID: rids}))
    try:
        relation: pa.Table | str = source_relation(source)
    except InvalidPredicateError:  # counted sources (CSV, JSON, XML, text, ORC, binary): Spark reads them
        relation = read_rows(source, sorted_unique([rids]))
    if isinstance(relation, str):
        con.execute(f"CREATE TEMP VIEW __ember_source AS SELECT * FROM ({relation}){' LIMIT 0' if probe else ''}")
    else:
        con.register("__ember_source", relation)

