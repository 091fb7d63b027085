"""The chapter's linked figures, close to the page's: the step (a GPU-count slider and a backups toggle, the
step view rescaled per size above the step-efficiency curves), the five ways (one button per row of the five-ways
table, each applying that row's interval and backups to all three panels of one figure: the two weeks, where the
time goes at every interval, and the row's shares and goodput) and the interval (where the time goes, stacked,
over a GPUs x interval grid). Every state is precomputed, so they work in the static book. The page's quoted
values are marked only where they apply. Used in: book/stragglers/01_the_one_slow_gpu.
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

from lib.straggler.figures import (CLUSTER_SIZES, PAGE_CLAIMS, PAGE_EFFICIENCY, _base, _count, _gpus,
                                   day_traces, efficiency_curves, interval_grid, page_marks, step_view_pair)
from lib.straggler.model import (FailureModel, StepModel, backup_count, expected_segment_min, step_efficiency,
                                 young_daly_min)
from lib.straggler.simulate import five_ways
from lib.viz import PALETTE, Frame, frames_figure

#: The cluster sizes the step and interval sliders offer (the reader's own is added).
PANEL_SIZES = (8, 64, 512, 1024, 4096, 16_384, 65_536)
#: Extra top margin (px) for a row of buttons above the plot, under the title.
BUTTONS_PX = 36


def _buttons(labels, args, active: int, y: float = 1.0) -> dict:
    """A row of plotly ``updatemenus`` buttons above the plot, left-aligned."""
    return dict(type="buttons", direction="right", active=active, x=0, xanchor="left", y=y, yanchor="bottom",
                pad=dict(t=4, b=6), showactive=True, font=dict(size=12),
                buttons=[dict(label=lab, method=m, args=a) for lab, (m, a) in zip(labels, args)])


def _room_for_buttons(fig) -> None:
    fig.update_layout(margin=dict(t=(fig.layout.margin.t or 40) + BUTTONS_PX))


# ----------------------------------------------------------------------------------------------- the step
def _step_bars(d: dict, with_backups: bool) -> list:
    """One variant's step view: healthy GPUs, the slowest healthy one, the slow ones (waited for, covered)."""
    parts = [("healthy", "healthy GPU", PALETTE["primary"]),
             ("slowest_healthy", "slowest healthy GPU", PALETTE["accent"]),
             ("waited", "slow GPU (waited for)", PALETTE["bad"])]
    if with_backups:
        parts.append(("covered", "slow GPU (covered by a backup)", PALETTE["neutral"]))
    out = []
    for key, name, colour in parts:
        x, y = d[key]
        # a step without slow GPUs draws None, not nothing: the legend, and so the plot's width, stay put
        x, y = (np.asarray(x).tolist(), np.round(y, 5).tolist()) if len(y) else ([None], [None])
        out.append(go.Bar(x=x, y=y, name=name, marker_color=colour, width=0.8, legendgroup=key, xaxis="x",
                          yaxis="y"))
    out.append(go.Scatter(x=[-1, d["shown"]], y=[round(d["close_s"], 5)] * 2, mode="lines",
                          name="step closes (then sync)", legendgroup="close",
                          line=dict(color=PALETTE["bad"], dash="dash"), xaxis="x", yaxis="y"))
    return out


def _log_range(values, pad: float = 0.05) -> list[float]:
    """A log axis's range (log10 units) from the smallest to the largest of ``values``, ``pad`` decades wider."""
    return [math.log10(min(values)) - pad, math.log10(max(values)) + pad]


def _step_range(draws, compute_s: float) -> list[float]:
    """The step view's y range for one size: from just under the compute time to just over the slowest bar."""
    top = max(max([d["close_s"]] + [float(np.max(d[k][1])) for k in ("waited", "covered") if len(d[k][1])])
              for d in draws)
    pad = 0.06 * (top - compute_s) + 0.002
    return [round(compute_s - pad, 4), round(top + pad, 4)]


def step_panel_figure(n_gpus: int = 16_384, backup_share: float = 0.02, seed: int = 0,
                      backups_on: bool = False, sizes=None, model: StepModel = StepModel()):
    """One drawn step above the exact step-efficiency curves: a GPU-count slider (the step view's axes rescale
    per size) and a toggle that shows the same cluster, one draw (``figures.step_view_pair``), without or with
    ``backup_share`` backups."""
    sizes = tuple(sorted({*(sizes or PANEL_SIZES), n_gpus}))
    curve_sizes = tuple(sorted({*CLUSTER_SIZES, *sizes}))
    c = efficiency_curves(curve_sizes, (backup_share,), model)
    marks_plain = page_marks(0.0)
    marks_backup = [m for m in page_marks(backup_share) if m[0][1] > 0]
    frames, ranges = [], []
    for n in sizes:
        b = backup_count(n, backup_share)
        # one draw per size, seeded by (seed, size): both buttons show the same cluster, and a reader's own
        # size leaves the other frames' draws as they were
        d0, d1 = step_view_pair(n, b, np.random.default_rng([seed, n]), model=model)
        e0, e1 = step_efficiency(n, 0, model), step_efficiency(n, b, model)
        data = _step_bars(d0, False) + _step_bars(d1, True) + [
            go.Scatter(x=[-1, max(d0["shown"], d1["shown"])], y=[model.compute_s] * 2, mode="lines",
                       name="compute without delay", line=dict(color=PALETTE["neutral"], dash="dot"),
                       xaxis="x", yaxis="y"),
            go.Scatter(x=c["sizes"], y=np.round(c["plain"], 5).tolist(), mode="lines", name="no backups (exact)",
                       line=dict(color=PALETTE["primary"]), xaxis="x2", yaxis="y2"),
            go.Scatter(x=c["sizes"], y=np.round(c["backups"][backup_share], 5).tolist(), mode="lines",
                       name=f"{100 * backup_share:g}% backups, charged (exact)", line=dict(color=PALETTE["good"]),
                       xaxis="x2", yaxis="y2"),
            go.Scatter(x=[n], y=[round(e0, 5)], mode="markers", name="this cluster", legendgroup="you",
                       marker=dict(color=PALETTE["accent"], size=13), xaxis="x2", yaxis="y2"),
            go.Scatter(x=[n], y=[round(e1, 5)], mode="markers", name="this cluster", legendgroup="you",
                       marker=dict(color=PALETTE["accent"], size=13), xaxis="x2", yaxis="y2"),
            go.Scatter(x=[k[0] for k, _ in marks_plain], y=[v for _, v in marks_plain], mode="markers",
                       name="the page (quoted)", legendgroup="page", xaxis="x2", yaxis="y2",
                       marker=dict(color=PALETTE["secondary"], symbol="diamond-open", size=11, line_width=2)),
            go.Scatter(x=[k[0] for k, _ in marks_backup], y=[v for _, v in marks_backup], mode="markers",
                       name="the page (quoted)", legendgroup="page", showlegend=False, xaxis="x2", yaxis="y2",
                       marker=dict(color=PALETTE["secondary"], symbol="diamond-open", size=11, line_width=2)),
        ]
        title = (f"{_count(n, 'GPU')}: this step {d0['step_s']:.3f} s ({_count(d0['n_slow'], 'slow GPU')}); "
                 f"with {_count(b, 'backup')} {d1['step_s']:.3f} s. Step efficiency (exact): {e0:.1%} "
                 f"without, {e1:.1%} with backups")
        frames.append(Frame(label=f"{n:,}", data=data, title=title))
        ranges.append(dict(xaxis=dict(range=[-1.5, max(d0["shown"], d1["shown"]) + 0.5]),
                           yaxis=dict(range=_step_range((d0, d1), model.compute_s))))
    plain, backup = step_panel_groups(len(frames[0].data))
    active = sizes.index(n_gpus)
    base = _base(760, barmode="overlay",
                 xaxis=dict(title="GPU (position in the sample shown)", domain=[0, 1], anchor="y",
                            **ranges[active]["xaxis"]),
                 yaxis=dict(title="compute this step (s)", domain=[0.5, 1], **ranges[active]["yaxis"]),
                 xaxis2=dict(title="GPUs in the cluster (log scale)", type="log", domain=[0, 1], anchor="y2",
                             range=_log_range(curve_sizes, pad=0.1)),
                 yaxis2=dict(title="step efficiency (%)", tickformat=".0%", range=[0.6, 1.0], domain=[0, 0.36]))
    fig = frames_figure(frames, "GPUs", active=active, base_layout=base)
    for fr, r in zip(fig.frames, ranges):
        fr.layout.update(r)  # plotly's animate does not autorange: every frame carries its own ranges
    n_traces = len(fig.data)
    visible = {False: [i not in backup for i in range(n_traces)], True: [i not in plain for i in range(n_traces)]}
    for i, tr in enumerate(fig.data):
        tr.visible = visible[backups_on][i]
    fig.update_layout(updatemenus=[_buttons(
        ["without backups", f"with {100 * backup_share:g}% backups"],
        [("restyle", [{"visible": visible[False]}]), ("restyle", [{"visible": visible[True]}])],
        active=int(backups_on))])
    _room_for_buttons(fig)
    return fig


def step_panel_groups(n_traces: int = 16) -> tuple[set[int], set[int]]:
    """Indices of the traces shown only without backups and only with them (the rest are always shown), in the
    order ``step_panel_figure`` draws them: 4 step traces without backups (0-3), 5 with (4-8), the compute line
    (9), the two curves (10, 11), this cluster without and with (12, 13), the page's marks without and with
    backups (14, 15)."""
    if n_traces != 16:
        raise ValueError(f"the step panel has 16 traces; got {n_traces}")
    return {0, 1, 2, 3, 12}, {4, 5, 6, 7, 8, 13, 15}


# ----------------------------------------------------------------------------------------------- the five ways
#: The lower panel's categories, top to bottom: (PolicyRow's exact expected field, its field for this run, label);
#: step efficiency is exact in both (a run's goodput is its kept share times the exact step efficiency).
BREAKDOWN = (("expected_kept", "kept_share", "time kept"), ("expected_checkpoint", "checkpoint_share", "writing"),
             ("expected_lost", "lost_share", "thrown away<br>+ restarts"),
             ("step_efficiency", None, "step efficiency"), ("expected_goodput", "goodput", "goodput"))
#: Plot-area heights (px) of the three panels of the five-ways figure, and the gap that holds an x-axis title
#: and the next panel's heading.
_PANEL_PX = {"interval": 190, "breakdown": 170}
_GAP_PX = 92
_TICKS_MIN = (0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000)


def _row_page_marks(row, yd_min: float) -> dict:
    """The page's quoted figures that apply to one row of the five ways: label -> value. Its step efficiencies
    where the row's cluster (GPUs, backups) is one the page quotes; its shares of the run only at its 16,384
    GPUs without backups and at the interval the page quotes each for (kept at Young-Daly, writing at YD/6,
    thrown away at 6 YD)."""
    out = {}
    eff = PAGE_EFFICIENCY.get((row.n_gpus, row.n_backup))
    if eff is not None:
        out["step efficiency"] = eff
    if row.n_gpus == 16_384 and row.n_backup == 0:
        for tau, key, label in ((yd_min, "kept_yd", "time kept"), (yd_min / 6, "ckpt_often", "writing"),
                                (6 * yd_min, "lost_rarely", "thrown away<br>+ restarts")):
            if math.isclose(row.interval_min, tau, rel_tol=1e-6):
                out[label] = float(PAGE_CLAIMS[key].rstrip("%")) / 100
    return out


def _five_ways_traces(row, run, failure: FailureModel, grid) -> list:
    """One row's traces: the two weeks (x, y), where the time goes at every interval for the row's cluster
    (x2, y2) and the row's shares, step efficiency and goodput (x3, y3)."""
    top = [tr.update(xaxis="x", yaxis="y", legend="legend") for tr in day_traces(run, failure)]
    m = failure.cluster_mtbf_min(row.n_gpus, row.n_backup)
    sh = time_shares(grid, m, failure.checkpoint_min, failure.restart_min)
    yd_row = young_daly_min(m, failure.checkpoint_min)
    ax2 = dict(xaxis="x2", yaxis="y2", legend="legend2")
    layers = (("kept", PALETTE["good"]), ("writing", PALETTE["primary"]), ("thrown", PALETTE["bad"]),
              ("restarts", PALETTE["neutral"]))
    mid = [go.Scatter(x=np.round(grid, 4).tolist(), y=np.round(np.clip(sh[k], 0, 1), 5).tolist(), mode="lines",
                      stackgroup="time", name=k, showlegend=False, line=dict(color=c, width=0.5), fillcolor=c,
                      hoverinfo="x+y+name", **ax2) for k, c in layers]
    mid += [go.Scatter(x=[yd_row, yd_row], y=[0, 1], mode="lines", name="Young-Daly", **ax2,
                       line=dict(color="black", dash="dash")),
            go.Scatter(x=[row.interval_min] * 2, y=[0, 1], mode="lines", name="this row's interval", **ax2,
                       line=dict(color=PALETTE["accent"], dash="dot", width=3)),
            go.Scatter(x=[row.interval_min], y=[round(row.expected_kept, 5)], mode="markers", **ax2,
                       name="kept (exact expected)", marker=dict(color="white", size=10, line=dict(
                           color=PALETTE["accent"], width=2))),
            go.Scatter(x=[row.interval_min], y=[round(run.kept_share, 5)], mode="markers", **ax2,
                       name="kept (this run)", marker=dict(color=PALETTE["accent"], size=10, symbol="x"))]
    labels = [lab for _, _, lab in BREAKDOWN]
    ax3 = dict(xaxis="x3", yaxis="y3", legend="legend3")
    page = _row_page_marks(row, yd_row)   # the page's marks are at 16,384 GPUs without backups only
    low = [go.Bar(y=labels, x=[round(getattr(row, e), 5) for e, _, _ in BREAKDOWN], orientation="h", width=0.55,
                  name="exact expected", marker_color=PALETTE["light"], marker_line=dict(
                      color=PALETTE["primary"], width=1), **ax3),
           go.Scatter(y=labels, x=[None if r is None else round(getattr(row, r), 5) for _, r, _ in BREAKDOWN],
                      mode="markers", name="this run (simulated)",
                      marker=dict(color=PALETTE["accent"], size=11, symbol="x"), **ax3),
           go.Scatter(y=list(page), x=list(page.values()), mode="markers", name="the page (quoted)", **ax3,
                      marker=dict(color=PALETTE["secondary"], symbol="diamond-open", size=12, line_width=2))]
    return top + mid + low


def five_ways_figure(n_gpus: int = 16_384, interval_min: float = 120.0, backup_share: float = 0.0,
                     days: float = 14.0, seed: int = 0, step: StepModel = StepModel(),
                     failure: FailureModel = FailureModel()):
    """The five ways in one figure of three panels, one button per row of ``simulate.five_ways``; each button
    applies its row's interval and backups to every panel: the two weeks one row per day (the same failures for
    every row), where the time goes at every interval for the row's cluster with its interval marked (exact
    expected, stacked), and the row's shares, step efficiency and goodput (exact bars, this run's crosses, the
    page's quoted values only where they apply). Axes stay fixed across buttons. Returns (figure, comparison).
    """
    comparison, runs = five_ways(n_gpus, interval_min, backup_share, days, seed, step, failure, record=True)
    yds = [young_daly_min(failure.cluster_mtbf_min(r.n_gpus, r.n_backup), failure.checkpoint_min)
           for r in comparison.rows]
    grid = interval_grid([r.interval_min for r in comparison.rows] + yds, 120)  # fixed across the buttons
    frames = []
    for row in comparison.rows:
        run = runs[row.name]
        title = (f"{row.name}: every {row.interval_min:.1f} min on {_gpus(row.n_gpus, row.n_backup)}: "
                 f"{_count(run.failures, 'failure')}; {run.lost_share:.1%} thrown away (with restarts); "
                 f"{run.checkpoint_share:.1%} writing; {run.kept_share:.1%} kept x {row.step_efficiency:.1%} "
                 f"step efficiency = {row.goodput:.1%} goodput (this run)")
        frames.append(Frame(label=row.name, data=_five_ways_traces(row, run, failure, grid), title=title))
    n_days = math.ceil(days)
    px = {"days": 40 + 24 * n_days, **_PANEL_PX}
    total = sum(px.values()) + 2 * _GAP_PX
    d3 = (0.0, px["breakdown"] / total)
    d2 = (d3[1] + _GAP_PX / total, d3[1] + (_GAP_PX + px["interval"]) / total)
    d1 = (d2[1] + _GAP_PX / total, 1.0)
    base = _base(total, barmode="overlay", bargap=0.25,
                 xaxis=dict(title="hour of the day (h)", range=[0, 24], dtick=3, anchor="y"),
                 yaxis=dict(title="day of the run", range=[n_days + 0.5, 0.5], dtick=1, domain=d1),
                 xaxis2=dict(title="checkpoint interval (min, log scale)", type="log", anchor="y2",
                             range=[math.log10(grid[0]), math.log10(grid[-1])], tickvals=_TICKS_MIN,
                             ticktext=[f"{t:g}" for t in _TICKS_MIN]),
                 yaxis2=dict(title="share of the time", tickformat=".0%", range=[0, 1], domain=d2),
                 xaxis3=dict(title="share of the run's time, of the ideal step rate, of GPU time",
                             tickformat=".0%", range=[0, 1], dtick=0.1, anchor="y3"),
                 yaxis3=dict(categoryorder="array", categoryarray=[lab for _, _, lab in BREAKDOWN][::-1],
                             range=[-0.5, len(BREAKDOWN) - 0.5], domain=d3, automargin=True))
    for name, d in (("legend", d1), ("legend2", d2), ("legend3", d3)):
        base[name] = {**base["legend"], "y": d[1], "traceorder": "normal"}
    base["annotations"] = [
        dict(text=text, x=0, xref="paper", xanchor="left", y=d[1], yref="paper", yanchor="bottom", yshift=4,
             showarrow=False, align="left", font=dict(size=13))
        for text, d in (("Where the time goes at every interval for this row's cluster (exact expected; "
                         "colours as above)", d2),
                        ("This row: shares of the run, step efficiency and goodput", d3))]
    active = len(frames) - 1  # "Your settings": the parameters cell
    fig = frames_figure(frames, "row", active=active, base_layout=base)
    anim = dict(mode="immediate", frame=dict(duration=0, redraw=True), transition=dict(duration=0))
    fig.layout.sliders = ()  # the buttons replace the slider
    fig.update_layout(updatemenus=[_buttons(
        [f.label for f in frames], [("animate", [[f.label], anim]) for f in frames], active=active)])
    _room_for_buttons(fig)
    fig.update_layout(height=total + fig.layout.margin.t + fig.layout.margin.b)
    return fig, comparison


def five_ways_panels(fig) -> dict[str, list[int]]:
    """The trace indices of each panel of ``five_ways_figure``: ``days``, ``interval``, ``breakdown``."""
    axes = {"x": "days", "x2": "interval", "x3": "breakdown"}
    out = {v: [] for v in axes.values()}
    for i, tr in enumerate(fig.data):
        out[axes[tr.xaxis or "x"]].append(i)
    return out


# ----------------------------------------------------------------------------------------------- the interval
def time_shares(interval_min, mtbf_min: float, checkpoint_min: float = 1.0, restart_min: float = 5.0) -> dict:
    """Where the wall time goes, exact, summing to 1: ``kept`` training, completed checkpoint ``writing``,
    ``restarts`` (R per failure, a failure every M + R of wall time) and work ``thrown`` away (with interrupted
    writes)."""
    e_t = expected_segment_min(interval_min, mtbf_min, checkpoint_min, restart_min)
    tau = np.asarray(interval_min, dtype=float)
    kept, writing = tau / e_t, checkpoint_min / e_t
    restarts = restart_min / (mtbf_min + restart_min) * np.ones_like(tau)
    return {"kept": kept, "writing": writing, "thrown": 1 - kept - writing - restarts, "restarts": restarts}


def interval_panel_figure(n_gpus: int = 16_384, interval_min: float = 120.0, sizes=None,
                          failure: FailureModel = FailureModel()):
    """Where the time goes against the checkpoint interval, stacked (kept, writing, thrown away, restarts), with
    a GPU-count slider; Young-Daly dashed, your interval dotted; the page's kept share only at its 16,384 GPUs."""
    sizes = tuple(sorted({*(sizes or PANEL_SIZES), n_gpus}))
    page_kept = float(PAGE_CLAIMS["kept_yd"].rstrip("%")) / 100
    layers = (("kept", "training kept", PALETTE["good"]), ("writing", "writing checkpoints", PALETTE["primary"]),
              ("thrown", "work thrown away", PALETTE["bad"]), ("restarts", "restarts", PALETTE["neutral"]))
    frames, ranges = [], []
    for n in sizes:
        m = failure.cluster_mtbf_min(n)
        yd = young_daly_min(m, failure.checkpoint_min)
        grid = interval_grid((yd, interval_min))  # each size its own: Young-Daly grows to hours on 8 GPUs
        ranges.append(dict(xaxis=dict(range=_log_range(grid, pad=0.0))))
        sh = time_shares(grid, m, failure.checkpoint_min, failure.restart_min)
        mine = {k: float(v) for k, v in time_shares(interval_min, m, failure.checkpoint_min,
                                                   failure.restart_min).items()}
        kept_yd = float(time_shares(yd, m, failure.checkpoint_min, failure.restart_min)["kept"])
        data = [go.Scatter(x=np.round(grid, 4).tolist(), y=np.round(np.clip(sh[k], 0, 1), 5).tolist(),
                           mode="lines", stackgroup="time", name=name, line=dict(color=colour, width=0.5),
                           fillcolor=colour) for k, name, colour in layers]
        page = n == 16_384
        data += [
            go.Scatter(x=[yd, yd], y=[0, 1], mode="lines", name="Young-Daly", line=dict(color="black",
                                                                                         dash="dash")),
            go.Scatter(x=[interval_min, interval_min], y=[0, 1], mode="lines", name="your interval",
                       line=dict(color=PALETTE["accent"], dash="dot", width=2)),
            # None where the page quotes nothing: the trace, and so the legend, stays in every frame
            go.Scatter(x=[yd] if page else [None], y=[page_kept] if page else [None], mode="markers",
                       name="the page: kept at Young-Daly (quoted)",
                       marker=dict(color=PALETTE["secondary"], symbol="diamond-open", size=12, line_width=2)),
        ]
        title = (f"{_count(n, 'GPU')}, MTBF {m / 60:,.1f} h: Young-Daly {yd:.1f} min keeps {kept_yd:.1%}; "
                 f"your {interval_min:g} min keeps {mine['kept']:.1%}, writes {mine['writing']:.1%}, "
                 f"throws away {mine['thrown']:.1%}, restarts {mine['restarts']:.1%} (exact expected)")
        frames.append(Frame(label=f"{n:,}", data=data, title=title))
    active = sizes.index(n_gpus)
    base = _base(480, xaxis=dict(title="checkpoint interval (min, log scale)", type="log",
                                 **ranges[active]["xaxis"]),
                 yaxis=dict(title="share of the run's time (%)", tickformat=".0%", range=[0, 1]))
    fig = frames_figure(frames, "GPUs", active=active, base_layout=base)
    for fr, r in zip(fig.frames, ranges):
        fr.layout.update(r)  # plotly's animate does not autorange: every frame carries its own range
    return fig


def chapter_panels(n_gpus: int = 16_384, interval_min: float = 120.0, backup_share: float = 0.0,
                   days: float = 14.0, seed: int = 0, step: StepModel = StepModel(),
                   failure: FailureModel = FailureModel()) -> dict:
    """The chapter's three figures (``step``, ``five_ways``, ``interval``) and the five-ways ``comparison``
    behind the buttons. The step toggle uses ``backup_share`` when it is above zero, else the page's 2%."""
    share = backup_share if backup_share > 0 else 0.02
    five, comparison = five_ways_figure(n_gpus, interval_min, backup_share, days, seed, step, failure)
    return {"step": step_panel_figure(n_gpus, share, seed, backups_on=backup_share > 0, model=step),
            "five_ways": five, "interval": interval_panel_figure(n_gpus, interval_min, failure=failure),
            "comparison": comparison}
