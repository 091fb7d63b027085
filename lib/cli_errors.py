"""One error convention for every command line in ``lib``: a user's mistake is one line, a bug is a traceback.

A user error is raised as :class:`UserError` where the input is checked (a flag, a file read back, an output
location), or is a file the user named that cannot be opened or written (an ``OSError`` carrying its file name:
missing, not a folder, read-only, full disk), or a pydantic ``ValidationError`` / ``json.JSONDecodeError``
from reading a user's file. It prints ``error: <what was wrong>; <what is allowed>`` to stderr and exits 2.
Anything else -- a plain ``ValueError`` or ``TypeError`` included -- is a bug: its traceback and exit 1, as
Python does. ``--debug`` anywhere on the command line shows the traceback of a user error too. Under a real
process group (``torchrun``, or ``torch.distributed`` initialised) only rank 0 prints (every rank still exits
2); a ``RANK`` left in the environment alone silences nothing.

    def main(argv=None) -> int: ...
    if __name__ == "__main__":
        sys.exit(run_cli(main))

This module imports nothing from ``lib`` (every CLI uses it; it must not close an import circle).
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import sys

USAGE_EXIT, FAILED_EXIT = 2, 1


#: The classes among which :func:`is_user_error` picks the user's (for ``except USER_ERRORS as e:`` followed by
#: ``if not is_user_error(e): raise``).
USER_ERRORS = None  # set below, once UserError exists


class UserError(ValueError):
    """A user's mistake, raised where the input is checked: one line through :func:`run_cli`, exit 2.

    A ``ValueError`` so that library callers which catch ``ValueError`` keep working; :func:`run_cli` treats only
    this class (not every ``ValueError``) as the user's."""


USER_ERRORS = (UserError, OSError, ValueError)

#: ``OSError`` numbers that, with a file name, mean the user's path is unusable (not a bug of ours).
PATH_ERRNOS = frozenset({errno.ENOENT, errno.EACCES, errno.EPERM, errno.EISDIR, errno.ENOTDIR, errno.EEXIST,
                         errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.ENAMETOOLONG, errno.EINVAL,
                         errno.ELOOP, errno.EFBIG})


def is_user_error(e: BaseException) -> bool:
    """Whether ``run_cli`` reports ``e`` as the user's mistake (one line, exit 2) rather than a bug."""
    if isinstance(e, UserError) or _is_validation_error(e) or isinstance(e, json.JSONDecodeError):
        return True
    return isinstance(e, OSError) and e.filename is not None and e.errno in PATH_ERRNOS


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose mistakes are :class:`UserError` (one line through ``run_cli``), not usage."""

    def error(self, message):
        raise UserError(f"{message}; see {self.prog} --help")


def in_process_group() -> bool:
    """Whether this process is one rank of a real process group: ``torch.distributed`` is initialised, or a
    launcher (``torchrun``/``lib.galvatron launch``) started it (``TORCHELASTIC_RUN_ID`` beside ``RANK`` and a
    ``WORLD_SIZE`` above 1)."""
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return dist.get_world_size() > 1
    except Exception:  # a half-torn-down group: fall back on the launcher's variables
        pass
    env = os.environ
    try:
        return "TORCHELASTIC_RUN_ID" in env and "RANK" in env and int(env.get("WORLD_SIZE", "1")) > 1
    except ValueError:
        return False


def _is_rank_zero() -> bool:
    """Prints the error line: every process, except the ranks other than 0 of a real process group."""
    if not in_process_group():
        return True
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_initialized():
            return dist.get_rank() == 0
    except Exception:
        pass
    return os.environ.get("RANK", "0").strip() == "0"


def one_line(e: BaseException) -> str:
    """The one line for a user error: pydantic errors described field by field, file errors with the path."""
    if _is_validation_error(e):
        return describe_validation_error(e)
    if isinstance(e, OSError) and e.filename is not None:
        return f"{e.filename}: {e.strerror or e}" + (f" -> {e.filename2}" if e.filename2 else "")
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
    except (UserError, OSError, ValueError) as e:  # only the user's (is_user_error); the rest is a bug
        if debug or not is_user_error(e):
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


# --- numeric flags: strict type, finite, within a range that says why (raise UserError naming the flag) ---

def check_int(flag: str, value, lo: int | None = None, hi: int | None = None, why: str = "") -> int:
    """``value`` if it is an int (not a bool) within ``[lo, hi]``; else :class:`UserError` naming ``flag``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise UserError(f"{flag}: {value!r} is not an integer")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise UserError(f"{flag}: {value} is out of range; allowed: {_range('[', lo, hi)}{_why(why)}")
    return value


def check_float(flag: str, value, lo: float | None = None, hi: float | None = None, lo_open: bool = False,
                why: str = "") -> float:
    """``value`` as a finite float within ``[lo, hi]`` (``(lo, hi]`` with ``lo_open``); else :class:`UserError`."""
    import math

    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UserError(f"{flag}: {value!r} is not a number")
    value = float(value)
    allowed = _range("(" if lo_open else "[", lo, hi)
    if not math.isfinite(value):
        raise UserError(f"{flag}: {value} is not finite; allowed: {allowed}{_why(why)}")
    if (lo is not None and (value < lo or (lo_open and value == lo))) or (hi is not None and value > hi):
        raise UserError(f"{flag}: {value:g} is out of range; allowed: {allowed}{_why(why)}")
    return value


def _range(open_bracket: str, lo, hi) -> str:
    def fmt(x, unbounded):
        return unbounded if x is None else (str(x) if isinstance(x, int) else f"{x:g}")

    return f"{open_bracket}{fmt(lo, '-inf')}, {fmt(hi, 'inf')}]"


def _why(why: str) -> str:
    return f" ({why})" if why else ""
