"""The collapse study's results summarised per setting (``collapse_study`` writes them; figures and the chapter's
tables read them). Apart from the study so that drawing it imports nothing that runs it. Used in: chapter 2.
"""

from __future__ import annotations


def summary(study: dict) -> list[dict]:
    """Per row: median collapse update (censored runs count as ``max_updates``), min, max, collapsed count."""
    import numpy as np

    cap = study["max_updates"]
    out = []
    for r in study["rows"]:
        v = np.array([cap if c is None else c for c in r["collapse"]], dtype=float)
        out.append({"factor": r["factor"], "value": r["value"], "median": float(np.median(v)),
                    "low": float(v.min()), "high": float(v.max()),
                    "collapsed": sum(c is not None for c in r["collapse"]), "n": len(v)})
    return out
