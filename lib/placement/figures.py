"""Figures of Part I drawn from run logs (never from memory): learning curves, head-to-head, phases.

Each function returns a plotly figure; chapters display it with ``lib.viz.show`` and the command line writes
it to HTML. Times are plotted in milliseconds. Used in: Part I, chapters 2-3.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from lib.placement.env import PHASES
from lib.viz import PALETTE, SEQUENCE, layout


def curve(result, metric: str = "mean_step_s") -> tuple[np.ndarray, np.ndarray]:
    """(update index, values) of a per-update metric; step times in milliseconds."""
    recs = result.records
    x = np.array([r["update"] for r in recs])
    y = np.array([r[metric] for r in recs], dtype=float)
    return x, (y * 1e3 if metric.endswith("_s") else y)


def first_identical(result) -> int | None:
    """The first update whose K samples were all the same placement (the collapse), or ``None``."""
    for r in result.records:
        if r["identical"]:
            return int(r["update"])
    return None


def learning_curves(results: Mapping[str, object], title: str | None = None, show_best: bool = True,
                    height: int = 420):
    """Mean step time of the K sampled placements per update (solid) and the best found so far (dotted)."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for i, (label, res) in enumerate(results.items()):
        colour = SEQUENCE[i % len(SEQUENCE)]
        x, y = curve(res)
        fig.add_trace(go.Scatter(x=x, y=y, mode="lines", name=f"{label}: sample mean", line=dict(color=colour)))
        if show_best:
            xb, yb = curve(res, "best_step_s")
            fig.add_trace(go.Scatter(x=xb, y=yb, mode="lines", name=f"{label}: best so far",
                                     line=dict(color=colour, dash="dot")))
        k = first_identical(res)
        if k is not None:
            fig.add_trace(go.Scatter(x=[k], y=[y[k]], mode="markers", name=f"{label}: all K identical",
                                     marker=dict(color=colour, symbol="x", size=12), showlegend=True))
    fig.update_xaxes(title="update")
    fig.update_yaxes(title="step time (ms)", type="log")
    return layout(fig, title, height)


def entropy_curves(results: Mapping[str, object], title: str | None = None, height: int = 320):
    """Policy entropy per update (nats, summed over decisions): the collapse is the drop to zero."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for i, (label, res) in enumerate(results.items()):
        x, y = curve(res, "entropy")
        fig.add_trace(go.Scatter(x=x, y=y, mode="lines", name=label, line=dict(color=SEQUENCE[i % len(SEQUENCE)])))
    fig.update_xaxes(title="update")
    fig.update_yaxes(title="entropy (nats)")
    return layout(fig, title, height)


def head_to_head_figure(h2h, quoted_ms: Mapping[str, float] | None = None, title: str | None = None,
                        height: int = 380):
    """Confirmation step times (mean ± std) per entry; ``quoted_ms`` (ms, keyed by entry label or by side) adds
    the seed's numbers beside ours. Out-of-memory entries are drawn in the "bad" colour at their 10 s charge."""
    import plotly.graph_objects as go

    rows = [r for r in h2h.rows()]
    labels = [f"{r['side']}: {r['placement']}" for r in rows]
    colours = [PALETTE["bad"] if r["oom"] else PALETTE["primary"] if r["side"] == h2h.rl_side
               else PALETTE["secondary"] for r in rows]
    fits = [r["mean_ms"] for r in rows if not r["oom"]]
    stub = 1.1 * max(fits) if fits else 1.0  # an OOM bar is drawn short (its 10 s charge would hide the rest)
    fig = go.Figure(go.Bar(
        y=labels, x=[stub if r["oom"] else r["mean_ms"] for r in rows], orientation="h", marker_color=colours,
        name="ours", error_x=dict(type="data", array=[0 if r["oom"] else r["std_ms"] for r in rows]),
        text=["out of memory" if r["oom"] else f"{r['mean_ms']:.1f}" for r in rows], textposition="inside"))
    if quoted_ms:  # keyed by an entry's label (fixed baselines) or by its side (picks)
        hits = [(lbl, quoted_ms.get(r["placement"], quoted_ms.get(r["side"]))) for lbl, r in zip(labels, rows)]
        hits = [(lbl, q) for lbl, q in hits if q is not None]
        fig.add_trace(go.Scatter(y=[h[0] for h in hits], x=[h[1] for h in hits], mode="markers",
                                 marker=dict(symbol="diamond", size=11, color=PALETTE["neutral"]),
                                 name="the seed (quoted)"))
    fig.update_xaxes(title="step time (ms), mean ± std over confirmation rounds")
    fig.update_yaxes(autorange="reversed")
    return layout(fig, title, height)


def phase_figure(pt, title: str | None = None, height: int = 320):
    """Per-phase medians (forward, backward, optimizer) as stacked bars, one bar per placement."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for j, ph in enumerate(PHASES):
        fig.add_trace(go.Bar(y=list(pt.labels), x=[p[ph] * 1e3 for p in pt.phase_s], orientation="h", name=ph,
                             marker_color=SEQUENCE[j]))
    fig.update_layout(barmode="stack")
    fig.update_xaxes(title="milliseconds")
    return layout(fig, title, height)


def placement_strip(placements: Mapping[str, tuple], names=None, n_devices: int = 4, title: str | None = None,
                    height: int | None = None):
    """Placements as coloured strips: one row per placement, one cell per node, colour = device."""
    import plotly.graph_objects as go

    labels = list(placements)
    z = np.array([list(placements[k]) for k in labels], dtype=float)
    scale = [[i / max(n_devices - 1, 1), SEQUENCE[i]] for i in range(n_devices)]
    hover = None
    if names is not None:
        hover = [[f"{names[j]}: device {int(z[i, j])}" for j in range(z.shape[1])] for i in range(len(labels))]
    fig = go.Figure(go.Heatmap(z=z, y=labels, colorscale=scale, zmin=0, zmax=n_devices - 1, xgap=1, ygap=2,
                               text=hover, hoverinfo="text" if hover else None,
                               colorbar=dict(title="device", tickvals=list(range(n_devices)))))
    fig.update_xaxes(title="node (chain order)")
    fig.update_yaxes(autorange="reversed")
    return layout(fig, title, height or 120 + 40 * len(labels))
