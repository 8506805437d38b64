"""Catalyst expressions as DuckDB SQL with the same meaning, and Parquet rows numbered as
Spark numbers them, for work done in-process.

Traces (`infer.duck_scan`, `infer.block`) and side tables (`capture.local`) read Parquet with
DuckDB instead of running a Spark job, when every part of a condition is in a small
vocabulary whose meaning is the same in both engines: columns, literals of plain types,
comparisons, negation, + - * (on decimals only where Spark keeps every digit of the
result), / (of doubles, IEEE; of decimals, rounded as Spark rounds, in integers or by
`duck.spark_divide`; by zero: null), AND/OR/NOT, IS NULL, IN, coalesce, CASE,
prefix/suffix/substring tests, substrings from a position counted from 1, upper and
lower case of ASCII text, LIKE without escapes, year(), integer & | and >> (Spark's
`grouping()`), exact widening casts to decimal or a wider integer or of a number to a
double, integer casts to a narrower integer (an overflow fails in DuckDB, and the work
goes back to Spark), decimal casts to another decimal (rounded half up in both), a
double's cast to a decimal (rounded as Spark rounds: `duck.spark_unscaled`), a
decimal's unscaled integer, min, max, sum, count and avg of a decimal or an integer (as
window functions, or under a GROUP BY; Spark averages a decimal of few digits as a
double over its unscaled integers, exact below 2^53), and
window functions whose values do not depend on the order of tied rows (rank,
dense_rank; min, max, sum and count over the whole partition or a RANGE frame).
Anything else translates to None, and the work stays on Spark.
"""

from __future__ import annotations

import datetime
import decimal
import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from ember.plan.sources import Source, SourceFile, local_path
from ember.plan.trees import OPAQUE, Tree

_COMPARE = {
    "EqualTo": "=",
    "EqualNullSafe": "IS NOT DISTINCT FROM",  # Spark's <=>: an INTERSECT's semi join
    "LessThan": "<",
    "LessThanOrEqual": "<=",
    "GreaterThan": ">",
    "GreaterThanOrEqual": ">=",
    "And": "AND",
    "Or": "OR",
    "Add": "+",  # exact on integers and decimals in both engines (an overflow errors in DuckDB:
    "Subtract": "-",  # the caller falls back to Spark), IEEE on doubles; division differs
    "Multiply": "*",
    "BitwiseAnd": "&",  # two's complement integers of one type in both
    "BitwiseOr": "|",
}
_CALLS = {"StartsWith": "starts_with", "EndsWith": "ends_with", "Contains": "contains", "Year": "year"}
_CASES = {"Upper": "upper", "Lower": "lower"}


def sql(
    e: Tree,
    named: Callable[[Tree], str] | None = None,
    window: str | None = None,
    grouped: bool = False,
    subquery: Callable[[Tree], str | None] | None = None,
    untied: bool = False,
) -> str | None:
    """`e` (a Catalyst expression) as DuckDB SQL with the same meaning, or None. Columns are
    spelled by their names, or by `named` (given the attribute). With `window` (an OVER
    clause's body), min, max, sum and count are window functions over it; `grouped` (an
    aggregate's own column, read under a GROUP BY), they are plain aggregates. An
    uncorrelated scalar subquery is spelled by `subquery` (given it), if there is one.
    `untied`: no two rows of a window's partition tie in its order (`capture.untie`), so
    row numbers and ROWS frames are the same in both engines."""
    kind = e.kind
    if kind == "AggregateExpression":
        return _aggregate(e, named, window, grouped)
    if kind == "WindowExpression":
        return _window(e, named, untied)
    if kind == "MakeDecimal":
        return _unscaled_sum(e, named, window, grouped, untied)
    if kind == "ScalarSubquery":
        return None if subquery is None or e.outer else subquery(e)
    found = [sql(c, named, window, grouped, subquery, untied) for c in e.children]
    args = [a for a in found if a is not None]
    if len(args) < len(found):
        return None
    if kind == "AttributeReference":
        return quoted(str(e.name)) if named is None else named(e)
    if kind == "Literal":
        return "NULL" if e.value is None else _value(e.value, e.dtype)
    if kind in ("And", "Or"):  # one flat chain: Spark's optimizer nests one either way
        return "(" + f" {_COMPARE[kind]} ".join(a[1:-1] if c.kind == kind else a for a, c in zip(args, e.children, strict=True)) + ")"
    if kind in _COMPARE and len(args) == 2:
        return f"({args[0]} {_COMPARE[kind]} {args[1]})" if _exact(e) else None
    if kind in _CALLS:
        return f"{_CALLS[kind]}({', '.join(a for a in args if a is not None)})"
    if kind in _CASES and e.dtype == "string":  # not a collated string
        return _case(_CASES[kind], args[0])
    if kind == "Not":
        return f"(NOT {args[0]})"
    if kind == "UnaryMinus":  # exact; where it overflows an integer, DuckDB fails
        return f"(- {args[0]})"
    if kind in ("IsNull", "IsNotNull"):
        return f"({args[0]} IS {'NOT ' if kind == 'IsNotNull' else ''}NULL)"
    if kind == "In":
        return f"({args[0]} IN ({', '.join(a for a in args[1:] if a is not None)}))" if len(args) > 1 else None
    if kind == "InSet":
        values = [_value(v, e.children[0].dtype) for v in e.values]
        if not values or any(v is None for v in values):
            return None
        return f"({args[0]} IN ({', '.join(v for v in values if v is not None)}))"
    if kind == "Coalesce":  # Spark has cast its arguments to one type
        return f"coalesce({', '.join(a for a in args if a is not None)})"
    if kind == "Alias":
        return args[0]
    if kind == "SortOrder":
        return _sort_order(e, args[0])
    if kind == "Substring":
        return _substring(e, args[0])
    pattern = e.children[-1] if e.children else None
    if kind == "Like" and len(args) == 2 and pattern is not None and pattern.kind == "Literal" and "\\" not in pattern.text:
        return f"({args[0]} LIKE {args[1]})"  # the same wildcards; escapes differ, so none may occur
    if kind == "Cast" and e.dtype is not None and _casts(e.children[0].dtype, e.dtype):
        into = _SQL_TYPES.get(e.dtype) or _decimal(e.dtype)
        return None if into is None else f"CAST({args[0]} AS {into})"
    if kind == "Cast" and e.children[0].dtype == "double":
        return _double_to_decimal(args[0], _precision(e.dtype))
    if kind == "UnscaledValue":
        of = _precision(e.children[0].dtype)
        return None if of is None or of[0] > 18 else _unscaled(args[0], of, "BIGINT")
    if kind == "Divide" and len(args) == 2:
        return _divide(e.dtype, (args[0], e.children[0].dtype), (args[1], e.children[1].dtype))
    if kind == "ShiftRight" and _shift(e):  # arithmetic in both engines
        return f"({args[0]} >> {args[1]})"
    if kind == "CaseWhen":  # branches (condition, value), then the ELSE value if any
        branches = " ".join(f"WHEN {c} THEN {v}" for c, v in zip(args[0:-1:2], args[1::2], strict=True))
        otherwise = f" ELSE {args[-1]}" if len(args) % 2 else ""
        return f"(CASE {branches}{otherwise} END)"
    return None


_RANKS = {"Rank": "rank", "DenseRank": "dense_rank"}
_BOUNDS = {"UnboundedPreceding": "UNBOUNDED PRECEDING", "UnboundedFollowing": "UNBOUNDED FOLLOWING", "CurrentRow": "CURRENT ROW"}
_FLOATING = ("float", "double")


def _window(e: Tree, named: Callable[[Tree], str] | None, untied: bool = False) -> str | None:
    """A window function whose values do not depend on how either engine orders rows that
    tie (a rank; min, max, sum or count over the whole partition or a RANGE frame, which
    takes peers together), or, where no rows tie (`untied`), a row number or an aggregate
    over a ROWS frame of exact values (a double's running sum would add in another order).
    Floating keys are not compared alike (Spark folds -0.0 and NaNs)."""
    fn, spec = e.children
    *keys, frame = spec.children
    if any((k.children[0] if k.kind == "SortOrder" else k).dtype in _FLOATING for k in keys):
        return None
    over = [sql(k, named) for k in keys]
    if any(k is None for k in over):
        return None
    partition = [text for k, text in zip(keys, over, strict=True) if k.kind != "SortOrder" and text is not None]
    order = [text for k, text in zip(keys, over, strict=True) if k.kind == "SortOrder" and text is not None]
    body = [f"PARTITION BY {', '.join(partition)}"] if partition else []
    body += [f"ORDER BY {', '.join(order)}"] if order else []
    if fn.kind in _RANKS or (untied and fn.kind == "RowNumber"):
        return f"CAST({_RANKS.get(fn.kind, 'row_number')}() OVER ({' '.join(body)}) AS INTEGER)"
    rows = (frame.frame or "").startswith("RowFrame")
    bounds = [_bound(b, rows) for b in frame.children[:2]]
    whole = bounds == ["UNBOUNDED PRECEDING", "UNBOUNDED FOLLOWING"]
    if None in bounds or (rows and not whole and (not untied or e.dtype in _FLOATING)):
        return None
    return _aggregate(fn, named, " ".join([*body, f"{'ROWS' if rows else 'RANGE'} BETWEEN {bounds[0]} AND {bounds[1]}"]), False)


def _bound(b: Tree, rows: bool) -> str | None:
    """A frame bound: unbounded, the current row, or an offset of rows (a RANGE frame's is
    of values: left to Spark)."""
    if b.kind in _BOUNDS:
        return _BOUNDS[b.kind]
    if rows and b.kind == "Literal" and isinstance(b.value, int) and not isinstance(b.value, bool):
        return rows_offset(b.value)
    return None


def rows_offset(offset: int) -> str:
    """A ROWS frame bound `offset` rows from the current one (negative: before it)."""
    return "CURRENT ROW" if offset == 0 else f"{abs(offset)} {'PRECEDING' if offset < 0 else 'FOLLOWING'}"


_SORT = re.compile(r" (ASC|DESC) NULLS (FIRST|LAST)$")


def _sort_order(e: Tree, text: str) -> str | None:
    """An ORDER BY key with its direction and its nulls' place spelled out (the engines'
    defaults differ); Catalyst prints a sort order as `child ASC NULLS FIRST`."""
    found = _SORT.search(e.text)
    return None if found is None else f"{text} {found.group(1)} NULLS {found.group(2)}"


def _case(function: str, text: str) -> str:
    """ASCII text in upper or lower case, alike in both engines. Other text Spark cases by
    Java's or ICU's rules (`ß` is `SS`), DuckDB one code point at a time, so a value that is
    not ASCII (more bytes than characters) fails DuckDB's read, and the work goes to Spark."""
    check = f"strlen({text}) <> length({text})"
    return f"(CASE WHEN {check} THEN error('{function}() of text that is not ASCII: left to Spark') ELSE {function}({text}) END)"


def _shift(e: Tree) -> bool:
    """A shift by a literal within the value's width: Java masks a wider one (`1 << 65` is 2),
    DuckDB does not."""
    value, by = e.children
    width = {"int": 32, "bigint": 64}.get(value.dtype or "")
    return width is not None and by.kind == "Literal" and isinstance(by.value, int) and 0 <= by.value < width


def _divide(dtype: str | None, a: tuple[str, str | None], b: tuple[str, str | None]) -> str | None:
    """A quotient (each operand's SQL with its Spark type): of doubles, IEEE in both engines;
    of decimals, rounded as Spark rounds (`_quotient`; DuckDB's own quotient is a double).
    By zero Spark's is null (or the job fails under ANSI rules), DuckDB's an infinity."""
    if dtype == "double":
        return f"({a[0]} / NULLIF({b[0]}, 0))"
    into = _precision(dtype)
    if into is None:
        return None
    exact = _quotient(into, (a[0], _precision(a[1])), (b[0], _precision(b[1])))
    if exact is not None:
        return exact
    return f"CAST(spark_divide(CAST({a[0]} AS VARCHAR), CAST({b[0]} AS VARCHAR), {into[0]}, {into[1]}) AS DECIMAL({into[0]}, {into[1]}))"


def _quotient(into: tuple[int, int], a: tuple[str, tuple[int, int] | None], b: tuple[str, tuple[int, int] | None]) -> str | None:
    """Spark's decimal quotient in DuckDB's integers, where both operands' types let every
    value fit 128 bits: Spark cuts the quotient to 39 digits, then rounds it half up to the
    result's scale, and as the result has at most 38 digits the cut never reaches the digit
    that rounding reads, so the value is the exact quotient rounded half up. The operands'
    unscaled integers are scaled to the result's scale and divided (`//` truncates), adding
    half the divisor, away from zero, to round. Wider types call `duck.spark_divide`, a
    Python function ember registers, called once a row and far slower than integers."""
    (x, of), (y, by) = a, b
    if of is None or by is None:
        return None
    shift = into[1] + by[1] - of[1]  # the numerator's unscaled value is scaled by 10^shift
    digits = max(of[0] + max(shift, 0), by[0] + max(-shift, 0)) + 1  # of 2N and 2D
    if of[0] + of[1] > 38 or by[0] + by[1] > 38 or digits > 38:
        return None
    kind = "BIGINT" if digits <= 18 else "HUGEINT"
    numerator = f"({_unscaled(x, of, kind)} * '{10 ** max(shift, 0)}'::{kind})"
    divisor = f"(NULLIF({_unscaled(y, by, kind)}, 0) * '{10 ** max(-shift, 0)}'::{kind})"
    rounded = f"((2 * {numerator} + sign({numerator}) * abs({divisor})) // (2 * {divisor}))"
    return _scaled(rounded, into)


def _unscaled(x: str, of: tuple[int, int], kind: str) -> str:
    """A decimal's digits as an integer (its value times 10^scale), multiplied in as many
    bits as the digits need (DuckDB multiplies two narrow decimals in 64, and fails past them)."""
    width = 18 if of[0] + of[1] <= 18 else 38
    return f"CAST(CAST({x} AS DECIMAL({width}, {of[1]})) * {_power(of[1])} AS {kind})"


def _power(k: int) -> str:
    """10^k as an exact decimal literal (DuckDB multiplies decimals exactly, or fails)."""
    if k >= 0:
        return f"CAST('1{'0' * k}' AS DECIMAL({k + 1}, 0))"
    return f"CAST('0.{'0' * (-k - 1)}1' AS DECIMAL({-k}, {-k}))"


def _double_to_decimal(d: str, into: tuple[int, int] | None) -> str | None:
    """A double cast to a decimal, rounded as Spark rounds it (`duck.spark_unscaled`): Spark
    averages a decimal of at most 11 digits so (`_integer_average`)."""
    if into is None:
        return None
    return _scaled(f"spark_unscaled({d}, {into[0]}, {into[1]})", into)


def _scaled(unscaled: str, into: tuple[int, int]) -> str:
    """A decimal of type `into` from its unscaled integer (exact: DuckDB multiplies decimals exactly)."""
    return f"CAST(CAST({unscaled} AS DECIMAL({into[0]}, 0)) * {_power(-into[1])} AS DECIMAL({into[0]}, {into[1]}))"


def _casts(source: str | None, target: str) -> bool:
    """Whether a cast means the same in both engines: one that widens or narrows an integer
    (`_widens`, `_narrows`), or a decimal's to another decimal type, which both round half
    away from zero (Spark fails or gives null past the type, DuckDB fails)."""
    return _widens(source, target) or _narrows(source, target) or (_precision(source) is not None and _precision(target) is not None)


def _narrows(source: str | None, target: str) -> bool:
    """A cast to a narrower integer: the same value where it fits; where it does not, Spark
    fails (ANSI) or wraps it, and DuckDB fails, which leaves the work to Spark (Spark's
    `grouping()` is a bit of the grouping id cast to a tinyint)."""
    return source in _DIGITS and target in _DIGITS


def _exact(e: Tree) -> bool:
    """Whether Spark computes a decimal sum, difference or product exactly, as DuckDB does:
    past 38 digits Spark rounds it to fewer decimals (`h * h` of two decimal(38,10) is a
    decimal(38,6)), and the two engines then compare different values."""
    into = _precision(e.dtype) if e.kind in ("Add", "Subtract", "Multiply") else None
    if into is None:
        return True
    scales = [p[1] for p in map(_precision, (c.dtype for c in e.children)) if p is not None]
    if len(scales) != 2:
        return False
    return into[1] == (sum(scales) if e.kind == "Multiply" else max(scales))


def _substring(e: Tree, text: str | None) -> str | None:
    """Positions from 1 and a length that is not negative mean the same characters in both
    engines (a position of 0 or from the end, a negative length, bytes: not so)."""
    string, *bounds = e.children
    if string.dtype != "string" or any(b.kind != "Literal" or not isinstance(b.value, int) for b in bounds):
        return None
    pos, length = (int(b.value) for b in bounds)
    if pos < 1 or length < 0:
        return None
    return f"substring({text}, {pos}, {length})"


# A sum is exact in both, but its type is wider in DuckDB (hugeint, decimal(38)): the same
# values, unless Spark's would overflow (DuckDB's errors). avg is a double in DuckDB (`_average`).
_AGGREGATES = {"Min": "min", "Max": "max", "Sum": "sum", "Count": "count", "Average": "avg"}


def _aggregate(e: Tree, named: Callable[[Tree], str] | None, window: str | None, grouped: bool) -> str | None:
    function = e.children[0]
    name = _AGGREGATES.get(function.kind)
    if name is None or e.filtered or (window is None and not grouped) or (window is not None and e.distinct):
        return None
    args = [sql(c, named) for c in function.children]
    if len(args) != 1 or args[0] is None:  # count(a, b) counts rows where none is null: not DuckDB's
        return None
    distinct, over = "DISTINCT " if e.distinct else "", "" if window is None else f" OVER ({window})"
    if name == "avg" and function.children[0].dtype in _DIGITS:
        return _integer_average(distinct, args[0], over) if e.dtype == "double" else None
    if name == "avg":
        return _average(e.dtype, function.children[0].dtype, f"{distinct}{args[0]}", over)
    return f"{name}({distinct}{args[0]}){over}"


def _integer_average(distinct: str, arg: str, over: str) -> str:
    """Spark's average of integers: their sum as a double, in the order rows come, over the
    count. Every partial sum is exact, whatever the order, while the values' magnitudes add
    up to at most 2^53 (bounded by the largest times the count); past it the read fails and
    the work goes to Spark. Spark averages a decimal of at most 11 digits as its unscaled
    integers (`avg(UnscaledValue(x)) / 10^scale`, cast back by `_double_to_decimal`)."""
    count = f"count({distinct}{arg}){over}"
    past = f"CAST(max(abs({arg})){over} AS HUGEINT) * {count} > {2**53}"
    quotient = f"CAST(sum({distinct}{arg}){over} AS DOUBLE) / CAST(NULLIF({count}, 0) AS DOUBLE)"
    return f"(CASE WHEN {past} THEN error('an average Spark sums inexactly as a double: left to Spark') ELSE {quotient} END)"


def _average(dtype: str | None, of: str | None, arg: str, over: str) -> str | None:
    """Spark's average of a decimal: its sum, in a decimal 10 digits wider (past it, Spark's
    is null or fails, and DuckDB's cast fails), divided by the count as Spark divides
    decimals (`duck.spark_divide`), into the average's type. (A decimal of at most 11
    digits Spark averages as a double, over its unscaled longs: `_integer_average`. An
    average of doubles adds them in another order in each engine.)"""
    into, source = _precision(dtype), _precision(of)
    if into is None or source is None:
        return None
    wide = f"decimal({min(38, source[0] + 10)},{source[1]})"
    return _divide(dtype, (f"CAST(sum({arg}){over} AS {_decimal(wide)})", wide), (f"count({arg}){over}", "decimal(20,0)"))


def _unscaled_sum(
    e: Tree, named: Callable[[Tree], str] | None, window: str | None, grouped: bool, untied: bool
) -> str | None:
    """Spark sums a decimal of at most 8 digits as longs, `MakeDecimal(sum(UnscaledValue(x)))`:
    the value of DuckDB's own decimal sum, cast to Spark's type (past it, Spark's is null
    and DuckDB's cast fails: the caller leaves the work to Spark)."""
    target, over = _decimal(e.dtype), e.children[0]
    aggregate = over.children[0] if over.kind == "WindowExpression" else over  # a window's sum is rewritten alike
    if target is None or aggregate.kind != "AggregateExpression" or aggregate.children[0].kind != "Sum":
        return None
    summed = aggregate.children[0]
    if len(summed.children) != 1 or summed.children[0].kind != "UnscaledValue":
        return None
    decimal_sum = replace(aggregate, children=(replace(summed, children=summed.children[0].children), *aggregate.children[1:]))
    if over.kind == "WindowExpression":
        found = _window(replace(over, children=(decimal_sum, *over.children[1:])), named, untied)
    else:
        found = _aggregate(decimal_sum, named, window, grouped)
    return None if found is None else f"CAST({found} AS {target})"


# Integer types by Spark's simpleString, with the decimal digits each holds.
_DIGITS = {"tinyint": 3, "smallint": 5, "int": 10, "bigint": 19}
_SQL_TYPES = {"double": "DOUBLE", "bigint": "BIGINT", "int": "INTEGER", "smallint": "SMALLINT", "tinyint": "TINYINT"}
_DECIMAL = re.compile(r"decimal\((\d+),(\d+)\)")


def _decimal(dtype: str | None) -> str | None:
    found = _DECIMAL.fullmatch(dtype or "")
    return f"DECIMAL({found.group(1)}, {found.group(2)})" if found else None


def _precision(dtype: str | None) -> tuple[int, int] | None:
    found = _DECIMAL.fullmatch(dtype or "")
    return (int(found.group(1)), int(found.group(2))) if found else None


def _widens(source: str | None, target: str) -> bool:
    """Whether a cast to a decimal or a wider integer keeps every value exactly (no rounding,
    no overflow: `sum(n)` of an int reads it as a bigint), or is an integer's or float's to
    a double (IEEE rounding in both), so it means the same in both engines; other casts do
    not translate."""
    if target == "double":
        return source in {*_DIGITS, "float"}
    if target in _DIGITS:
        return source in _DIGITS and _DIGITS[source] < _DIGITS[target]
    into = _precision(target)
    if into is None:
        return False
    room, scale = into[0] - into[1], into[1]
    if source in _DIGITS:
        return room >= _DIGITS[source]
    was = _precision(source)
    return was is not None and room >= was[0] - was[1] and scale >= was[1]


def quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _value(value: Any, dtype: str | None) -> str | None:
    """A Catalyst literal value of a plain type as SQL; None for anything else."""
    if value is OPAQUE or value is None:
        return None
    if dtype in _DIGITS and isinstance(value, int):
        return str(value)
    if dtype == "boolean":
        return "TRUE" if value else "FALSE"
    if dtype == "string":
        return quoted_text(str(value))
    if dtype == "date" and isinstance(value, int):
        return f"DATE '{datetime.date(1970, 1, 1) + datetime.timedelta(days=value)}'"
    into = _decimal(dtype)
    if into is not None and isinstance(value, decimal.Decimal):
        return f"CAST('{value}' AS {into})"
    if dtype == "double" and isinstance(value, int | float):
        return repr(float(value))
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
        return quoted_text(value)
    if isinstance(value, decimal.Decimal):
        return f"CAST('{value}' AS DECIMAL(38, {max(0, -int(value.as_tuple().exponent))}))"
    if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
        return f"DATE '{value.isoformat()}'"
    return None


def one_of(rows: Sequence[Sequence[tuple[str | None, Any]]]) -> str | None:
    """SQL for: the row equals one of `rows` (each a list of (column's SQL, traced value)),
    a null matching a null. `=` (not IS NOT DISTINCT FROM) where the value is not null lets
    DuckDB skip row groups of a scan by it. None where a column or a value does not translate."""
    if not rows:
        return "FALSE"
    matched = []
    for row in rows:
        terms = []
        for sql_, value in row:
            literal = "NULL" if value is None else python_literal(value)
            if sql_ is None or literal is None:
                return None
            terms.append(f"({sql_} IS NULL)" if value is None else f"({sql_} = {literal})")
        matched.append("(" + " AND ".join(terms) + ")" if terms else "TRUE")
    return "(" + " OR ".join(matched) + ")"


def numbered_parquet(source: Source, rid: str) -> str | None:
    """SQL for the rows of a source's Parquet files with each row's rid as column `rid`
    (its position in its file plus the rows of earlier files, as Spark numbers them), or
    None where the files are not local. Files are matched by column name, as Spark reads
    them (a dataset's files may hold their columns in another order, or more of them)."""
    try:
        return " UNION ALL BY NAME ".join(f"SELECT file_row_number + {f.offset} AS {rid}, * FROM {parquet_file(source, f)}" for f in source.files)
    except ValueError:
        return None


_DUCK_TYPES = {
    "string": "VARCHAR", "boolean": "BOOLEAN", "tinyint": "TINYINT", "smallint": "SMALLINT", "int": "INTEGER",
    "bigint": "BIGINT", "float": "FLOAT", "double": "DOUBLE", "date": "DATE", "timestamp": "TIMESTAMP",
    "timestamp_ntz": "TIMESTAMP",
}  # fmt: skip


def duck_type(dtype: str) -> str | None:
    """The DuckDB type holding a Spark type's values as Spark shows them (None: no such
    type here): a partition column's folder text is cast to it, and typed nulls are. A Spark
    `timestamp` is local time, as Spark shows it."""
    return _DUCK_TYPES.get(dtype) or _decimal(dtype)


def typed_null(dtype: str) -> str | None:
    """A null of a Spark type, so that UNION ALL branches agree on their columns' types."""
    into = duck_type(dtype)
    return None if into is None else f"CAST(NULL AS {into})"


def parquet_file(source: Source, f: SourceFile) -> str:
    """One Parquet file's rows as Spark reads them, for a FROM clause: the file's columns,
    its partition columns, and `file_row_number`. Raises ValueError where the file is not local."""
    values = partition_columns(source, f)
    return f"(SELECT *{', ' if values else ''}{values} FROM read_parquet({quoted_text(str(local_path(f.uri)))}, file_row_number = true, hive_partitioning = false))"


def partition_columns(source: Source, f: SourceFile) -> str:
    """A select list of a file's partition columns, their values read off its folders."""
    return ", ".join(
        f"CAST({'NULL' if value is None else quoted_text(value)} AS {duck_type(dtype)}) AS {quoted(name)}"
        for (name, dtype), value in zip(source.partitioning, f.partition, strict=True)
    )


def quoted_text(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
