"""posenc.book: the chapters' scenery, one module per chapter or topic.

Views, figures, animations, playgrounds, the summary and the claims. Each module imports
the core (``posenc``) and :mod:`posenc.display.plots`; the core never imports this subpackage. A
chapter imports what it draws with, e.g. ``from posenc.book import rope_views``.

- ``property_table`` (chapter 2): the five properties, one measure per column;
- ``bits`` (chapter 3): how the bits of a binary position change;
- ``absolute_animations`` (3): the integer and binary animations;
- ``waves`` (4): sine waves and their explorer;
- ``sinusoidal_views`` (5): views of the sinusoidal encoding;
- ``shift`` (6): the symbolic derivation "a shift is a rotation";
- ``rotation_explorer`` (6): the rotation playground;
- ``relative_views`` (7): relative methods' tables, figures and shift experiment;
- ``context`` (8): the four terms of a score with additive encodings;
- ``rope_views`` (9): RoPE's playground, animation and demonstrations;
- ``llama_rope`` (10): RoPE as Llama 3.2 runs it, next to transformers;
- ``rope_nd_views`` (11): grid checks of RoPE in n dimensions;
- ``frequencies`` (12): periods, decay bound, context extension;
- ``precision_views`` (14): tables and figures of low-precision RoPE;
- ``trained`` (15): RoPE measured inside SmolLM2-135M, a trained model;
- ``summary`` (16): the property table of every scheme and the road map;
- ``explorers`` (4, 5, 6, 9, 12): the playgrounds as sliders that run in the page, with
  no kernel;
- ``checks`` (every chapter): a check's printed line, the measured value beside its verdict;
- ``claims``, ``claim_checks``, ``claims_tables``: every claim of the sources the book
  checks, the one function that settles each (run by its chapter, by chapter 17 and for
  the appendix), and their tables.
"""

from posenc._extras import require

require("posenc.book", "numpy", "matplotlib", "sympy", "ipywidgets", "transformers")
