"""Side tables over local Parquet scans, answered in-process by DuckDB.

A side table fetched after the job is restricted to the groups the lineage points at
(`capture.sides`): a semi join's witnesses for the probe values the result holds, an
aggregate's rows for the groups that reach the output, a window's partitions. When its
rows come from Parquet scans of local files under filters, projections, aggregates,
expands, unions, windows and inner, outer, semi and anti joins (TPC-H Q4's and Q21's
`EXISTS (... lineitem ...)`, Q20's witnesses over a correlated sum, the groups of Q2's,
Q15's, Q17's, Q18's and Q20's aggregates, and of the aggregates `capture.annotate`
leaves to DuckDB rather than listing their groups; TPC-DS's channel unions, INTERSECTs
and ranks over groups), a Spark job spends most of its time being scheduled; DuckDB
reads the same files, with the same row-group skipping, in-process, joined with the
wanted keys, and returns them sorted for the index. An aggregate input two tables read
is read once, beside the job (`Inputs`).
Conditions and key expressions are translated by `engines.duck.sql` (only expressions that
mean the same in both engines); anything it cannot translate, any other plan shape, and
any error while reading leave the table to Spark.
"""

from __future__ import annotations

import itertools
import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ember.capture.annotate import input_rows
from ember.capture.decided import matched_keys, without_decided
from ember.capture.untie import Tied
from ember.engines import duck
from ember.engines.duck.sql import (
    duck_type,
    numbered_parquet,
    quoted,
    rows_offset,
    sql,
    typed_null,
)
from ember.plan import ir
from ember.plan.slots import GROUPS, SideTable
from ember.plan.sources import Source
from ember.plan.trees import Tree, find
from ember.store.build import SORTED, order_by, sorted_rows

_RID = "__ember_rid"
_MARK = "\x00"  # around an attribute id in a translated template
SHARED_ROWS = 1 << 20  # past this many rows an aggregate input is not kept for two tables (`Inputs`)


def _template(e: ir.Expr, grouped: bool, untied: bool = False) -> str | None:
    """`e` in SQL with its attributes and scalar subqueries as placeholders (`<id>`, `q<i>`:
    `e.subqueries[i]`), filled in by each query that reads it."""
    if e.tree is None:
        return None
    numbered = {id(s): i for i, s in enumerate(s for s in find(e.tree, {"ScalarSubquery"}) if s.plan is not None)}
    made: list[str] = []

    def placeholder(a: Tree) -> str:
        made.append(str(a.id))
        return f"{_MARK}{made[-1]}{_MARK}"

    def subquery(s: Tree) -> str | None:
        if id(s) not in numbered:
            return None
        made.append(f"q{numbered[id(s)]}")
        return f"{_MARK}{made[-1]}{_MARK}"

    if any(_MARK in str(literal.value) for literal in find(e.tree, {"Literal"})):
        return None  # the mark would be read as a placeholder's
    return sql(e.tree, placeholder, grouped=grouped, subquery=subquery, untied=untied)


@dataclass
class _Query:
    """SQL for each attribute the side table's plan makes, in terms of its scans' columns
    (`s0`, `s1`, ...) and the wanted keys (`w`), with the conditions met on the way."""

    sources: dict[str, Source]
    columns: dict[int, str | None] = field(default_factory=dict)  # None: made, but not translatable
    conditions: list[str] = field(default_factory=list)
    scans: list[str] = field(default_factory=list)  # FROM items: scans, or scans left joined
    aliases: Iterator[int] = field(default_factory=itertools.count)  # shared with nested queries
    keyed: bool = False  # the wanted keys come in through an `ir.Keys` node
    strict: bool = False  # a projected or aggregate column that does not translate fails the read (`readable`)
    inputs: dict[str, tuple[ir.Node, ...]] = field(default_factory=dict)  # registered name → the plans whose rows it holds
    packing: Packing | None = None  # how `text`'s rows are sorted after the read, if not by DuckDB
    pushed: dict[int, int] = field(default_factory=dict)  # attribute id → the wanted key it equals (`cut`)
    coalesced: dict[tuple[int, int], int] = field(default_factory=dict)  # a full join's key sides → the wanted key

    @property
    def where(self) -> str:
        """The conditions as one WHERE clause's text."""
        return " AND ".join(self.conditions) or "TRUE"

    def nested(self, columns: dict[int, str | None] | None = None, pushed: dict[int, int] | None = None) -> _Query:
        """A query inside this one (a derived table, an EXISTS), reading the same inputs; its
        rows are cut to the wanted keys only by the `pushed` attributes given (its own copy:
        what it learns below, or clears, stays its own)."""
        return _Query(
            self.sources, columns=columns or {}, aliases=self.aliases, inputs=self.inputs, strict=self.strict, pushed=dict(pushed or {})
        )

    def cut(self, node: ir.Aggregate | ir.Window, keys: Sequence[ir.AnyExpr]) -> dict[int, int]:
        """The keys (`node`'s group or partition keys) that equal a wanted key: `node`'s input
        rows may be cut to the wanted keys by them, since no output row with a wanted key
        reads a row without one. DuckDB does not push the wanted keys' join into a derived
        table: TPC-DS Q51's running sums were computed for every item, 20 wanted."""
        wanted = {_origin(node, a): i for a, i in self.pushed.items()}
        found = {}
        for k in keys:
            column = _column(k)
            if column is not None and _origin(node.child, column) in wanted:
                found[column] = wanted[_origin(node.child, column)]
        return found

    def cut_rows(self, cut: Mapping[int, int]) -> None:
        """Keeps the rows whose `cut` attributes hold a wanted key (or null: refs match nulls)."""
        for attr, i in cut.items():
            text = self.columns.get(attr)
            if text is not None:
                self.conditions.append(f"({text} IN (SELECT k{i} FROM wanted) OR {text} IS NULL)")

    def read(self, node: ir.Node) -> bool:
        """Follows `node` down to its scans; False where it is not local Parquet scans
        under filters, projections, aggregates, expands, windows, unions, repeatable
        cached subplans, inner, outer, semi and anti joins and a join with the wanted
        keys, all of whose expressions translate; a plan read beside the job (`Inputs`) is
        read from memory."""
        name = next((n for n, plans in self.inputs.items() if node in plans), None)
        if name is not None:
            self.stored(name, node.output)
            return True
        if isinstance(node, ir.Project):
            self.renamed(node)
            if not self.read(node.child):
                return False
            made = {c.attr.id: self.expr(c.expr) for c in node.columns}
            self.columns.update(made)
            return not (self.strict and None in made.values())
        if isinstance(node, ir.Filter):
            return self.read(node.child) and self.condition(node.cond)
        if isinstance(node, ir.Join) and node.kind == "inner" and isinstance(node.left, ir.Keys):
            self.keyed = True
            self.columns.update({a.id: f"w.k{i}" for i, a in enumerate(node.left.attrs)})
            return self.read(node.right) and node.cond is not None and self.condition(node.cond)
        if isinstance(node, ir.Join) and node.kind == "inner":
            return self.read(node.left) and self.read(node.right) and (node.cond is None or self.condition(node.cond))
        if isinstance(node, ir.Join) and node.kind in ("left", "right") and node.cond is not None:
            kept, padded = (node.left, node.right) if node.kind == "left" else (node.right, node.left)
            return self.read(kept) and self.outer(padded, node.cond)
        if isinstance(node, ir.Join) and node.kind == "full" and node.cond is not None:
            return self.full(node)
        if isinstance(node, ir.Join) and node.kind in ("semi", "anti") and node.cond is not None:
            return self.read(node.left) and self.exists(node.right, node.cond, negated=node.kind == "anti")
        if isinstance(node, ir.Shared):  # computed again here: the rows it cached, if repeatable
            return ir.repeatable(node.child) and self.read(node.child)
        if isinstance(node, ir.Aggregate):
            return self.grouped(node)
        if isinstance(node, ir.Expand):
            return self.expanded(node)
        if isinstance(node, ir.Window):
            return self.windowed(node)
        if isinstance(node, ir.Union):
            return self.united(node)
        if isinstance(node, ir.Numbered) and isinstance(node.child, ir.Scan) and node.only is None:
            return self.scan(node.child, node.rid)
        return isinstance(node, ir.Scan) and self.scan(node, None)

    def grouped(self, node: ir.Aggregate) -> bool:
        """An aggregate as a derived table of its groups (Q20's correlated `sum(l_quantity)`,
        Q15's revenue view). Floating keys are not grouped alike (Spark folds -0.0 and NaNs)."""
        cut = self.cut(node, node.keys)
        inner = self.nested(pushed=cut)
        if not inner.read(node.child) or inner.keyed:
            return False
        inner.cut_rows(cut)
        if any(ir.dtype_of(k) in ("float", "double") for k in node.keys):
            return False
        keys = [inner.expr(k) for k in node.keys]
        if any(k is None for k in keys):
            return False
        # A column that does not translate is left out (None): what reads it fails, but a
        # table reading only the groups' keys and lineage (a window's partitions over them) does not.
        made = {c.attr.id: inner.expr(c.expr, grouped=True) for c in node.columns}
        if self.strict and any(text is None for text in made.values()):
            return False
        alias = f"g{next(self.aliases)}"
        select = ", ".join(f"{text} AS c{i}" for i, text in made.items() if text is not None) or "1"
        group = f" GROUP BY {', '.join(k for k in keys if k is not None)}" if keys else ""
        self.scans.append(f"(SELECT {select} FROM {inner.joined()} WHERE {inner.where}{group}) {alias}")
        self.columns.update({i: None if text is None else f"{alias}.c{i}" for i, text in made.items()})
        return True

    def expanded(self, node: ir.Expand) -> bool:
        """An expand (ROLLUP, CUBE, GROUPING SETS) as a derived table: its child's rows once
        per projection, UNION ALL. Without it the groups of a rollup are listed through
        Spark's aggregate, every input row once per grouping set (TPC-DS Q22: 58 M). A
        child that is more than rows kept in memory is computed once, a materialized CTE
        each projection reads: DuckDB computed TPC-DS Q14's three channels' groups, each
        under a HAVING over a scalar subquery of 5.7 M sales rows, once per grouping set."""
        inner = self.nested()
        if not inner.read(node.child) or inner.keyed:
            return False
        if len(inner.scans) == 1 and not inner.conditions and _STORED_SCAN.fullmatch(inner.scans[0]):
            return self.union_all("e", [inner.select([inner.expr(e) for e in p], node.attrs) for p in node.projections], node.attrs)
        made = [a for a in node.child.output if inner.columns.get(a.id) is not None]
        name = f"x{next(self.aliases)}"
        rows = self.nested({a.id: f"{name}.c{a.id}" for a in made})
        rows.scans.append(name)
        columns = ", ".join(f"{inner.columns[a.id]} AS c{a.id}" for a in made) or "1"
        once = f"WITH {name} AS MATERIALIZED (SELECT {columns} FROM {inner.joined()} WHERE {inner.where}) "
        return self.union_all("e", [rows.select([rows.expr(e) for e in p], node.attrs) for p in node.projections], node.attrs, once)

    def renamed(self, node: ir.Project) -> None:
        """A pushed column a projection renames is its input's; one that is a full join's key
        (the first of its sides' keys that is not null) cuts both sides (`full`)."""
        for c in node.columns:
            i = self.pushed.get(c.attr.id)
            if i is None:
                continue
            column, pair = _column(c.expr), _coalesced(c.expr)
            if column is not None:
                self.pushed[column] = i
            if pair is not None:
                self.coalesced[pair] = self.coalesced[pair[::-1]] = i

    def windowed(self, node: ir.Window) -> bool:
        """A window's rows are its child's. Its functions' values are read where each
        translates (`duck_sql`: a rank, an aggregate over the whole partition or a RANGE
        frame, whose values no engine's order among ties changes), as a derived table: TPC-DS
        Q70's states ranked by profit, filtered to the top five. Otherwise a window
        partitions table reads the partition keys and lineage alone, and the values stay
        untranslated; a frame's positions would depend on how each engine breaks ties, so
        they are not read here (`annotate` shares such a window's rows instead). Floating
        partition keys are not compared alike (Spark folds -0.0 and NaNs)."""
        if any(ir.dtype_of(p) in ("float", "double") for p in node.partition):
            return False
        if self.ranked(node):
            return True
        if not self.cut(node, node.partition):
            self.pushed.clear()  # a partition holds rows of other keys: none may be cut below
        if not self.read(node.child):
            return False
        self.columns.update({c.attr.id: None for c in node.columns})
        return True

    def ranked(self, node: ir.Window) -> bool:
        """The window as a derived table of its child's rows with every function's value."""
        cut = self.cut(node, node.partition)
        inner = self.nested(pushed=cut)
        if not inner.read(node.child) or inner.keyed:
            return False
        inner.cut_rows(cut)
        values = {
            c.attr.id: inner.counted(node, c.expr) if isinstance(c.expr, ir.FrameCount) else inner.expr(c.expr, untied=node.untied)
            for c in node.columns
        }
        check = inner.tie_check(node) if node.untied else ""
        if any(v is None for v in values.values()) or check is None:
            return False
        passed = {a.id: inner.columns[a.id] for a in node.child.output if inner.columns.get(a.id) is not None}
        alias = f"v{next(self.aliases)}"
        select = ", ".join(f"{text} AS c{i}" for i, text in {**passed, **values}.items())
        self.scans.append(f"(SELECT {select} FROM {inner.joined()} WHERE {inner.where}{check}) {alias}")
        self.columns.update({a.id: None for a in node.child.output})
        self.columns.update({i: f"{alias}.c{i}" for i in {**passed, **values}})
        return True

    def over(self, node: ir.Window) -> tuple[list[str], list[str]] | None:
        """The window's PARTITION BY and ORDER BY terms, or None."""
        partition, order = [self.expr(p) for p in node.partition], [self.expr(o) for o in node.order]
        if any(t is None for t in partition + order):
            return None
        return [t for t in partition if t is not None], [t for t in order if t is not None]

    def counted(self, node: ir.Window, count: ir.FrameCount) -> str | None:
        """An ember-made frame count (`spark_build._frame_count`) of a window whose frames
        hold the same rows in both engines (RANGE frames, `ir.Frame.ordered_alike`, or an
        untied window's); a RANGE frame's offset is left to Spark."""
        alike = node.untied or all(f.ordered_alike for f in node.frames)
        over = self.over(node) if alike else None
        if over is None:
            return None
        body = " ".join(([f"PARTITION BY {', '.join(over[0])}"] if over[0] else []) + [f"ORDER BY {', '.join(over[1])}"])
        if count.bound == "pos":
            return f"row_number() OVER ({body})"
        frame = count.frame
        assert frame is not None
        lower, upper = _frame_bound(frame, frame.lower, "PRECEDING"), _frame_bound(frame, frame.upper, "FOLLOWING")
        if lower is None or upper is None:
            return None
        rows = "ROWS" if frame.kind == "rows" else "RANGE"
        if count.bound == "hi":  # rows from the partition's start to the frame's end
            return f"count(*) OVER ({body} {rows} BETWEEN UNBOUNDED PRECEDING AND {upper})"
        return f"count(*) OVER ({body} {rows} BETWEEN {lower} AND UNBOUNDED FOLLOWING)"

    def tie_check(self, node: ir.Window) -> str | None:
        """A QUALIFY that fails the read where two rows of a partition tie in the order
        (`untie.Tied`), checked on every row the window computes, before any filter above
        could drop a row whose place moved its neighbours' frames."""
        over = self.over(node)
        if over is None:
            return None
        peers = ", ".join(over[0] + [_DIRECTION.sub("", o) for o in over[1]])
        return f" QUALIFY (CASE WHEN count(*) OVER (PARTITION BY {peers}) > 1 THEN error('{TIED}') ELSE TRUE END)"

    def united(self, node: ir.Union) -> bool:
        """A union as a derived table: each input's rows, UNION ALL, by position (Spark has
        cast the inputs to the union's types). TPC-DS Q5's and Q75's channels, Q14's
        `avg_sales`. Every column must translate: `annotate` leaves a subplan DuckDB reads
        uncached, so a table reading a column that does not would have Spark compute the
        whole union again (Q36's margins, a division: +108 % -> +275 %)."""
        selects = []
        for child in node.inputs:
            inner = self.nested()
            if not inner.read(child) or inner.keyed:
                return False
            selects.append(inner.select([inner.expr(ir.ColumnRef(a)) for a in child.output], node.attrs))
        return self.union_all("u", selects, node.attrs)

    def select(self, made: list[str | None], attrs: tuple[ir.Attr, ...]) -> str | None:
        """A SELECT of `made` (attribute a's as `c<a.id>`) from what this query read, or None
        if one does not translate."""
        if any(m is None for m in made):
            return None
        columns = ", ".join(f"{m} AS c{a.id}" for m, a in zip(made, attrs, strict=True)) or "1"
        return f"SELECT {columns} FROM {self.joined()} WHERE {self.where}"

    def union_all(self, prefix: str, selects: list[str | None], attrs: tuple[ir.Attr, ...], ctes: str = "") -> bool:
        """The `selects` (None: one that does not translate) as one FROM item, UNION ALL,
        after the `ctes` they read."""
        if any(s is None for s in selects):
            return False
        alias = f"{prefix}{next(self.aliases)}"
        self.scans.append(f"({ctes}{' UNION ALL '.join(s for s in selects if s is not None)}) {alias}")
        self.columns.update({a.id: f"{alias}.c{a.id}" for a in attrs})
        return True

    def exists(self, right: ir.Node, cond: ir.Expr, negated: bool) -> bool:
        """A semi (anti) join's condition as (NOT) EXISTS over its right side. Spark's anti
        join keeps a row no right row makes the condition true for, as NOT EXISTS does (a
        NOT IN arrives with its null test spelled out in the condition)."""
        inner = self.nested(dict(self.columns))
        if not inner.read(right) or inner.keyed or not inner.condition(cond):
            return False
        test = f"EXISTS (SELECT 1 FROM {inner.joined()} WHERE {inner.where})"
        self.conditions.append(f"NOT {test}" if negated else test)
        return True

    def outer(self, padded: ir.Node, cond: ir.Expr) -> bool:
        """A left (right) join: its right (left) side as a derived table joined on the
        join's condition with all that is read so far (a cross join of it: the condition
        reads only the join's sides)."""
        table = self.derived(padded)
        on = None if table is None else self.expr(cond)
        if on is None:
            return False
        self.scans = [f"{self.joined()} LEFT JOIN {table} ON {on}"]
        return True

    def full(self, node: ir.Join) -> bool:
        """A full join: both sides as derived tables, joined on the join's condition, one
        FROM item (TPC-DS Q97's customers and items sold in one channel, the other or both)."""
        cuts = [{pair[j]: i for pair, i in self.coalesced.items() if pair in node.equi} for j in (0, 1)]
        left, right = self.derived(node.left, cuts[0]), self.derived(node.right, cuts[1])
        on = None if left is None or right is None or node.cond is None else self.expr(node.cond)
        if on is None:
            return False
        self.scans.append(f"({left} FULL OUTER JOIN {right} ON {on})")
        return True

    def derived(self, side: ir.Node, cut: dict[int, int] | None = None) -> str | None:
        """An outer join's padded side as a derived table, whose own conditions stay inside
        it, so they do not drop padded rows; its columns are read from it. A full join's
        sides are `cut` to the wanted keys where its key is one (a row of either side meets
        only rows with its key)."""
        inner = self.nested(pushed=cut)
        if not inner.read(side) or inner.keyed:
            return None
        inner.cut_rows(cut or {})
        alias = f"r{next(self.aliases)}"
        made = [a for a in side.output if inner.columns.get(a.id) is not None]
        self.columns.update({a.id: None for a in side.output})
        self.columns.update({a.id: f"{alias}.c{a.id}" for a in made})
        select = ", ".join(f"{inner.columns[a.id]} AS c{a.id}" for a in made) or "1"
        return f"(SELECT {select} FROM {inner.joined()} WHERE {inner.where}) {alias}"

    def joined(self) -> str:
        """The FROM clause: every item read, cross joined (the WHERE conditions join them)."""
        return " CROSS JOIN ".join(self.scans)

    def scan(self, scan: ir.Scan, rid: ir.Attr | None) -> bool:
        source = self.sources.get(scan.source.key, scan.source)
        rows = numbered_parquet(source, _RID) if source.kind == "parquet" and source.files else None
        if rows is None:
            return False
        alias = f"s{next(self.aliases)}"
        self.scans.append(f"({rows}) {alias}")
        self.columns.update({a.id: f'{alias}."{a.name}"' for a in scan.attrs})
        if rid is not None:
            self.columns[rid.id] = f"{alias}.{_RID}"
        return True

    def stored(self, name: str, attrs: tuple[ir.Attr, ...]) -> None:
        """Reads rows already read (`Inputs`): the relation `name`, a column `c<id>` per attribute."""
        alias = f"m{next(self.aliases)}"
        self.scans.append(f"{name} {alias}")
        self.columns.update({a.id: f"{alias}.c{a.id}" for a in attrs})

    def condition(self, cond: ir.Expr) -> bool:
        text = self.expr(cond)
        if text is None:
            return False
        self.conditions.append(f"({text})")
        return True

    def expr(self, e: ir.AnyExpr, grouped: bool = False, untied: bool = False) -> str | None:
        """`e` in SQL, or None. A column, or a column renamed, is what it reads. `grouped`:
        an aggregate's column, whose aggregate functions are computed per group; `untied`:
        a window column whose partitions have no ties (`duck_sql.sql`)."""
        if isinstance(e, ir.ColumnRef):
            return self.columns.get(e.attr.id)
        if isinstance(e, ir.Constant):  # a ref's `present` flag, or a union input's absent slot
            return typed_null(e.like.dtype) if e.value is None else str(e.value).upper()
        if not isinstance(e, ir.Expr) or e.tree is None or any(self.columns.get(r) is None for r in e.refs):
            return None
        if e.column is not None:
            return self.columns[e.column]
        template = _template(e, grouped, untied)
        if template is None:
            return None
        parts = template.split(_MARK)
        for i in range(1, len(parts), 2):
            mark = parts[i]
            made = self.scalar(e.subqueries[int(mark[1:])]) if mark.startswith("q") else self.columns.get(int(mark))
            if made is None:
                return None
            parts[i] = made
        return "".join(parts)

    def scalar(self, plan: ir.Node) -> str | None:
        """An uncorrelated scalar subquery (TPC-DS Q58's week, TPC-H Q22's average balance)
        as one in SQL, reading its plan on its own; Spark fails a job whose subquery has
        more than one row, as DuckDB does."""
        inner = self.nested()
        if not inner.read(plan) or inner.keyed or len(plan.output) != 1:
            return None
        value = inner.expr(ir.ColumnRef(plan.output[0]))
        return None if value is None else f"(SELECT {value} FROM {inner.joined()} WHERE {inner.where})"

    def rolled_up(
        self, table: SideTable, wanted: pa.Table, sets: dict[int, list[int]], outputs: dict[int, str | None]
    ) -> bool:
        """Restricts a rollup's group table (`capture.rollup`) to the rows of the wanted
        groups: for each number of leading keys a wanted grouping set groups by, the rows
        equal on them to a wanted group of such a set (nothing restricted where the grand
        total, grouping by none, is wanted). Where all wanted groups are of one set (the
        finest, under a LIMIT), joined with them, which lets DuckDB start from the wanted
        keys; else one EXISTS per set, behind one on the leading keys all wanted groups
        share. False where a key does not translate."""
        if 0 in sets:
            return True
        if not sets:
            self.conditions.append("FALSE")
            return True
        keys = [outputs.get(k.id) for k in table.keys[: max(sets)]]
        if any(k is None for k in keys):
            return False
        gid = f"w.k{len(table.keys)}"
        if len(sets) == 1:  # a row is in one wanted group at most: joined, as other group tables
            ((_, ids),) = sets.items()
            compared = {i: _key_test(i, str(k), wanted) for i, k in enumerate(keys)}
            self.conditions += [f"{gid} IN ({', '.join(map(str, ids))})", *_anchored(compared, wanted)]
            self.scans.insert(0, "wanted w")
            return True

        def matched(length: int) -> str:
            return " AND ".join(_key_test(i, str(k), wanted) for i, k in enumerate(keys[:length]))

        tests = [f"EXISTS (SELECT 1 FROM wanted w WHERE {gid} IN ({', '.join(map(str, ids))}) AND {matched(n)})"
                 for n, ids in sorted(sets.items())]  # fmt: skip
        # Every wanted group's leading keys, a test DuckDB joins before the others (Q22: 0.3 -> 0.17 s).
        self.conditions += [f"EXISTS (SELECT 1 FROM wanted w WHERE {matched(min(sets))})", f"({' OR '.join(tests)})"]
        return True

    def text(self, table: SideTable, wanted: pa.Table | None, cap: int | None = None) -> str | None:
        """The whole query: every output column of the table, named as Spark would name it.
        The table is read whole if `wanted` is None (a keyless one, a global aggregate's one
        group, is read not at all if it is not None: no row holds its ref). Its rows come
        sorted for the index, or with a `cap`, unsorted and at most one past the cap (a
        LIMIT under a sort would not stop the read)."""
        plan = _as_read(table) if wanted is not None else table.plan  # only groups that reach the result
        if not isinstance(plan, ir.Project):
            return None
        groups = table.why == GROUPS and wanted is not None
        matched = matched_keys(plan, table.keys, table.unique) if groups else tuple(range(len(table.keys)))
        if wanted is not None and table.keys and not table.prefixes:  # rows below may be cut to the wanted keys (`cut`)
            self.pushed = {k.id: i for i, k in enumerate(table.keys)}
            self.renamed(plan)
        name = Inputs.name(table)
        if name in self.inputs:  # its own input: read whole, it holds the rows of the groups wanted here
            self.inputs = {**self.inputs, name: (*self.inputs[name], _kept(plan.child))}
        if not self.read(plan.child) or (self.keyed and wanted is None):
            return None
        outputs = {c.attr.id: self.expr(c.expr) for c in plan.columns}
        if table.prefixes and wanted is not None:
            sets = _wanted_sets(table, wanted)
            if sets is None or not self.rolled_up(table, wanted, sets, outputs):
                return None
        # the wanted keys are a FROM item `w`
        joined = bool(table.keys) and wanted is not None and not table.prefixes
        hashed = False
        if joined and wanted is not None and wanted.num_columns != len(table.keys):
            return None
        if joined and not self.keyed:  # restricted to the wanted groups, null-safely as refs match
            compared: dict[int, str] = {}
            typed: dict[int, tuple[str, str]] = {}  # a key's type, where its values hash alike, and its SQL
            for i, k in enumerate(table.keys):
                if outputs.get(k.id) is None:
                    return None
                if i in matched:  # a key the matched ones fix is not compared (Q10's customer's comment)
                    compared[i] = _key_test(i, str(outputs[k.id]), wanted)
                    into = _hashed(k.dtype)
                    if into is not None:
                        typed[i] = (into, str(outputs[k.id]))
                outputs[k.id] = f"w.k{i}"  # the key values exactly as the lineage holds them
            assert wanted is not None
            anchored = _anchored(compared, wanted, typed)
            self.conditions += anchored
            hashed = any(c.startswith("hash(") for c in anchored)
        if not table.keys and wanted is not None:
            self.conditions.append("FALSE")
        if any(v is None for v in outputs.values()):
            return None
        self.packing = None if cap is not None else _packing(table, joined and not self.keyed)
        numbered = self.packing.keys if self.packing is not None else ()
        made = [f'{outputs[a.id]} AS "{a.name}"' for a in plan.output if a.name not in numbered]
        select = ", ".join([f"w.{_GROUP} AS {_GROUP}"] * bool(numbered) + made)
        if joined:
            self.scans.insert(0, f"{_STORED if hashed else 'wanted'} w")
        order = ", ".join(f"{quoted(name)} ASC NULLS FIRST" for name in order_by(table))
        query = f"SELECT {select} FROM {self.joined()} WHERE {self.where}"
        if cap is not None:
            return f"{query} LIMIT {cap + 1}"
        return query + (f" ORDER BY {order}" if order and self.packing is None else "")


_INTEGERS = frozenset({"tinyint", "smallint", "int", "bigint"})
_GROUP = "__ember_group"  # a wanted key's number in key order (`Packing`)


@dataclass(frozen=True)
class Packing:
    """A read whose rows are sorted for the index after DuckDB returns them, as packed
    integers (`store.packing`: DuckDB's sort was half of TPC-DS Q99's 0.27 s read of 287 K
    rows, a third of TPC-H Q13's 0.36 s of 1.5 M). Its columns must all be integers, but keys
    that are the wanted ones (names, dates) come back as their number among the wanted
    keys in key order, one integer, and are looked up after the sort."""

    names: tuple[str, ...]  # the table's columns, in order
    keys: tuple[str, ...]  # the key columns that come back numbered: key i is wanted column k<i>
    order: tuple[str, ...]  # the columns read, as they are sorted

    def sorted(self, con: duckdb.DuckDBPyConnection, rows: pa.Table, wanted: pa.Table | None) -> pa.Table:
        ordered = sorted_rows(con, rows, list(self.order))
        if not self.keys:
            return ordered
        assert wanted is not None
        group = ordered.column(_GROUP)
        keys = {name: wanted.column(f"k{i}").take(group) for i, name in enumerate(self.keys)}
        return pa.table([keys[n] if n in keys else ordered.column(n) for n in self.names], names=list(self.names))


def _wanted_sets(table: SideTable, wanted: pa.Table) -> dict[int, list[int]] | None:
    """A rollup group table's wanted grouping sets: how many leading keys → the grouping
    ids grouping by that many (the wanted keys' last column); None for an id it has not."""
    length = dict(table.prefixes)
    sets: dict[int, list[int]] = {}
    for gid in pc.unique(wanted.column(wanted.num_columns - 1)).to_pylist():
        if gid not in length:
            return None
        sets.setdefault(length[gid], []).append(gid)
    return sets


def _packing(table: SideTable, numbered: bool) -> Packing | None:
    """How the table's rows are sorted after the read (`Packing`), if its columns are
    integers, or keys `numbered` (the wanted ones), all sorted by; None: DuckDB sorts them."""
    order, attrs = order_by(table), table.plan.output
    names = [a.name for a in attrs]
    keys = [k.name for k in table.keys] if numbered else []
    if not order or sorted(order) != sorted(names) or len(set(names)) != len(names):
        return None
    if any(a.dtype not in _INTEGERS for a in attrs if a.name not in keys):
        return None
    if any(duck_type(k.dtype) is None or k.dtype in ("float", "double") for k in table.keys if k.name in keys):
        return None  # numbered by Arrow, which sorts NaN first and no nested type
    return Packing(tuple(names), tuple(keys), (*([_GROUP] if keys else []), *(n for n in order if n not in keys)))


def _in_key_order(wanted: pa.Table) -> pa.Table:
    """The wanted keys sorted as DuckDB sorts them (nulls first; text by its bytes), each
    with its row number (`Packing`). A DuckDB query for it cost as much as a small read's sort."""
    order = pc.sort_indices(wanted, sort_keys=[(n, "ascending", "at_start") for n in wanted.column_names])
    return wanted.take(order).append_column(_GROUP, pa.array(np.arange(wanted.num_rows, dtype=np.int64)))


_FANOUT = 8  # wanted groups per value of the first keys from which all keys are hashed
_STORED = "wanted_table"  # the wanted keys copied into a table (`_run`)
_UNHASHED = ("float", "double", "timestamp", "timestamp_ntz")  # -0.0 = 0.0; wanted timestamps come in another zone's type


def _hashed(dtype: str | None) -> str | None:
    """The type a key is cast to on both sides of a hashed join, so equal values hash alike."""
    return None if dtype is None or dtype in _UNHASHED else duck_type(dtype)


def _key_test(i: int, sql: str, wanted: pa.Table | None) -> str:
    """Key `i` (`sql`) equal to the wanted keys' `k<i>`, null matching null as refs match.
    Without a null among the wanted values `=` matches the same rows, and lets DuckDB push
    the join's key range into the scan (Q3's groups: 33 -> 20 ms)."""
    nulls = wanted is None or wanted.column(i).null_count > 0
    return f"w.k{i} {'IS NOT DISTINCT FROM' if nulls else '='} ({sql})"


def _anchored(compared: dict[int, str], wanted: pa.Table, typed: Mapping[int, tuple[str, str]] | None = None) -> list[str]:
    """The conditions matching key `i` to the wanted keys' column `k<i>`, arranged so that
    DuckDB joins the wanted keys to one FROM item before the others.

    Each condition is a join of `w` with the items its key reads. Given separately, they
    let DuckDB's join order start from a key of few values: TPC-DS Q11's groups by
    customer and year joined its 90 wanted customers to the year's 365 days first, then
    to all of their sales (48 M rows, 10 s). The keys of the item whose wanted values are
    the most distinct stay separate conditions (that join goes first, and pushes its key
    ranges into the item's scan); every other key is tested in one condition together
    with one of those, which DuckDB can check only once that item is joined (0.1 s). The
    rows matched are the same: it is one conjunction either way.

    That condition DuckDB tests on every pair of a row and a wanted group the first keys
    match: Q47's 650 K sales rows and 882 groups of 18 brands took 0.65 s. Where many
    groups share the first keys' values (`_FANOUT`) and every key's type allows (`typed`),
    a hash of all the keys on either side, equal where the keys are, lets the join match
    them at once, the exact test still applied (0.2 s, with the wanted keys a table whose
    statistics DuckDB reads: `_STORED`). Elsewhere it only costs a hash a row (5-15 ms
    over Q4's, Q11's and Q74's reads)."""
    reads = {i: frozenset(re.findall(r"\b([sgrmeuv]\d+)\.", text)) for i, text in compared.items()}
    items = sorted(set().union(*reads.values()))
    if len(items) < 2:
        return list(compared.values())

    def distinct(item: str) -> int:
        return max(pc.count_distinct(wanted.column(f"k{i}"), mode="all").as_py() for i in compared if reads[i] == {item})

    alone = [item for item in items if any(r == {item} for r in reads.values())]
    if not alone:
        return list(compared.values())
    anchor = max(alone, key=distinct)
    first = [text for i, text in compared.items() if reads[i] == {anchor}]
    rest = [text for i, text in compared.items() if reads[i] != {anchor}]
    hashed = []
    anchored = [f"k{i}" for i in compared if reads[i] == {anchor}]
    fanout = wanted.num_rows / max(1, wanted.select(anchored).group_by(anchored).aggregate([]).num_rows)
    if typed is not None and all(i in typed for i in compared) and fanout >= _FANOUT:
        wanted_side = ", ".join(f"CAST(w.k{i} AS {typed[i][0]})" for i in compared)
        row_side = ", ".join(f"CAST(({typed[i][1]}) AS {typed[i][0]})" for i in compared)
        hashed = [f"hash({wanted_side}) = hash({row_side})"]
    return [*first, *hashed, f"coalesce({' AND '.join([first[0], *rest])}, FALSE)"]


class Inputs:
    """Aggregate inputs two side tables read, read once, beside the job.

    A table of groups DuckDB reads after the job reads its aggregate's input again (for
    the groups that reach the result), and another side table may aggregate that same input
    whole: Q20's witnesses hold the correlated `sum(l_quantity)` over the 1994 lineitem rows
    of forest parts, whose rids the sum's groups hold. Both would scan lineitem. Its rows
    need no key from the job, so they are read beside it, once, and both tables read them
    from memory (Q20: two scans of 115 and 89 ms alone become one of 102, then 41 and 4).
    A rollup's input is kept below its expand (`_kept`). Not for a table read beside the
    job (`beside`), which reads its own input there, nor past `SHARED_ROWS` rows (whose
    read stops there): each table reads its own again."""

    def __init__(self, tables: tuple[SideTable, ...], sources: dict[str, Source], beside: set[int]):
        self.sources = sources
        self._tables = {
            Inputs.name(t): t for t in tables if _aggregated_twice(t, tables, beside) and not _surely_large(t.aggregated)
        }
        self._rows: dict[str, Future[pa.Table | None]] = {}
        self.same: dict[str, str] = {}  # name → the input whose read gives its rows

    @staticmethod
    def name(table: SideTable) -> str:
        return f"input{table.id}"

    def start(self, pool: Executor) -> None:
        """Reads each input once, beside the job; inputs whose queries are the same up to
        names share one read (TPC-DS Q47 aggregates one join in three side tables, for the
        query's three reads of its monthly sales), and an input whose plan holds another's
        is computed from that one's rows once they are read (Q36 aggregates its `results`
        join three ways: one scan of `store_sales`, not four). Smaller plans are read
        first, so a read waits only for reads submitted before it."""
        first: dict[str, str] = {}
        held: dict[str, tuple[ir.Node, ...]] = {}
        for name, table in sorted(self._tables.items(), key=lambda item: len(ir.walk(_held(item[1])))):
            own = self._query(table)
            if own is None:
                continue
            self.same[name] = first.setdefault(_numbered(own), name)
            if self.same[name] == name:
                via = self._query(table, held)
                used = set(_INPUT.findall(via or "")) & set(held)
                bases = {b: (self._rows[self.same[b]], _stored_names(self._tables[b])) for b in sorted(used)}
                self._rows[name] = (
                    pool.submit(self._read_from, via, bases, own) if via is not None and bases else pool.submit(self._read, own)
                )
            held[name] = (_held(table),)

    def read(self) -> dict[str, tuple[tuple[ir.Node, ...], pa.Table]]:
        """Name → (the plans whose rows it holds: what is kept of the input as the job reads
        it, its rows), for each input read."""
        found: dict[str, tuple[tuple[ir.Node, ...], pa.Table]] = {}
        for name, owner in self.same.items():
            rows = self._rows[owner].result()
            if rows is not None:
                found[name] = ((_held(self._tables[name]),), rows.rename_columns(_stored_names(self._tables[name])))
        return found

    def _query(self, table: SideTable, held: Mapping[str, tuple[ir.Node, ...]] | None = None) -> str | None:
        """The query reading the rows of the group table's plan below its keys (its slots'
        rids with the aggregate's input columns; `_kept`), a column `c<id>` per attribute;
        from the `held` inputs' rows where its plan meets theirs."""
        assert isinstance(table.plan, ir.Project)
        query, kept = _Query(self.sources, inputs=dict(held or {})), _kept(table.plan.child)
        if not query.read(kept):
            return None
        columns = {a.id: query.expr(ir.ColumnRef(a)) for a in kept.output}
        if any(c is None for c in columns.values()):
            return None
        select = ", ".join(f"{c} AS c{i}" for i, c in columns.items())
        return f"SELECT {select} FROM {query.joined()} WHERE {query.where} LIMIT {SHARED_ROWS + 1}"

    @staticmethod
    def _read(query: str, registered: Mapping[str, pa.Table] | None = None) -> pa.Table | None:
        """The rows, None if too many."""
        con = duck.connect()
        try:
            for name, rows in (registered or {}).items():
                con.register(name, rows)
            rows = con.sql(query).to_arrow_table()
        except duckdb.Error:
            return None
        finally:
            con.close()
        return rows if rows.num_rows <= SHARED_ROWS else None

    @staticmethod
    def _read_from(via: str, bases: Mapping[str, tuple[Future[pa.Table | None], list[str]]], own: str) -> pa.Table | None:
        """The rows, from the `bases`' once read (each under its own column names), or by
        the input's `own` query where one of them could not be read."""
        registered = {}
        for name, (rows, names) in bases.items():
            got = rows.result()
            if got is None:
                return Inputs._read(own)
            registered[name] = got.rename_columns(names)
        return Inputs._read(via, registered)


def _column(e: ir.AnyExpr) -> int | None:
    """The attribute an expression only reads (or renames), or None."""
    if isinstance(e, ir.ColumnRef):
        return e.attr.id
    return e.column if isinstance(e, ir.Expr) else None


def _coalesced(e: ir.AnyExpr) -> tuple[int, int] | None:
    """(l, r) where `e` is the first of columns l and r that is not null, as Spark spells a
    full join's key: `CASE WHEN l IS NOT NULL THEN l ELSE r END`, or `coalesce(l, r)`."""
    tree = e.tree if isinstance(e, ir.Expr) else None
    while tree is not None and tree.kind == "Alias":
        tree = tree.children[0]
    kids: tuple[Tree, ...] = () if tree is None else tree.children
    if tree is not None and tree.kind == "CaseWhen" and len(kids) == 3 and kids[0].kind == "IsNotNull" and kids[0].children[0] == kids[1]:
        pair = kids[1:]
    elif tree is not None and tree.kind == "Coalesce" and len(kids) == 2:
        pair = kids
    else:
        return None
    ids = [k.id for k in pair if k.kind == "AttributeReference" and k.id is not None]
    return (ids[0], ids[1]) if len(ids) == 2 else None


def _origin(node: ir.Node, attr: int) -> int:
    """The attribute of the rows below `node` that `node`'s output attribute `attr` copies,
    through renames, group keys and the columns a window or filter passes on: an
    aggregate's `item` and its `item AS key` are one column."""
    while True:
        if isinstance(node, ir.Filter | ir.Shared) or (isinstance(node, ir.Window) and all(c.attr.id != attr for c in node.columns)):
            node = node.child
            continue
        if not isinstance(node, ir.Project | ir.Aggregate):
            return attr
        made = next((c.expr for c in node.columns if c.attr.id == attr), None)
        column = None if made is None else _column(made)
        if column is None or (isinstance(node, ir.Aggregate) and all(_column(k) != column for k in node.keys)):
            return attr
        node, attr = node.child, column


def _held(table: SideTable) -> ir.Node:
    """The plan whose rows an input read holds (what other reads may read from it)."""
    assert table.aggregated is not None
    return _kept(table.aggregated)


def _stored_names(table: SideTable) -> list[str]:
    assert isinstance(table.plan, ir.Project)
    return [f"c{a.id}" for a in _kept(table.plan.child).output]


def _kept(plan: ir.Node) -> ir.Node:
    """What an input read beside the job holds of an aggregate's input: an expand's child,
    whose rows the reads repeat per grouping set (TPC-DS Q70's rollup input: 541 K rows
    kept, not 1.6 M)."""
    return plan.child if isinstance(plan, ir.Expand) else plan


def _aggregated_twice(table: SideTable, tables: tuple[SideTable, ...], beside: set[int]) -> bool:
    """Whether another side table read after the job aggregates the input `table`'s groups
    come from (not under a condition its keys decide: Q18's groups skip the `IN (... GROUP
    BY l_orderkey ...)` that aggregates all of lineitem)."""
    return table.aggregated is not None and any(
        isinstance(n, ir.Aggregate) and n.child == table.aggregated
        for other in tables
        if other.id != table.id and not other.inline and other.id not in beside
        for n in ir.walk(_as_read(other))
    )


def _surely_large(plan: ir.Node | None) -> bool:
    """Whether a plan has more than `SHARED_ROWS` rows for certain: all of a scan's (Q18's
    `GROUP BY l_orderkey` over all of lineitem)."""
    return (
        plan is not None
        and all(isinstance(n, (ir.Project, ir.Numbered, ir.Scan)) for n in ir.walk(plan))
        and input_rows(plan) > SHARED_ROWS
    )


def _as_read(table: SideTable) -> ir.Node:
    """The plan DuckDB reads for the table's wanted rows: a group table's without the
    conditions its keys decide."""
    plan = table.plan
    if table.why != GROUPS or not isinstance(plan, ir.Project) or table.prefixes:
        return plan  # a rollup's coarser groups are not decided by all of its keys
    return without_decided(plan, table.keys)


def readable(plan: ir.Node, sources: dict[str, Source]) -> bool:
    """Whether DuckDB could read `plan`'s rows (checked before the capture rewrite, on the
    plan an aggregate's groups would come from). Strictly: `annotate` leaves a subplan
    DuckDB reads uncached, and a side table reading a projected column or an aggregate's
    value DuckDB cannot compute would then have Spark compute the subplan again (as a
    union's did, `united`)."""
    return _Query(sources, strict=True).read(plan)


_QUOTED = re.compile(r"""('(?:[^']|'')*'|"(?:[^"]|"")*")""")  # literals and names: kept as they are
_DERIVED = re.compile(r"\bc(\d+)\b")  # a derived table's column, named by its attribute's id
_INPUT = re.compile(r"\binput\d+\b")  # rows read beside the job (`Inputs.name`)
_STORED_SCAN = re.compile(r"input\d+ m\d+")  # a FROM item of such rows (`_Query.stored`)
_DIRECTION = re.compile(r" (ASC|DESC) NULLS (FIRST|LAST)$")  # an ORDER BY term's, after its value
TIED = "ember: rows tie in the order of a window guessed untied"


def _frame_bound(frame: ir.Frame, bound: str, beyond: str) -> str | None:
    """A frame bound in SQL (`beyond`: PRECEDING for the lower one, FOLLOWING for the
    upper), or None for a RANGE frame's offset (compared by value)."""
    if bound == "unbounded":
        return f"UNBOUNDED {beyond}"
    if bound == "current":
        return "CURRENT ROW"
    if frame.kind != "rows" or not bound.lstrip("-").isdigit():
        return None
    return rows_offset(int(bound))


def same_rows(table: SideTable, sources: dict[str, Source]) -> str | None:
    """The query reading the whole table, up to names (`_by_position`; None: DuckDB cannot
    read it). Tables with the same text have the same rows: TPC-DS Q9's fifteen subqueries
    read five."""
    text = _Query(sources).text(table, None)
    return None if text is None else _by_position(text, table)


def _by_position(text: str, table: SideTable, inputs: Mapping[str, str] | None = None) -> str:
    """A table's query with its output columns named by position, then `_numbered`."""
    for i, a in enumerate(table.plan.output):
        text = text.replace(f'"{a.name}"', f'"o{i}"')
    return _numbered(text, inputs)


def _numbered(text: str, inputs: Mapping[str, str] | None = None) -> str:
    """A query with its derived columns numbered by first use and each input read beside
    the job named by the one whose read gives its rows (`Inputs.same`), outside literals
    and quoted names."""
    numbers: dict[str, int] = {}
    read = inputs or {}
    parts = _QUOTED.split(text)
    for j in range(0, len(parts), 2):
        part = _DERIVED.sub(lambda m: f"c{numbers.setdefault(m.group(1), len(numbers))}", parts[j])
        parts[j] = _INPUT.sub(lambda m: read.get(m.group(0), m.group(0)), part)
    return "".join(parts)


def renamed(rows: pa.Table, table: SideTable) -> pa.Table:
    """Another table's rows (the same query's, up to names) under this one's names, still sorted."""
    return rows.rename_columns([a.name for a in table.plan.output]).replace_schema_metadata(rows.schema.metadata)


class Reads:
    """One capture's DuckDB reads of side tables after the job, each query run once: a
    table whose query is an earlier one's up to names, for the same wanted keys, gets that
    one's rows (TPC-DS Q14 reads each channel's `cross_items` semi joins twice and its
    `avg_sales` three times); tables of one wave whose queries are one up to names, for
    other keys, are read once for all of their keys (`batch`)."""

    def __init__(self, sources: dict[str, Source], inputs: Inputs | None = None, cap: int = 0):
        self.sources = sources
        self.inputs = inputs
        self.cap = cap  # rows of a `capped` read past which it is left to Spark
        self._done: dict[str, list[tuple[pa.Table | None, int, pa.Table | None]]] = {}
        self._batches: dict[int, _Batch] = {}  # table id → the read it shares (`batch`)
        self.same: dict[int, int] = {}  # table id → the table whose read gave its rows (none if DuckDB could not)

    def batch(self, wave: Sequence[tuple[SideTable, pa.Table]]) -> None:
        """Tables to be read side by side whose queries are one up to names but whose wanted
        keys differ are read once, for all of their keys: TPC-DS Q14 reads its `cross_items`
        intersect for each channel's groups, three copies of one CTE, each of three sales
        tables scanned per copy (nine reads of 0.1-0.6 s; three). Each table gets every
        group read, its own and the others': refs point only at their own, and the index
        keeps one level for them all (`store.index.build_index`'s `same`). A rollup's group
        table (its wanted keys name grouping sets) and keys a hash would not compare alike
        (`_hashed`) are read alone."""
        read = self.inputs.read() if self.inputs is not None else {}
        shared: dict[str, list[tuple[SideTable, pa.Table]]] = {}
        for table, wanted in wave:
            if not table.keys or table.prefixes or any(_hashed(k.dtype) is None for k in table.keys):
                continue
            query = _reader(self.sources, read).text(table, wanted)
            if query is not None:
                shared.setdefault(self._position(query, table), []).append((table, wanted))
        for tables in shared.values():
            first, keys = tables[0]
            if all(_same_keys(keys, other) for _, other in tables[1:]):
                continue  # one read already (`_done`)
            if any(w.schema != keys.schema for _, w in tables) or any(pa.types.is_nested(f.type) for f in keys.schema):
                continue  # keys Arrow could not put in one table, or group
            union = pa.concat_tables([w for _, w in tables])
            batch = _Batch(first, union.group_by(union.column_names, use_threads=False).aggregate([]))
            self._batches.update({t.id: batch for t, _ in tables})

    def side_table(self, table: SideTable, wanted: pa.Table | None, capped: bool = False) -> pa.Table | None:
        """The table's rows for the `wanted` keys (columns k0..kn; None: every row), read by
        DuckDB, from the `inputs` already read where it can; None where Spark must compute it.
        `capped`: a table that may be too big to read here, read unsorted up to `cap` rows."""
        batch = self._batches.get(table.id)
        if batch is None or capped:
            return self._read(table, wanted, capped)
        with batch.lock:
            if not batch.done:
                batch.rows, batch.done = self._read(batch.first, batch.keys, False), True
        if batch.rows is None:
            return None
        self.same[table.id] = self.same[batch.first.id]
        return renamed(batch.rows, table)

    def _read(self, table: SideTable, wanted: pa.Table | None, capped: bool) -> pa.Table | None:
        read = self.inputs.read() if self.inputs is not None else {}
        limit = self.cap if capped else None
        reader = _reader(self.sources, read)
        query = reader.text(table, wanted, limit)
        if query is None:
            return None
        keys = wanted if table.keys else None
        done = self._done.setdefault(self._position(query, table), [])
        for other, owner, rows in done:
            if _same_keys(other, keys):
                if rows is None:
                    return None
                self.same[table.id] = owner
                return renamed(rows, table)
        rows = _run(query, keys, read, reader.packing)
        if rows is not None and limit is not None:
            rows = None if rows.num_rows > limit else rows.replace_schema_metadata(None)
        done.append((keys, table.id, rows))
        if rows is not None:
            self.same[table.id] = table.id
        return rows

    def _position(self, query: str, table: SideTable) -> str:
        """The query up to names (`_by_position`), inputs named by the read that gives their rows."""
        return _by_position(query, table, self.inputs.same if self.inputs else None)


@dataclass
class _Batch:
    """One read for several tables' keys (`Reads.batch`), made by whichever table asks first."""

    first: SideTable  # the table whose query is run, for all the `keys`
    keys: pa.Table
    lock: threading.Lock = field(default_factory=threading.Lock)
    done: bool = False
    rows: pa.Table | None = None


def _same_keys(a: pa.Table | None, b: pa.Table | None) -> bool:
    """Whether two tables' wanted keys are the same, in any order (each comes from its own
    refs' rows: Q47's three reads of its monthly sales want the same months in other orders)."""
    if a is None or b is None:
        return a is b
    if a.equals(b):
        return True
    if a.num_rows != b.num_rows or a.schema != b.schema:
        return False
    try:
        return _ordered(a).equals(_ordered(b))
    except pa.ArrowNotImplementedError:  # nested keys: not sorted
        return False


def _ordered(keys: pa.Table) -> pa.Table:
    return keys.sort_by([(name, "ascending") for name in keys.column_names])


def side_table(
    table: SideTable, wanted: pa.Table | None, sources: dict[str, Source], inputs: Inputs | None = None
) -> pa.Table | None:
    """One table read alone (`Reads.side_table`)."""
    return Reads(sources, inputs).side_table(table, wanted)


def _reader(sources: dict[str, Source], read: Mapping[str, tuple[tuple[ir.Node, ...], pa.Table]]) -> _Query:
    """A query over the sources and the inputs `read` beside the job."""
    return _Query(sources, inputs={name: plans for name, (plans, _) in read.items()})


def _run(
    query: str, wanted: pa.Table | None, read: dict[str, tuple[tuple[ir.Node, ...], pa.Table]], packing: Packing | None = None
) -> pa.Table | None:
    con = duck.connect()
    try:
        if wanted is not None:
            wanted = _in_key_order(wanted) if packing is not None and packing.keys else wanted
            con.register("wanted", wanted)
        if wanted is not None and f" {_STORED} w" in query:  # statistics to order a hashed join by (`_anchored`)
            con.execute(f"CREATE TEMP TABLE {_STORED} AS SELECT * FROM wanted")
        for name, (_, rows) in read.items():
            con.register(name, rows)
        rows = con.sql(query).to_arrow_table()
        if packing is not None:
            rows = packing.sorted(con, rows, wanted)
        return rows.replace_schema_metadata(SORTED)  # sorted here, by DuckDB in parallel, or packed
    except duckdb.Error as e:  # e.g. an overflow in translated arithmetic: Spark's semantics decide
        if TIED in str(e):
            raise Tied(str(e)) from e
        return None
    finally:
        con.close()
