"""What the chapters display: figures (:mod:`~posenc.display.plots`) and captioned tables
(:mod:`~posenc.display.table`).

Both sit above the core and below the book and the benchmark; the chapters name them
``pe.plots`` and ``pe.table`` (``from posenc import plots`` works too).
"""
