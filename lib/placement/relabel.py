"""Relabelling a placement's GPUs: the same cut of the model, on other GPUs of the same machine.

A placement learned on one machine names the GPUs of that machine. Judged on another machine, whose GPUs differ
in speed, the same cut can run on any of its GPUs; the baselines of the head-to-head already choose theirs
there (the best of the four single GPUs, the human split on every pair). ``relabellings`` lists every distinct
placement a permutation of the GPU labels gives, so that every side can choose its GPUs where it is judged.
``label`` names a relabelled candidate ("top1 (GPUs 0123→2013)": GPU 0 becomes 2, 1 becomes 0, ...), and
``base_label`` recovers the name it had. Used in: Part I, chapters 3 and 4 (``lib.placement.evaluate``).
"""

from __future__ import annotations

from itertools import permutations
from typing import Sequence

_MARK = " (GPUs "


def apply(placement: Sequence[int], perm: Sequence[int]) -> tuple[int, ...]:
    """``placement`` with every GPU ``d`` renamed ``perm[d]``."""
    return tuple(int(perm[d]) for d in placement)


def relabellings(placement: Sequence[int], n_devices: int) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Every distinct placement that a permutation of the ``n_devices`` GPU labels gives, as
    ``(permutation, placement)`` pairs: the placement as labelled first, then in permutation order; a
    placement on ``k`` GPUs has ``n!/(n-k)!`` of them (4 GPUs: 4 for one GPU, 12 for two, 24 for three or
    four)."""
    p = tuple(int(d) for d in placement)
    if n_devices < 1 or any(not 0 <= d < n_devices for d in p):
        raise ValueError(f"placement {list(p)} names a GPU outside 0..{n_devices - 1}")
    out, seen = [], set()
    for perm in permutations(range(n_devices)):  # the identity comes first
        q = apply(p, perm)
        if q not in seen:
            seen.add(q)
            out.append((tuple(perm), q))
    return out


def label(base: str, perm: Sequence[int]) -> str:
    """The candidate's name: ``base`` for the identity, else ``base`` with the permutation."""
    if tuple(perm) == tuple(range(len(perm))):
        return base
    return f"{base}{_MARK}{''.join(map(str, range(len(perm))))}→{''.join(map(str, perm))})"


def base_label(name: str) -> str:
    """The name a candidate had before relabelling (``label``'s inverse on the base)."""
    return name.split(_MARK, 1)[0]


def relabelled(candidates: Sequence[tuple[str, Sequence[int]]], n_devices: int) -> list[tuple[str, tuple[int, ...]]]:
    """Every candidate under every relabelling, without repeats (the first name of a placement is kept)."""
    out, seen = [], set()
    for name, p in candidates:
        for perm, q in relabellings(p, n_devices):
            if q not in seen:
                seen.add(q)
                out.append((label(name, perm), q))
    return out
