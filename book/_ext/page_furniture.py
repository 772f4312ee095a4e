"""Page furniture the theme does not give: an "Open in Colab" badge under every chapter's
title, and one search field per page.

- The badge links the chapter's notebook in Colab. Its address is built from the same
  settings as the theme's launch menu (``repository.url``, ``branch`` and ``path_to_book``
  in ``_config.yml``), so the repository URL is still written once.
- sphinx-book-theme 1.x keeps its search field in the sidebar, and pydata-sphinx-theme 0.16
  adds a second one to the header band ("navbar_persistent"); the header's is dropped.
"""

from __future__ import annotations

import html

from docutils import nodes

COLAB = "https://colab.research.google.com/github"


def one_search_field(app, config) -> None:
    """Drop the header band's search field; the sidebar keeps its own."""
    config.html_theme_options["navbar_persistent"] = []


def colab_url(options: dict, docname: str) -> str:
    """The Colab address of a notebook page, from the theme's repository settings."""
    repository = options["repository_url"].rstrip("/").removeprefix("https://github.com/")
    branch = options.get("repository_branch") or "main"
    folder = (options.get("path_to_docs") or "").strip("/")
    path = f"{folder}/{docname}.ipynb" if folder else f"{docname}.ipynb"
    return f"{COLAB}/{repository}/blob/{branch}/{path}"


def add_colab_badge(app, doctree, docname) -> None:
    """Put the badge right under the title of every notebook page."""
    if not str(app.env.doc2path(docname)).endswith(".ipynb"):
        return
    url = colab_url(app.config.html_theme_options, docname)
    badge = nodes.raw(
        "",
        f'<p class="colab-badge"><a href="{html.escape(url)}" target="_blank" '
        'rel="noopener">Open this chapter in Colab</a> to run it and change it.</p>',
        format="html",
    )
    for section in doctree.findall(nodes.section):
        title = next(iter(section.findall(nodes.title)), None)
        if title is not None:
            title.parent.insert(title.parent.index(title) + 1, badge)
            return


def setup(app):
    app.connect("config-inited", one_search_field)
    app.connect("doctree-resolved", add_colab_badge)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
