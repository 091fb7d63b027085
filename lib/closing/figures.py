"""The closing chapter's figures: the slider over cluster sizes (every stage of one run's estimate, precomputed
frames of ``lib.viz.frames_figure``, so it works in the static book without a kernel) with Llama 3's quoted
values marked where they apply, and stage 2's sensitivity. Share axes zoom to the range the values span; each
frame of the slider fits its own axes.

Used in: book/closing/01_one_run.
"""

from __future__ import annotations

from dataclasses import replace

import math

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from lib.viz import PALETTE, Frame, frames_figure, layout

from .llama3 import (LLAMA3_EFFECTIVE_TRAINING, LLAMA3_GPUS, LLAMA3_TFLOPS, LLAMA3_TOKENS_PER_STEP,
                     llama3_step_s)
from .run import Job, OneRun, one_run

#: The slider's cluster sizes by default: 256 to 16,384 GPUs (32 to 2,048 nodes of eight; the 405B model fits no plan on 128 under the cost model).
SLIDER_SIZES = tuple(2**k for k in range(8, 15))
SHARE_BARS = (("step efficiency", "eff_no_backup", "eff_backup"), ("kept share", "kept", "kept_backup"),
              ("goodput", "goodput_no_backup", "goodput_backup"))


def sweep(job: Job, sizes=SLIDER_SIZES, done: tuple[OneRun, ...] = ()) -> list[OneRun]:
    """``one_run`` of ``job`` at every cluster size (each size searches its own plan); a run in ``done`` of
    the same job at one of the sizes is reused, not searched again."""
    known = {r.job: r for r in done}
    return [known.get(replace(job, n_gpus=int(n))) or one_run(replace(job, n_gpus=int(n))) for n in sizes]


def _values(r: OneRun) -> dict:
    return {**r.stages(), "kept_backup": r.fail_backup["kept"]}


def share_range(values, pad: float = 0.03, room: float = 0.0) -> list[float]:
    """A share axis that starts a little below the smallest value (in steps of 5%) and ends at 100%, so 84, 90
    and 95% look apart. ``room``: the least share of the axis the smallest value stands above its start, so a
    short bar still holds its label."""
    lo = min(values) - pad
    if room > 0:
        lo = min(lo, (min(values) - room) / (1 - room))
    return [max(0.0, math.floor(lo * 20) / 20), 1.0]


#: Each panel's categories, left to right, in every frame: a category axis keeps its order and slots when a
#: frame draws nothing in one of them.
CATEGORIES = {"x": ["step"], "x2": ["Young–Daly"], "x3": [label for label, _, _ in SHARE_BARS]}
#: Headroom above the tallest mark of a frame's step and interval panels (its label sits inside the bar).
HEADROOM = 1.15


def _llama3_step(r: OneRun) -> list[float]:
    """Llama 3's step at this frame's size, only where the frame's plan trains Meta's batch (Table 4: 16M
    tokens a step at 8,192 and at 16,384 GPUs): a step of another batch is not set beside the plan's."""
    n = r.job.n_gpus
    same_batch = r.job.tokens_per_gpu * n == LLAMA3_TOKENS_PER_STEP
    return [llama3_step_s(n)] if r.job.model == "llama3-405b" and n in LLAMA3_TFLOPS and same_batch else []


def _marks(r: OneRun) -> list:
    """Llama 3's quoted values where they apply: its step (estimated from Table 4's TFLOP/s) at 8,192 and
    16,384 GPUs when the plan's batch is Meta's, its effective training time (>90%) beside the kept share at
    16,384. A missing value is None, not an empty trace: every frame keeps its traces and its legend, so the
    plot area does not move with the slider."""
    llama = r.job.model == "llama3-405b"
    step = _llama3_step(r) or [None]
    kept = [LLAMA3_EFFECTIVE_TRAINING] if llama and r.job.n_gpus == LLAMA3_GPUS else [None]
    diamond = dict(symbol="diamond", size=13, color=PALETTE["secondary"], line=dict(color="white", width=1))
    return [
        go.Scatter(x=["step"], y=step, mode="markers", marker=diamond, xaxis="x", yaxis="y",
                   name="Llama 3 405B's step, 16M tokens<br>(from its quoted TFLOP/s)"),
        go.Scatter(x=["kept share"], y=kept, mode="markers",
                   marker=dict(diamond, symbol="line-ew", size=40, line=dict(color=PALETTE["secondary"], width=3)),
                   xaxis="x3", yaxis="y3", name="Llama 3: >90% effective training time (quoted)"),
    ]


def _traces(r: OneRun) -> list:
    v = _values(r)
    names = CATEGORIES["x3"]
    return _marks(r) + [
        go.Bar(x=["step"], y=[r.est.step_s], name="step time (s)", marker_color=PALETTE["neutral"],
               xaxis="x", yaxis="y", text=[f"{r.est.step_s:.1f} s"], textposition="inside"),
        go.Bar(x=["Young–Daly"], y=[r.fail_no_backup["interval_min"]], name="Young–Daly interval (min)",
               marker_color=PALETTE["accent"], xaxis="x2", yaxis="y2",
               text=[f"{r.fail_no_backup['interval_min']:.1f}"], textposition="inside"),
        go.Bar(x=names, y=[v[k] for _, k, _ in SHARE_BARS], name="no backups", marker_color=PALETTE["primary"],
               xaxis="x3", yaxis="y3", text=[f"{v[k]:.0%}" for _, k, _ in SHARE_BARS], textposition="inside"),
        go.Bar(x=names, y=[v[k] for _, _, k in SHARE_BARS], name="backup replicas", marker_color=PALETTE["good"],
               xaxis="x3", yaxis="y3", text=[f"{v[k]:.0%}" for _, _, k in SHARE_BARS], textposition="inside"),
    ]


def frame_ranges(r: OneRun) -> dict:
    """One frame's value axes, fitted to what that frame draws: the step (with Llama 3's where it is drawn), the
    interval, and the shares from a little below the smallest (room for its label) to 100%."""
    step = max([r.est.step_s, *_llama3_step(r)])
    v = _values(r)
    shares = [v[k] for _, a, b in SHARE_BARS for k in (a, b)]
    return {"yaxis": dict(range=[0, HEADROOM * step]),
            "yaxis2": dict(range=[0, HEADROOM * r.fail_no_backup["interval_min"]]),
            "yaxis3": dict(range=share_range(shares, room=0.1))}


def _title(r: OneRun) -> str:
    e = r.est
    cp = f" x cp {e.cp}" if e.cp > 1 else ""
    return (f"{r.job.n_gpus:,} GPUs: plan tp {e.tp}{cp} x pp {e.pp} x dp {e.dp}, goodput "
            f"{r.goodput_no_backup:.1%} plain, {r.goodput_backup:.1%} with {r.backup_gpus:,} backup GPUs "
            f"(estimated)")


def slider_figure(runs: list[OneRun], active_gpus: int | None = None):
    """One frame per run: step time, Young–Daly interval, and step efficiency, kept share and goodput
    with and without backup replicas; Llama 3's quoted values marked in the frames where they apply (the first
    two traces). Each frame sets its own value ranges (``frame_ranges``); the categories keep one order and
    fixed slots. ``active_gpus``: the frame shown first (default: the last)."""
    if not runs:
        raise ValueError("slider_figure needs at least one run; got none")
    sizes = [r.job.n_gpus for r in runs]
    if active_gpus is not None and active_gpus not in sizes:
        raise ValueError(f"active_gpus must be one of the runs' sizes {sizes}; got {active_gpus!r}")
    frames = [Frame(label=f"{r.job.n_gpus:,}", data=_traces(r), title=_title(r)) for r in runs]
    ranges = [frame_ranges(r) for r in runs]
    active = sizes.index(active_gpus) if active_gpus is not None else len(runs) - 1
    grid = make_subplots(rows=1, cols=3, column_widths=[0.16, 0.16, 0.68], horizontal_spacing=0.13)
    base = layout(grid, height=480).layout.to_plotly_json()
    base.update(barmode="group", uniformtext=dict(minsize=8, mode="show"))
    for ax, cats in CATEGORIES.items():
        name = f"xaxis{ax[1:]}"
        base[name] = dict(base.get(name, {}), type="category", categoryorder="array", categoryarray=cats,
                          range=[-0.5, len(cats) - 0.5])
    for name, title in (("yaxis", "seconds per step"), ("yaxis2", "minutes"), ("yaxis3", "share")):
        base[name] = dict(base.get(name, {}), title=title, **ranges[active][name])
    base["yaxis3"]["tickformat"] = ".0%"
    fig = frames_figure(frames, "GPUs", active=active, base_layout=base)
    for fr, rng in zip(fig.frames, ranges):
        fr.layout.update(rng)  # plotly's animate does not autorange: every frame carries its own ranges
    return fig


def sensitivity_figure(cases):
    """Goodput without and with backup replicas for each step and straggler tail (``sensitivity.sensitivity``),
    on a zoomed share axis, with Llama 3's quoted effective training time as a reference line (another
    measure: it does not charge stragglers)."""
    if not cases:
        raise ValueError("sensitivity_figure needs at least one case; got none")
    # two-level categories: the step under each group of bars, the tail under each bar (one long label
    # per bar overlapped its neighbours at 1,400 px)
    x = [[c.step.replace(", ", ",<br>") for c in cases], [c.tail.name.replace("the page's", "page's")
                                                          for c in cases]]
    plain = [c.run.goodput_no_backup for c in cases]
    backed = [c.run.goodput_backup for c in cases]
    bar = dict(textposition="inside", textangle=-90, insidetextanchor="end")
    fig = go.Figure([
        go.Bar(x=x, y=plain, name="goodput, no backups", marker_color=PALETTE["primary"],
               text=[f"{v:.1%}" for v in plain], **bar),
        go.Bar(x=x, y=backed, name="goodput, backup replicas", marker_color=PALETTE["good"],
               text=[f"{v:.1%}" for v in backed], **bar),
        go.Scatter(x=x, y=[LLAMA3_EFFECTIVE_TRAINING] * len(cases), mode="lines",
                   line=dict(color=PALETTE["secondary"], dash="dash", width=2),
                   name="Llama 3: >90% effective<br>training time (quoted;<br>charges no stragglers)"),
    ])
    title = (f"Stage 2's sensitivity on {cases[0].run.job.n_gpus:,} GPUs: goodput by step and straggler tail "
             "(estimated)")
    layout(fig, title, height=460)
    lo = share_range(plain + backed + [LLAMA3_EFFECTIVE_TRAINING], pad=0.05)[0]
    fig.update_layout(barmode="group", yaxis=dict(title="goodput", tickformat=".0%", range=[lo, 1.0]),
                      xaxis=dict(tickangle=0, title="step, then the straggler tail"),
                      uniformtext=dict(minsize=9, mode="show"))
    return fig
