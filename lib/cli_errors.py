"""One error convention for every command line in ``lib``: a user's mistake is one line, a bug is a traceback.

A user error (``ValueError``, ``TypeError``, a missing or unreadable file, bad JSON, a pydantic
``ValidationError``) prints ``error: <what was wrong>; <what is allowed>`` to stderr and exits 2. Anything
else is a bug: its traceback and exit 1, as Python does. ``--debug`` anywhere on the command line shows the
traceback of a user error too. Under ``torchrun`` only rank 0 prints (every rank still exits 2).

    def main(argv=None) -> int: ...
    if __name__ == "__main__":
        sys.exit(run_cli(main))

This module imports nothing from ``lib`` (every CLI uses it; it must not close an import circle).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

USAGE_EXIT, FAILED_EXIT = 2, 1
USER_ERRORS = (ValueError, TypeError, FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError)


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose mistakes are ``ValueError`` (one line through ``run_cli``), not usage + exit."""

    def error(self, message):
        raise ValueError(f"{message}; see {self.prog} --help")


def _is_rank_zero() -> bool:
    return os.environ.get("RANK", "0") == "0"


def one_line(e: BaseException) -> str:
    """The one line for a user error: pydantic errors described field by field, file errors with the path."""
    if _is_validation_error(e):
        return describe_validation_error(e)
    if isinstance(e, OSError) and e.filename is not None:
        return f"{e.filename}: {e.strerror or e}"
    if isinstance(e, json.JSONDecodeError):
        return f"not valid JSON: {e.msg} at line {e.lineno} column {e.colno}"
    return " ".join(str(e).split()) or type(e).__name__


def run_cli(main, argv=None, debug: bool | None = None) -> int:
    """``main(argv)``'s exit code; a user error becomes one line on stderr and exit 2 (see the module doc)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if debug is None:
        debug = "--debug" in argv
    try:
        return int(main(argv) or 0)
    except USER_ERRORS as e:  # includes json.JSONDecodeError and pydantic.ValidationError (both ValueErrors)
        if debug:
            raise
        if _is_rank_zero():
            print(f"error: {one_line(e)}", file=sys.stderr, flush=True)
        return USAGE_EXIT


def _is_validation_error(e) -> bool:
    return type(e).__name__ == "ValidationError" and hasattr(e, "errors")


def _json(v) -> str:
    try:
        return json.dumps(v, allow_nan=True)[:80]
    except (TypeError, ValueError):
        return repr(v)[:80]


def _loc(loc) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(the whole document)"


_WHAT = {"int_type": "is not an integer", "int_from_float": "is not an integer", "int_parsing": "is not an integer",
         "bool_type": "is not true or false", "bool_parsing": "is not true or false",
         "float_type": "is not a number", "float_parsing": "is not a number", "finite_number": "is not finite",
         "greater_than_equal": "is too small", "greater_than": "is too small", "less_than_equal": "is too large",
         "less_than": "is too large", "list_type": "is not a list", "string_type": "is not a string",
         "dict_type": "is not an object", "model_type": "is not an object", "too_short": "is too short",
         "too_long": "is too long", "literal_error": "is not one of the allowed values"}


def describe_validation_error(e, source: str | None = None, allowed: dict | None = None) -> str:
    """``<source>: <field>: <value> <what is wrong>; <what is allowed>`` for the first error of a pydantic
    ``ValidationError``; ``allowed`` maps a top-level field to its allowed values in words."""
    err = e.errors()[0]
    loc, kind = _loc(err["loc"]), err["type"]
    head = f"{source}: " if source else ""
    if kind == "missing":
        return f"{head}missing field {loc}"
    if kind == "extra_forbidden":
        return f"{head}unknown field {loc}"
    if kind == "value_error":  # a validator's own message, which says what is allowed
        return f"{head}{loc}: {err.get('ctx', {}).get('error', err['msg'])}"
    text = f"{loc}: {_json(err.get('input'))} {_WHAT[kind]}" if kind in _WHAT else f"{loc}: {err['msg']}"
    field = next((p for p in reversed(err["loc"]) if isinstance(p, str)), None)  # the innermost named field
    rule = (allowed or {}).get(field)
    if rule:
        return f"{head}{text}; {field} must be {rule}"
    return f"{head}{text}; {err['msg'][:1].lower()}{err['msg'][1:]}" if kind in _WHAT else head + text


# --- numeric flags: strict type, finite, within a range that says why (raise ValueError naming the flag) ---

def check_int(flag: str, value, lo: int | None = None, hi: int | None = None, why: str = "") -> int:
    """``value`` if it is an int (not a bool) within ``[lo, hi]``; else ``ValueError`` naming ``flag``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{flag}: {value!r} is not an integer")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise ValueError(f"{flag}: {value} is out of range; allowed: {_range('[', lo, hi)}{_why(why)}")
    return value


def check_float(flag: str, value, lo: float | None = None, hi: float | None = None, lo_open: bool = False,
                why: str = "") -> float:
    """``value`` as a finite float within ``[lo, hi]`` (``(lo, hi]`` with ``lo_open``); else ``ValueError``."""
    import math

    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{flag}: {value!r} is not a number")
    value = float(value)
    allowed = _range("(" if lo_open else "[", lo, hi)
    if not math.isfinite(value):
        raise ValueError(f"{flag}: {value} is not finite; allowed: {allowed}{_why(why)}")
    if (lo is not None and (value < lo or (lo_open and value == lo))) or (hi is not None and value > hi):
        raise ValueError(f"{flag}: {value:g} is out of range; allowed: {allowed}{_why(why)}")
    return value


def _range(open_bracket: str, lo, hi) -> str:
    def fmt(x, unbounded):
        return unbounded if x is None else (str(x) if isinstance(x, int) else f"{x:g}")

    return f"{open_bracket}{fmt(lo, '-inf')}, {fmt(hi, 'inf')}]"


def _why(why: str) -> str:
    return f" ({why})" if why else ""
