"""What a view's group-by item may be (docs/guide/security.md): a column of the table,
a number or a short plain string, `+ - * / %` and `||`, a cast to a simple type, and a
few functions (FUNCTIONS); with an optional `AS alias`. Nothing else: no subquery, no
other function (`reflect`, `java_method`, file readers, UDFs), no `*`, no qualified
name.

An item is parsed by DuckDB's parser (`json_serialize_sql`, which parses without
running anything) and its tree walked against the allowlist; what Spark then runs is
not the text as written but the Spark SQL written back from that tree (`check`'s
answer), so whatever the two parsers might read differently in the text, Spark is only
ever given allowlisted functions over the table's columns.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import duckdb

from ember.errors import EmberError

# Spark function → (fewest, most) arguments.
FUNCTIONS: dict[str, tuple[int, int]] = {
    **{part: (1, 1) for part in ("year", "quarter", "month", "day", "dayofmonth", "dayofweek", "dayofyear",
                                 "weekofyear", "hour", "minute", "second")},
    "date_trunc": (2, 2),  # date_trunc('month', ts)
    "trunc": (2, 2),  # trunc(date, 'month')
    "date_format": (2, 2),  # date_format(d, 'yyyy-MM')
    "to_date": (1, 2),
    "round": (1, 2),
    "floor": (1, 1),
    "ceil": (1, 1),
    "ceiling": (1, 1),
    "abs": (1, 1),
    "lower": (1, 1),
    "upper": (1, 1),
    "substring": (2, 3),
    "substr": (2, 3),
    "length": (1, 1),
    "trim": (1, 1),
    "concat": (1, 8),
}
OPERATORS = {"+", "-", "*", "/", "%", "||"}
# A cast's type as DuckDB's parser names it → as Spark writes it.
TYPES = {
    "TINYINT": "TINYINT", "SMALLINT": "SMALLINT", "INTEGER": "INT", "INT": "INT", "BIGINT": "BIGINT",
    "LONG": "BIGINT", "FLOAT": "FLOAT", "REAL": "FLOAT", "DOUBLE": "DOUBLE", "DECIMAL": "DECIMAL",
    "VARCHAR": "STRING", "STRING": "STRING", "TEXT": "STRING", "DATE": "DATE", "TIMESTAMP": "TIMESTAMP",
    "BOOLEAN": "BOOLEAN",
}
MAX_LENGTH = 300  # characters of an item
MAX_DEPTH = 12  # nested calls and operators
PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
NUMBER = re.compile(r"-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")
TEXT = re.compile(r"[A-Za-z0-9 _:./,-]{0,40}")  # a string literal's contents: a unit or a date pattern
RESERVED_ALIASES = {"count", "sum"}  # the view's own measure columns


def check(item: str, columns: Sequence[str]) -> str:
    """The Spark SQL of one group-by item over a table with these columns; raises
    EmberError with a one-line reason when the item is not allowed."""
    tree = _parse(item)
    try:
        return _render(tree, {c.lower(): c for c in columns}, 0, top=True)
    except EmberError as e:
        raise EmberError(f"group-by item {_short(item)}: {e}") from None


def column(name: object, columns: Sequence[str]) -> str:
    """A column of the table, as Spark SQL (for `sum`)."""
    by_name = {c.lower(): c for c in columns}
    if not isinstance(name, str) or name.lower() not in by_name:
        raise EmberError(f"no column {name!r} to sum; the table has {', '.join(columns)}")
    return _identifier(by_name[name.lower()])


def allowed() -> str:
    """The allowlist, for messages."""
    return ", ".join(sorted(FUNCTIONS)) + "; operators " + " ".join(sorted(OPERATORS)) + "; CAST"


def _parse(item: str) -> dict[str, Any]:
    if not isinstance(item, str) or not item.strip():
        raise EmberError("a group-by item must be a non-empty string")
    if len(item) > MAX_LENGTH:
        raise EmberError(f"group-by item {_short(item)}: longer than {MAX_LENGTH} characters")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in item):
        raise EmberError(f"group-by item {_short(item)}: control characters are not allowed")
    with duckdb.connect() as con:
        row = con.execute("SELECT json_serialize_sql(?)", ["SELECT " + item]).fetchone()
    parsed: dict[str, Any] = json.loads(row[0]) if row else {"error": True}
    if parsed.get("error"):
        reason = str(parsed.get("error_message", "")).splitlines()[0] if parsed.get("error_message") else "a syntax error"
        raise EmberError(f"group-by item {_short(item)}: not an expression ({reason})")
    statements = parsed["statements"]
    node = statements[0]["node"] if len(statements) == 1 else {}
    if node.get("type") != "SELECT_NODE" or len(node.get("select_list", [])) != 1 or _clauses(node) != _bare():
        raise EmberError(f"group-by item {_short(item)}: one expression only (no FROM, comma, semicolon or clause)")
    return node["select_list"][0]


def _render(node: dict[str, Any], columns: dict[str, str], depth: int, top: bool = False) -> str:
    if depth > MAX_DEPTH:
        raise EmberError(f"nested deeper than {MAX_DEPTH}")
    alias = node.get("alias", "")
    if alias and not top:
        raise EmberError("an alias only at the end")
    kind = node.get("class")
    if kind == "COLUMN_REF":
        names = node["column_names"]
        if len(names) != 1:
            raise EmberError(f"{'.'.join(names)!r}: a column of the table only, without a qualifier")
        if names[0].lower() not in columns:
            raise EmberError(f"no column {names[0]!r}; the table has {', '.join(columns.values())}")
        sql = _identifier(columns[names[0].lower()])
    elif kind == "CONSTANT":
        sql = _literal(node["literal"])
    elif kind == "CAST":
        if node.get("try_cast"):
            raise EmberError("TRY_CAST is not allowed; CAST is")
        sql = f"CAST({_render(node['child'], columns, depth + 1)} AS {_type(node['type_expr'])})"
    elif kind == "FUNCTION":
        sql = _call(node, columns, depth)
    else:
        what = {"SUBQUERY": "a subquery", "STAR": "*", "WINDOW": "a window function", "LAMBDA": "a lambda",
                "PARAMETER": "a parameter"}.get(str(kind), f"{str(kind).lower()} ({node.get('type')})")
        raise EmberError(f"{what} is not allowed: only columns, literals, CAST, {' '.join(sorted(OPERATORS))} and allowed functions")
    if alias:
        if not PLAIN.fullmatch(alias) or alias.lower() in RESERVED_ALIASES or alias.lower().startswith("ember_"):
            raise EmberError(f"alias {alias!r}: letters, digits and _ only, and not count, sum or ember_*")
        sql += f" AS {alias}"
    return sql


def _call(node: dict[str, Any], columns: dict[str, str], depth: int) -> str:
    name = str(node["function_name"]).lower()
    if node.get("schema") or node.get("catalog"):
        raise EmberError(f"{node.get('schema')}.{name}: a qualified function name is not allowed")
    if node.get("distinct") or node.get("filter") or node.get("export_state") or (node.get("order_bys") or {}).get("orders"):
        raise EmberError(f"{name}: DISTINCT, FILTER and ORDER BY are not allowed in a call")
    arguments = node.get("arguments", [])
    if any(a.get("name") for a in arguments):
        raise EmberError(f"{name}: named arguments are not allowed")
    if name not in OPERATORS and name not in FUNCTIONS:  # before the arguments: the first reason is this one
        raise EmberError(f"function {name} is not allowed (allowed: {allowed()})")
    args = [_render(a["expression"], columns, depth + 1) for a in arguments]
    if name in OPERATORS:
        if len(args) == 2:
            return f"({args[0]} {name} {args[1]})"
        if len(args) == 1 and name in ("-", "+"):
            return f"({name} {args[0]})"  # a space: `- -1` is not a `--` comment
        raise EmberError(f"operator {name} with {len(args)} operands")
    fewest, most = FUNCTIONS[name]
    if not fewest <= len(args) <= most:
        raise EmberError(f"{name} takes {fewest}{'' if fewest == most else f' to {most}'} arguments, not {len(args)}")
    return f"{name}({', '.join(args)})"


def _literal(literal: dict[str, Any]) -> str:
    kind, text = literal.get("kind"), str(literal.get("text", ""))
    if kind in ("INTEGER", "NUMERIC", "BIGINT", "DECIMAL", "DOUBLE") and NUMBER.fullmatch(text):
        return text
    if kind == "STRING" and TEXT.fullmatch(text):
        return f"'{text}'"
    if kind == "BOOLEAN" and text.lower() in ("true", "false"):
        return text.lower()
    if kind == "NULL_LITERAL":
        return "NULL"
    if kind == "STRING":
        raise EmberError(f"string {text[:20]!r}: up to 40 letters, digits, spaces and _ : . / , - only")
    raise EmberError(f"literal {text[:20]!r} ({str(kind).lower()}) is not allowed")


def _type(node: dict[str, Any]) -> str:
    name = str(node.get("type_name", "")).upper()
    children = node.get("children", [])
    if node.get("class") != "TYPE" or node.get("schema") or node.get("catalog") or name not in TYPES:
        raise EmberError(f"CAST to {name.lower() or '?'} is not allowed (allowed: {', '.join(sorted(set(TYPES.values())))})")
    if name == "DECIMAL" and children:
        numbers = [c.get("literal", {}).get("text", "") for c in children if c.get("class") == "CONSTANT"]
        if len(numbers) != len(children) or len(numbers) > 2 or not all(n.isdigit() and int(n) <= 38 for n in numbers):
            raise EmberError("DECIMAL takes a precision and a scale, numbers up to 38")
        return f"DECIMAL({', '.join(numbers)})"
    if children and TYPES[name] != "STRING":  # VARCHAR(10): the length means nothing to a group-by
        raise EmberError(f"CAST to {name.lower()} takes no parameters")
    return TYPES[name]


def _identifier(name: str) -> str:
    return name if PLAIN.fullmatch(name) else "`" + name.replace("`", "``") + "`"


def _clauses(node: dict[str, Any]) -> dict[str, Any]:
    """A SELECT's clauses besides its select list (where query locations left out)."""
    return {k: v for k, v in node.items() if k != "select_list" and k != "from_table"} | {
        "from": (node.get("from_table") or {}).get("type")
    }


_BARE: dict[str, Any] = {}


def _bare() -> dict[str, Any]:
    """The clauses of `SELECT 1`: what an item's statement must have besides its expression."""
    if not _BARE:
        with duckdb.connect() as con:
            row = con.execute("SELECT json_serialize_sql('SELECT 1')").fetchone()
        assert row is not None
        _BARE.update(_clauses(json.loads(row[0])["statements"][0]["node"]))
    return _BARE


def _short(item: str) -> str:
    return repr(item if len(item) <= 60 else item[:57] + "...")
