"""Keep the HTML book self-contained and its browser console clean when read offline.

Two small repairs, both checked by ``tools/browser_check.py``:

- matplotlib's animation player (``to_jshtml``) links Font Awesome 4 from a CDN for its
  button icons. The theme already ships Font Awesome, which draws those icons, so the link
  is dropped from the stored outputs when the page is written: the book fetches nothing.
- sphinx-thebe registers its configuration script twice (with Sphinx 7.4), and the second
  copy's ``const`` declarations throw a SyntaxError on every page. Each page keeps the
  first copy of every script.
"""

from __future__ import annotations

import os
import re

from docutils import nodes

CDN_STYLESHEET = re.compile(
    r'<link\b[^>]*href="https?://[^"]*font-awesome[^"]*"[^>]*>\s*', re.IGNORECASE
)


def drop_cdn_stylesheets(app, doctree, docname) -> None:
    """Remove Font Awesome stylesheet links from raw HTML outputs."""
    for node in list(doctree.findall(nodes.raw)):
        if "html" not in node.get("format", "").split():
            continue
        text = node.astext()
        cleaned = CDN_STYLESHEET.sub("", text)
        if cleaned != text:
            node.replace(node.children[0], nodes.Text(cleaned))


def _key(script) -> tuple:
    """What the script tag will say: its file (``None`` and ``""`` both mean inline), its
    attributes and its body."""
    if isinstance(script, str):
        return (script, ())
    attributes = getattr(script, "attributes", {}) or {}
    filename = os.fspath(script.filename) if script.filename else ""
    return (filename, tuple(sorted((k, str(v)) for k, v in attributes.items())))


def drop_repeated_scripts(app, pagename, templatename, context, doctree) -> None:
    """Keep the first of identical scripts (same file or body, same attributes)."""
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, unique = set(), []
    for script in scripts:
        key = _key(script)
        if key not in seen:
            seen.add(key)
            unique.append(script)
    context["script_files"] = unique


def setup(app):
    app.connect("doctree-resolved", drop_cdn_stylesheets)
    app.connect("html-page-context", drop_repeated_scripts)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
