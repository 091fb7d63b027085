"""Small helpers every chapter uses: provenance labels, computed prose numbers (glue), run mode.

Simulated is never presented as measured: every number a chapter prints carries one of the labels below.
Used in: every chapter.
"""

from __future__ import annotations

import os
from typing import Any

MODES = ("sim", "real", "auto")


def measured(device: str) -> str:
    """Label for a number measured on this kernel, e.g. ``measured on cuda:0 (NVIDIA H200)``."""
    return f"measured on {device}"


def simulated(profile: str, kind: str = "hardware profile") -> str:
    """Label for a number predicted by a simulator or cost model.

    ``kind`` says what ``profile`` names: a ``"hardware profile"`` from data/hardware/ (the default), or e.g.
    ``"model"`` for an analytic model that has no hardware behind it (Part III).
    """
    return f"simulated with {kind} {profile}"


def quoted(source: str) -> str:
    """Label for a number copied from a seed document or a paper."""
    return f"quoted from {source}"


def signed_pct(x: float) -> str:
    """``x`` as a signed percentage with one decimal, ``+4.7%``; a value that rounds to zero is ``+0.0%``,
    never ``-0.0%``."""
    return f"{x:+.1%}" if round(x * 100, 1) != 0 else "+0.0%"


def glue(name: str, value: Any, display: bool = False) -> Any:
    """Make ``value`` available to the chapter's prose as ``{glue:}`name``` (myst-nb).

    Outside a book build (Colab, plain Jupyter without myst-nb) it just returns ``value``.
    """
    try:
        from myst_nb import glue as _glue
    except ImportError:  # Colab and bare kernels do not have myst-nb
        return value
    # a str would be shown as its repr, quotes included ('30%'); glue text that shows as itself
    _glue(name, _Text(value) if isinstance(value, str) else value, display=display)
    return value


class _Text(str):
    """A string whose plain-text display shows the string itself, without quotes, in the built page.

    myst-nb's ``{glue:text}`` role reads the glued text/plain back with ``ast.literal_eval`` and prints the
    result, so a plain ``32,768`` would come back as the tuple ``(32, 768)`` and ``0.50`` as ``0.5``. Such
    text, which Python would read as another value, is displayed quoted: the role then reads back the string
    itself. Any other text is displayed bare. Chapters paste with ``{glue:text}`` only: the ``{glue:}`` role
    shows the text/plain as it is, and would show the quotes (tests/test_check_glued.py holds this).
    """

    def __repr__(self) -> str:
        text = str.__str__(self)
        return text if reads_back_as_itself(text) else str.__repr__(text)


def reads_back_as_itself(text: str) -> bool:
    """Whether ``text``, glued bare, shows as itself on the page: myst-nb's ``{glue:text}`` reads it back with
    ``ast.literal_eval`` (falling back to the text when that fails) and prints ``str()`` of the result."""
    import ast

    try:
        value = ast.literal_eval(text)
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        return True
    return str(value) == text


def resolve_mode(mode: str, n_real_devices: int, needed: int) -> str:
    """Turn the chapter parameter ``mode`` into ``"sim"`` or ``"real"``.

    ``"auto"`` picks ``"real"`` when at least ``needed`` real devices are present, else ``"sim"``.
    ``"real"`` with too few devices is an error rather than a silent fallback.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}; got {mode!r}")
    if mode == "auto":
        return "real" if n_real_devices >= needed else "sim"
    if mode == "real" and n_real_devices < needed:
        raise ValueError(f"mode='real' needs at least {needed} devices; this kernel has {n_real_devices}")
    return mode


def in_ci() -> bool:
    """True under CI or a book build (set ``CI=true``); chapters may shorten live-only extras then."""
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


#: Where a chapter's downloadable run logs go, relative to the chapter's folder (git-ignored; the page links
#: ``{download}`runlogs/<chapter>.zip```; a replay puts the rerun's logs there instead).
RUNLOGS_DIR = "runlogs"


def runlogs_zip_name(chapter: str) -> str:
    """The download a chapter's page links for its run logs, relative to the chapter's folder."""
    return f"{RUNLOGS_DIR}/{os.path.basename(chapter)}.zip"


#: What a run-log download never holds: writers' locks, temporary files, and training checkpoints (the placer's
#: weights and optimiser state, tens of MB each: not a log, and nothing a reader needs to redraw a figure).
NOT_LOGS = (".lock", ".tmp", ".ckpt.pt", ".partial.ipynb")


def zip_runlogs(runs_dir: str, dest: str) -> int:
    """Zip every log under ``runs_dir`` (paths relative to it, sorted; ``NOT_LOGS`` left out) into ``dest``.

    Written whole or not at all (``lib.atomic``): a reader never downloads half an archive. Returns the number
    of files archived; a ``runs_dir`` that is missing or holds no file is a ``ValueError`` naming it.
    """
    import io
    import zipfile

    from lib.atomic import write_bytes

    files = sorted(os.path.relpath(os.path.join(d, f), runs_dir)
                   for d, _, fs in os.walk(runs_dir) for f in fs if not f.endswith(NOT_LOGS))
    if not files:
        raise ValueError(f"runs_dir {runs_dir!r}: no run logs to offer (missing or empty folder)")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for rel in files:
            z.write(os.path.join(runs_dir, rel), rel)
    write_bytes(dest, buf.getvalue())
    return len(files)


def offer_runlogs(runs_dir: str, chapter: str) -> str:
    """Zip this chapter's run logs where its page's download link points (run from the chapter's folder)."""
    name = runlogs_zip_name(chapter)
    zip_runlogs(runs_dir, name)
    return name
