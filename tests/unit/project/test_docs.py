"""The docs' shell examples, found and accounted for (running them is in tests/project/test_docs.py)."""

from __future__ import annotations

import shutil

from tests.support.doc_examples import PAGES, examples

SKIP_LIMIT = 8


def test_few_examples_are_skipped_and_each_says_why() -> None:
    skipped = [e for page in PAGES for e in examples(page) if e.skip is not None and not e.file]
    assert len(skipped) <= SKIP_LIMIT, [f"{e.page.name}:{e.line}: {e.skip}" for e in skipped]
    assert all(e.skip != "(no reason given)" for e in skipped)


def test_the_examples_are_found() -> None:
    """The parser sees the examples (a changed fence style must not make this test pass vacuously)."""
    counted = {page.name: sum(len(e.commands) for e in examples(page)) for page in PAGES}
    assert counted["cli.md"] >= 40 and counted["opencode.md"] >= 10, counted
    assert shutil.which("bash")
