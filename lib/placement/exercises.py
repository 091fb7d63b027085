"""Reference answers to the exercises of Part I (chapters 1-3), computed with the library; see lib/exercises.py.

Used in: the exercises at the end of book/placement/01_the_game, 02_the_placer and 03_colocation.
"""

from __future__ import annotations

ANSWERS: dict[str, dict] = {}
