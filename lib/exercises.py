"""Check a reader's answer to a chapter's exercise: right or wrong, and how far off.

    from lib.exercises import check
    check("ch10.2", 42.4)   # -> right: 42.4 vs the reference 42.43 min for ... (off by 0.06%, allowed 1.0%)

Each part keeps its exercises' reference answers beside its code (``lib/placement/exercises.py`` and
``exercises_break.py``, ``lib/galvatron/exercises.py`` and ``exercises_practice.py``, ``lib/straggler/exercises.py``,
``lib/closing/exercises.py``) as ``ANSWERS``: a dict from the exercise's id
(``ch<chapter>.<k>``, the book's chapter number) to a dict with ``answer`` (a function of no arguments that
computes the reference with the library, never a typed-in number), ``rel_tol`` (or ``abs_tol``), ``unit``,
``what`` and ``stated``: the answer as the chapter's solution text states it (``0.53``, ``"53%"``, ``20``), or
``None`` where the solution's text states no number (its code prints it). An answer passes when it is as close
to the reference as the widest of ``rel_tol``, ``abs_tol`` and the stated answer's own precision, so the
solution's rounded answer passes; the message prints enough digits to tell pass from fail. Every chapter's
solution cells call :func:`check` on their own result and assert it, so a wrong answer key fails CI, and
``tests/test_exercises.py`` checks every stated answer against its key and the solution's text.
Used in: the exercises at the end of every chapter.
"""

from __future__ import annotations

import importlib
import math
import re
import textwrap
from dataclasses import dataclass
from typing import Any, Callable

#: Where each chapter's reference answers live (chapter numbers as in the book's table of contents).
PARTS = {1: "lib.placement.exercises", 2: "lib.placement.exercises", 3: "lib.placement.exercises",
         4: "lib.placement.exercises_break",
         5: "lib.galvatron.exercises", 6: "lib.galvatron.exercises", 7: "lib.galvatron.exercises",
         8: "lib.galvatron.exercises", 9: "lib.galvatron.exercises_practice", 10: "lib.straggler.exercises",
         11: "lib.closing.exercises"}


@dataclass(frozen=True)
class Reference:
    """One exercise's answer key. ``stated`` is the answer as the chapter's solution text states it (``0.53``,
    ``"53%"``, ``20``, ``"1.8e16"``, a label): the check accepts any answer as close to the reference as that
    statement's own precision (half a unit of its last digit), so the solution's own rounded answer passes."""

    id: str
    answer: Callable[[], Any]
    what: str
    unit: str = ""
    rel_tol: float = 1e-3
    abs_tol: float = 0.0
    stated: Any = None


def stated_number(stated: Any) -> tuple[float, float] | None:
    """``(value, precision)`` of a stated number: its value and half a unit of its last significant digit
    (``0.53`` -> (0.53, 0.005); ``"53%"`` -> (0.53, 0.005); ``20`` -> (20, 5); ``"0.9978"`` -> (0.9978, 5e-5);
    ``"1.8e16"`` or ``"1.8 \\times 10^{16}"`` -> (1.8e16, 5e14); ``"50,700"`` or ``"50{,}700"`` -> (50700, 50)).
    A whole number's trailing zeros are not significant ("about 20 ms" is 20 to the nearest ten). ``None`` for
    anything that is not a number."""
    from decimal import Decimal, InvalidOperation

    if isinstance(stated, bool) or not isinstance(stated, (int, float, str)):
        return None
    text = str(stated).strip().replace("{,}", "").replace(",", "").replace("\u2009", "")
    m = re.fullmatch(r"(.+?)\s*(?:\\times|×|x)\s*10\^\{?(-?\d+)\}?", text)  # LaTeX: 1.8 \times 10^{16}
    if m:
        text = f"{m.group(1)}e{m.group(2)}"
    scale = 0
    if text.endswith("%"):
        text, scale = text[:-1].strip(), -2
    try:
        d = Decimal(text)
    except InvalidOperation:
        return None
    if not d.is_finite():
        return None
    exp = d.as_tuple().exponent
    if exp >= 0 and d != 0:  # a whole number: its last non-zero digit is its precision
        exp = d.normalize().as_tuple().exponent
    return float(d.scaleb(scale)), 0.5 * 10.0 ** (exp + scale)


@dataclass(frozen=True)
class Verdict:
    id: str
    right: bool
    given: Any
    expected: Any
    message: str

    def __bool__(self) -> bool:
        return self.right

    def __repr__(self) -> str:  # what a reader sees when a cell ends with check(...)
        return self.message

    def _repr_pretty_(self, p, cycle):  # IPython's display: wrapped to fit a solution's box (78 characters)
        p.text(textwrap.fill(self.message, 78, subsequent_indent="  ", break_on_hyphens=False))


def _chapter(ex_id: str) -> int:
    m = re.fullmatch(r"ch(\d+)\.(\d+)", ex_id) if isinstance(ex_id, str) else None
    if m is None:
        raise ValueError(f"exercise id {ex_id!r}: expected 'ch<chapter>.<k>', e.g. 'ch9.2'")
    chapter = int(m.group(1))
    if chapter not in PARTS:
        raise ValueError(f"exercise id {ex_id!r}: no chapter {chapter}; chapters are {min(PARTS)}-{max(PARTS)}")
    return chapter


def references(chapter: int | None = None) -> dict[str, Reference]:
    """Every exercise's reference (of one chapter, or of the whole book), by id."""
    out = {}
    for module in sorted(set(PARTS.values()) if chapter is None else {PARTS[chapter]}):
        for ex_id, spec in importlib.import_module(module).ANSWERS.items():
            if chapter is None or _chapter(ex_id) == chapter:
                out[ex_id] = Reference(ex_id, **spec)
    return out


def reference(ex_id: str) -> Reference:
    refs = references(_chapter(ex_id))
    if ex_id not in refs:
        raise ValueError(f"no exercise {ex_id!r}; chapter {_chapter(ex_id)} has {', '.join(sorted(refs)) or 'none'}")
    return refs[ex_id]


def _fmt(x: Any) -> str:
    if isinstance(x, float) and x.is_integer() and abs(x) < 1e12:  # a count reads as one: 117964800, not 1.18e+08
        return str(int(x))
    return f"{x:.4g}" if isinstance(x, float) else repr(x) if isinstance(x, str) else str(x)


def as_real(v: Any) -> float | None:
    """``v`` as a Python float when it is one real number -- an int, float, ``Decimal``, ``Fraction``, numpy
    scalar, 0-d (or one-element) array, torch tensor of one element -- else ``None`` (a bool, a string, an array
    of several numbers, a complex number, a value too large for a float). Never raises."""
    import numbers

    if isinstance(v, (bool, str, bytes)) or v is None:
        return None
    try:
        import numpy as np

        if isinstance(v, np.bool_):
            return None
    except ImportError:  # pragma: no cover - numpy is a dependency
        np = None
    try:
        if hasattr(v, "detach") and hasattr(v, "numel"):  # a torch tensor: no import of torch needed
            if v.numel() != 1 or v.dtype.is_complex or str(v.dtype) == "torch.bool":
                return None
            v = v.detach().cpu().reshape(()).item()
        elif np is not None and isinstance(v, (np.ndarray, np.generic)):
            a = np.asarray(v)
            if a.size != 1 or a.dtype.kind not in "iuf":
                return None
            v = a.reshape(()).item()
        from decimal import Decimal

        if isinstance(v, Decimal):
            return float(v)
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            return None
        return float(v)
    except (OverflowError, TypeError, ValueError, ArithmeticError):
        return None


def compare(ref: Reference, given: Any, expected: Any) -> Verdict:
    """``given`` against ``expected``: real numbers within the reference's tolerance (``rel_tol`` of the
    reference, ``abs_tol``, or the precision of the solution's ``stated`` answer, whichever is widest; a float,
    a numpy scalar, a 0-d array, a one-element tensor, a ``Decimal``...), anything else equal; a value that
    cannot be compared (an array, a number too large for a float) is wrong, never an exception. The message
    prints as many digits as it takes to tell the distance from the allowance (off by 0.14%, allowed 0.10%)."""
    unit = f" {ref.unit}" if ref.unit else ""
    g, e = as_real(given), as_real(expected)
    shown = _fmt(g) if g is not None else _show(given)
    if e is not None and not isinstance(expected, bool):
        if g is None:
            return Verdict(ref.id, False, given, expected, f"wrong: {shown} is not one real number that fits a float "
                                                           f"({ref.what}; the reference is {_fmt(e)}{unit})")
        if not math.isfinite(g):
            return Verdict(ref.id, False, given, expected, f"wrong: {shown} is not a finite number "
                                                           f"({ref.what}; the reference is {_fmt(e)}{unit})")
        off = abs(g - e)
        rel, absolute = ref.rel_tol * abs(e), ref.abs_tol
        st = stated_number(ref.stated)
        rounding = st[1] if st is not None else 0.0
        allowed = max(rel, absolute, rounding)
        right = off <= allowed * (1 + 1e-9)  # the slack: a float's last bits, so an allowance's edge passes
        if allowed == rel and rel > 0:  # the relative tolerance binds: percentages of the reference
            a, b = _apart(off / abs(e), ref.rel_tol, lambda x, d: f"{x:.{d}%}")
            how = f"off by {a}, allowed {b}"
        else:
            a, b = _apart(off, allowed, lambda x, d: f"{x:.{d + 1}g}")
            how = f"off by {a}{unit}, allowed {b}{unit}"
            if allowed == rounding and rounding > 0:
                how += f": as precise as the solution's {_stated_text(ref.stated)}"
        verdict = "right" if right else "wrong"
        return Verdict(ref.id, right, given, expected,
                       f"{verdict}: {shown} vs the reference {_fmt(e)}{unit} for {ref.what} ({how})")
    try:
        right = bool(given == expected) and isinstance(given, bool) == isinstance(expected, bool)  # True is not 1
    except Exception:  # an array's ambiguous truth, a comparison that raises: not the expected answer
        right = False
    return Verdict(ref.id, right, given, expected,
                   f"{'right' if right else 'wrong'}: {shown}" + ("" if right else f", expected {_fmt(expected)}")
                   + f" for {ref.what}")


def _apart(off: float, allowed: float, fmt) -> tuple[str, str]:
    """``off`` and ``allowed`` printed with the fewest digits (one to five) at which they differ, so a pass
    never reads "off by 0.1%, allowed 0.1%" beside a fail that reads the same; equal values print alike."""
    for digits in range(1, 6):
        a, b = fmt(off, digits), fmt(allowed, digits)
        if a != b or off == allowed:
            break
    return a, b


def _stated_text(stated: Any) -> str:
    """A stated answer as plain text: LaTeX's ``{,}`` and ``\\times 10^{16}`` as ``,`` and ``e16``."""
    if not isinstance(stated, str):
        return repr(stated) if isinstance(stated, float) else _fmt(stated)
    text = stated.replace("{,}", ",")
    return re.sub(r"\s*\\times\s*10\^\{?(-?\d+)\}?", r"e\1", text)


def _show(v: Any) -> str:
    """A short, safe rendering of a value (a huge int or array is cut, never printed whole)."""
    try:
        text = repr(v) if isinstance(v, str) else str(v)
    except Exception:  # e.g. an int beyond Python's digit limit for str()
        text = f"<{type(v).__name__}>"
    text = " ".join(text.split())
    return text if len(text) <= 40 else text[:37] + "..."


def check(ex_id: str, value: Any) -> Verdict:
    """Your answer ``value`` to exercise ``ex_id`` against the book's reference: right or wrong, and how far."""
    ref = reference(ex_id)
    return compare(ref, value, ref.answer())


#: Parameters that change where files go or what is interactive, never a number an answer depends on.
NEUTRAL_PARAMETERS = ("runs_dir", "live_widgets", "save_profile")


def chapter_defaults(chapter: int) -> dict[str, Any]:
    """The defaults of chapter ``chapter``'s parameters cell (what every answer key assumes), evaluated."""
    import ast

    import papermill

    from lib.rerun.params import ROOT, book_chapters

    path = f"{ROOT}/{book_chapters()[chapter - 1]}.ipynb"
    values: dict[str, Any] = {}
    for name, spec in papermill.inspect_notebook(path).items():
        try:
            values[name] = ast.literal_eval(spec["default"])
        except (ValueError, SyntaxError):
            values[name] = eval(spec["default"], {}, dict(values))  # e.g. model_name = models[0]
    return values


def at_defaults(chapter: int, namespace: dict) -> bool:
    """Whether a chapter runs with the parameters its answer key assumes (those of its parameters cell).

    A chapter rerun with other parameters (``papermill -p``, ``make rerun``) still shows its solutions, but their
    numbers are for the run's parameters, so the solutions' asserts apply only when this is True.
    """
    defaults = chapter_defaults(chapter)
    return all(namespace.get(k) == v for k, v in defaults.items() if k not in NEUTRAL_PARAMETERS)
