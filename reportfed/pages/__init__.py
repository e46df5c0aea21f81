"""The pages reportfed writes, each one self-contained HTML file: the review page of
``reportfed label --review`` (:mod:`reportfed.pages.review`) and the run report of a federation
or of ``reportfed train --report`` (:mod:`reportfed.pages.run_report`). Both are rendered from
the Jinja2 templates in ``templates/`` (one shared ``page.html`` and its macros), with
autoescaping on: a report's text, a label or a node name shows as text, never as markup."""

from __future__ import annotations

from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from reportfed.core.metrics import FEW_POSITIVES

__all__ = ["FEW_POSITIVES", "render_page", "template_text"]

_ENV = Environment(
    loader=PackageLoader("reportfed.pages"),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)


def render_page(template: str, **context: Any) -> str:
    """The page ``template`` (a file of ``templates/``) rendered with ``context``, autoescaped."""
    return _ENV.get_template(template).render(**context)


def template_text(name: str) -> Markup:
    """A file of ``templates/`` as it is (a page's script), marked safe to place in a page."""
    assert _ENV.loader is not None
    return Markup(_ENV.loader.get_source(_ENV, name)[0])
