"""The README's operator table is generated from the code; this keeps them in step. The
docs' relative links must point at files (and headings) that exist."""

import re
from pathlib import Path

from ember.plan.ir import operator_table

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)


def test_operator_table_matches_code() -> None:
    text = README.read_text()
    start, end = "<!-- operators:start -->\n", "<!-- operators:end -->"
    body = text[text.index(start) + len(start) : text.index(end)]
    assert body.strip() == operator_table().strip(), "regenerate with: python -m ember.plan.ir"


def test_readme_opens_with_the_two_commands() -> None:
    head = README.read_text().splitlines()[:6]
    assert "make demo" in "\n".join(head) and "make test" in "\n".join(head)


def _docs() -> list[Path]:
    """README.md and docs/**/*.md, except the generated benchmark pages (their own helper
    keeps those)."""
    pages = [README, *sorted((ROOT / "docs").rglob("*.md"))]
    return [p for p in pages if not p.relative_to(ROOT).as_posix().startswith("docs/benchmarks")]


def _prose(text: str) -> str:
    """The text without fenced code blocks and inline code, where `](` means nothing."""
    return CODE.sub("", FENCE.sub("", text))


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces as dashes, `-n` on repeats."""
    seen: dict[str, int] = {}
    found = set()
    for title in HEADING.findall(FENCE.sub("", page.read_text())):
        slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        found.add(slug if n == 0 else f"{slug}-{n}")
    return found


def test_relative_links_point_at_existing_files() -> None:
    broken = []
    for page in _docs():
        for target in LINK.findall(_prose(page.read_text())):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            where = f"{page.relative_to(ROOT)}: {target}"
            if not dest.exists():
                broken.append(f"{where} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                broken.append(f"{where} (no such heading)")
    assert not broken, "broken links:\n" + "\n".join(broken)
