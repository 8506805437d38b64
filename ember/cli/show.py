"""How the command prints: rich tables for people, JSON for scripts."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
from rich.console import Console
from rich.table import Table


def human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def rows_table(title: str, rows: pa.Table) -> Table:
    """An Arrow table as a rich table (values as text, nulls shown as NULL)."""
    table = Table(title=title, title_justify="left", show_lines=False)
    for name in rows.column_names:
        table.add_column(name, overflow="fold")
    for row in rows.to_pylist():
        table.add_row(*("NULL" if v is None else str(v) for v in row.values()))
    return table


def dict_table(title: str, records: list[dict[str, Any]]) -> Table:
    table = Table(title=title, title_justify="left")
    for name in records[0] if records else []:
        table.add_column(name, overflow="fold")
    for r in records:
        table.add_row(*("" if v is None else str(v) for v in r.values()))
    return table


def print_json(out: Console, doc: Any) -> None:
    """JSON on stdout, unwrapped (dates, decimals and the like as strings)."""
    out.file.write(json.dumps(doc, default=str, indent=1) + "\n")
