"""docs/arrays.md's coverage table is generated from the code; this keeps them in step."""

from __future__ import annotations

from pathlib import Path

from ember.arrays.coverage import BEGIN, END, markdown, table

DOC = Path(__file__).resolve().parents[2] / "docs" / "arrays.md"


def test_coverage_table_matches_code() -> None:
    text = DOC.read_text()
    body = text[text.index(BEGIN) + len(BEGIN) : text.index(END)]
    rows = table()
    assert len(rows) >= 136
    assert all(r.safe is not False for r in rows), "a rule misses a dependency"
    assert body.strip() == markdown(rows).strip(), "regenerate: python -m ember.arrays.coverage"
