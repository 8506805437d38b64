"""A plan's rows restricted to wanted keys: the groups the lineage points at.

A side table's rows are read for the groups rows above it reference (`capture.sides`):
the wanted keys, a relation `wanted` with a column `k<i>` per key, joined with the rows
on each key, null matching null as refs match. Rows below an aggregate or a window whose
key is a wanted one are cut to the wanted keys before they are grouped (`Compiler.cut`:
DuckDB does not push a join into a derived table). The key tests are arranged so DuckDB
joins the wanted keys to one FROM item first (`_anchored`); a rollup's wanted keys name
grouping sets (`_rolled_up`). With `numbered`, the keys come back as their row's number
among the wanted keys in key order, one integer column (`GROUP`), for a caller that sorts
the rows as packed integers.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ember.engines.duck.compile import Compiled, Compiler, _Col
from ember.engines.duck.sql import duck_type, quoted
from ember.engines.duck.syntax import Column, Relation, Select
from ember.plan import ir
from ember.plan.sources import Source

GROUP = "__ember_group"  # a wanted key's number in key order (`numbered`)
STORED = "wanted_table"  # the wanted keys copied into a table, whose statistics DuckDB reads (`_anchored`)
FANOUT = 8  # wanted groups per value of the first keys from which all keys are hashed (`_anchored`)
_UNHASHED = ("float", "double", "timestamp", "timestamp_ntz")  # -0.0 = 0.0; wanted timestamps come in another zone's type


@dataclass(frozen=True)
class Wanted:
    """The keys a read is restricted to: `rows` (columns k0..kn: the values of `keys`, the
    plan's output columns; a rollup's last column is the grouping id)."""

    rows: pa.Table
    keys: tuple[ir.Attr, ...]
    compared: Collection[int] | None = None  # positions of the keys compared (None: all); the others follow from them
    sets: Mapping[int, int] | None = None  # a rollup's grouping ids → how many leading keys each groups by
    numbered: bool = False  # the keys come back as column `GROUP` (their row in `in_key_order`)


def table_rows(
    plan: ir.Project,
    sources: Mapping[str, Source],
    wanted: Wanted | None,
    *,
    inputs: Mapping[str, tuple[ir.Node, ...]] | None = None,
    order: Sequence[str] = (),
    limit: int | None = None,
) -> Compiled | None:
    """`plan`'s rows (every output column, named as the plan names it) for the `wanted` keys
    (None: every row; no keys: no row), sorted by the `order` columns (ascending, nulls
    first) or at most `limit` of them; None where it does not compile. Its `key` names the
    output columns by position."""
    keys = wanted.keys if wanted is not None else ()
    query = Compiler.of(sources, inputs=inputs)
    if wanted is not None and keys and not wanted.sets:  # rows below may be cut to the wanted keys (`cut`)
        query.pushed = {k.id: i for i, k in enumerate(keys)}
        query.renamed(plan)
    if not query.read(plan.child) or (query.keyed and wanted is None):
        return None
    outputs = {c.attr.id: query.made(c.expr) for c in plan.columns}
    if wanted is not None and keys and wanted.sets:
        sets = _wanted_sets(wanted.sets, wanted.rows)
        if sets is None or not _rolled_up(query, keys, wanted.rows, sets, outputs):
            return None
    joined = wanted is not None and bool(keys) and not wanted.sets  # the wanted keys are a FROM item `w`
    hashed = False
    if wanted is not None and joined and wanted.rows.num_columns != len(keys):
        return None
    if wanted is not None and joined and not query.keyed:  # restricted to the wanted groups, null-safely as refs match
        compared: dict[int, str] = {}
        reads: dict[int, frozenset[str]] = {}
        typed: dict[int, tuple[str, str]] = {}  # a key's type, where its values hash alike, and its SQL
        for i, k in enumerate(keys):
            made = outputs.get(k.id)
            if made is None:
                return None
            if wanted.compared is None or i in wanted.compared:  # a key the compared ones fix is not compared
                compared[i], reads[i] = _key_test(i, made.text, wanted.rows), made.items
                into = _hashed(k.dtype)
                if into is not None:
                    typed[i] = (into, made.text)
            outputs[k.id] = _Col(f"w.k{i}", frozenset({"w"}))  # the key values exactly as the lineage holds them
        anchored, hashed = _anchored(compared, reads, wanted.rows, typed)
        query.conditions += anchored
    if wanted is not None and not keys:
        query.conditions.append("FALSE")
    if any(v is None for v in outputs.values()):
        return None
    numbered = wanted is not None and wanted.numbered
    if numbered and (not joined or query.keyed):
        return None  # only keys joined as `w` come back numbered
    names = {k.name for k in keys} if numbered else set()
    if joined:
        query.items.insert(0, Relation(STORED if hashed else "wanted", "w"))
    tables: dict[str, pa.Table] = {}
    if wanted is not None and keys:
        tables["wanted"] = in_key_order(wanted.rows) if numbered else wanted.rows

    def select(named: bool) -> Select:
        """The query; unless `named`, its output columns named by position (`o<i>`)."""
        position = {a.name: i for i, a in reversed(list(enumerate(plan.output)))}

        def name(column: str, i: int) -> str:
            return quoted(column) if named else quoted(f"o{i}")

        made = [Column(outputs[a.id].text, name(a.name, i)) for i, a in enumerate(plan.output) if a.name not in names]  # type: ignore[union-attr]
        columns = [Column(f"w.{GROUP}", GROUP)] * numbered + made
        return query.rows_query(columns, order=[f"{name(n, position.get(n, -1))} ASC NULLS FIRST" for n in order], limit=limit)

    copies = ((STORED, "wanted"),) if hashed else ()
    return query.compiled(select(True), select(False), tables=tables, copies=copies)


def in_key_order(wanted: pa.Table) -> pa.Table:
    """The wanted keys sorted as DuckDB sorts them (nulls first; text by its bytes), each
    with its row number (`GROUP`). A DuckDB query for it cost as much as a small read's sort."""
    order = pc.sort_indices(wanted, sort_keys=[(n, "ascending", "at_start") for n in wanted.column_names])
    return wanted.take(order).append_column(GROUP, pa.array(np.arange(wanted.num_rows, dtype=np.int64)))


def _wanted_sets(lengths: Mapping[int, int], wanted: pa.Table) -> dict[int, list[int]] | None:
    """A rollup's wanted grouping sets: how many leading keys → the grouping ids grouping by
    that many (the wanted keys' last column); None for an id it has not."""
    sets: dict[int, list[int]] = {}
    for gid in pc.unique(wanted.column(wanted.num_columns - 1)).to_pylist():
        if gid not in lengths:
            return None
        sets.setdefault(lengths[gid], []).append(gid)
    return sets


def _rolled_up(
    query: Compiler, keys: tuple[ir.Attr, ...], wanted: pa.Table, sets: dict[int, list[int]], outputs: Mapping[int, _Col | None]
) -> bool:
    """Restricts a rollup's group table (`capture.rollup`) to the rows of the wanted groups:
    for each number of leading keys a wanted grouping set groups by, the rows equal on them
    to a wanted group of such a set (nothing restricted where the grand total, grouping by
    none, is wanted). Where all wanted groups are of one set (the finest, under a LIMIT),
    joined with them, which lets DuckDB start from the wanted keys; else one EXISTS per
    set, behind one on the leading keys all wanted groups share, a test DuckDB joins before
    the others. False where a key does not translate."""
    if 0 in sets:
        return True
    if not sets:
        query.conditions.append("FALSE")
        return True
    made = [outputs.get(k.id) for k in keys[: max(sets)]]
    texts = [m.text for m in made if m is not None]
    if len(texts) < len(made):
        return False
    gid = f"w.k{len(keys)}"
    if len(sets) == 1:  # a row is in one wanted group at most: joined, as other group tables
        ((_, ids),) = sets.items()
        compared = {i: _key_test(i, t, wanted) for i, t in enumerate(texts)}
        reads = {i: m.items for i, m in enumerate(made) if m is not None}
        query.conditions += [f"{gid} IN ({', '.join(map(str, ids))})", *_anchored(compared, reads, wanted)[0]]
        query.items.insert(0, Relation("wanted", "w"))
        return True

    def matched(length: int) -> str:
        return " AND ".join(_key_test(i, t, wanted) for i, t in enumerate(texts[:length]))

    tests = [f"EXISTS (SELECT 1 FROM wanted w WHERE {gid} IN ({', '.join(map(str, ids))}) AND {matched(n)})"
             for n, ids in sorted(sets.items())]  # fmt: skip
    query.conditions += [f"EXISTS (SELECT 1 FROM wanted w WHERE {matched(min(sets))})", f"({' OR '.join(tests)})"]
    return True


def hashable(dtype: str | None) -> bool:
    """Whether a key's values hash alike on both sides of a join (`_anchored`)."""
    return _hashed(dtype) is not None


def _hashed(dtype: str | None) -> str | None:
    """The type a key is cast to on both sides of a hashed join, so equal values hash alike."""
    return None if dtype is None or dtype in _UNHASHED else duck_type(dtype)


def _key_test(i: int, sql: str, wanted: pa.Table | None) -> str:
    """Key `i` (`sql`) equal to the wanted keys' `k<i>`, null matching null as refs match.
    Without a null among the wanted values `=` matches the same rows, and lets DuckDB push
    the join's key range into the scan."""
    nulls = wanted is None or wanted.column(i).null_count > 0
    return f"w.k{i} {'IS NOT DISTINCT FROM' if nulls else '='} ({sql})"


def _anchored(
    compared: dict[int, str],
    reads: Mapping[int, frozenset[str]],
    wanted: pa.Table,
    typed: Mapping[int, tuple[str, str]] | None = None,
) -> tuple[list[str], bool]:
    """The conditions matching key `i` (which reads the FROM items `reads[i]`) to the wanted
    keys' column `k<i>`, arranged so that DuckDB joins the wanted keys to one FROM item
    before the others, and whether a hash of all keys joins them.

    Each condition is a join of `w` with the items its key reads. Given separately, they
    let DuckDB's join order start from a key of few values (a year's days, joined to every
    sale before the wanted customers are). The keys of the item whose wanted values are
    the most distinct stay separate conditions (that join goes first, and pushes its key
    ranges into the item's scan); every other key is tested in one condition together
    with one of those, which DuckDB can check only once that item is joined. The rows
    matched are the same: it is one conjunction either way.

    That condition DuckDB tests on every pair of a row and a wanted group the first keys
    match. Where many groups share the first keys' values (`FANOUT`) and every key's type
    allows (`typed`), a hash of all the keys on either side, equal where the keys are,
    lets the join match them at once, the exact test still applied (with the wanted keys
    a table whose statistics DuckDB reads: `STORED`)."""
    items = sorted(set().union(*(reads.get(i, frozenset()) for i in compared)))
    if len(items) < 2:
        return list(compared.values()), False

    def distinct(item: str) -> int:
        return max(pc.count_distinct(wanted.column(f"k{i}"), mode="all").as_py() for i in compared if reads.get(i) == {item})

    alone = [item for item in items if any(reads.get(i) == {item} for i in compared)]
    if not alone:
        return list(compared.values()), False
    anchor = max(alone, key=distinct)
    first = [text for i, text in compared.items() if reads.get(i) == {anchor}]
    rest = [text for i, text in compared.items() if reads.get(i) != {anchor}]
    hashed = []
    anchored = [f"k{i}" for i in compared if reads.get(i) == {anchor}]
    fanout = wanted.num_rows / max(1, wanted.select(anchored).group_by(anchored).aggregate([]).num_rows)
    if typed is not None and all(i in typed for i in compared) and fanout >= FANOUT:
        wanted_side = ", ".join(f"CAST(w.k{i} AS {typed[i][0]})" for i in compared)
        row_side = ", ".join(f"CAST(({typed[i][1]}) AS {typed[i][0]})" for i in compared)
        hashed = [f"hash({wanted_side}) = hash({row_side})"]
    return [*first, *hashed, f"coalesce({' AND '.join([first[0], *rest])}, FALSE)"], bool(hashed)
