"""Ranking as a check: how well the cost model orders the layouts of a published sweep (one model on one
cluster, measured under several layouts), beside how well it prices each.

A run belongs to a sweep by its name: ``sweep#layout`` (the part before ``#`` names the sweep). For each sweep
of at least two runs, from the measured and the estimated tokens/s/GPU of its runs:

- ``spearman``: Spearman's rank correlation of estimate against measurement (ties get their average rank;
  ``None`` when either side is constant, where no correlation is defined);
- ``top1_regret``: how much slower the planner's favourite among the measured layouts ran than the best
  measured one, ``1 - measured[favourite] / max(measured)`` (0: it would have picked the best). The
  favourite is the layout with the highest estimate among those the model says fit (a planner picks nothing
  that does not fit); among all of them if none fits.

Used in: ``validate.py`` (the report's ``sweeps``), tests/galvatron/test_ranking.py.
"""

from __future__ import annotations

import numpy as np

SEP = "#"


def sweep_of(name: str) -> str | None:
    """The sweep a run named ``name`` belongs to (the part before ``#``), or None."""
    return name.split(SEP, 1)[0] if SEP in name else None


def ranks(x) -> np.ndarray:
    """Ranks 1..n of ``x``, ties given their average rank."""
    x = np.asarray(x, dtype=float)
    order = np.argsort(x, kind="mergesort")
    r = np.empty(len(x))
    r[order] = np.arange(1, len(x) + 1)
    for v in np.unique(x):
        tie = x == v
        if tie.sum() > 1:
            r[tie] = r[tie].mean()
    return r


def spearman(a, b) -> float | None:
    """Spearman's rank correlation of ``a`` and ``b`` (same length >= 2); None where either is constant."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(a) != len(b) or len(a) < 2:
        raise ValueError(f"spearman needs two sequences of the same length >= 2; got {len(a)} and {len(b)}")
    ra, rb = ranks(a), ranks(b)
    if np.ptp(ra) == 0 or np.ptp(rb) == 0:
        return None
    return float(np.corrcoef(ra, rb)[0, 1])


def top1_regret(measured, estimated, fits=None) -> tuple[float, int]:
    """(regret, index of the favourite): see the module docstring. ``fits``: the model's verdict per layout."""
    m, e = np.asarray(measured, dtype=float), np.asarray(estimated, dtype=float)
    ok = np.ones(len(e), bool) if fits is None else np.asarray(fits, bool)
    pool = np.flatnonzero(ok) if ok.any() else np.arange(len(e))
    fav = int(pool[np.argmax(e[pool])])
    return float(1.0 - m[fav] / m.max()), fav


def sweeps(rows) -> dict:
    """Per sweep and over them, from report rows with ``name``, ``published``, ``estimate`` and ``fits``:
    {"sweeps": [{"sweep", "runs", "spearman", "top1_regret", "favourite", "best"}], "median_spearman",
    "median_top1_regret"} (medians over sweeps where defined; None when there are none)."""
    groups: dict[str, list] = {}
    for r in rows:
        s = sweep_of(r["name"])
        if s is not None:
            groups.setdefault(s, []).append(r)
    out = []
    for s, rs in groups.items():
        if len(rs) < 2:
            continue
        m = [r["published"] for r in rs]
        e = [r["estimate"] for r in rs]
        regret, fav = top1_regret(m, e, [r["fits"] for r in rs])
        rho = spearman(m, e)
        out.append({"sweep": s, "runs": len(rs), "spearman": None if rho is None else round(rho, 6),
                    "top1_regret": round(regret, 6), "favourite": rs[fav]["name"],
                    "best": rs[int(np.argmax(m))]["name"]})
    rhos = [x["spearman"] for x in out if x["spearman"] is not None]
    return {"sweeps": out,
            "median_spearman": round(float(np.median(rhos)), 6) if rhos else None,
            "median_top1_regret": round(float(np.median([x["top1_regret"] for x in out])), 6) if out else None}
