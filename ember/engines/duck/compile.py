"""IR plans as DuckDB SQL: the one compiler for every read ember makes in-process.

A plan is compiled node by node (a `_<NodeClass>` method each, dispatched by the class's
name) into FROM items, WHERE conditions and a map from each attribute to its SQL there,
all held as a syntax tree (`syntax`) and rendered once. A node whose rows must be
computed apart (an aggregate's groups, a window's values, a union, an expand, an outer
join's padded side) becomes a derived table, whose columns are named per attribute in
the order the compiler first names them: plans equal up to attribute ids compile to
equal text. Expressions translate through `sql` (only what means the same in both
engines); a plan holding anything else does not compile, and its caller leaves the work
to Spark.

Two modes. "plan": the plan's own rows (capture's side tables: semi and anti joins as
[NOT] EXISTS, aggregates as their groups). "lineage": every combination of input rows
that takes part in some row (infer's block: a semi join's witnesses joined as an inner
join's, an aggregate as its input rows with their group's values beside them, each
scan's rids carried to the top), over candidate rows read beforehand (`frames`).
Restricting a read to wanted keys is `wanted`'s; checking a window's order for ties,
`ties`'.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import duckdb
import pyarrow as pa

from ember.engines.duck import syntax, ties
from ember.engines.duck.sql import numbered_parquet, quoted, rows_offset, sql, typed_null
from ember.engines.duck.syntax import (
    Column,
    Cte,
    Derived,
    Exists,
    Join,
    Relation,
    Select,
    TieCheck,
    UnionAll,
)
from ember.plan import ir
from ember.plan.sources import SAVED, Source
from ember.plan.trees import Tree, find

Mode = Literal["plan", "lineage"]
# FROM item aliases: scans, stored inputs, groups, rows beside an aggregate's values, a
# window's values, an outer join's side, unions, expands and the CTE an expand reads.
Alias = Literal["s", "m", "g", "a", "v", "r", "u", "e", "x"]
Registered = Literal["f", "saved", "k"]  # relations a query registers: frames, saved rows, key lists
RID = "__ember_rid"  # a scan's rid column, as a source's numbered rows and candidate frames name it

# The nodes each mode reads (a join only of the kinds its method takes).
_READS: dict[Mode, frozenset[str]] = {
    "plan": frozenset({"Scan", "Numbered", "Filter", "Project", "Join", "Shared", "Aggregate", "Expand", "Window", "Union"}),
    "lineage": frozenset({"Scan", "Filter", "Project", "Join", "Aggregate", "Passthrough"}),
}
_KEEP_ROWS = ("sort", "repartition", "observe")  # passthroughs that keep every row as it is
_FLOATING = ("float", "double")


@dataclass(frozen=True)
class Compiled:
    """A query ready to run (`run`)."""

    sql: str
    key: str  # the same query up to its output columns' names: queries of one key read the same rows
    tables: Mapping[str, pa.Table] = field(default_factory=dict)  # relations it reads, registered by `run`
    copies: tuple[tuple[str, str], ...] = ()  # (temporary table, relation) copied before it runs
    ties: bool = False  # it checks a window's order for ties (`ties`)
    inputs: frozenset[str] = frozenset()  # the relations the caller registers (`Compiler.of`'s `inputs`) it reads
    rids: Mapping[str, int] = field(default_factory=dict)  # lineage: output column → id() of the scan whose rids it holds


def run(query: Compiled, con: duckdb.DuckDBPyConnection) -> pa.Table:
    """The query's rows, on `con` (which holds the caller's relations). Raises `ties.Tie`
    where a tie check failed, `duckdb.Error` where anything else did (an overflow in
    translated arithmetic: Spark's semantics decide)."""
    for name, rows in query.tables.items():
        con.register(name, rows)
    for table, relation in query.copies:  # a table's statistics guide DuckDB's join order
        con.execute(f"CREATE TEMP TABLE {table} AS SELECT * FROM {relation}")
    if not query.ties:
        return con.sql(query.sql).to_arrow_table()
    (statement,) = con.extract_statements(query.sql)
    if syntax.TIE not in statement.named_parameters:  # its checks were in parts left out
        return con.sql(statement).to_arrow_table()
    run_token = ties.token()
    try:
        return con.sql(statement, params={syntax.TIE: run_token}).to_arrow_table()
    except duckdb.Error as e:
        if ties.tied(run_token):
            raise ties.Tie("rows of a window partition tie in its order") from e
        raise


@dataclass(frozen=True)
class _Col:
    """An attribute's SQL in a query, and the FROM items (aliases) it reads."""

    text: str
    items: frozenset[str]


class _Missing(Exception):
    """An expression reads a column or subquery that does not translate."""


@dataclass
class _Shared:
    """What one query's compilers (the top one and those of its derived tables and
    subqueries) share."""

    sources: Mapping[str, Source]
    mode: Mode
    strict: bool
    inputs: Mapping[str, tuple[ir.Node, ...]]  # registered relation → the plans whose rows it holds
    frames: Mapping[int, pa.Table]  # lineage: id() of a scan → its candidate rows (RID, `a<attr id>`)
    aliases: Iterator[int] = field(default_factory=itertools.count)
    numbers: dict[int, int] = field(default_factory=dict)  # attribute id → its derived columns' number
    tables: dict[str, pa.Table] = field(default_factory=dict)
    used: set[str] = field(default_factory=set)  # inputs read
    rid_scans: dict[str, int] = field(default_factory=dict)  # lineage: rid column → id() of its scan
    scan_rids: dict[int, str] = field(default_factory=dict)  # id() of a scan read → its rid's SQL
    ties: bool = False

    def name(self, attr: int) -> str:
        """The name of a derived table's column for an attribute."""
        return f"c{self.numbers.setdefault(attr, len(self.numbers))}"

    def alias(self, prefix: Alias) -> str:
        return f"{prefix}{next(self.aliases)}"

    def register(self, prefix: Registered, rows: pa.Table) -> str:
        name = f"{prefix}{len(self.tables)}"
        self.tables[name] = rows
        return name

    def input_of(self, node: ir.Node) -> str | None:
        return next((n for n, plans in self.inputs.items() if node in plans), None)


class Compiler:
    """One level of a query: its FROM items, conditions and columns; derived tables and
    subqueries are compiled by nested compilers sharing `_Shared`."""

    def __init__(self, shared: _Shared, columns: dict[int, _Col | None] | None = None, pushed: dict[int, int] | None = None):
        self.s = shared
        self.columns: dict[int, _Col | None] = columns or {}  # None: made, but not translatable
        self.conditions: list[syntax.Condition] = []
        self.items: list[syntax.FromItem] = []
        self.rids: dict[str, _Col] = {}  # lineage: rid column → its SQL here
        self.keyed = False  # the wanted keys come in through an `ir.Keys` node
        self.pushed: dict[int, int] = dict(pushed or {})  # attribute id → the wanted key it equals (`cut`)
        self.coalesced: dict[tuple[int, int], int] = {}  # a full join's key sides → the wanted key

    @classmethod
    def of(
        cls,
        sources: Mapping[str, Source],
        mode: Mode = "plan",
        *,
        strict: bool = False,
        inputs: Mapping[str, tuple[ir.Node, ...]] | None = None,
        frames: Mapping[int, pa.Table] | None = None,
    ) -> Compiler:
        """A query over the `sources`. `strict`: a projected or aggregate column that does not
        translate fails the read (`readable`). `inputs`: relations the caller registers,
        each holding the rows of the plans given (a column `c<i>` per output position),
        read in their place. `frames` (lineage): each scan's candidate rows."""
        return cls(_Shared(sources, mode, strict, inputs or {}, frames or {}))

    def nested(self, columns: dict[int, _Col | None] | None = None, pushed: dict[int, int] | None = None) -> Compiler:
        """A query inside this one (a derived table, an EXISTS); its rows are cut to the
        wanted keys only by the `pushed` attributes given (its own copy: what it learns
        below, or clears, stays its own)."""
        return Compiler(self.s, columns, pushed)

    # --- reading a plan -----------------------------------------------------
    def read(self, node: ir.Node) -> bool:
        """Follows `node` down to its scans; False where some part does not compile. A plan
        an input holds is read from it."""
        name = self.s.input_of(node)
        if name is not None:
            self.stored(name, node.output)
            return True
        kind = type(node).__name__
        if kind not in _READS[self.s.mode]:
            return False
        visit: bool = getattr(self, f"_{kind}")(node)
        return visit

    def _Scan(self, node: ir.Scan) -> bool:
        return self.scan(node, None)

    def _Numbered(self, node: ir.Numbered) -> bool:
        return isinstance(node.child, ir.Scan) and node.only is None and self.scan(node.child, node.rid)

    def _Passthrough(self, node: ir.Passthrough) -> bool:
        return node.kind in _KEEP_ROWS and self.read(node.child)

    def _Shared(self, node: ir.Shared) -> bool:
        """Computed again here: the rows it cached, if repeatable."""
        return ir.repeatable(node.child) and self.read(node.child)

    def _Filter(self, node: ir.Filter) -> bool:
        if self.s.mode == "lineage" and _over_scan(node):
            return self.read(node.child)  # a frame holds the rows that passed it
        return self.read(node.child) and self.condition(node.cond)

    def _Project(self, node: ir.Project) -> bool:
        self.renamed(node)
        if not self.read(node.child):
            return False
        made = {c.attr.id: self.made(c.expr) for c in node.columns}
        self.columns.update(made)
        return not (self.s.strict and None in made.values())

    def _Join(self, node: ir.Join) -> bool:
        if self.s.mode == "lineage":
            return self._joined_rows(node)
        if node.kind == "inner" and isinstance(node.left, ir.Keys):
            self.keyed = True
            self.columns.update({a.id: _Col(f"w.k{i}", frozenset({"w"})) for i, a in enumerate(node.left.attrs)})
            return self.read(node.right) and node.cond is not None and self.condition(node.cond)
        if node.kind == "inner":
            return self.read(node.left) and self.read(node.right) and (node.cond is None or self.condition(node.cond))
        if node.kind in ("left", "right") and node.cond is not None:
            kept, padded = (node.left, node.right) if node.kind == "left" else (node.right, node.left)
            return self.read(kept) and self.outer(padded, node.cond)
        if node.kind == "full" and node.cond is not None:
            return self.full(node)
        if node.kind in ("semi", "anti") and node.cond is not None:
            return self.read(node.left) and self.exists(node.right, node.cond, negated=node.kind == "anti")
        return False

    def _joined_rows(self, node: ir.Join) -> bool:
        """Lineage: a semi join's witnesses are lineage, so it joins as an inner join; a left
        join's padded rows have no right-side rids; an anti join keeps the rows with no
        partner, NOT EXISTS with its own condition (which also spells NOT IN's null rule)."""
        if {a.id for a in node.left.output} & {a.id for a in node.right.output}:
            return False
        if node.kind in ("inner", "cross", "semi"):
            return self.read(node.left) and self.read(node.right) and (node.cond is None or self.condition(node.cond))
        if node.kind == "left":
            return self.read(node.left) and self.outer(node.right, node.cond)
        if node.kind == "anti":
            return self.read(node.left) and self.exists(node.right, node.cond, negated=True)
        return False

    def _Aggregate(self, node: ir.Aggregate) -> bool:
        return self.grouped(node) if self.s.mode == "plan" else self.beside_rows(node)

    def grouped(self, node: ir.Aggregate) -> bool:
        """An aggregate as a derived table of its groups. Floating keys are not grouped alike
        (Spark folds -0.0 and NaNs)."""
        cut = self.cut(node, node.keys)
        inner = self.nested(pushed=cut)
        if not inner.read(node.child) or inner.keyed:
            return False
        inner.cut_rows(cut)
        if any(ir.dtype_of(k) in _FLOATING for k in node.keys):
            return False
        keys = [inner.expr(k) for k in node.keys]
        if any(k is None for k in keys):
            return False
        # A column that does not translate is left out (None): what reads it fails, but a
        # table reading only the groups' keys and lineage (a window's partitions over them) does not.
        made = {c.attr.id: inner.expr(c.expr, grouped=True) for c in node.columns}
        if self.s.strict and any(text is None for text in made.values()):
            return False
        alias = self.s.alias("g")
        columns = tuple(Column(text, self.s.name(i)) for i, text in made.items() if text is not None)
        group = tuple(k for k in keys if k is not None)
        self.items.append(Derived(Select(columns, tuple(inner.items), tuple(inner.conditions), group_by=group), alias))
        self.columns.update({i: None if text is None else self.derived_column(alias, i) for i, text in made.items()})
        return True

    def beside_rows(self, node: ir.Aggregate) -> bool:
        """Lineage: every input row, with its group's aggregate values beside it (window
        functions over the group), so the rows of a group some joined row reaches all stay."""
        inner = self.nested()
        if not inner.read(node.child):
            return False
        keys = [inner.expr(k) for k in node.keys]
        if any(k is None for k in keys):
            return False
        window = f"PARTITION BY {', '.join(k for k in keys if k is not None)}" if keys else ""
        values = {c.attr.id: inner.expr(c.expr, window=window) for c in node.columns if inner.columns.get(c.attr.id) is None}
        return self.beside(node.child, inner, {i: v for i, v in values.items() if v is not None}, "a", None)

    def beside(self, child: ir.Node, inner: Compiler, values: dict[int, str], prefix: Alias, check: TieCheck | None) -> bool:
        """`child`'s rows as `inner` read them, with `values` computed over them, as a derived
        table: what `inner` read of the child's columns (and rids) passes through."""
        passed = {a.id: c.text for a in child.output if (c := inner.columns.get(a.id)) is not None}
        alias = self.s.alias(prefix)
        made = {**passed, **values}
        columns = [Column(text, self.s.name(i)) for i, text in made.items()]
        columns += [Column(c.text, r) for r, c in inner.rids.items()]
        self.items.append(Derived(Select(tuple(columns), tuple(inner.items), tuple(inner.conditions), qualify=check), alias))
        self.columns.update({a.id: None for a in child.output})
        self.columns.update({i: self.derived_column(alias, i) for i in made})
        self.rids.update({r: _Col(f"{alias}.{r}", frozenset({alias})) for r in inner.rids})
        return True

    def _Expand(self, node: ir.Expand) -> bool:
        """An expand (ROLLUP, CUBE, GROUPING SETS) as a derived table: its child's rows once
        per projection, UNION ALL. A child that is more than rows kept in memory is computed
        once, a materialized CTE each projection reads (DuckDB would compute it once per
        grouping set)."""
        inner = self.nested()
        if not inner.read(node.child) or inner.keyed:
            return False
        if len(inner.items) == 1 and not inner.conditions and self.is_stored(inner.items[0]):
            selects = [inner.select([inner.expr(e) for e in p], node.attrs) for p in node.projections]
            return self.union_all("e", selects, node.attrs)
        made = [a for a in node.child.output if inner.columns.get(a.id) is not None]
        name = self.s.alias("x")
        rows = self.nested({a.id: _Col(f"{name}.{self.s.name(a.id)}", frozenset({name})) for a in made})
        rows.items.append(Relation(name))
        columns = tuple(Column(text.text, self.s.name(a.id)) for a in made if (text := inner.columns[a.id]) is not None)
        once = Cte(name, Select(columns, tuple(inner.items), tuple(inner.conditions)))
        selects = [rows.select([rows.expr(e) for e in p], node.attrs) for p in node.projections]
        return self.union_all("e", selects, node.attrs, (once,))

    def _Window(self, node: ir.Window) -> bool:
        """A window's rows are its child's. Its functions' values are read where each
        translates (`sql`: a rank, an aggregate over the whole partition or a RANGE frame,
        whose values no engine's order among ties changes, or any where the window is
        untied), as a derived table (`ranked`). Otherwise a window partitions table reads
        the partition keys and lineage alone, and the values stay untranslated. Floating
        partition keys are not compared alike (Spark folds -0.0 and NaNs)."""
        if any(ir.dtype_of(p) in _FLOATING for p in node.partition):
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
        """The window as a derived table of its child's rows with every function's value; an
        untied window's rows are checked for ties on every row it computes, before any
        filter above could drop a row whose place moved its neighbours' frames."""
        cut = self.cut(node, node.partition)
        inner = self.nested(pushed=cut)
        if not inner.read(node.child) or inner.keyed:
            return False
        inner.cut_rows(cut)
        values = {
            c.attr.id: inner.counted(node, c.expr) if isinstance(c.expr, ir.FrameCount) else inner.expr(c.expr, untied=node.untied)
            for c in node.columns
        }
        check = inner.tie_check(node) if node.untied else None
        if any(v is None for v in values.values()) or (node.untied and check is None):
            return False
        self.s.ties = self.s.ties or check is not None
        return self.beside(node.child, inner, {i: v for i, v in values.items() if v is not None}, "v", check)

    def over(self, node: ir.Window) -> tuple[list[str], list[str]] | None:
        """The window's PARTITION BY and ORDER BY terms, or None."""
        partition, order = [self.expr(p) for p in node.partition], [self.expr(o) for o in node.order]
        if any(t is None for t in partition + order):
            return None
        return [t for t in partition if t is not None], [t for t in order if t is not None]

    def counted(self, node: ir.Window, count: ir.FrameCount) -> str | None:
        """An ember-made frame count (`engines.spark.build`) of a window whose frames hold
        the same rows in both engines (RANGE frames, `ir.Frame.ordered_alike`, or an untied
        window's); a RANGE frame's offset is left to Spark."""
        alike = node.untied or all(f.ordered_alike for f in node.frames)
        over = self.over(node) if alike else None
        if over is None or not over[1]:
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

    def tie_check(self, node: ir.Window) -> TieCheck | None:
        """The check that no two rows of a partition tie in the window's order (`ties`): its
        peers are the partition keys and the order's values, without their directions."""
        over = self.over(node)
        if over is None:
            return None
        order = [self.expr(o, tree=_sorted_value(o)) for o in node.order]
        if any(o is None for o in order):
            return None
        return TieCheck((*over[0], *(o for o in order if o is not None)))

    def _Union(self, node: ir.Union) -> bool:
        """A union as a derived table: each input's rows, UNION ALL, by position (Spark has
        cast the inputs to the union's types)."""
        selects = []
        for child in node.inputs:
            inner = self.nested()
            if not inner.read(child) or inner.keyed:
                return False
            selects.append(inner.select([inner.expr(ir.ColumnRef(a)) for a in child.output], node.attrs))
        return self.union_all("u", selects, node.attrs)

    def select(self, made: Sequence[str | None], attrs: tuple[ir.Attr, ...]) -> Select | None:
        """A SELECT of `made` (attribute a's under its derived name) from what this query
        read, or None if one does not translate."""
        if any(m is None for m in made):
            return None
        columns = tuple(Column(m, self.s.name(a.id)) for m, a in zip(made, attrs, strict=True) if m is not None)
        return Select(columns, tuple(self.items), tuple(self.conditions))

    def union_all(self, prefix: Alias, selects: Sequence[Select | None], attrs: tuple[ir.Attr, ...], ctes: tuple[Cte, ...] = ()) -> bool:
        """The `selects` (None: one that does not translate) as one FROM item, UNION ALL,
        after the `ctes` they read."""
        if any(s is None for s in selects):
            return False
        alias = self.s.alias(prefix)
        self.items.append(Derived(UnionAll(tuple(s for s in selects if s is not None), ctes), alias))
        self.columns.update({a.id: self.derived_column(alias, a.id) for a in attrs})
        return True

    def exists(self, right: ir.Node, cond: ir.Expr | None, negated: bool) -> bool:
        """A semi (anti) join's condition as (NOT) EXISTS over its right side. Spark's anti
        join keeps a row no right row makes the condition true for, as NOT EXISTS does (a
        NOT IN arrives with its null test spelled out in the condition)."""
        inner = self.nested(dict(self.columns))
        if not inner.read(right) or inner.keyed or not (cond is None or inner.condition(cond)):
            return False
        self.conditions.append(Exists(Select((), tuple(inner.items), tuple(inner.conditions)), negated))
        return True

    def outer(self, padded: ir.Node, cond: ir.Expr | None) -> bool:
        """A left (right) join: its right (left) side as a derived table joined on the
        join's condition with all that is read so far."""
        table = self.derived(padded)
        on = None if table is None else "TRUE" if cond is None else self.expr(cond)
        if table is None or on is None:
            return False
        self.items = [Join(tuple(self.items), table, "LEFT", on)]
        return True

    def full(self, node: ir.Join) -> bool:
        """A full join: both sides as derived tables, joined on the join's condition, one
        FROM item."""
        cuts = [{pair[j]: i for pair, i in self.coalesced.items() if pair in node.equi} for j in (0, 1)]
        left, right = self.derived(node.left, cuts[0]), self.derived(node.right, cuts[1])
        on = None if left is None or right is None or node.cond is None else self.expr(node.cond)
        if left is None or right is None or on is None:
            return False
        self.items.append(Join((left,), right, "FULL OUTER", on))
        return True

    def derived(self, side: ir.Node, cut: dict[int, int] | None = None) -> Derived | None:
        """An outer join's padded side as a derived table, whose own conditions stay inside
        it, so they do not drop padded rows; its columns are read from it. A full join's
        sides are `cut` to the wanted keys where its key is one (a row of either side meets
        only rows with its key)."""
        inner = self.nested(pushed=cut)
        if not inner.read(side) or inner.keyed:
            return None
        inner.cut_rows(cut or {})
        alias = self.s.alias("r")
        made = [(a, c) for a in side.output if (c := inner.columns.get(a.id)) is not None]
        self.columns.update({a.id: None for a in side.output})
        self.columns.update({a.id: self.derived_column(alias, a.id) for a, _ in made})
        self.rids.update({r: _Col(f"{alias}.{r}", frozenset({alias})) for r in inner.rids})
        columns = tuple(Column(c.text, self.s.name(a.id)) for a, c in made) + tuple(Column(c.text, r) for r, c in inner.rids.items())
        return Derived(Select(columns, tuple(inner.items), tuple(inner.conditions)), alias)

    def derived_column(self, alias: str, attr: int) -> _Col:
        return _Col(f"{alias}.{self.s.name(attr)}", frozenset({alias}))

    def scan(self, scan: ir.Scan, rid: ir.Attr | None) -> bool:
        """A scan's rows: a source's local Parquet files, numbered as Spark numbers them; rows
        saved in memory (`plan.sources.SAVED`); or, in lineage mode, its candidate frame."""
        if self.s.mode == "lineage":
            frame = self.s.frames.get(id(scan))
            if frame is None:
                return False
            alias = self.s.alias("s")
            self.items.append(Relation(self.s.register("f", frame), alias))
            names = set(frame.column_names)
            self.columns.update({a.id: _Col(f"{alias}.a{a.id}", frozenset({alias})) for a in scan.attrs if f"a{a.id}" in names})
            column = f"rid{len(self.s.rid_scans)}"
            self.s.rid_scans[column] = id(scan)
            self.rids[column] = _Col(f"{alias}.{RID}", frozenset({alias}))
            return True
        source = self.s.sources.get(scan.source.key, scan.source)
        if source.kind == SAVED and source.data is not None:
            alias = self.s.alias("s")
            self.items.append(Relation(self.s.register("saved", source.data), alias))
        else:
            rows = numbered_parquet(source, RID) if source.kind == "parquet" and source.files and not source.remote else None
            if rows is None:
                return False
            alias = self.s.alias("s")
            self.items.append(Derived(syntax.Raw(rows), alias))
        self.columns.update({a.id: _Col(f"{alias}.{quoted(a.name)}", frozenset({alias})) for a in scan.attrs})
        self.s.scan_rids[id(scan)] = f"{alias}.{RID}"
        if rid is not None:
            self.columns[rid.id] = _Col(f"{alias}.{RID}", frozenset({alias}))
        return True

    def stored(self, name: str, attrs: tuple[ir.Attr, ...]) -> None:
        """Reads rows the caller registered (`inputs`): the relation `name`, a column `c<i>`
        per output position."""
        alias = self.s.alias("m")
        self.items.append(Relation(name, alias))
        self.columns.update({a.id: _Col(f"{alias}.c{i}", frozenset({alias})) for i, a in enumerate(attrs)})
        self.s.used.add(name)

    def is_stored(self, item: syntax.FromItem) -> bool:
        return isinstance(item, Relation) and item.name in self.s.inputs

    # --- the wanted keys ----------------------------------------------------
    def cut(self, node: ir.Aggregate | ir.Window, keys: Sequence[ir.AnyExpr]) -> dict[int, int]:
        """The keys (`node`'s group or partition keys) that equal a wanted key: `node`'s input
        rows may be cut to the wanted keys by them, since no output row with a wanted key
        reads a row without one. DuckDB does not push the wanted keys' join into a derived
        table: a window's running sums would be computed for every key, not the few wanted."""
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
            column = self.columns.get(attr)
            if column is not None:
                self.conditions.append(f"({column.text} IN (SELECT k{i} FROM wanted) OR {column.text} IS NULL)")

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

    # --- expressions --------------------------------------------------------
    def condition(self, cond: ir.Expr) -> bool:
        text = self.expr(cond)
        if text is None:
            return False
        self.conditions.append(f"({text})")
        return True

    def column(self, attr: int) -> str | None:
        """An attribute's SQL here, or None."""
        found = self.columns.get(attr)
        return None if found is None else found.text

    def made(self, e: ir.AnyExpr) -> _Col | None:
        """`expr`, with the FROM items it reads."""
        text = self.expr(e)
        return None if text is None else _Col(text, self.items_of(e))

    def items_of(self, e: ir.AnyExpr) -> frozenset[str]:
        """The FROM items an expression's columns read here."""
        if isinstance(e, ir.ColumnRef):
            refs: frozenset[int] = frozenset({e.attr.id})
        elif isinstance(e, ir.Expr):
            refs = e.refs | ({e.column} if e.column is not None else frozenset())
        else:
            return frozenset()
        return frozenset().union(*(c.items for r in refs if (c := self.columns.get(r)) is not None))

    def expr(
        self,
        e: ir.AnyExpr,
        grouped: bool = False,
        untied: bool = False,
        window: str | None = None,
        tree: Tree | None = None,
        subqueries: bool = True,
    ) -> str | None:
        """`e` in SQL, or None. A column, or a column renamed, is what it reads. `grouped`:
        an aggregate's column, whose aggregate functions are computed per group; `untied`:
        a window column whose partitions have no ties; `window`: aggregate functions as
        window functions over this OVER body (`sql.sql`); `tree`: a part of `e` instead;
        `subqueries`: its uncorrelated scalar subqueries read here too (else it does not
        translate)."""
        if isinstance(e, ir.ColumnRef):
            return self.column(e.attr.id)
        if isinstance(e, ir.Constant):  # a ref's `present` flag, or a union input's absent slot
            return typed_null(e.like.dtype) if e.value is None else str(e.value).upper()
        if not isinstance(e, ir.Expr) or e.tree is None or any(self.columns.get(r) is None for r in e.refs):
            return None
        if e.column is not None and tree is None:
            return self.column(e.column)
        numbered = {id(s): i for i, s in enumerate(s for s in find(e.tree, {"ScalarSubquery"}) if s.plan is not None)}

        def named(a: Tree) -> str:
            found = self.columns.get(a.id) if a.id is not None else None
            if found is None:
                raise _Missing
            return found.text

        def subquery(s: Tree) -> str | None:
            if not subqueries or id(s) not in numbered:
                return None
            made = self.scalar(e.subqueries[numbered[id(s)]])
            if made is None:
                raise _Missing
            return made

        try:
            return sql(e.tree if tree is None else tree, named, window=window, grouped=grouped, subquery=subquery, untied=untied)
        except _Missing:
            return None

    def scalar(self, plan: ir.Node) -> str | None:
        """An uncorrelated scalar subquery as one in SQL, reading its plan on its own; Spark
        fails a job whose subquery has more than one row, as DuckDB does."""
        inner = self.nested()
        if not inner.read(plan) or inner.keyed or len(plan.output) != 1:
            return None
        value = inner.expr(ir.ColumnRef(plan.output[0]))
        return None if value is None else syntax.scalar(Select((Column(value),), tuple(inner.items), tuple(inner.conditions)))

    # --- queries ------------------------------------------------------------
    def rid(self, scan: ir.Scan) -> str | None:
        """The SQL of a scan's rids, once it is read."""
        return self.s.scan_rids.get(id(scan))

    def register(self, prefix: Registered, rows: pa.Table) -> str:
        """Rows the query reads, registered by `run` under the name returned."""
        return self.s.register(prefix, rows)

    def compiled(
        self,
        query: Select,
        key: Select | None = None,
        *,
        tables: Mapping[str, pa.Table] | None = None,
        copies: tuple[tuple[str, str], ...] = (),
        rids: Mapping[str, int] | None = None,
    ) -> Compiled:
        """The query as run, and as compared (`key`: the same up to output names); `tables`:
        more relations it reads, `copies`: copied before it runs."""
        text = syntax.render(query)
        return Compiled(
            text,
            text if key is None else syntax.render(key),
            tables={**self.s.tables, **(tables or {})},
            copies=copies,
            ties=self.s.ties,
            inputs=frozenset(self.s.used),
            rids=rids or {},
        )

    def rows_query(
        self, columns: Sequence[Column], *, distinct: bool = False, order: Sequence[str] = (), limit: int | None = None
    ) -> Select:
        """A SELECT of `columns` over what this query read."""
        return Select(tuple(columns), tuple(self.items), tuple(self.conditions), order_by=tuple(order), limit=limit, distinct=distinct)

    def lineage(self, where: str | None = None) -> Compiled:
        """Lineage: every distinct combination of the scans' rids that takes part in a row
        read (`where` holds too); a left join's padded rows have null right-side rids."""
        query = self.rows_query([Column(c.text, r) for r, c in self.rids.items()], distinct=True)
        if where is not None:
            query = replace(query, where=(*query.where, where))
        return self.compiled(query, rids={r: self.s.rid_scans[r] for r in self.rids})


def readable(plan: ir.Node, sources: Mapping[str, Source], strict: bool = True) -> bool:
    """Whether DuckDB could read `plan`'s rows; `strict`: every column it makes too."""
    return Compiler.of(sources, strict=strict).read(plan)


def rows(
    plan: ir.Node, sources: Mapping[str, Source], inputs: Mapping[str, tuple[ir.Node, ...]] | None = None, limit: int | None = None
) -> Compiled | None:
    """`plan`'s rows, a column `c<i>` per output position (as `Compiler.stored` reads them
    back), or None where it does not compile."""
    query = Compiler.of(sources, inputs=inputs)
    if not query.read(plan):
        return None
    columns = [query.expr(ir.ColumnRef(a)) for a in plan.output]
    if any(c is None for c in columns):
        return None
    return query.compiled(query.rows_query([Column(c, f"c{i}") for i, c in enumerate(columns) if c is not None], limit=limit))


def windowable(agg: ir.Aggregate) -> bool:
    """Whether lineage mode can compute `agg` beside its rows: its keys translate, and each
    column passes a key through or translates as a window function over the group (min,
    max, sum, count, avg of a decimal; not DISTINCT)."""
    keys = [_placeholder_sql(k) for k in agg.keys]
    if any(k is None for k in keys):
        return False
    window = f"PARTITION BY {', '.join(k for k in keys if k is not None)}" if keys else ""
    passed = {ir.column_of(k) for k in agg.keys}
    return all(
        ir.column_of(c.expr) in passed
        or (isinstance(c.expr, ir.Expr) and c.expr.tree is not None and sql(c.expr.tree, _placeholder, window) is not None)
        for c in agg.columns
    )


def _placeholder(a: Tree) -> str:
    return f"a{a.id}"


def _placeholder_sql(e: ir.AnyExpr) -> str | None:
    if isinstance(e, ir.ColumnRef):
        return f"a{e.attr.id}"
    if isinstance(e, ir.Expr) and e.column is not None:
        return f"a{e.column}"
    if isinstance(e, ir.Expr) and e.tree is not None:
        return sql(e.tree, _placeholder)
    return None


def _sorted_value(order: ir.Expr) -> Tree | None:
    """The value a window's ORDER BY term sorts by (a Catalyst sort order's child)."""
    tree: Tree | None = order.tree
    return tree.children[0] if tree is not None and tree.kind == "SortOrder" else tree


def _over_scan(node: ir.Filter) -> bool:
    below: ir.Node = node
    while isinstance(below, ir.Filter):
        below = below.child
    return isinstance(below, ir.Scan)


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
