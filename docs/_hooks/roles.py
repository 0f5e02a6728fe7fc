"""mkdocs hook: the Sphinx roles of the docstrings (``:class:`~streamtape.Cassette```) as code.

The package's docstrings cross-reference with reST roles, which mkdocstrings
renders as their text (``:class:`` then the target in code). This turns each
into the target alone, shortened as Sphinx shortens ``~a.b.C`` to ``C``.
"""

from __future__ import annotations

import re
from typing import Any

ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|exc|obj|const|py:\w+):<code>(~?)([^<]+)</code>")


def _short(m: re.Match[str]) -> str:
    target = m.group(2)
    return f"<code>{target.rsplit('.', 1)[-1] if m.group(1) else target}</code>"


def on_page_content(html: str, **kwargs: Any) -> str:
    return ROLE.sub(_short, html)
