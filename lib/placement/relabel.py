"""Relabelling a placement's GPUs: the same cut of the model, on other GPUs of the same machine.

A placement learned on one machine names the GPUs of that machine. Judged on another machine, whose GPUs differ
in speed, the same cut can run on any of its GPUs; the single-GPU side of the head-to-head already chooses its
GPU there. ``by_speed`` gives every placement the same choice by one rule: its busiest GPU (by the FLOPs of
the nodes on it) becomes the machine's fastest, the next busiest the next fastest, and so on, with the
machine's GPUs ranked by timing them (``lib.placement.evaluate.rank_devices``). ``relabellings`` lists every
distinct placement a permutation of the labels gives (for the exhaustive checks). ``label`` names a relabelled
candidate ("top1 (GPUs 13→30)": GPU 1 becomes 3 and GPU 3 becomes 0), and ``base_label`` recovers the name
it had. Used in: Part I, chapters 3 and 4 (``lib.placement.evaluate``).
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


def label(base: str, perm: Sequence[int], used: Sequence[int] | None = None) -> str:
    """The candidate's name: ``base`` when no GPU of ``used`` (default: all) changes, else ``base`` with the
    GPUs that ``perm`` maps."""
    used = range(len(perm)) if used is None else sorted(used)
    if all(perm[d] == d for d in used):
        return base
    return f"{base}{_MARK}{''.join(map(str, used))}→{''.join(str(perm[d]) for d in used)})"


def device_work(placement: Sequence[int], graph) -> dict[int, float]:
    """The forward and backward FLOPs of the nodes each GPU of ``placement`` runs."""
    work: dict[int, float] = {}
    for d, node in zip(placement, graph.nodes):
        work[int(d)] = work.get(int(d), 0.0) + node.fwd_flops + node.bwd_flops
    return work


def speed_perm(placement: Sequence[int], order: Sequence[int], graph) -> tuple[int, ...]:
    """The permutation that puts ``placement``'s busiest GPU on ``order[0]`` (the fastest), the next busiest on
    ``order[1]``, ...; ties keep the lower label first. GPUs the placement does not use keep the rest."""
    n = len(order)
    if sorted(order) != list(range(n)):
        raise ValueError(f"order must be a permutation of the GPUs 0..{n - 1}; got {list(order)}")
    work = device_work(placement, graph)
    busy = sorted(work, key=lambda d: (-work[d], d))
    perm = [-1] * n
    for d, target in zip(busy, order):
        perm[d] = target
    free = [t for t in order if t not in perm]
    for d in range(n):
        if perm[d] < 0:
            perm[d] = free.pop(0)
    return tuple(perm)


def by_speed(candidates: Sequence[tuple[str, Sequence[int]]], order: Sequence[int],
             graph) -> list[tuple[str, tuple[int, ...]]]:
    """Every candidate with its busiest GPU on the fastest (``speed_perm``), without repeats (the first name of
    a placement is kept)."""
    out, seen = [], set()
    for name, p in candidates:
        perm = speed_perm(p, order, graph)
        q = apply(p, perm)
        if q not in seen:
            seen.add(q)
            out.append((label(name, perm, set(int(d) for d in p)), q))
    return out


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
