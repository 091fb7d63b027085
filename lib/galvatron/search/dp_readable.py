"""Galvatron's dynamic program as plain Python, short enough to read on the page.

The same recurrence as ``dynamic_program.dp_solve`` (which is vectorised with numpy and visits only the memory
levels a complete plan can pass through), written as loops over layers, memory levels v = 0..E, strategies s
and previous strategies s', as the artifact's ``DPAlg`` does:

    f[i][v][s] = time[i][s] + min over s' of ( f[i-1][v - mem[i][s]][s'] + trans[i][s'][s] ),   f[-1] = 0

``solve`` returns the least total time, the chosen strategy per layer and the memory it uses; ``path`` the
(layer, strategy, memory level) cells the backtracking visits, which chapter 7 draws on the DP table.
Pure Python, no numpy inside the loops: the like-for-like baseline of ``benchmarks/bench_search.py``.

Used in: book/galvatron/03_the_search, benchmarks/bench_search.py.
"""

from __future__ import annotations

import math

INF = math.inf


def _mb(x) -> int:
    """Memory in whole MB, rounded up (as the search rounds it)."""
    return int(math.ceil(float(x) - 1e-9))


def solve(time, mem, trans, E):
    """Least total time of one stage under a budget of ``E`` MB.

    ``time[i][s]`` (s) and ``mem[i][s]`` (MB) of layer i under strategy s;
    ``trans[i][a][b]`` the cost of entering layer i under b from a (ignored for
    i = 0). Returns (cost, choice, used_mb), or (inf, (), 0) when nothing fits."""
    L, S, E = len(time), len(time[0]), int(math.floor(E))
    if E < 0:
        return INF, (), 0
    mem = [[_mb(x) for x in row] for row in mem]
    # f[v][s] before the first layer: nothing used, no time
    f = [[0.0] * S for _ in range(E + 1)]
    back = []  # back[i][v][s]: the best previous strategy s'
    for i in range(L):
        new = [[INF] * S for _ in range(E + 1)]
        arg = [[-1] * S for _ in range(E + 1)]
        for v in range(E + 1):
            for s in range(S):
                if mem[i][s] > v:
                    continue  # layer i under s alone needs more than v MB
                prev = f[v - mem[i][s]]
                for sp in range(S):
                    c = prev[sp] + (trans[i][sp][s] if i else 0.0)
                    if c < new[v][s]:
                        new[v][s], arg[v][s] = c, sp
                new[v][s] += time[i][s]
        f = new
        back.append(arg)
    s = min(range(S), key=lambda k: f[E][k])
    if f[E][s] == INF:
        return INF, (), 0
    cost, cells = f[E][s], _backtrack(back, mem, E, s)
    choice = tuple(c[1] for c in cells)
    return float(cost), choice, sum(mem[i][c] for i, c in enumerate(choice))


def _backtrack(back, mem, E, s):
    """The (layer, strategy, level) cells from the answer f[L-1][E][s] back to layer 0, in layer order."""
    v, cells = E, []
    for i in range(len(back) - 1, -1, -1):
        cells.append((i, s, v))
        s, v = back[i][v][s], v - mem[i][s]
    return list(reversed(cells))


def path(time, mem, trans, E):
    """The cells (layer i, strategy s, memory level v) of the optimal plan as the backtracking visits them:
    layer i's entry f[i][v][s] is the one the answer was built from. Empty when nothing fits."""
    _, choice, _ = solve(time, mem, trans, E)
    cells, v = [], int(math.floor(E))
    for i in range(len(choice) - 1, -1, -1):
        cells.append((i, choice[i], v))
        v -= _mb(mem[i][choice[i]])
    return list(reversed(cells))
