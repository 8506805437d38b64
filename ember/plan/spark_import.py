"""Spark's optimized logical plan → ember IR (the import edge).

ember reads the plan Spark itself would run, so SQL and the DataFrame API are one
path and subqueries arrive decorrelated. A few optimizer rules are switched off for
the plan ember reads because they would destroy row identity or lineage (for
example, folding a filter over an in-memory table into a new in-memory table).
Anything ember cannot trace exactly raises `UnsupportedOperatorError` here, before
any job runs.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession

from ember.errors import UnsupportedOperatorError
from ember.plan import ir
from ember.plan.jvm import (
    CATALYST,
    EXPRESSIONS,
    JObj,
    Jvm,
    class_name,
    iterate,
    option,
    output_ids,
    texts,
)
from ember.plan.sources import Source, SourceFile, file_facts, local_path, spark_uri, stem

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

_UNSUPPORTED = {
    "MapInPandas": "mapInPandas",
    "MapInArrow": "mapInArrow",
    "PythonMapInArrow": "mapInArrow",
    "FlatMapGroupsInPandas": "groupBy().applyInPandas",
    "FlatMapGroupsInArrow": "groupBy().applyInArrow",
    "FlatMapCoGroupsInPandas": "cogroup().applyInPandas",
    "FlatMapCoGroupsInArrow": "cogroup().applyInArrow",
    "FlatMapGroupsInPandasWithState": "applyInPandasWithState",
    "TransformWithStateInPandas": "transformWithStateInPandas",
    "MapPartitionsInR": "dapply",
    "MapPartitions": "mapPartitions (typed)",
    "MapElements": "map (typed)",
    "AppendColumns": "typed groupByKey",
    "MapGroups": "mapGroups (typed)",
    "CoGroup": "cogroup (typed)",
    "DeserializeToObject": "typed Dataset operators",
    "SerializeFromObject": "typed Dataset operators",
}

_JOIN_KINDS = {
    "Inner": "inner",
    "Cross": "cross",
    "LeftOuter": "left",
    "RightOuter": "right",
    "FullOuter": "full",
    "LeftSemi": "semi",
    "LeftAnti": "anti",
}

_PASSTHROUGH = {
    "Sort": "sort",
    "Repartition": "repartition",
    "RepartitionByExpression": "repartition",
    "RebalancePartitions": "repartition",
    "BatchEvalPython": "python udf",
    "ArrowEvalPython": "pandas udf",
    "BatchEvalPythonUDTF": "python udtf",
    "ArrowEvalPythonUDTF": "python udtf",
    "Sample": "sample",
}

_LIMITS = {"GlobalLimit", "LocalLimit", "Offset", "Tail", "GlobalLimitAndOffset"}

# Process-wide names given with `ember.source(df, name)`, by source key.
SOURCE_NAMES: dict[str, str] = {}


@contextmanager
def excluded_rules(spark: SparkSession) -> Iterator[None]:
    key = "spark.sql.optimizer.excludedRules"
    before = spark.conf.get(key, None)
    rules = [r for r in (before or "").split(",") if r]
    spark.conf.set(key, ",".join(rules + [r for r in EXCLUDED_RULES if r not in rules]))
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)


def optimized_plan(jvm: Jvm, df: DataFrame) -> JObj:
    """The optimized plan of `df` with ember's excluded rules, and without cached data
    substituted in, so a DataFrame the user cached is traced through to its sources."""
    with excluded_rules(jvm.spark):
        return jvm.jsession.sessionState().optimizer().execute(jvm.analyzed(df))


@dataclass
class Importer:
    """Reads one optimized plan; sources are shared across the plan by their key."""

    jvm: Jvm
    view_names: dict[str, str]
    sources: dict[str, Source] = field(default_factory=dict)

    # --- expressions -----------------------------------------------------
    def attr(self, a: JObj) -> ir.Attr:
        return ir.Attr(int(a.exprId().id()), str(a.name()), str(a.dataType().simpleString()), bool(a.nullable()))

    def attrs(self, seq: JObj) -> tuple[ir.Attr, ...]:
        """A Seq of attributes in a few round trips (ids, then names, types and nullability
        from the schema they make), instead of six per attribute."""
        ids = output_ids(seq)
        schema = self.jvm.name(CATALYST + ".types.DataTypeUtils.fromAttributes")(seq)
        fields = json.loads(str(schema.json()))["fields"]
        out = []
        for i, (expr_id, f) in enumerate(zip(ids, fields, strict=True)):
            dtype = _simple_type(f["type"])
            if dtype is None:
                dtype = str(seq.apply(i).dataType().simpleString())
            out.append(ir.Attr(expr_id, str(f["name"]), dtype, bool(f["nullable"])))
        return tuple(out)

    def expr(self, e: JObj, named: ir.Attr | None = None) -> ir.Expr:
        """`named`: the attribute a named expression (an alias) makes, whose id and type
        then need no round trips to learn."""
        text = str(e.toString())
        refs = frozenset(output_ids(e.references()))
        subqueries: tuple[ir.Node, ...] = ()
        if "scalar-subquery#" in text:
            subqueries = tuple(self.node(s.plan()) for s in self._scalar_subqueries(e, text))
        if any(m in text for m in ("exists#", "list#", "lateral-subquery#")):
            left = _find(e, {"Exists", "InSubquery", "ListQuery", "LateralSubquery"})
            if left:
                raise UnsupportedOperatorError(f"ember cannot trace the subquery {left[0]} left in {text}")
        dtype = named.dtype if named is not None else _dtype(e)
        names = named.id if named is not None else None
        return ir.Expr(text, refs, e, subqueries, bool(e.deterministic()), dtype, _column(e), names)

    def _scalar_subqueries(self, e: JObj, text: str) -> list[JObj]:
        """The scalar subqueries in `e` (which prints as `text`). An uncorrelated one is a leaf (its children are its
        outer references), so the leaves' texts name them in two round trips; a count that
        differs from the text's means a correlated one, found (and refused) by walking."""
        leaves = e.collectLeaves()
        found = [leaves.apply(i) for i, t in enumerate(texts(leaves)) if t.startswith("scalar-subquery#")]
        if len(found) == text.count("scalar-subquery#"):
            return found
        return self._walked_subqueries(e)

    def _walked_subqueries(self, e: JObj) -> list[JObj]:
        if class_name(e) == "ScalarSubquery":
            if e.outerAttrs().nonEmpty():
                raise UnsupportedOperatorError(f"ember cannot trace the correlated scalar subquery {e}")
            return [e]
        return [s for c in iterate(e.children()) for s in self._walked_subqueries(c)]

    def named(self, e: JObj) -> ir.Named:
        attr = self.attr(e.toAttribute())
        return ir.Named(self.expr(e, attr), attr)

    def named_list(self, seq: JObj, output: JObj) -> tuple[ir.Named, ...]:
        """Named expressions with the output attributes they make. A bare column prints
        as its output attribute does and is read without asking about it (most of a
        projection's columns are bare)."""
        attrs = self.attrs(output)
        out = []
        for i, (text, made, attr) in enumerate(zip(texts(seq), texts(output), attrs, strict=True)):
            if text == made:
                bare = ir.Expr(text, frozenset({attr.id}), seq.apply(i), dtype=attr.dtype, column=attr.id, names=attr.id)
                out.append(ir.Named(bare, attr))
            else:
                out.append(ir.Named(self.expr(seq.apply(i), attr), attr))
        return tuple(out)

    def exprs(self, seq: JObj) -> tuple[ir.Expr, ...]:
        return tuple(self.expr(e) for e in iterate(seq))

    # --- plans -------------------------------------------------------------
    def node(self, p: JObj) -> ir.Node:
        kind = class_name(p)
        if kind in _UNSUPPORTED:
            raise UnsupportedOperatorError(
                f"ember cannot trace {kind} ({_UNSUPPORTED[kind]}): its output rows have no known input rows"
            )
        method = getattr(self, f"_{kind}", None)
        if method is not None:
            node: ir.Node = method(p)
            return node
        if kind in _LIMITS:
            return ir.Limit(self.node(p.child()), kind=kind, handle=p)
        if kind in _PASSTHROUGH:
            child = self.node(p.child())
            added = tuple(a for a in self.attrs(p.output()) if a not in child.output)
            exprs = tuple(self.expr(e) for e in iterate(p.expressions()))
            return ir.Passthrough(child, kind=_PASSTHROUGH[kind], added=added, exprs=exprs, handle=p)
        raise UnsupportedOperatorError(f"ember cannot trace the operator {kind}: {p.simpleString(200)!s}")

    def _Project(self, p: JObj) -> ir.Node:
        return ir.Project(self.node(p.child()), columns=self.named_list(p.projectList(), p.output()))

    def _Filter(self, p: JObj) -> ir.Node:
        child = self.node(p.child())
        kept = [c for c in _conjuncts(p.condition()) if not _is_runtime_filter(c)]
        if not kept:
            return child
        cond = kept[0]
        for c in kept[1:]:
            cond = self.jvm.name(EXPRESSIONS + ".And")(cond, c)
        return ir.Filter(child, cond=self.expr(cond))

    def _Join(self, p: JObj) -> ir.Node:
        jt = p.joinType()
        name = class_name(jt).rstrip("$")
        cond = option(p.condition())
        left, right = self.node(p.left()), self.node(p.right())
        expr = self.expr(cond) if cond is not None else None
        equi, theta = _equi(cond, left, right) if cond is not None else ((), False)
        if name == "ExistenceJoin":
            exists = self.attr(jt.exists())
            return ir.Join("existence", left, right, expr, handle=p, exists_attr=exists, equi=equi, theta=theta)
        if name not in _JOIN_KINDS:
            raise UnsupportedOperatorError(f"ember cannot trace join type {name}")
        return ir.Join(_JOIN_KINDS[name], left, right, expr, handle=p, equi=equi, theta=theta)

    def _Aggregate(self, p: JObj) -> ir.Node:
        return ir.Aggregate(
            self.node(p.child()),
            keys=self.exprs(p.groupingExpressions()),
            columns=self.named_list(p.aggregateExpressions(), p.output()),
            handle=p,
        )

    def _Union(self, p: JObj) -> ir.Node:
        children = list(iterate(p.children()))
        blind = frozenset(i for i, c in enumerate(children) if _is_except_all_right(c))
        return ir.Union(
            tuple(self.node(c) for c in children),
            self.attrs(p.output()),
            blind=blind,
            handle=p,
        )

    def _Window(self, p: JObj) -> ir.Node:
        columns = tuple(self.named(e) for e in iterate(p.windowExpressions()))
        frames = tuple(_frame(e) for e in iterate(p.windowExpressions()))
        return ir.Window(
            self.node(p.child()),
            columns=columns,
            frames=frames,
            partition=self.exprs(p.partitionSpec()),
            order=self.exprs(p.orderSpec()),
            handle=p,
        )

    def _Generate(self, p: JObj) -> ir.Node:
        return ir.Generate(
            self.node(p.child()),
            generator=self.expr(p.generator()),
            generated=self.attrs(p.generatorOutput()),
            kept=self.attrs(p.requiredChildOutput()),
            handle=p,
        )

    def _Expand(self, p: JObj) -> ir.Node:
        return ir.Expand(
            self.node(p.child()),
            projections=tuple(self.exprs(proj) for proj in iterate(p.projections())),
            attrs=self.attrs(p.output()),
            handle=p,
        )

    # --- leaves --------------------------------------------------------------
    def _scan(self, p: JObj, source: Source) -> ir.Node:
        source = self.sources.setdefault(source.key, source)
        return ir.Scan(source=source, attrs=self.attrs(p.output()), handle=p)

    def _LogicalRelation(self, p: JObj) -> ir.Node:
        rel = p.relation()
        if class_name(rel) != "HadoopFsRelation":
            raise UnsupportedOperatorError(f"ember cannot trace rows of the relation {class_name(rel)}")
        fmt = class_name(rel.fileFormat()).replace("FileFormat", "").lower()
        if fmt not in ("parquet", "csv", "json"):
            raise UnsupportedOperatorError(
                f"ember cannot number the rows of {fmt} files (Parquet, CSV, JSON and in-memory sources are)"
            )
        roots = sorted(str(r.toString()) for r in iterate(rel.location().rootPaths()))
        key = f"{fmt}:{','.join(roots)}"
        if key in self.sources:
            return self._scan(p, self.sources[key])
        uris = sorted(spark_uri(str(f)) for f in rel.location().inputFiles())
        files, offset = [], 0
        for uri in uris:
            size, mtime = file_facts(uri)
            # Text formats are counted by a pass over the files once capture starts (capture.numbering).
            rows = pq.ParquetFile(local_path(uri)).metadata.num_rows if fmt == "parquet" else 0
            files.append(SourceFile(uri, size, mtime, rows, offset))
            offset += rows
        name = self._name(key, stem(roots[0]) if len(roots) == 1 else fmt)
        return self._scan(p, Source(key, name, fmt, offset, tuple(files), data=p if fmt != "parquet" else None))

    def _LocalRelation(self, p: JObj) -> ir.Node:
        key = f"memory:{self.jvm.jvm.System.identityHashCode(p.data())}"
        if key in self.sources:
            return self._scan(p, self.sources[key])
        return self._scan(p, Source(key, self._name(key, "memory"), "memory", -1, data=p))

    def _LogicalRDD(self, p: JObj) -> ir.Node:
        key = f"memory:rdd{p.rdd().id()}"
        if key in self.sources:
            return self._scan(p, self.sources[key])
        return self._scan(p, Source(key, self._name(key, "memory"), "memory", -1, data=p))

    def _Range(self, p: JObj) -> ir.Node:
        step = int(p.step())
        key = f"range:{p.start()}:{p.end()}:{step}"
        count = p.numElements()
        rows = int(count if isinstance(count, int) else count.longValue())
        return self._scan(p, Source(key, self._name(key, "range"), "range", rows))

    def _OneRowRelation(self, p: JObj) -> ir.Node:
        return self._scan(p, Source("none", "none", "none", 1))

    def _name(self, key: str, default: str) -> str:
        name = SOURCE_NAMES.get(key) or self.view_names.get(key) or default
        taken = {s.name for s in self.sources.values()}
        for n in itertools.count(2):
            if name not in taken:
                return name
            name = f"{name.rsplit('_', 1)[0] if n > 2 else name}_{n}"
        raise AssertionError("unreachable")


def source_key(jvm: Jvm, leaf: JObj) -> str | None:
    """The key `Importer` gives a leaf, computed from the analyzed plan (for naming)."""
    kind = class_name(leaf)
    if kind == "LogicalRelation" and class_name(leaf.relation()) == "HadoopFsRelation":
        rel = leaf.relation()
        fmt = class_name(rel.fileFormat()).replace("FileFormat", "").lower()
        roots = sorted(str(r.toString()) for r in iterate(rel.location().rootPaths()))
        return f"{fmt}:{','.join(roots)}"
    if kind == "LocalRelation":
        return f"memory:{jvm.jvm.System.identityHashCode(leaf.data())}"
    if kind == "LogicalRDD":
        return f"memory:rdd{leaf.rdd().id()}"
    if kind == "Range":
        return f"range:{leaf.start()}:{leaf.end()}:{leaf.step()}"
    return None


def leaves(p: JObj) -> list[JObj]:
    """Every leaf of a plan."""
    kids = list(iterate(p.children()))
    if not kids:
        return [p]
    return [leaf for k in kids for leaf in leaves(k)]


def view_names(jvm: Jvm, analyzed: JObj) -> dict[str, str]:
    """Source key → temp-view or table name, for views and tables that *are* one source
    (a view defined by a query over a table, such as TPC-H Q15's revenue0, names nothing)."""
    names: dict[str, str] = {}

    def visit(p: JObj) -> None:
        kind = class_name(p)
        name = None
        if kind == "View":
            name = str(p.desc().identifier().table())
        elif kind == "SubqueryAlias" and p.identifier().qualifier().nonEmpty():
            name = str(p.identifier().name())
        leaf = _bare_leaf(p.child()) if name is not None else None
        key = source_key(jvm, leaf) if leaf is not None else None
        if name is not None and key is not None:
            names.setdefault(key, name)
        for k in iterate(p.children()):
            visit(k)
        for sub in iterate(p.subqueries()):
            visit(sub)

    visit(analyzed)
    return names


def _bare_leaf(p: JObj) -> JObj | None:
    """The leaf under a chain of aliases, views and plain column selections, if that is all."""
    kind = class_name(p)
    if kind in ("SubqueryAlias", "View"):
        return _bare_leaf(p.child())
    if kind == "Project" and all(class_name(e) == "AttributeReference" for e in iterate(p.projectList())):
        return _bare_leaf(p.child())
    return p if p.children().isEmpty() else None


def import_plan(jvm: Jvm, df: DataFrame) -> tuple[ir.Node, dict[str, Source]]:
    """The IR of `df`'s optimized plan and the sources it reads, by key."""
    analyzed = jvm.analyzed(df)
    importer = Importer(jvm, view_names(jvm, analyzed))
    root = importer.node(optimized_plan(jvm, df))
    return root, importer.sources


# Spark's JSON names of atomic types → their simpleString (what Attr.dtype holds).
_SIMPLE_TYPES = {
    "long": "bigint", "integer": "int", "short": "smallint", "byte": "tinyint", "string": "string",
    "double": "double", "float": "float", "boolean": "boolean", "date": "date", "timestamp": "timestamp",
    "timestamp_ntz": "timestamp_ntz", "binary": "binary", "null": "void",
}  # fmt: skip


def _simple_type(json_type: object) -> str | None:
    """The simpleString of a type given as Spark's schema JSON, where that is plain to see."""
    if not isinstance(json_type, str):
        return None
    if json_type.startswith("decimal("):
        return json_type
    return _SIMPLE_TYPES.get(json_type)


def _dtype(e: JObj) -> str:
    try:
        return str(e.dataType().simpleString())
    except Exception:  # unresolved or dataType-less expressions (sort orders have one; generators may not)
        return ""


def _find(e: JObj, kinds: set[str]) -> list[JObj]:
    if class_name(e) in kinds:
        return [e]
    return [x for c in iterate(e.children()) for x in _find(c, kinds)]


def _column(e: JObj) -> int | None:
    """The exprId of the column `e` reads, when `e` is a column or an alias of one."""
    kind = class_name(e)
    if kind == "Alias":
        e, kind = e.child(), class_name(e.child())
    return int(e.exprId().id()) if kind == "AttributeReference" else None


def _equi(cond: JObj, left: ir.Node, right: ir.Node) -> tuple[tuple[tuple[int, int], ...], bool]:
    """The (left, right) column pairs a join condition's conjuncts declare equal, and whether
    it holds anything else (other conjuncts, or null-safe equalities, which pair nulls)."""
    lids, rids = {a.id for a in left.output}, {a.id for a in right.output}
    pairs = []
    conjuncts = _conjuncts(cond)
    plain = 0
    for c in conjuncts:
        if class_name(c) not in ("EqualTo", "EqualNullSafe"):
            continue
        a, b = _column(c.left()), _column(c.right())
        if a in rids and b in lids:
            a, b = b, a
        if a in lids and b in rids:
            pairs.append((a, b))
            plain += class_name(c) == "EqualTo"
    return tuple(pairs), plain < len(conjuncts)


def _conjuncts(e: JObj) -> list[JObj]:
    if class_name(e) == "And":
        return _conjuncts(e.left()) + _conjuncts(e.right())
    return [e]


def _is_runtime_filter(e: JObj) -> bool:
    """Bloom-filter and dynamic-pruning filters the optimizer adds: redundant for lineage."""
    text = str(e.toString())
    return text.startswith("might_contain(scalar-subquery#") or "dynamicpruning#" in text


def _is_except_all_right(p: JObj) -> bool:
    """The right input of Spark's EXCEPT ALL rewrite: it tags its rows with `-1 AS vcol`."""
    if class_name(p) != "Project":
        return False
    for e in iterate(p.projectList()):
        if class_name(e) == "Alias" and str(e.name()) == "vcol" and str(e.child().toString()) == "-1":
            return True
    return False


def _frame(named: JObj) -> ir.Frame:
    """The frame of a window column `Alias(WindowExpression(fn, spec))`."""
    we = named.child() if class_name(named) == "Alias" else named
    if class_name(we) != "WindowExpression":
        raise UnsupportedOperatorError(f"ember cannot read the window column {named}")
    fn = we.windowFunction()
    frame = we.windowSpec().frameSpecification()
    ranking = class_name(fn) in {
        "RowNumber", "Rank", "DenseRank", "PercentRank", "NTile", "CumeDist",
    }
    if class_name(frame) != "SpecifiedWindowFrame":
        raise UnsupportedOperatorError(f"ember cannot read the window frame {frame}")
    kind = "rows" if class_name(frame.frameType()).startswith("RowFrame") else "range"
    return ir.Frame(kind, _bound(frame.lower()), _bound(frame.upper()), whole=ranking)


def _bound(e: JObj) -> str:
    kind = class_name(e).rstrip("$")
    if kind in ("UnboundedPreceding", "UnboundedFollowing"):
        return "unbounded"
    if kind == "CurrentRow":
        return "current"
    if kind == "Literal" and str(e.value()).lstrip("-").isdigit():
        return str(int(str(e.value())))
    raise UnsupportedOperatorError(f"ember cannot trace a window frame bound {e}")
