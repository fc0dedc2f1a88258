"""MkDocs hooks (see mkdocs.yml): recordmill's docstrings name code with Sphinx roles
(:func:`write`, :class:`~recordmill.engine.settings.WriteSettings`), which Markdown leaves as
text before a code span; here they become the code span alone, the ``~`` form showing only the
last part of the name, as Sphinx shows it."""

import re

ROLE = re.compile(r":(?:func|class|meth|mod|data|attr|exc|obj):<code>(~?)([^<]*)</code>")


def _code(match: re.Match[str]) -> str:
    name = match.group(2).rsplit(".", 1)[-1] if match.group(1) else match.group(2)
    return f"<code>{name}</code>"


def on_page_content(html: str, **_: object) -> str:
    return ROLE.sub(_code, html)
