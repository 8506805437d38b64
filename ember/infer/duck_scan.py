"""Scan conditions evaluated in-process by DuckDB instead of by a Spark job.

A superset trace (and an exact trace on a plan `infer.exact` accepts) only needs, per
scan, the rids and key columns of the rows its bindings and filters select. Spark
answers that with one job per scan, ~0.3 s each before it reads a byte; DuckDB reads
the same Parquet files with the same row-group skipping in-process. So a condition is
translated when every part of it is in a small vocabulary whose meaning is the same in
both engines (columns, literals of plain types, comparisons, + - *, AND/OR/NOT, IS NULL, IN,
prefix/suffix/substring tests, LIKE without escapes, year(), exact widening casts to
decimal or of a number to a double); anything else returns None and the scan stays on
Spark.
"""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Callable, Sequence
from typing import Any

import duckdb
import pyarrow as pa

from ember import duck
from ember.fetch.rows import check_unchanged
from ember.infer.pushdown import Binding, ScanPlan
from ember.infer.spark import MAX_DISJUNCTS, RID
from ember.plan import ir
from ember.plan.jvm import JObj, class_name, iterate
from ember.plan.sources import SAVED, Source, local_path

_COMPARE = {
    "EqualTo": "=",
    "LessThan": "<",
    "LessThanOrEqual": "<=",
    "GreaterThan": ">",
    "GreaterThanOrEqual": ">=",
    "And": "AND",
    "Or": "OR",
    "Add": "+",  # exact on integers and decimals in both engines (an overflow errors in DuckDB:
    "Subtract": "-",  # the caller falls back to Spark), IEEE on doubles; division differs
    "Multiply": "*",
}
_CALLS = {"StartsWith": "starts_with", "EndsWith": "ends_with", "Contains": "contains", "Year": "year"}
_INTEGERS = {"IntegerType", "LongType", "ShortType", "ByteType"}


def sql(e: JObj, named: Callable[[JObj], str] | None = None, window: str | None = None) -> str | None:
    """`e` (a Catalyst expression) as DuckDB SQL with the same meaning, or None. Columns are
    spelled by their names, or by `named` (given the attribute). With `window` (an OVER
    clause's body), min, max, sum and count are window functions over it."""
    kind = class_name(e).rstrip("$")
    if kind == "AggregateExpression":
        return _window_function(e, named, window)
    args = [sql(c, named, window) for c in iterate(e.children())]
    if any(a is None for a in args):
        return None
    if kind == "AttributeReference":
        return _name(str(e.name())) if named is None else named(e)
    if kind == "Literal":
        return _literal(e)
    if kind in _COMPARE and len(args) == 2:
        return f"({args[0]} {_COMPARE[kind]} {args[1]})"
    if kind in _CALLS:
        return f"{_CALLS[kind]}({', '.join(a for a in args if a is not None)})"
    if kind == "Not":
        return f"(NOT {args[0]})"
    if kind in ("IsNull", "IsNotNull"):
        return f"({args[0]} IS {'NOT ' if kind == 'IsNotNull' else ''}NULL)"
    if kind == "In":
        return f"({args[0]} IN ({', '.join(a for a in args[1:] if a is not None)}))" if len(args) > 1 else None
    if kind == "InSet":
        values = [_value(v, e.child().dataType()) for v in iterate(e.hset().toSeq())]
        if not values or any(v is None for v in values):
            return None
        return f"({args[0]} IN ({', '.join(v for v in values if v is not None)}))"
    if kind == "Alias":
        return args[0]
    if kind == "Like" and len(args) == 2 and class_name(e.right()) == "Literal" and "\\" not in str(e.right()):
        return f"({args[0]} LIKE {args[1]})"  # the same wildcards; escapes differ, so none may occur
    if kind == "Cast" and _widens(e.child().dataType(), e.dataType()):
        target = e.dataType()
        if class_name(target).rstrip("$") == "DoubleType":
            return f"CAST({args[0]} AS DOUBLE)"
        return f"CAST({args[0]} AS DECIMAL({target.precision()}, {target.scale()}))"
    return None


_WINDOWED = {"Min": "min", "Max": "max", "Sum": "sum", "Count": "count"}  # avg differs: a double in DuckDB


def _window_function(e: JObj, named: Callable[[JObj], str] | None, window: str | None) -> str | None:
    function = e.aggregateFunction()
    name = _WINDOWED.get(class_name(function).rstrip("$"))
    if window is None or name is None or e.isDistinct() or e.filter().isDefined():
        return None
    args = [sql(c, named) for c in iterate(function.children())]
    if any(a is None for a in args):
        return None
    return f"{name}({', '.join(a for a in args if a is not None)}) OVER ({window})"


_DIGITS = {"ByteType": 3, "ShortType": 5, "IntegerType": 10, "LongType": 19}


def _widens(source: JObj, target: JObj) -> bool:
    """Whether a cast to a decimal keeps every value exactly (no rounding, no overflow), or
    is an integer's or float's to a double (IEEE rounding in both), so it means the same in
    both engines; other casts do not translate."""
    if class_name(target).rstrip("$") == "DoubleType":
        return class_name(source).rstrip("$") in {*_DIGITS, "FloatType"}
    if class_name(target).rstrip("$") != "DecimalType":
        return False
    room, scale = target.precision() - target.scale(), target.scale()
    kind = class_name(source).rstrip("$")
    if kind in _DIGITS:
        return room >= _DIGITS[kind]
    return kind == "DecimalType" and room >= source.precision() - source.scale() and scale >= source.scale()


def _name(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(e: JObj) -> str | None:
    value = e.value()
    return "NULL" if value is None else _value(value, e.dataType())


def _value(value: Any, dtype: JObj) -> str | None:
    """A Catalyst literal value of a plain type as SQL; None for anything else."""
    kind = class_name(dtype).rstrip("$")
    if kind in _INTEGERS:
        return str(int(value))
    if kind == "BooleanType":
        return "TRUE" if value else "FALSE"
    if kind == "StringType":
        return "'" + str(value.toString() if hasattr(value, "toString") else value).replace("'", "''") + "'"
    if kind == "DateType":
        return f"DATE '{datetime.date(1970, 1, 1) + datetime.timedelta(days=int(value))}'"
    if kind == "DecimalType":
        return f"CAST('{value.toString()}' AS DECIMAL({dtype.precision()}, {dtype.scale()}))"
    if kind == "DoubleType":
        number = float(value)
        return None if number != number or number in (float("inf"), float("-inf")) else repr(number)
    return None


def python_literal(value: Any) -> str | None:
    """A traced output value as SQL (None when it has no exact spelling here)."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return None if value != value or value in (float("inf"), float("-inf")) else repr(value)
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, decimal.Decimal):
        return f"CAST('{value}' AS DECIMAL(38, {max(0, -int(value.as_tuple().exponent))}))"
    if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
        return f"DATE '{value.isoformat()}'"
    return None


def candidates(
    source: Source,
    plan: ScanPlan,
    tuples: list[tuple[tuple[int, Any], ...]] | None,
    attrs: list[ir.Attr],
    keys: Sequence[tuple[ir.Attr, pa.ChunkedArray]] = (),
    keep_nulls: bool = False,
) -> pa.Table | None:
    """The rids (`__ember_rid`) and columns `a<attr id>` of the scan's rows that its filters
    and bound values select, read by DuckDB; None when some part does not translate. A
    saved intermediate (`infer.segments`) is read from its rows in memory.

    `tuples` are the traced rows' bound values (`infer.spark.bound_values`; None: no
    binding restricts). `keys`: columns whose value must be among the given ones (a join's
    cut, applied while reading), or null with `keep_nulls`.
    """
    saved = source.kind == SAVED
    if not saved and (source.kind != "parquet" or not source.files):
        return None
    conds = [sql(f.handle) for f in plan.filters]
    if tuples is not None:
        terms = [_term(b) for b in plan.bindings]
        conds.append(_match_any(terms, tuples))
    if any(c is None for c in conds):
        return None
    for n, (attr, _) in enumerate(keys):
        among = f"{_name(attr.name)} IN (SELECT v FROM k{n})"
        conds.append(f"({among} OR {_name(attr.name)} IS NULL)" if keep_nulls else among)
    where = " AND ".join(c for c in conds if c is not None) or "TRUE"
    columns = "".join(f", {_name(a.name)} AS a{a.id}" for a in attrs)
    if saved:
        parts = [f"SELECT {RID}{columns} FROM saved WHERE {where}"]
    else:
        try:
            files = [(str(local_path(f.uri)), f.offset) for f in source.files]
        except ValueError:
            return None
        check_unchanged(source)
        parts = [
            f"SELECT file_row_number + {offset} AS {RID}{columns} "
            f"FROM read_parquet('{path.replace(chr(39), chr(39) * 2)}', file_row_number = true) WHERE {where}"
            for path, offset in files
        ]
    con = duck.connect()
    try:
        if saved:
            con.register("saved", source.data)
        for n, (_, values) in enumerate(keys):
            con.register(f"k{n}", pa.table({"v": values}))
        return con.sql(" UNION ALL ".join(parts)).to_arrow_table()
    except duckdb.Error:  # an overflow in translated arithmetic: Spark's own semantics decide
        return None
    finally:
        con.close()


def _term(b: Binding) -> str | None:
    """The scan-side SQL a binding compares: a column, or a computed column re-evaluated."""
    if b.attr is not None:
        return _name(b.attr.name)
    return None if b.expr is None or b.expr.handle is None else sql(b.expr.handle)


def _match_any(terms: list[str | None], tuples: list[tuple[tuple[int, Any], ...]]) -> str | None:
    """SQL for: the scan row matches the bound values of some traced row."""
    if not tuples:
        return "FALSE"
    if len(tuples) <= MAX_DISJUNCTS:
        rows = [_all([_equals(terms[n], v) for n, v in t]) for t in tuples]
        return None if any(r is None for r in rows) else "(" + " OR ".join(r for r in rows if r is not None) + ")"
    conds = []
    for n, term in enumerate(terms):
        values = {repr(v): v for t in tuples for m, v in t if m == n}
        if not values:
            continue
        if term is None:
            return None
        plain = [python_literal(v) for v in values.values() if v is not None]
        if any(p is None for p in plain):
            return None
        cond = f"{term} IN ({', '.join(p for p in plain if p is not None)})" if plain else "FALSE"
        conds.append(f"({cond} OR {term} IS NULL)" if len(plain) < len(values) else cond)
    return _all(conds)


def _equals(term: str | None, value: Any) -> str | None:
    if term is None:
        return None
    if value is None:
        return f"({term} IS NULL)"
    literal = python_literal(value)
    return None if literal is None else f"({term} = {literal})"


def _all(conds: Sequence[str | None]) -> str | None:
    if any(c is None for c in conds):
        return None
    return "(" + " AND ".join(c for c in conds if c is not None) + ")" if conds else "TRUE"
