"""One small picture per basic parallelism: what each GPU holds, and one iteration as a timeline.

The pictures are schematic, not priced: four GPUs, a model cut into four parts and a batch cut into four, and
times in abstract units chosen so that the orders and ratios the cost model uses hold (DP's all-reduce moves
2 units, SDP's two all-gathers and one reduce-scatter 3, half as much again; a GPipe pipeline of p stages and
m micro-batches idles (p - 1) / (m + p - 1) of its time). The numbers come later, from the cost model.
Torch-free. Used in: book/galvatron/01_the_space (chapter 5, "Four ways to split one layer").
"""

from __future__ import annotations

from dataclasses import dataclass

from lib.viz import PALETTE, layout

KINDS = ("dp", "sdp", "tp", "pp")

#: What a cell of the holdings grid means: the GPU keeps it, gathers it for a moment, or never has it.
HELD, GATHERED, ABSENT = 1.0, 0.5, 0.0

#: Colours of the timeline: forward and backward compute, communication, idle (the pipeline bubble).
COLOURS = {"fwd": PALETTE["primary"], "bwd": "#1B9AAA", "comm": PALETTE["accent"], "idle": "#E4E6EA"}

# Abstract time units of one GPU's work in one iteration: a forward pass of 2, a backward pass of 4 (twice the
# forward, as the cost model's bwd_ratio), whatever the parallelism, because each divides the work by 4.
_FWD, _BWD = 2.0, 4.0


@dataclass(frozen=True)
class Event:
    """One bar of a timeline: ``gpu`` is busy with ``what`` (``fwd``, ``bwd``, ``comm`` or ``idle``) from
    ``start`` for ``dur`` units; ``label`` is the text on the bar."""

    gpu: int
    start: float
    dur: float
    what: str
    label: str

    @property
    def end(self) -> float:
        return self.start + self.dur


def _check(kind: str, n_gpus: int) -> None:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}; got {kind!r}")
    if n_gpus < 2:
        raise ValueError(f"n_gpus must be at least 2; got {n_gpus}")


def holdings(kind: str, n_gpus: int = 4) -> tuple[list[str], list[list[float]]]:
    """Columns (n_gpus parts of the model, then n_gpus parts of the batch) and, per GPU, what it holds of each:
    ``HELD``, ``GATHERED`` (SDP's weights, fetched for a moment and dropped) or ``ABSENT``."""
    _check(kind, n_gpus)
    model_cols = {"dp": "model part", "sdp": "model part", "tp": "columns", "pp": "layers"}[kind]
    batch_cols = "micro-batch" if kind == "pp" else "samples"
    cols = [f"{model_cols} {k + 1}" for k in range(n_gpus)] + [f"{batch_cols} {k + 1}" for k in range(n_gpus)]
    grid = []
    for g in range(n_gpus):
        mine = [HELD if k == g else ABSENT for k in range(n_gpus)]
        everything = [HELD] * n_gpus
        model = {"dp": everything, "sdp": [HELD if k == g else GATHERED for k in range(n_gpus)],
                 "tp": mine, "pp": mine}[kind]
        batch = mine if kind in ("dp", "sdp") else everything
        grid.append(model + batch)
    return cols, grid


def timeline(kind: str, n_gpus: int = 4, micro_batches: int = 4) -> list[Event]:
    """One iteration of ``kind`` on ``n_gpus`` GPUs as events, in abstract units (see the module docstring).

    DP: forward, backward, and the gradients' all-reduce started during the backward pass. SDP: an all-gather
    of the weights before the forward and again before the backward, and a reduce-scatter of the gradients.
    TP: an all-reduce of the activations after each half of the layer (attention, MLP), forward and backward,
    on the critical path. PP: GPipe, ``micro_batches`` forwards then as many backwards per stage, activations
    sent to the next stage, and the bubble as idle time.
    """
    _check(kind, n_gpus)
    if micro_batches < 1:
        raise ValueError(f"micro_batches must be at least 1; got {micro_batches}")
    ev: list[Event] = []
    if kind == "dp":
        for g in range(n_gpus):
            ev += [Event(g, 0, _FWD, "fwd", "forward"), Event(g, _FWD, _BWD, "bwd", "backward"),
                   Event(g, _FWD + _BWD / 2, 2.0, "comm", "all-reduce grads")]
    elif kind == "sdp":
        for g in range(n_gpus):
            ev += [Event(g, 0, 1.0, "comm", "gather W"), Event(g, 1, _FWD, "fwd", "forward"),
                   Event(g, 1 + _FWD, 1.0, "comm", "gather W"), Event(g, 2 + _FWD, _BWD, "bwd", "backward"),
                   Event(g, 2 + _FWD + _BWD / 2, 1.0, "comm", "scatter grads")]
    elif kind == "tp":
        ar = 0.75
        for g in range(n_gpus):
            t = 0.0
            for what, dur in (("fwd", _FWD / 2), ("fwd", _FWD / 2), ("bwd", _BWD / 2), ("bwd", _BWD / 2)):
                ev.append(Event(g, t, dur, what, "fwd" if what == "fwd" else "bwd"))
                ev.append(Event(g, t + dur, ar, "comm", "AR"))
                t += dur + ar
    else:  # GPipe: stage s runs micro-batch j's forward at step s + j, backwards in reverse stage order
        p, m = n_gpus, micro_batches
        f, b = _FWD / m, _BWD / m
        fwd_end = (m + p - 1) * f
        for s in range(p):
            for j in range(m):
                ev.append(Event(s, (s + j) * f, f, "fwd", f"F{j + 1}"))
                ev.append(Event(s, fwd_end + (p - 1 - s + j) * b, b, "bwd", f"B{j + 1}"))
            # idle: before the first forward, between the last forward and the first backward, after the last
            gaps = [(0.0, s * f), ((s + m) * f, fwd_end + (p - 1 - s) * b),
                    (fwd_end + (p - 1 - s + m) * b, fwd_end + (m + p - 1) * b)]
            ev += [Event(s, a, z - a, "idle", "idle") for a, z in gaps if z - a > 1e-9]
    return ev


def idle_fraction(events: list[Event]) -> float:
    """The share of GPU time spent idle in ``events`` (the pipeline bubble; 0 for DP, SDP and TP)."""
    span = max(e.end for e in events)
    n = len({e.gpu for e in events})
    return sum(e.dur for e in events if e.what == "idle") / (span * n)


def comm_units(events: list[Event]) -> float:
    """Communication per GPU in ``events``, in the pictures' units (bar length: one unit moves one unit)."""
    n = len({e.gpu for e in events})
    return sum(e.dur for e in events if e.what == "comm") / n


def compute_end(events: list[Event]) -> float:
    """When the last compute bar ends: the iteration's length as far as compute is concerned."""
    return max(e.end for e in events if e.what in ("fwd", "bwd"))


TITLES = {
    "dp": "DP: every GPU holds the whole model and a quarter of the batch; the gradients are "
          "all-reduced during the backward pass",
    "sdp": "SDP (ZeRO-3): every GPU keeps a quarter of the model states, gathers the weights before "
           "each pass and reduce-scatters the gradients",
    "tp": "TP: every GPU holds a quarter of each matrix and the whole batch; activations are "
          "all-reduced inside each pass, on the critical path",
    "pp": "PP: every GPU holds a quarter of the layers; micro-batches flow stage to stage, and the "
          "GPUs idle in the bubble",
}


def parallelism_figure(kind: str, n_gpus: int = 4, micro_batches: int = 4, title: str | None = None):
    """The picture of ``kind``: on top, what each GPU holds (dark: kept, light: gathered for a moment);
    below, one iteration as a timeline (not to scale; sends between stages as arrows)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    cols, grid = holdings(kind, n_gpus)
    events = timeline(kind, n_gpus, micro_batches)
    gpus = [f"GPU {g}" for g in range(n_gpus)]
    fig = make_subplots(rows=2, cols=1, row_heights=[0.4, 0.6], vertical_spacing=0.2,
                        subplot_titles=("what each GPU holds (dark: kept; light: gathered for a moment)",
                                        "one iteration in time (not to scale)"))
    words = {HELD: "holds", GATHERED: "gathers", ABSENT: ""}
    fig.add_trace(go.Heatmap(z=grid, x=cols, y=gpus, zmin=0, zmax=1, showscale=False, xgap=3, ygap=3,
                             colorscale=[[0, "#F4F5F7"], [0.5, PALETTE["light"]], [1, PALETTE["primary"]]],
                             text=[[words[v] for v in row] for row in grid], texttemplate="%{text}",
                             hovertemplate="%{y}, %{x}: %{text}<extra></extra>"), row=1, col=1)
    for e in events:
        dark = e.what in ("fwd", "bwd", "comm")
        fig.add_trace(go.Bar(x=[e.dur], base=[e.start], y=[f"GPU {e.gpu}"], orientation="h",
                             marker=dict(color=COLOURS[e.what], line=dict(color="white", width=1)),
                             text=[e.label if e.what != "idle" or e.dur >= 1 else ""],
                             textposition="inside",
                             insidetextanchor="start" if e.what == "bwd" and kind != "pp" else "middle",
                             textfont=dict(color="white" if dark else "#555", size=11),
                             width=0.45 if e.what == "comm" and kind in ("dp", "sdp") else 0.8,
                             offset=-0.45 if e.what == "comm" and kind in ("dp", "sdp") else None,
                             showlegend=False, hovertemplate=f"{e.label}: {e.start:g} to {e.end:g}<extra></extra>"),
                      row=2, col=1)
    if kind == "pp":  # activations sent forward, and their gradients back, at every stage boundary
        for e in events:
            to = e.gpu + 1 if e.what == "fwd" else e.gpu - 1
            if e.what in ("fwd", "bwd") and 0 <= to < n_gpus:
                fig.add_annotation(x=e.end, y=f"GPU {to}", ax=e.end, ay=f"GPU {e.gpu}", xref="x2",
                                   yref="y2", axref="x2", ayref="y2", showarrow=True, arrowhead=2,
                                   arrowwidth=1, arrowcolor=COLOURS["comm"], text="")
    fig.update_layout(barmode="overlay", bargap=0.1)
    fig.update_yaxes(autorange="reversed", row=1, col=1)
    fig.update_yaxes(autorange="reversed", row=2, col=1)
    fig.update_xaxes(title_text="time (units of work, not to scale)", row=2, col=1)
    fig.update_xaxes(side="bottom", row=1, col=1)
    fig.update_annotations(font_size=12)
    return layout(fig, title or TITLES[kind], height=430)
