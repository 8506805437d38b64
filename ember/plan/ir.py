"""ember's relational IR: plain, immutable data that knows nothing about Spark.

A plan is a tree of `Node`s. Each node names the attributes it outputs; expressions
are opaque `Expr`s that carry what ember must know about them (the attributes they
read, their SQL text, uncorrelated scalar subqueries inside them) plus an engine
handle that only the engine edge (`engines.spark.build`) looks at.

Each operator class carries `LINEAGE`: the backward lineage it gives one output
row. The README's operator table is generated from these strings (and a test keeps
it in step).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from ember.plan.sources import Source


@dataclass(frozen=True)
class Attr:
    """An output column, identified by id (Catalyst's exprId) across the whole plan."""

    id: int
    name: str
    dtype: str
    nullable: bool = True


@dataclass(frozen=True)
class Expr:
    """An engine expression ember treats as a black box."""

    sql: str
    refs: frozenset[int]
    handle: Any = field(default=None, compare=False, hash=False, repr=False)
    subqueries: tuple[Node, ...] = ()
    deterministic: bool = True
    dtype: str = ""
    column: int | None = None  # the attribute id, when the expression only reads (or renames) one column
    names: int | None = None  # the attribute id the expression itself stands for (an alias, or a column as is)
    tree: Any = field(default=None, compare=False, hash=False, repr=False)  # the engine's tree, as plain data


@dataclass(frozen=True)
class ColumnRef:
    """An ember-made expression: just read `attr` from the input."""

    attr: Attr


@dataclass(frozen=True)
class Constant:
    """An ember-made constant: `true`, or a typed null standing in for an absent column."""

    value: bool | None
    like: Attr  # for a null, the attribute whose type it takes


@dataclass(frozen=True)
class Frame:
    """A window function's frame: rows or range, bounds "unbounded", "current", a signed
    integer offset, or a RANGE frame's value offset of another type (a decimal, a double,
    an interval: its text); `values` holds the engine's expression of each offset bound.
    `whole` is set for ranking functions, which read the whole partition. `tie_free` is set where the
    function's value is the same whichever order rows that tie in the ORDER BY come in (a
    rank, an order-blind aggregate over the whole partition or a RANGE frame, which takes
    peers together), so a second run gives the same values."""

    kind: str  # "rows" | "range"
    lower: str
    upper: str
    whole: bool = False
    values: tuple[Any, Any] = field(default=(None, None), compare=False, hash=False, repr=False)
    tie_free: bool = field(default=False, compare=False)

    @property
    def partition_wide(self) -> bool:
        return self.whole or (self.lower == "unbounded" and self.upper == "unbounded")

    @property
    def ordered_alike(self) -> bool:
        """Whether the frame's rows are the same whichever order tied rows come in: the
        whole partition, or a RANGE frame, which takes peers together (its row counts are
        then the same in any engine, and a partition sorted by either's row numbers holds
        each frame's rows in one run)."""
        return self.partition_wide or self.kind == "range"


@dataclass(frozen=True)
class FrameCount:
    """An ember-made window column over its window node's own spec: the row's number in its
    partition (`bound="pos"`, from 1), the count of rows from `frame`'s start to the partition's
    end (`"lo"`), or from the partition's start to `frame`'s end (`"hi"`)."""

    bound: str
    frame: Frame | None = None


@dataclass(frozen=True)
class Collected:
    """An ember-made aggregate: the list of its group's rows, each the struct of `attrs`
    (or the bare value of the one attribute; nulls, which mean no lineage, are then left
    out). It carries an aggregate's lineage in the job's own result (`capture.annotate`)."""

    attrs: tuple[Attr, ...]


@dataclass(frozen=True)
class PartitionId:
    """An ember-made column: a number naming the Spark partition the row is in, a partition
    map's group (Spark's partition id where it is computed; a partition map's reporting
    wrapper draws one of its own, `engines.spark.build._reporting`)."""


AnyExpr = Expr | ColumnRef | Constant | FrameCount | Collected | PartitionId


@dataclass(frozen=True)
class Named:
    """An expression bound to the attribute it produces."""

    expr: AnyExpr
    attr: Attr


@dataclass(frozen=True)
class Node:
    """A relational operator."""

    LINEAGE: ClassVar[str] = ""
    OPERATORS: ClassVar[str] = ""

    @property
    def children(self) -> tuple[Node, ...]:
        return ()

    @property
    def output(self) -> tuple[Attr, ...]:
        return ()

    def expressions(self) -> tuple[Expr, ...]:
        """Expressions this node itself evaluates (not its children's)."""
        return ()


@dataclass(frozen=True)
class Scan(Node):
    OPERATORS: ClassVar[str] = "scan (Parquet, CSV, JSON, XML, text, ORC, binary files, in-memory DataFrames, spark.range)"
    LINEAGE: ClassVar[str] = "the row it came from"

    source: Source
    attrs: tuple[Attr, ...]
    handle: Any = field(default=None, compare=False, hash=False, repr=False)

    @property
    def output(self) -> tuple[Attr, ...]:
        return self.attrs


@dataclass(frozen=True)
class Unary(Node):
    child: Node

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.child,)

    @property
    def output(self) -> tuple[Attr, ...]:
        return self.child.output


@dataclass(frozen=True)
class Filter(Unary):
    OPERATORS: ClassVar[str] = "filter (WHERE, HAVING)"
    LINEAGE: ClassVar[str] = "the row it came from"

    cond: Expr = field(default_factory=lambda: Expr("true", frozenset()))

    def expressions(self) -> tuple[Expr, ...]:
        return (self.cond,)


@dataclass(frozen=True)
class Project(Unary):
    OPERATORS: ClassVar[str] = "project, computed columns, Python / pandas UDFs"
    LINEAGE: ClassVar[str] = "the row it came from"

    columns: tuple[Named, ...] = ()

    @property
    def output(self) -> tuple[Attr, ...]:
        return tuple(c.attr for c in self.columns)

    def expressions(self) -> tuple[Expr, ...]:
        return tuple(c.expr for c in self.columns if isinstance(c.expr, Expr))


@dataclass(frozen=True)
class Passthrough(Unary):
    """An operator that keeps every input row's columns and adds columns computed from that
    row alone (Python UDF evaluation, repartition, sample, ...)."""

    OPERATORS: ClassVar[str] = (
        "sort, repartition, sample, Python UDF evaluation, observed metrics (`df.observe`), pandas-on-Spark's "
        "default index (a row sequence)"
    )
    LINEAGE: ClassVar[str] = "the row it came from"

    kind: str = ""
    added: tuple[Attr, ...] = ()
    exprs: tuple[Expr, ...] = ()
    handle: Any = field(default=None, compare=False, hash=False, repr=False)

    @property
    def output(self) -> tuple[Attr, ...]:
        return self.child.output + self.added

    def expressions(self) -> tuple[Expr, ...]:
        return self.exprs


@dataclass(frozen=True)
class Limit(Unary):
    OPERATORS: ClassVar[str] = "limit, offset, top-k"
    LINEAGE: ClassVar[str] = "the row it came from (only kept rows have lineage)"

    kind: str = "limit"
    handle: Any = field(default=None, compare=False, hash=False, repr=False)


@dataclass(frozen=True)
class Join(Node):
    OPERATORS: ClassVar[str] = "inner / cross / theta / outer joins"
    LINEAGE: ClassVar[str] = "the joined pair; for an outer join's unmatched row, that row alone"

    kind: str  # inner, cross, left, right, full, semi, anti, existence
    left: Node
    right: Node
    cond: Expr | None = None
    handle: Any = field(default=None, compare=False, hash=False, repr=False)
    exists_attr: Attr | None = None  # existence joins add a boolean column
    equi: tuple[tuple[int, int], ...] = ()  # (left, right) attribute ids the condition equates
    theta: bool = False  # the condition holds more than `column = column` pairs across the sides

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.left, self.right)

    @property
    def output(self) -> tuple[Attr, ...]:
        if self.kind in ("semi", "anti"):
            return self.left.output
        if self.kind == "existence":
            assert self.exists_attr is not None
            return (*self.left.output, self.exists_attr)
        return self.left.output + self.right.output

    def expressions(self) -> tuple[Expr, ...]:
        return (self.cond,) if self.cond is not None else ()


@dataclass(frozen=True)
class Aggregate(Unary):
    OPERATORS: ClassVar[str] = "aggregate (GROUP BY, global, DISTINCT, count(DISTINCT), pandas aggregate UDFs)"
    LINEAGE: ClassVar[str] = "every row of its group"

    keys: tuple[AnyExpr, ...] = ()
    columns: tuple[Named, ...] = ()
    handle: Any = field(default=None, compare=False, hash=False, repr=False)
    domain: bool = False  # the outer values Spark joins a decorrelated subquery with: no lineage (`plan.domains`)
    python: bool = False  # its aggregate functions run in Python (pandas UDAFs): Spark allows no other beside them

    @property
    def output(self) -> tuple[Attr, ...]:
        return tuple(c.attr for c in self.columns)

    def expressions(self) -> tuple[Expr, ...]:
        own = self.keys + tuple(c.expr for c in self.columns)
        return tuple(e for e in own if isinstance(e, Expr))


@dataclass(frozen=True)
class Nary(Node):
    """An operator over any number of inputs that names its output columns itself."""

    inputs: tuple[Node, ...]
    attrs: tuple[Attr, ...]

    @property
    def children(self) -> tuple[Node, ...]:
        return self.inputs

    @property
    def output(self) -> tuple[Attr, ...]:
        return self.attrs


@dataclass(frozen=True)
class Union(Nary):
    OPERATORS: ClassVar[str] = "union all (distinct is an aggregate over it)"
    LINEAGE: ClassVar[str] = "the row it came from, on whichever side"

    # Inputs whose rows add no lineage: the right side of Spark's EXCEPT ALL rewrite.
    blind: frozenset[int] = frozenset()
    handle: Any = field(default=None, compare=False, hash=False, repr=False)


@dataclass(frozen=True)
class Window(Unary):
    OPERATORS: ClassVar[str] = "window functions"
    LINEAGE: ClassVar[str] = (
        "the row and every row of its window frame, ROWS or RANGE (offsets of rows, or of the "
        "ORDER BY value: a number, an interval); lag and lead: the row they read; the whole "
        "partition for ranking functions; a window column dropped unread is used by no row"
    )

    columns: tuple[Named, ...] = ()
    frames: tuple[Frame, ...] = ()
    partition: tuple[Expr, ...] = ()
    order: tuple[Expr, ...] = ()
    handle: Any = field(default=None, compare=False, hash=False, repr=False)
    python: bool = False  # its window functions run in Python (pandas UDFs): Spark runs no SQL one beside them
    # A capture's guess that no two rows of a partition tie in the order (`capture.untie`):
    # every read that computes the window again checks it, and a tie undoes the guess.
    untied: bool = False

    @property
    def output(self) -> tuple[Attr, ...]:
        return self.child.output + tuple(c.attr for c in self.columns)

    @property
    def tie_free(self) -> bool:
        """Whether a second run gives the same values: no function tells tied rows apart,
        nor does a frame position of ember's, or no rows tie (`untied`)."""
        return self.untied or (
            all(f.tie_free for f in self.frames) and not any(isinstance(c.expr, FrameCount) for c in self.columns)
        )

    def expressions(self) -> tuple[Expr, ...]:
        own = tuple(c.expr for c in self.columns if isinstance(c.expr, Expr))
        return own + self.partition + self.order


@dataclass(frozen=True)
class Shared(Unary):
    """A subplan computed once and read by the job and its side tables alike (made by capture),
    so rows whose order is not fixed by the data (window peers) mean the same in both."""

    key: int = 0


@dataclass(frozen=True)
class Generate(Unary):
    OPERATORS: ClassVar[str] = (
        "explode / generate, Python UDTFs without terminate() (and the replication inside INTERSECT/EXCEPT ALL)"
    )
    LINEAGE: ClassVar[str] = "the row it came from"

    generator: Expr = field(default_factory=lambda: Expr("", frozenset()))
    generated: tuple[Attr, ...] = ()
    kept: tuple[Attr, ...] = ()
    python: bool = False  # a Python UDTF: its node names the child columns it keeps
    handle: Any = field(default=None, compare=False, hash=False, repr=False)

    @property
    def output(self) -> tuple[Attr, ...]:
        return self.kept + self.generated

    def expressions(self) -> tuple[Expr, ...]:
        return (self.generator,)


@dataclass(frozen=True)
class GroupMap(Nary):
    """A Python function over each group's rows as one table (pandas or Arrow), or over a
    key's groups of two inputs (cogrouped), returning any rows: no output row shows which
    input rows made it, so each has its whole group (both groups)."""

    OPERATORS: ClassVar[str] = (
        "grouped map (`groupBy().applyInPandas` / `applyInArrow`, and `cogroup()`'s over two inputs)"
    )
    LINEAGE: ClassVar[str] = "every row of its group, of both groups when cogrouped (the function saw them all)"

    keys: tuple[tuple[Attr, ...], ...]  # each input's grouping columns
    function: Expr
    handle: Any = field(default=None, compare=False, hash=False, repr=False)

    def expressions(self) -> tuple[Expr, ...]:
        return (self.function,)


@dataclass(frozen=True)
class PartitionMap(GroupMap):
    """A grouped map whose groups are its input's partitions: a Python function over an
    iterator of a partition's batches, returning any rows (each row has the whole
    partition). In capture, `reports` is the side table its wrapped function reports each
    partition's rids to; without one, its input is cached and ends with each row's
    partition number."""

    OPERATORS: ClassVar[str] = "partition map (`mapInPandas` / `mapInArrow`)"
    LINEAGE: ClassVar[str] = "every row of its input partition (the function may read them all)"

    reports: int | None = None


@dataclass(frozen=True)
class Expand(Unary):
    OPERATORS: ClassVar[str] = "expand (unpivot, ROLLUP / CUBE / GROUPING SETS)"
    LINEAGE: ClassVar[str] = "the row it came from"

    projections: tuple[tuple[AnyExpr, ...], ...] = ()
    attrs: tuple[Attr, ...] = ()
    handle: Any = field(default=None, compare=False, hash=False, repr=False)

    @property
    def output(self) -> tuple[Attr, ...]:
        return self.attrs

    def expressions(self) -> tuple[Expr, ...]:
        return tuple(e for p in self.projections for e in p if isinstance(e, Expr))


@dataclass(frozen=True)
class Numbered(Unary):
    """A scan with its rows' `ember_rid` added as `rid` (made by capture, never imported).
    With `only` (SQL over the scan's columns), rows not matching it get a null rid."""

    rid: Attr = field(default_factory=lambda: Attr(0, "", "bigint"))
    only: str | None = None

    @property
    def output(self) -> tuple[Attr, ...]:
        return (*self.child.output, self.rid)


@dataclass(frozen=True)
class Keys(Node):
    """Rows supplied when the plan runs (made by capture): the distinct values of `attrs`
    that the lineage already fetched points at, so a side table is computed for those
    values only, without the subplan that made them."""

    attrs: tuple[Attr, ...] = ()

    @property
    def output(self) -> tuple[Attr, ...]:
        return self.attrs


OPERATOR_CLASSES: tuple[type[Node], ...] = (
    Scan,
    Filter,
    Project,
    Passthrough,
    Limit,
    Join,
    Aggregate,
    Union,
    Window,
    Generate,
    Expand,
    GroupMap,
    PartitionMap,
)


# How Spark plans the SQL constructs that have no operator of their own in the IR.
PLANNED_AS: tuple[tuple[str, str], ...] = (
    ("semi join (EXISTS, IN subquery)", "the outer row and every inner row that witnesses it"),
    ("anti join (NOT EXISTS, NOT IN)", "the outer row only"),
    ("scalar subquery (correlated or not)", "the full lineage of the scalar value, for every row that used it "
     "(in a condition it passed, or in a column read downstream: a scalar column dropped unread is used by no row)"),
    ("union distinct", "the equal rows of each side that produced it"),
    ("intersect (distinct, ALL)", "the equal rows of both sides"),
    ("except (distinct, ALL)", "the equal rows of the left side"),
    ("pivot", "every row of its index group"),
    ("unpivot, explode", "the row it came from"),
)


def operator_table() -> str:
    """The README's table of supported operators, as markdown."""
    rows = [(cls.OPERATORS, cls.LINEAGE) for cls in OPERATOR_CLASSES] + list(PLANNED_AS)
    lines = ["| operator | backward lineage of an output row |", "|---|---|"]
    lines += [f"| {op} | {lineage} |" for op, lineage in rows]
    return "\n".join(lines)


def column_of(e: AnyExpr) -> int | None:
    """The attribute an expression merely reads (or renames), if it is that simple."""
    if isinstance(e, ColumnRef):
        return e.attr.id
    return e.column if isinstance(e, Expr) else None


def dtype_of(e: AnyExpr) -> str:
    """The type of the value an expression makes (ember-made counts are bigints)."""
    if isinstance(e, Expr):
        return e.dtype
    if isinstance(e, ColumnRef):
        return e.attr.dtype
    return e.like.dtype if isinstance(e, Constant) else "bigint"


def with_children(node: Node, children: tuple[Node, ...]) -> Node:
    """The same operator over new inputs."""
    if isinstance(node, Unary):
        return replace(node, child=children[0])
    if isinstance(node, Join):
        return replace(node, left=children[0], right=children[1])
    if isinstance(node, Nary):
        return replace(node, inputs=children)
    return node


RANDOM_SAMPLE = "random sample"  # a sample with no seed (TABLESAMPLE): Spark draws one per run


SEQUENCE = "sequence"  # pandas-on-Spark's default index: rows numbered in the order they come


def repeatable(plan: Node) -> bool:
    """Whether running the plan twice over unchanged sources gives the same rows: it does
    not vary, is not `order_bound`, and has no sample (a seeded one draws by partition,
    which another job may cut otherwise), limit or window whose rows or values could be
    chosen differently among ties (a row number, a lag; a rank is the same either way)."""
    return not varies(plan) and not order_bound(plan) and not any(
        isinstance(n, Limit)
        or (isinstance(n, Window) and not n.tie_free)
        or (isinstance(n, Passthrough) and n.kind == "sample")
        for n in walk(plan)
    )


def order_bound(plan: Node) -> bool:
    """Whether some value depends on the order rows arrive in, which a shuffle leaves to
    chance: a grouped map's function sees its group in that order (a partition map's, its
    partition, which a second run may also cut otherwise), a row sequence
    numbers rows in it, an aggregate function keeps the row that came first or lists rows
    as they came (`CHOOSING`: `dropDuplicates` on some columns, `first`, `collect_list`)."""
    return any(
        isinstance(n, GroupMap)
        or (isinstance(n, Passthrough) and n.kind == SEQUENCE)
        or (isinstance(n, Aggregate) and any(choosing(c.expr) is not None for c in n.columns))
        for n in walk_all(plan)
    )


# Aggregate functions whose value depends on the order rows reach them (Catalyst's name →
# how a user writes it): `dropDuplicates` on some columns and `any_value` are `first`.
CHOOSING = {
    "First": "first", "Last": "last", "CollectList": "collect_list", "CollectSet": "collect_set",
    "MaxBy": "max_by", "MinBy": "min_by", "Mode": "mode", "ApproximatePercentile": "percentile_approx",
    "ListAgg": "listagg", "HistogramNumeric": "histogram_numeric",
}  # fmt: skip


def choosing(e: AnyExpr) -> str | None:
    """The first aggregate function of `CHOOSING` that `e` computes (as a user writes it), or None."""
    if not isinstance(e, Expr) or e.tree is None:
        return None
    stack = [e.tree]
    while stack:
        tree = stack.pop()
        if tree.kind == "AggregateExpression" and tree.children and tree.children[0].kind in CHOOSING:
            return CHOOSING[tree.children[0].kind]
        stack.extend(reversed(tree.children))
    return None


def varies(plan: Node) -> bool:
    """Whether two runs of the plan may well give other rows: a sample with no seed, or a
    nondeterministic expression."""
    return any(
        (isinstance(n, Passthrough) and n.kind == RANDOM_SAMPLE) or any(not e.deterministic for e in n.expressions())
        for n in walk(plan)
    )


def walk(node: Node) -> list[Node]:
    """All nodes of a plan, parents before children."""
    out = [node]
    for child in node.children:
        out.extend(walk(child))
    return out


def walk_all(node: Node) -> list[Node]:
    """All nodes of a plan and of the subqueries its expressions run."""
    return [n for m in walk(node) for n in (m, *(s for e in m.expressions() for q in e.subqueries for s in walk_all(q)))]


def outline(node: Node) -> str:
    """A one-line summary of a plan, e.g. `Aggregate(Join(Scan(lineitem), Scan(orders)))`."""
    inner = ", ".join(outline(c) for c in node.children)
    if isinstance(node, Scan):
        inner = node.source.name
    return f"{type(node).__name__}({inner})"


if __name__ == "__main__":  # `python -m ember.plan.ir` rewrites the README's operator table
    import pathlib

    readme = pathlib.Path(__file__).resolve().parents[2] / "README.md"
    text = readme.read_text()
    start, end = "<!-- operators:start -->\n", "<!-- operators:end -->"
    head, rest = text.split(start)
    readme.write_text(head + start + operator_table() + "\n" + end + rest.split(end, 1)[1])
