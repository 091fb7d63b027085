"""Range checks for numeric command-line flags: strict type, finite, within a range that says why.

Each raises ``ValueError`` naming the flag, which ``lib.cli_errors.run_cli`` prints as one line (exit 2):
``--lr: inf is not finite; allowed: (0, 1] (Adam's step; above 1 the placer diverges)``. Imports nothing
from ``lib``. Used in: ``python -m lib.placement``, ``python -m lib.straggler``.
"""

from __future__ import annotations

import math
import numbers


def check_int(flag: str, value, lo: int | None = None, hi: int | None = None, why: str = "") -> int:
    """``value`` if it is an integer (not a bool) within ``[lo, hi]``; else ``ValueError`` naming ``flag``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{flag}: {value!r} is not an integer; allowed: {_range('[', lo, hi)}{_why(why)}")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise ValueError(f"{flag}: {value} is out of range; allowed: {_range('[', lo, hi)}{_why(why)}")
    return int(value)


def check_float(flag: str, value, lo: float | None = None, hi: float | None = None, lo_open: bool = False,
                why: str = "") -> float:
    """``value`` as a finite float within ``[lo, hi]`` (``(lo, hi]`` with ``lo_open``); else ``ValueError``."""
    allowed = _range("(" if lo_open else "[", lo, hi)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{flag}: {value!r} is not a number; allowed: {allowed}{_why(why)}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{flag}: {value} is not finite; allowed: {allowed}{_why(why)}")
    if (lo is not None and (value < lo or (lo_open and value == lo))) or (hi is not None and value > hi):
        raise ValueError(f"{flag}: {value:g} is out of range; allowed: {allowed}{_why(why)}")
    return value


def _range(open_bracket: str, lo, hi) -> str:
    def fmt(x, unbounded):
        return unbounded if x is None else (str(x) if isinstance(x, numbers.Integral) else f"{x:g}")

    return f"{open_bracket}{fmt(lo, '-inf')}, {fmt(hi, 'inf')}]"


def _why(why: str) -> str:
    return f" ({why})" if why else ""
