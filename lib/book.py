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
    """A string whose plain-text display is the string itself, without quotes."""

    def __repr__(self) -> str:
        return str.__str__(self)


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
