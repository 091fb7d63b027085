"""Reference answers to the exercises of Part II (chapters 4-7), computed with the library; see lib/exercises.py.

Used in: the exercises at the end of book/galvatron/01_the_space, 02_the_cost_model, 03_the_search and 04_from_plan_to_run.
"""

from __future__ import annotations

ANSWERS: dict[str, dict] = {}
