"""Compact HTML for notebooks (`_repr_html_`): counts first, then the first few rows."""

from __future__ import annotations

from html import escape

import pyarrow as pa

PREVIEW = 5


def render(title: str, counts: list[tuple[str, int]], previews: list[tuple[str, pa.Table]]) -> str:
    """A heading, a two-column table of counts, and up to `PREVIEW` rows of each table."""
    parts = [f"<div class='ember'><b>{escape(title)}</b>"]
    if counts:
        cells = "".join(f"<tr><td>{escape(name)}</td><td>{n:,}</td></tr>" for name, n in counts)
        parts.append(f"<table><tr><th>of</th><th>rows</th></tr>{cells}</table>")
    for caption, table in previews:
        shown = table.slice(0, PREVIEW)
        more = f" (first {PREVIEW} of {table.num_rows:,})" if table.num_rows > PREVIEW else ""
        parts.append(f"<p>{escape(caption)}{more}</p>")
        parts.append(shown.to_pandas().to_html(index=False, na_rep="null", max_cols=12))
    parts.append("</div>")
    return "".join(parts)
