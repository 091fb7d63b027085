"""The figure of the section "The page against production clusters": one panel per kind of published
observation, the published value across and the predictions up, the page's model and the production-calibrated
one side by side, held-out observations drawn apart from the calibration set. Used in:
book/stragglers/01_the_one_slow_gpu.
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from lib.straggler.production import KINDS, SHARE_KINDS
from lib.straggler.production_report import Comparison
from lib.viz import PALETTE, layout

TITLES = {"interruptions": "interruptions (count)", "mttf_hours": "job MTTF (hours)",
          "ettr": "effective training time ratio", "cause_share": "share of failures by cause",
          "straggler_share": "share of jobs slowed >= 10%", "straggler_slowdown": "straggler slowdown (ratio)"}
LOG_KINDS = frozenset({"interruptions", "mttf_hours"})


def _panel_range(values, log: bool):
    lo, hi = min(values), max(values)
    if log:
        return lo / 1.6, hi * 1.6
    pad = 0.08 * (hi - lo or 1)
    return lo - pad, hi + pad


def figure(cmp: Comparison, title: str) -> go.Figure:
    """Predicted against published, one panel per kind; the dashed line is a perfect prediction."""
    fig = make_subplots(rows=2, cols=3, subplot_titles=[TITLES[k] for k in KINDS],
                        horizontal_spacing=0.09, vertical_spacing=0.16)
    styles = [("page", "page", PALETTE["secondary"]), ("production", "production", PALETTE["primary"])]
    for j, kind in enumerate(KINDS):
        row, col = divmod(j, 3)
        row, col = row + 1, col + 1
        idx = cmp.subset(kind=kind)
        published = [cmp.observations[i][1].value for i in idx]
        values = list(published)
        for model, label, colour in styles:
            preds = cmp.page if model == "page" else cmp.production
            for stem, symbol in (("calibration", "circle"), ("heldout", "diamond")):
                pts = [(cmp.observations[i][1].value, preds[i].predicted, cmp.observations[i][1].name)
                       for i in idx if cmp.set_of(i) == stem and preds[i].predicted is not None]
                if not pts:
                    continue
                values += [p[1] for p in pts]
                fig.add_trace(go.Scatter(
                    x=[p[0] for p in pts], y=[p[1] for p in pts], text=[p[2] for p in pts], mode="markers",
                    marker=dict(color=colour, symbol=symbol, size=9, opacity=0.85,
                                line=dict(width=1, color="white")),
                    name=f"{label}, {'held out' if stem == 'heldout' else 'calibration'}",
                    legendgroup=f"{model}-{stem}", showlegend=j == 0 or not _shown(fig, f"{model}-{stem}"),
                    hovertemplate="%{text}<br>published %{x:.3g}<br>predicted %{y:.3g}<extra></extra>"),
                    row=row, col=col)
        lo, hi = _panel_range(values, kind in LOG_KINDS)
        fig.add_trace(go.Scatter(x=[lo, hi], y=[lo, hi], mode="lines", showlegend=False, hoverinfo="skip",
                                 line=dict(color=PALETTE["neutral"], dash="dash", width=1)), row=row, col=col)
        # log panels: one tick per power of ten (minor labels crowd a panel a third of the page wide)
        axis = dict(type="log", dtick=1) if kind in LOG_KINDS else dict(range=[lo, hi])
        fig.update_xaxes(title_text="published", row=row, col=col, **axis)
        fig.update_yaxes(title_text="predicted" if col == 1 else None, row=row, col=col, **axis)
        if kind in SHARE_KINDS:
            fig.update_xaxes(tickformat=".0%", row=row, col=col)
            fig.update_yaxes(tickformat=".0%", row=row, col=col)
    layout(fig, title=title, height=660)
    fig.update_annotations(font_size=12)
    return fig


def _shown(fig, group: str) -> bool:
    return any(t.legendgroup == group and t.showlegend for t in fig.data)
