"""The inner dynamic program of Galvatron's search: one pipeline stage, layers in order, memory in bins.

Minimise the summed per-layer time plus the transition costs between consecutive layers, subject to the summed
per-layer memory fitting a budget (spec section 3.1). ``viterbi`` is the same problem without the memory limit,
``brute_force`` the oracle for tiny instances. Tables in, choices out: the cost model lives in ``cost.py``.

Used in: book/galvatron/03_the_search.ipynb.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class DPResult:
    """Optimum of one stage: total seconds, the strategy index per layer, the memory used (MB)."""

    feasible: bool
    cost_s: float
    choice: tuple
    mem_mb: int


def _ints(mem_mb) -> np.ndarray:
    return np.ceil(np.asarray(mem_mb, float) - 1e-9).astype(np.int64)


def viterbi(time_s, trans_s) -> tuple[float, tuple]:
    """Cheapest per-layer choice ignoring memory (time + transitions), O(L S^2)."""
    time_s, trans_s = np.asarray(time_s, float), np.asarray(trans_s, float)
    L, S = time_s.shape
    f = time_s[0].copy()
    back = np.zeros((L, S), dtype=np.int64)
    for i in range(1, L):
        tot = f[:, None] + trans_s[i]
        back[i] = np.argmin(tot, axis=0)
        f = tot[back[i], np.arange(S)] + time_s[i]
    s = int(np.argmin(f))
    choice = [s]
    for i in range(L - 1, 0, -1):
        s = int(back[i, s])
        choice.append(s)
    return float(np.min(f)), tuple(reversed(choice))


def dp_tables(time_s, mem_mb, trans_s, budget_mb: int):
    """The DP tables: ``fs[i]`` holds f after layer i for memory levels ``lo[i] .. lo[i] + len(fs[i]) - 1``
    (MB), one column per strategy; inf where nothing fits. Used by ``dp_solve`` and shown in 03_the_search."""
    time_s, trans_s = np.asarray(time_s, float), np.asarray(trans_s, float)
    mem = _ints(mem_mb)
    L, S = time_s.shape
    E = int(math.floor(budget_mb))
    if E < mem.min(axis=1).sum():
        raise ValueError(f"budget {E} MB is below the least memory any assignment needs ({mem.min(axis=1).sum()} MB)")
    # Only memory levels a path to f[L-1][E] can visit matter: after layer i, at least the minimum memory of
    # layers <= i is used, and at most E minus the minimum of the layers still to come.
    mn, mx = mem.min(axis=1), mem.max(axis=1)
    pre_min = np.cumsum(mn)
    suf_min = np.concatenate([np.cumsum(mn[::-1])[::-1][1:], [0]])
    suf_max = np.concatenate([np.cumsum(mx[::-1])[::-1][1:], [0]])
    lo = np.maximum(pre_min, E - suf_max)
    hi = E - suf_min
    fs = []
    f = np.full((hi[0] - lo[0] + 1, S), np.inf)
    for s in range(S):
        f[max(mem[0, s] - lo[0], 0):, s] = time_s[0, s]
    fs.append(f)
    for i in range(1, L):
        # g[u, s] = min over the previous strategy s' of f[u, s'] + trans[s', s]
        g = np.min(f[:, None, :] + trans_s[i].T[None, :, :], axis=2)
        nf = np.full((hi[i] - lo[i] + 1, S), np.inf)
        for s in range(S):
            u0 = lo[i] - mem[i, s]                       # source level of the window's first row
            skip = max(lo[i - 1] - u0, 0)                 # rows whose source is below the reachable minimum
            src0 = u0 + skip - lo[i - 1]
            n_rows = nf.shape[0] - skip
            if n_rows > 0:
                nf[skip:, s] = g[src0:src0 + n_rows, s] + time_s[i, s]
        f = nf
        fs.append(f)
    return fs, lo


def dp_solve(time_s, mem_mb, trans_s, budget_mb: int, shortcut: bool = True) -> DPResult:
    """Exact minimum of sum_i time[i, s_i] + trans[i, s_{i-1}, s_i] subject to sum_i mem[i, s_i] <= budget.

    f[v, s] = least time of the layers so far using at most v MB with the last layer under s (capacity-style
    start f = 0). Memory is in whole MB (rounded up). Vectorised over v and s; backtracking recomputes the
    argmin over the previous strategy along the chosen path only. ``shortcut``: return the unconstrained
    optimum (Viterbi) directly when it fits.
    """
    time_s = np.asarray(time_s, float)
    trans_s = np.asarray(trans_s, float)
    mem = _ints(mem_mb)
    L, S = time_s.shape
    budget = int(math.floor(budget_mb))
    inf = DPResult(False, math.inf, (), 0)
    if budget < 0 or mem.min(axis=1).sum() > budget:
        return inf
    # Shortcut: if the unconstrained optimum fits, it is the answer.
    c0, ch0 = viterbi(time_s, trans_s)
    used0 = int(sum(mem[i, s] for i, s in enumerate(ch0)))
    if shortcut and used0 <= budget:
        return DPResult(True, c0, ch0, used0)
    E = min(budget, int(mem.max(axis=1).sum()))
    fs, lo = dp_tables(time_s, mem, trans_s, E)
    f = fs[-1]
    s = int(np.argmin(f[E - lo[L - 1]]))
    best = float(f[E - lo[L - 1], s])
    if not np.isfinite(best):
        return inf
    v, choice = E, [s]
    for i in range(L - 1, 0, -1):
        v -= mem[i, s]
        row = fs[i - 1][v - lo[i - 1]]
        s = int(np.argmin(row + trans_s[i][:, s]))
        choice.append(s)
    choice = tuple(reversed(choice))
    used = int(sum(mem[i, s] for i, s in enumerate(choice)))
    return DPResult(True, best, choice, used)


def brute_force(time_s, mem_mb, trans_s, budget_mb: int) -> DPResult:
    """Enumerate every assignment (S^L): the oracle for ``dp_solve`` on tiny instances."""
    time_s, trans_s, mem = np.asarray(time_s, float), np.asarray(trans_s, float), _ints(mem_mb)
    L, S = time_s.shape
    best = DPResult(False, math.inf, (), 0)
    for ch in itertools.product(range(S), repeat=L):
        used = int(sum(mem[i, s] for i, s in enumerate(ch)))
        if used > budget_mb:
            continue
        c = sum(time_s[i, s] for i, s in enumerate(ch)) + sum(trans_s[i, ch[i - 1], ch[i]] for i in range(1, L))
        if c < best.cost_s:
            best = DPResult(True, float(c), ch, used)
    return best


def dp_solve_python(time_s, mem_mb, trans_s, budget_mb: int) -> DPResult:
    """The same recurrence as ``dp_solve`` in plain Python loops over every memory level v = 0..budget (as the
    artifact's ``DPAlg`` does): ``dp_readable.solve``, the version chapter 7 prints, as a ``DPResult``. Exact;
    first index on ties."""
    from .dp_readable import solve

    as_lists = (np.asarray(x, float).tolist() for x in (time_s, mem_mb, trans_s))
    cost, choice, used = solve(*as_lists, budget_mb)
    return DPResult(bool(choice), float(cost), choice, int(used))
