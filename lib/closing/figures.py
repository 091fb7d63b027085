"""The closing chapter's figures: the slider over cluster sizes (every stage of one run's estimate, precomputed
frames of ``lib.viz.frames_figure``, so it works in the static book without a kernel) with Llama 3's quoted
values marked where they apply, and stage 2's sensitivity. Share axes zoom to the range the values span.

Used in: book/closing/01_one_run.
"""

from __future__ import annotations

from dataclasses import replace

import plotly.graph_objects as go
from plotly.subplots import make_subplots

import math

from lib.viz import PALETTE, Frame, frames_figure, layout

from .llama3 import LLAMA3_EFFECTIVE_TRAINING, LLAMA3_GPUS, LLAMA3_TFLOPS, llama3_step_s
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


def share_range(values, pad: float = 0.03) -> list[float]:
    """A share axis that starts a little below the smallest value (in steps of 5%) and ends at 100%, so 84, 90
    and 95% look apart."""
    lo = min(values) - pad
    return [max(0.0, math.floor(lo * 20) / 20), 1.0]


def _marks(r: OneRun) -> list:
    """Llama 3's quoted values where they apply: its step (estimated from Table 4's TFLOP/s) at 8,192 and
    16,384 GPUs, its effective training time (>90%) beside the kept share at 16,384. Empty traces elsewhere,
    so every frame has as many traces."""
    llama = r.job.model == "llama3-405b"
    n = r.job.n_gpus
    step = [llama3_step_s(n)] if llama and n in LLAMA3_TFLOPS else []
    kept = [LLAMA3_EFFECTIVE_TRAINING] if llama and n == LLAMA3_GPUS else []
    diamond = dict(symbol="diamond", size=13, color=PALETTE["secondary"], line=dict(color="white", width=1))
    return [
        go.Scatter(x=["step"] * len(step), y=step, mode="markers", marker=diamond, xaxis="x", yaxis="y",
                   name="Llama 3 405B's step (from its quoted TFLOP/s)"),
        go.Scatter(x=["kept share"] * len(kept), y=kept, mode="markers",
                   marker=dict(diamond, symbol="line-ew", size=40, line=dict(color=PALETTE["secondary"], width=3)),
                   xaxis="x3", yaxis="y3", name="Llama 3: >90% effective training time (quoted)"),
    ]


def _traces(r: OneRun, y_max_s: float, y_max_min: float) -> list:
    v = _values(r)
    names = [label for label, _, _ in SHARE_BARS]
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


def _title(r: OneRun) -> str:
    e = r.est
    cp = f" x cp {e.cp}" if e.cp > 1 else ""
    return (f"{r.job.n_gpus:,} GPUs: plan tp {e.tp}{cp} x pp {e.pp} x dp {e.dp}, goodput "
            f"{r.goodput_no_backup:.1%} plain, {r.goodput_backup:.1%} with {r.backup_gpus:,} backup GPUs "
            f"(estimated)")


def slider_figure(runs: list[OneRun], active_gpus: int | None = None):
    """One frame per run: step time, Young–Daly interval, and step efficiency, kept share and goodput
    with and without backup replicas; Llama 3's quoted values marked in the frames where they apply (the first
    two traces). ``active_gpus``: the frame shown first (default: the last)."""
    if not runs:
        raise ValueError("slider_figure needs at least one run; got none")
    sizes = [r.job.n_gpus for r in runs]
    if active_gpus is not None and active_gpus not in sizes:
        raise ValueError(f"active_gpus must be one of the runs' sizes {sizes}; got {active_gpus!r}")
    y_s = 1.25 * max(r.est.step_s for r in runs)
    y_min = 1.25 * max(r.fail_no_backup["interval_min"] for r in runs)
    frames = [Frame(label=f"{r.job.n_gpus:,}", data=_traces(r, y_s, y_min), title=_title(r)) for r in runs]
    grid = make_subplots(rows=1, cols=3, column_widths=[0.16, 0.16, 0.68], horizontal_spacing=0.13)
    base = layout(grid, height=480).layout.to_plotly_json()
    base.update(barmode="group", uniformtext=dict(minsize=8, mode="show"))
    base["yaxis"] = dict(base.get("yaxis", {}), title="seconds per step", range=[0, y_s])
    base["yaxis2"] = dict(base.get("yaxis2", {}), title="minutes", range=[0, y_min])
    shares = [_values(r)[k] for r in runs for _, a, b in SHARE_BARS for k in (a, b)]
    base["yaxis3"] = dict(base.get("yaxis3", {}), title="share", tickformat=".0%", range=share_range(shares))
    active = sizes.index(active_gpus) if active_gpus is not None else len(runs) - 1
    return frames_figure(frames, "GPUs", active=active, base_layout=base)


def sensitivity_figure(cases):
    """Goodput without and with backup replicas for each step and straggler tail (``sensitivity.sensitivity``),
    on a zoomed share axis, with Llama 3's quoted effective training time as a reference line (another
    measure: it does not charge stragglers)."""
    if not cases:
        raise ValueError("sensitivity_figure needs at least one case; got none")
    x = [f"{c.step.replace('at ', '').replace(' throughput', '')} step<br>{c.tail.name} tail" for c in cases]
    plain = [c.run.goodput_no_backup for c in cases]
    backed = [c.run.goodput_backup for c in cases]
    bar = dict(textposition="inside", textangle=-90, insidetextanchor="end")
    fig = go.Figure([
        go.Bar(x=x, y=plain, name="goodput, no backups", marker_color=PALETTE["primary"],
               text=[f"{v:.1%}" for v in plain], **bar),
        go.Bar(x=x, y=backed, name="goodput, backup replicas", marker_color=PALETTE["good"],
               text=[f"{v:.1%}" for v in backed], **bar),
        go.Scatter(x=x, y=[LLAMA3_EFFECTIVE_TRAINING] * len(x), mode="lines",
                   line=dict(color=PALETTE["secondary"], dash="dash", width=2),
                   name="Llama 3: >90% effective<br>training time (quoted;<br>charges no stragglers)"),
    ])
    title = (f"Stage 2's sensitivity on {cases[0].run.job.n_gpus:,} GPUs: goodput by step and straggler tail "
             "(estimated)")
    layout(fig, title, height=460)
    lo = share_range(plain + backed + [LLAMA3_EFFECTIVE_TRAINING], pad=0.05)[0]
    fig.update_layout(barmode="group", yaxis=dict(title="goodput", tickformat=".0%", range=[lo, 1.0]),
                      xaxis=dict(tickangle=0), uniformtext=dict(minsize=9, mode="show"))
    return fig
