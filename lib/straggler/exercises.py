"""Reference answers to the exercises of Part III (chapter 8), computed with the library; see lib/exercises.py.

Used in: the exercises at the end of book/stragglers/01_the_one_slow_gpu.
"""

from __future__ import annotations

ANSWERS: dict[str, dict] = {}
