"""docs/ and the README state what the committed results say: every rendered table equals its
rendering."""

from __future__ import annotations

from benchmarks.render_docs import _BLOCK, PAGES, RENDERERS, render


def test_every_rendered_table_of_the_docs_equals_its_results() -> None:
    pages = {page.name: page.read_text() for page in PAGES}
    used = {m.group(2) for text in pages.values() for m in _BLOCK.finditer(text)}
    assert used == set(RENDERERS)  # every renderer has its table, and no table lacks one
    assert {name: render(text) == text for name, text in pages.items()} == dict.fromkeys(
        pages, True
    )
