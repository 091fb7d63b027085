"""How much there was to win: the exhaustive optimum over contiguous group placements, noiseless.

The placer over co-location groups chooses a GPU for each group. ``contiguous_placements`` lists every
placement in which each GPU holds one contiguous run of groups (or none): the chain cut into ``k`` pieces,
``k`` up to the number of GPUs, each piece on a GPU of its own, in any order. For 13 groups on 4 GPUs
that is 4 + 12·12 + 66·24 + 220·24 = 7,012 placements, every single GPU, human split, layer split, pipeline
and the write-up's embedding | body | head among them. ``optimum`` times them all on one machine without
noise (its GPUs' speed factors included) and returns the fastest, with how far one-group moves from it get
(``polish``: a placement that is not contiguous could be faster; a one-group move is the first place to
look). Used in: Part I, chapters 3 and 4.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations, permutations
from typing import Sequence

from lib.graph import expand


def contiguous_group_placements(n_groups: int, n_devices: int) -> list[tuple[int, ...]]:
    """Every group placement in which each GPU holds at most one contiguous run of groups."""
    if n_groups < 1 or n_devices < 1:
        raise ValueError(f"need n_groups >= 1 and n_devices >= 1; got {n_groups}, {n_devices}")
    out = []
    for k in range(1, min(n_groups, n_devices) + 1):
        for cuts in combinations(range(1, n_groups), k - 1):
            bounds = (0, *cuts, n_groups)
            for devs in permutations(range(n_devices), k):
                out.append(tuple(devs[i] for i in range(k) for _ in range(bounds[i], bounds[i + 1])))
    return out


def count_contiguous(n_groups: int, n_devices: int) -> int:
    """``len(contiguous_group_placements(...))`` in closed form: sum over k of C(n-1, k-1) · n_devices!/(n_devices-k)!."""
    return sum(math.comb(n_groups - 1, k - 1) * math.perm(n_devices, k)
               for k in range(1, min(n_groups, n_devices) + 1))


@dataclass(frozen=True)
class Optimum:
    """The fastest placement found, its noiseless step time and the space it was taken over."""

    placement: tuple[int, ...]  # per node
    group_placement: tuple[int, ...]
    step_s: float
    n_timed: int  # placements timed (those that ran out of memory included)
    n_oom: int
    polished_s: float  # after one-group moves from the contiguous optimum (== step_s when none helps)
    polished: tuple[int, ...]  # per node
    single_s: float | None  # the fastest single GPU on the same machine (None: no single GPU fits)

    @property
    def range_share(self) -> float | None:
        """How much faster the optimum is than the fastest single GPU, as a share of the single GPU's step."""
        return None if self.single_s is None else (self.single_s - self.step_s) / self.single_s


def optimum(env, groups: Sequence[Sequence[int]], polish: bool = True) -> Optimum:
    """The noiseless optimum of ``env`` (which must have ``noiseless_s``, e.g. ``SimPlacementEnv``) over the
    contiguous placements of ``groups``; ``polish`` then tries every one-group move from it, repeatedly, until
    none is faster. ValueError when every placement runs out of memory."""
    n = env.n_nodes
    best, best_g, best_s, n_oom, cands = None, None, math.inf, 0, contiguous_group_placements(len(groups),
                                                                                             env.n_devices)
    for gp in cands:
        p = expand(gp, groups, n)
        t = env.noiseless_s(p)
        if t is None:
            n_oom += 1
        elif t < best_s:
            best, best_g, best_s = p, gp, t
    if best is None:
        raise ValueError(f"every one of the {len(cands)} contiguous placements runs out of memory on "
                         f"{env.describe()}")
    cur_g, cur_s = best_g, best_s
    while polish:
        moves = [cur_g[:i] + (d,) + cur_g[i + 1:] for i in range(len(cur_g)) for d in range(env.n_devices)
                 if d != cur_g[i]]
        timed = [(t, g) for g in moves if (t := env.noiseless_s(expand(g, groups, n))) is not None]
        t, g = min(timed, default=(math.inf, None))
        if t >= cur_s:
            break
        cur_g, cur_s = g, t
    singles = [t for d in range(env.n_devices) if (t := env.noiseless_s((d,) * n)) is not None]
    return Optimum(best, best_g, best_s, len(cands), n_oom, cur_s, expand(cur_g, groups, n),
                   min(singles) if singles else None)
