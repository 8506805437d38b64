"""The README's operator table is generated from the code; this keeps them in step."""

from pathlib import Path

from ember.plan.ir import operator_table

README = Path(__file__).resolve().parents[1] / "README.md"


def test_operator_table_matches_code() -> None:
    text = README.read_text()
    start, end = "<!-- operators:start -->\n", "<!-- operators:end -->"
    body = text[text.index(start) + len(start) : text.index(end)]
    assert body.strip() == operator_table().strip(), "regenerate with: python -m ember.plan.ir"


def test_readme_opens_with_the_two_commands() -> None:
    head = README.read_text().splitlines()[:6]
    assert "make demo" in "\n".join(head) and "make test" in "\n".join(head)
