"""Parallelism, Rebuilt: the shared library behind the book.

One concept per module (see DESIGN.md in the book's repository):
``graph``, ``gpt``, ``hardware``, ``placement/``, ``galvatron/``, ``straggler``, ``viz``, ``runlog``.
Simulators and searches are numpy-only; torch is imported only where a real step runs.
"""

__version__ = "0.1.0"
