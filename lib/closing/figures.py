"""The closing chapter's slider: every stage of one run's estimate at each cluster size, precomputed frames
(``lib.viz.frames_figure``), so it works in the static book without a kernel.

Used in: book/closing/01_one_run.
"""

from __future__ import annotations

from dataclasses import replace

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from lib.viz import PALETTE, Frame, frames_figure, layout

from .run import Job, OneRun, one_run

#: The slider's cluster sizes by default: 256 to 16,384 GPUs (32 to 2,048 nodes of eight; the 405B model fits no plan on 128 under the cost model).
SLIDER_SIZES = tuple(2**k for k in range(8, 15))
SHARE_BARS = (("step efficiency", "eff_no_backup", "eff_backup"), ("kept fraction", "kept", "kept_backup"),
              ("goodput", "goodput_no_backup", "goodput_backup"))


def sweep(job: Job, sizes=SLIDER_SIZES) -> list[OneRun]:
    """``one_run`` of ``job`` at every cluster size (each size searches its own plan)."""
    return [one_run(replace(job, n_gpus=int(n))) for n in sizes]


def _values(r: OneRun) -> dict:
    return {**r.stages(), "kept_backup": r.fail_backup["kept"]}


def _traces(r: OneRun, y_max_s: float, y_max_min: float) -> list:
    v = _values(r)
    names = [label for label, _, _ in SHARE_BARS]
    return [
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
    return (f"{r.job.n_gpus:,} GPUs: plan tp {e.tp} x pp {e.pp} x dp {e.dp}, goodput "
            f"{r.goodput_no_backup:.1%} plain, {r.goodput_backup:.1%} with {r.backup_gpus:,} backup GPUs "
            f"(estimated)")


def slider_figure(runs: list[OneRun], active_gpus: int | None = None):
    """One frame per run: step time, Young–Daly interval, and step efficiency, kept fraction and goodput
    with and without backup replicas. ``active_gpus``: the frame shown first (default: the last)."""
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
    base["yaxis3"] = dict(base.get("yaxis3", {}), title="share", tickformat=".0%", range=[0, 1.12])
    active = sizes.index(active_gpus) if active_gpus is not None else len(runs) - 1
    return frames_figure(frames, "GPUs", active=active, base_layout=base)
