"""docs/model.md and docs/architecture.md: every section the code, tests, notebooks and README
cite exists, and pytest runs the docs' examples (and no other Markdown) as doctests."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
CITE = re.compile(r"docs/(model|architecture)\.md\s+§\s*(\d+)((?:\s*(?:,|–|-|…|and)\s*§?\s*\d+)*)")
CITING = ("mqjoin", "widgets", "datasets", "benchmarks", "tests", "notebooks")


def _sections(doc: str) -> set[int]:
    return {int(n) for n in re.findall(r"^## §(\d+) ", (DOCS / f"{doc}.md").read_text(), re.M)}


def test_the_docs_have_their_numbered_sections():
    assert _sections("model") == set(range(1, 8))
    assert _sections("architecture") == set(range(1, 6))


def _citations():
    files = [REPO / "README.md", *(p for d in CITING for p in (REPO / d).rglob("*")
                                   if p.suffix in (".py", ".ipynb", ".md") and ".venv" not in p.parts)]
    for path in files:
        for m in CITE.finditer(path.read_text()):
            numbers = [int(m[2]), *(int(n) for n in re.findall(r"\d+", m[3]))]
            yield path.relative_to(REPO), m[1], numbers


def test_every_cited_section_exists():
    cited = list(_citations())
    assert len(cited) > 100  # the code cites the docs throughout; a broken pattern would find none
    sections = {doc: _sections(doc) for doc in ("model", "architecture")}
    missing = [(str(path), doc, n) for path, doc, numbers in cited for n in numbers if n not in sections[doc]]
    assert missing == []


def test_pytest_doctests_the_docs_and_no_other_markdown():
    ini = (REPO / "pyproject.toml").read_text()
    addopts = re.search(r'^addopts = "([^"]*)"', ini, re.M)[1]
    testpaths = re.findall(r'"([^"]+)"', re.search(r"^testpaths = \[([^\]]*)\]", ini, re.M)[1])
    assert "--doctest-glob=*.md" in addopts.split() and "docs" in testpaths
    stray = [str(p.relative_to(REPO)) for d in testpaths if d != "docs" for p in (REPO / d).rglob("*.md")]
    assert stray == [], "pytest would run these as doctests: move them out of its testpaths"
    for doc in ("model", "architecture"):
        assert ">>> " in (DOCS / f"{doc}.md").read_text()
