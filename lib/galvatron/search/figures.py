"""Figures for the Galvatron chapters (plotly), kept out of the notebooks so cells stay short.

Used in: book/galvatron/01_the_space, 02_the_cost_model, 03_the_search.
"""

from __future__ import annotations

import numpy as np

from lib.viz import PALETTE, SEQUENCE, Frame, frames_figure, layout
from .cost import layer_memory_mb, layer_time_terms, overlap_ms, transition_s
from .strategies import Strategy, count_formula, generate

KIND_COLOUR = {"pp": PALETTE["accent"], "dp": PALETTE["primary"], "sdp": PALETTE["good"],
               "tp": PALETTE["secondary"], "gpu": PALETTE["neutral"]}


def _group_ids(s: Strategy):
    """Rows (outer to inner) x GPUs: for each level, the id of the communication group of every GPU."""
    levels = ([("pp", s.pp)] if s.pp > 1 else []) + list(s.levels)
    rows, labels = [], []
    for kind, _ in levels:
        gid = np.zeros(s.n_gpus, dtype=int)
        for k, grp in enumerate(s.groups(kind)):
            gid[list(grp)] = k
        rows.append(gid)
        labels.append(f"{kind.upper()}{dict(levels)[kind]}")
    return rows, labels


def tree_frames_figure(n_gpus: int = 8, active: int = 0):
    """One slider frame per strategy: each row is a tree level (outer on top); GPUs in one communication
    group of that level share a colour and a number."""
    import plotly.graph_objects as go

    strats = generate(n_gpus)
    depth = max(len(s.levels) + (s.pp > 1) for s in strats)
    frames = []
    for s in strats:
        rows, labels = _group_ids(s)
        z = np.full((depth, n_gpus), np.nan)
        text = [[""] * n_gpus for _ in range(depth)]
        ylab = [f"level {i + 1}" for i in range(depth)]
        for i, (r, lab) in enumerate(zip(rows, labels)):
            z[i] = r
            text[i] = [f"{lab}<br>group {g}" for g in r]
            ylab[i] = f"{i + 1}: {lab}"
        hm = go.Heatmap(z=z[::-1], x=[f"GPU {g}" for g in range(n_gpus)], y=ylab[::-1], text=text[::-1],
                        texttemplate="%{text}", colorscale="Viridis", showscale=False, xgap=3, ygap=3,
                        hoverinfo="text")
        frames.append(Frame(label=s.code, data=[hm], title=f"{s.code}: {s.name}"))
    fig = frames_figure(frames, "strategy", active=active)
    return layout(fig, frames[active].title, height=360)


def counts_figure(gpus=(2, 4, 8, 16, 32, 64)):
    import plotly.graph_objects as go

    fig = go.Figure()
    series = [("unpruned", dict(pruned=False)), ("pruned (no DP with SDP)", dict()),
              ("pruned, with CKPT", dict(ckpt=True))]
    for (name, kw), colour in zip(series, (PALETTE["neutral"], PALETTE["primary"], PALETTE["secondary"])):
        fig.add_bar(x=[str(n) for n in gpus], y=[len(generate(n, **kw)) for n in gpus], name=name,
                    marker_color=colour)
    fig.update_layout(barmode="group", xaxis_title="GPUs", yaxis_title="strategies per layer")
    return layout(fig, "Strategies per layer: decision trees, before and after pruning", height=380)


def pure_costs(layer, n_gpus: int, global_bsz: int, cluster, chunks: int):
    """Memory and message volume of one layer under each pure parallelism (for the 'four ways' table)."""
    out = []
    shapes = [("DP", Strategy.from_shape(1, 1, n_gpus)), ("SDP", Strategy.from_shape(1, 1, n_gpus, sdp=True)),
              ("TP", Strategy.from_shape(1, n_gpus, 1)), ("PP", Strategy.from_shape(n_gpus, 1, 1))]
    for name, s in shapes:
        t = layer_time_terms(layer, s, global_bsz, cluster, chunks if s.pp > 1 else 1)
        states = 4 * layer.param_mb / s.tp * ((1 / s.dp + 0.025) if s.sdp else 1)
        act = layer.act_mb(s.tp) * global_bsz / s.dp
        dp_mb = 2 * (s.dp - 1) / s.dp * layer.param_mb / s.tp
        msg = {"DP": dp_mb, "SDP": 1.5 * dp_mb,
               "TP": 2 * (s.tp - 1) / s.tp * global_bsz * layer.seq_len * layer.hidden * layer.tp_allreduces
               * layer.act_bytes / 2**20,
               "PP": 2 * global_bsz * layer.seq_len * layer.hidden * layer.act_bytes / 2**20 / n_gpus}[name]
        out.append(dict(kind=name, strategy=s, states_mb=states, act_mb=act, comm_mb=msg, time_s=t["total_s"]))
    return out


def pure_costs_figure(rows, title):
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=3, subplot_titles=("memory per GPU (MB)", "communicated per GPU (MB)",
                                                        "time per layer (ms)"))
    x = [r["kind"] for r in rows]
    fig.add_bar(x=x, y=[r["states_mb"] for r in rows], name="model states", marker_color=PALETTE["primary"],
                row=1, col=1)
    fig.add_bar(x=x, y=[r["act_mb"] for r in rows], name="activations", marker_color=PALETTE["secondary"],
                row=1, col=1)
    fig.add_bar(x=x, y=[r["comm_mb"] for r in rows], name="message", marker_color=PALETTE["accent"],
                showlegend=False, row=1, col=2)
    fig.add_bar(x=x, y=[r["time_s"] * 1e3 for r in rows], name="time", marker_color=PALETTE["neutral"],
                showlegend=False, row=1, col=3)
    fig.update_layout(barmode="stack")
    return layout(fig, title, height=380)


TERM_NAMES = [("fwd_ms", "forward"), ("bwd_hidden_ms", "backward"), ("dp_exposed_ms", "DP all-reduce (not hidden)"),
              ("tp_ms", "TP all-reduces"), ("sdp_ms", "SDP all-gather"), ("extra_overhead_ms", "fixed overhead"),
              ("bubble_ms", "pipeline bubble")]


def term_rows(layer, strategies, global_bsz, cluster, chunks_of, extra_overhead_ms):
    """Per strategy, the time terms in ms per layer, summing to the total (bubble shown as its own term)."""
    rows = []
    for s in strategies:
        t = layer_time_terms(layer, s, global_bsz, cluster, chunks_of(s.pp), extra_overhead_ms)
        scale = cluster.time_inflation / 24
        ideal = dict(fwd_ms=t["fwd_ms"], bwd_hidden_ms=t["bwd_ms"], dp_exposed_ms=t["dp_exposed_ms"],
                     tp_ms=t["tp_ms"], sdp_ms=t["sdp_ms"], extra_overhead_ms=t["extra_overhead_ms"])
        ideal = {k: v * scale for k, v in ideal.items()}
        # With PP a GPU computes 1/pp of the layers, but waits through the bubble: compute x (pp-1)/(pp m).
        comp = ideal["fwd_ms"] + ideal["bwd_hidden_ms"] + ideal["tp_ms"]
        ideal["bubble_ms"] = 0.0
        if s.pp > 1:
            m = chunks_of(s.pp)
            for k in ("fwd_ms", "bwd_hidden_ms", "tp_ms"):
                ideal[k] /= s.pp
            ideal["bubble_ms"] = comp * (s.pp - 1) / (s.pp * m)
        total = t["total_s"] * 1e3
        assert abs(sum(ideal.values()) + t["p2p_ms"] * scale - total) < 1e-6 * max(total, 1.0)
        rows.append(dict(strategy=s, total_ms=total, mem_mb=layer_memory_mb(layer, s, global_bsz),
                         compute_ms=comp, **ideal))
    return rows


def terms_figure(rows, title):
    import plotly.graph_objects as go

    fig = go.Figure()
    x = [r["strategy"].code for r in rows]
    for (key, name), colour in zip(TERM_NAMES, SEQUENCE):
        fig.add_bar(x=x, y=[r[key] for r in rows], name=name, marker_color=colour)
    fig.add_scatter(x=x, y=[r["total_ms"] for r in rows], mode="markers", name="total",
                    marker=dict(color="black", symbol="line-ew-open", size=18, line=dict(width=2)))
    fig.update_layout(barmode="relative", yaxis_title="ms per layer per iteration", xaxis_tickangle=-45)
    return layout(fig, title, height=460)


def overlap_figure(bwd_ms: float = 100.0, kappas=(1.0, 1.3)):
    import plotly.graph_objects as go

    comm = np.linspace(0, 3 * bwd_ms, 121)
    fig = go.Figure()
    fig.add_scatter(x=comm, y=comm + bwd_ms, name="no overlap: C + G", line=dict(color=PALETTE["bad"], dash="dot"))
    for k, colour in zip(kappas, (PALETTE["good"], PALETTE["primary"], PALETTE["secondary"])):
        fig.add_scatter(x=comm, y=overlap_ms(comm, bwd_ms, k), name=f"overlap, slowdown {k:g}",
                        line=dict(color=colour))
    fig.update_layout(xaxis_title="all-reduce alone, C (ms)", yaxis_title="backward + all-reduce (ms)")
    return layout(fig, f"Backward (G = {bwd_ms:g} ms) overlapped with the gradient all-reduce", height=380)


def transition_figure(layer, strategies, global_bsz, cluster):
    import plotly.graph_objects as go

    codes = [s.code for s in strategies]
    z = np.array([[transition_s(layer, a, b, global_bsz, cluster) * 1e3 for b in strategies] for a in strategies])
    fig = go.Figure(go.Heatmap(z=z, x=codes, y=codes, colorscale="Blues", colorbar=dict(title="ms"),
                               hovertemplate="from %{y} to %{x}: %{z:.3f} ms<extra></extra>"))
    fig.update_layout(xaxis_title="next layer", yaxis_title="previous layer", yaxis_autorange="reversed")
    return layout(fig, f"Slice-Gather cost between neighbouring layers (global batch {global_bsz})", height=560)


def dp_table_frames(fs, lo, codes, title):
    """Slider over layers of the DP table f[v, s] (best time with at most v MB, last layer under s)."""
    import plotly.graph_objects as go

    frames = []
    for i, f in enumerate(fs):
        z = np.where(np.isfinite(f), f * 1e3, np.nan)
        v = np.arange(lo[i], lo[i] + f.shape[0])
        frames.append(Frame(label=f"layer {i}", data=[go.Heatmap(z=z.T, x=v, y=codes, colorscale="Viridis",
                                                                  colorbar=dict(title="ms"))],
                            title=f"{title}: after layer {i}"))
    fig = frames_figure(frames, "layer", active=len(frames) - 1)
    fig.update_layout(xaxis_title="memory allowed so far, v (MB)", yaxis_title="strategy of this layer")
    return layout(fig, frames[-1].title, height=380)


def comparison_figure(table, models, budgets, systems):
    """Grouped bars: throughput per system, one panel per model, budgets on the x axis."""
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=len(models), subplot_titles=models, shared_yaxes=False)
    colours = {sysname: SEQUENCE[i % len(SEQUENCE)] for i, sysname in enumerate(systems)}
    for j, m in enumerate(models):
        for sysname in systems:
            fig.add_bar(x=[f"{b} GB" for b in budgets], y=[table[(m, b, sysname)] for b in budgets], name=sysname,
                        marker_color=colours[sysname], showlegend=(j == 0), row=1, col=j + 1)
    fig.update_layout(barmode="group", yaxis_title="samples/s")
    return layout(fig, "Estimated throughput: Galvatron against every baseline (0 = no plan fits)", height=430)


def plan_figure(plan, model, title):
    """Figure 5 of the paper, redrawn: one rectangle per layer, height = parameter memory per GPU (MB),
    width = activation memory per GPU (MB); colour = strategy."""
    import plotly.graph_objects as go

    strats, layers, B = plan.strategies(), model.layers(), plan.global_bsz
    codes = sorted({s.code for s in strats}, key=lambda c: [s.code for s in strats].index(c))
    colour = {c: SEQUENCE[i % len(SEQUENCE)] for i, c in enumerate(codes)}
    fig = go.Figure()
    x0 = 0.0
    seen = set()
    for i, (s, lt) in enumerate(zip(strats, layers)):
        h = 4 * lt.param_mb / s.tp * ((1 / s.dp + 0.025) if s.sdp else 1.0)
        w = (lt.ckpt_act_mb() if s.ckpt else lt.act_mb(s.tp)) * B / s.dp
        fig.add_scatter(x=[x0, x0 + w, x0 + w, x0, x0], y=[0, 0, h, h, 0], fill="toself", mode="lines",
                        line=dict(color="white", width=1), fillcolor=colour[s.code], name=f"{s.code} ({s.name})",
                        legendgroup=s.code, showlegend=s.code not in seen,
                        hovertext=f"layer {i}: {s.name}<br>model states {h:.0f} MB<br>activations {w:.0f} MB",
                        hoverinfo="text")
        seen.add(s.code)
        x0 += w
    fig.update_layout(xaxis_title="activation memory per GPU (MB, cumulative over layers)",
                      yaxis_title="model-state memory per GPU (MB)")
    return layout(fig, title, height=360)


def lines_figure(x, series: dict, xtitle, ytitle, title, log_y=False):
    import plotly.graph_objects as go

    fig = go.Figure()
    for (name, ys), colour in zip(series.items(), SEQUENCE):
        fig.add_scatter(x=list(x), y=list(ys), name=name, mode="lines+markers", line=dict(color=colour))
    fig.update_layout(xaxis_title=xtitle, yaxis_title=ytitle)
    if log_y:
        fig.update_yaxes(type="log")
    return layout(fig, title, height=380)


def count_table(gpus=(2, 4, 8, 16, 32, 64)):
    return [(n, len(generate(n, pruned=False)), count_formula(n, False), len(generate(n)), count_formula(n),
             len(generate(n, ckpt=True))) for n in gpus]
