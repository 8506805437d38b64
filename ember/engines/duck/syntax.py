"""A small SQL syntax tree for the queries `engines.duck.compile` builds, rendered to text once.

The compiler assembles SELECTs, FROM items, joins, conditions and CTEs as values and never
edits SQL text after the fact: a query's shape (which items it reads, whether it copies
the wanted keys, its tie checks) is read off the tree, not searched for in a string.
Expressions inside it are SQL text from `engines.duck.sql` (leaves of the tree).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

TIE = "tie"  # the parameter a tie check passes to `ember_tie`, `$tie`: the run's token (`engines.duck.ties`)


@dataclass(frozen=True)
class Raw:
    """A whole query as text: a source's Parquet files, numbered (`sql.numbered_parquet`)."""

    text: str


@dataclass(frozen=True)
class Relation:
    """A registered relation or a CTE, by name, under an alias (none: the name itself)."""

    name: str
    alias: str | None = None


@dataclass(frozen=True)
class Derived:
    """A query in parentheses as a FROM item: `(query) alias`."""

    query: Query
    alias: str


@dataclass(frozen=True)
class Join:
    """The items `left` (cross joined) and one more joined on a condition. A left join reads
    on after the items before it (`a CROSS JOIN b LEFT JOIN r ON ...`); a full join is one
    parenthesized item."""

    left: tuple[FromItem, ...]
    right: FromItem
    kind: Literal["LEFT", "FULL OUTER"]
    on: str


@dataclass(frozen=True)
class Exists:
    """`[NOT] EXISTS (select)` as a condition."""

    query: Select
    negated: bool = False


@dataclass(frozen=True)
class TieCheck:
    """A QUALIFY that fails the query where two rows of a partition tie in `peers` (the
    window's partition keys and order keys): `ember_tie` notes the tie for the run's
    `$tie` parameter, and the run raises `ties.Tie`."""

    peers: tuple[str, ...]


@dataclass(frozen=True)
class Column:
    text: str
    alias: str | None = None


@dataclass(frozen=True)
class Select:
    columns: tuple[Column, ...]  # none: `1`
    items: tuple[FromItem, ...]  # cross joined
    where: tuple[Condition, ...] = ()  # none: TRUE
    group_by: tuple[str, ...] = ()
    qualify: TieCheck | None = None
    order_by: tuple[str, ...] = ()
    limit: int | None = None
    distinct: bool = False


@dataclass(frozen=True)
class Cte:
    name: str
    query: Query
    materialized: bool = True


@dataclass(frozen=True)
class UnionAll:
    selects: tuple[Select, ...]
    ctes: tuple[Cte, ...] = ()


Query: TypeAlias = "Select | UnionAll | Raw"
FromItem: TypeAlias = "Relation | Derived | Join"
Condition: TypeAlias = "str | Exists"


def render(query: Query) -> str:
    """The query as DuckDB SQL."""
    if isinstance(query, Raw):
        return query.text
    if isinstance(query, UnionAll):
        ctes = "".join(f"WITH {c.name} AS {'MATERIALIZED ' if c.materialized else ''}({render(c.query)}) " for c in query.ctes)
        return ctes + " UNION ALL ".join(render(s) for s in query.selects)
    columns = ", ".join(c.text if c.alias is None else f"{c.text} AS {c.alias}" for c in query.columns) or "1"
    text = f"SELECT {'DISTINCT ' if query.distinct else ''}{columns} FROM {items(query.items)} WHERE {where(query.where)}"
    if query.group_by:
        text += f" GROUP BY {', '.join(query.group_by)}"
    if query.qualify is not None:
        peers = ", ".join(query.qualify.peers)
        text += f" QUALIFY (CASE WHEN count(*) OVER (PARTITION BY {peers}) > 1 THEN ember_tie(${TIE}) ELSE TRUE END)"
    if query.order_by:
        text += f" ORDER BY {', '.join(query.order_by)}"
    if query.limit is not None:
        text += f" LIMIT {query.limit}"
    return text


def items(found: tuple[FromItem, ...]) -> str:
    """FROM items, cross joined (the WHERE conditions join them)."""
    return " CROSS JOIN ".join(_item(i) for i in found)


def where(conditions: tuple[Condition, ...]) -> str:
    return " AND ".join(condition(c) for c in conditions) or "TRUE"


def condition(c: Condition) -> str:
    if isinstance(c, Exists):
        return f"{'NOT ' if c.negated else ''}EXISTS ({render(c.query)})"
    return c


def scalar(query: Select) -> str:
    """A query of one value as an expression."""
    return f"({render(query)})"


def _item(item: FromItem) -> str:
    if isinstance(item, Relation):
        return item.name if item.alias is None else f"{item.name} {item.alias}"
    if isinstance(item, Derived):
        return f"({render(item.query)}) {item.alias}"
    joined = f"{items(item.left)} {item.kind} JOIN {_item(item.right)} ON {item.on}"
    return f"({joined})" if item.kind == "FULL OUTER" else joined
