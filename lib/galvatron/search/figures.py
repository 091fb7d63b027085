"""Figures for the Galvatron chapters (plotly), kept out of the notebooks so cells stay short.

Used in: book/galvatron/01_the_space, 02_the_cost_model, 03_the_search.
"""

from __future__ import annotations

import math

import numpy as np

from lib.viz import PALETTE, SEQUENCE, Frame, frames_figure, layout, title_margin
from .cost import DUMMY_LAYERS, layer_memory_mb, layer_time_terms, other_memory_mb, overlap_ms, transition_s
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


def pure_costs(layer, n_gpus: int, global_bsz: int, cluster, chunks: int, extra_overhead_ms: float = 0.0,
               rules=None, model_name: str = ""):
    """Memory and message volume of one layer under each pure parallelism (for the 'four ways' table).

    ``time_s`` is the cost model's total for the layer (``layer_time_s``, with the model's fixed per-iteration
    overhead ``extra_overhead_ms`` when given, as the search uses it); ``overhead_ms`` is that overhead's share
    of it in ms per layer (data-parallel shapes only). With ``rules`` whose micro-batch rule is not
    ``galvatron2`` (e.g. ``vldb2023``), PP's micro-batches follow the rules for ``model_name`` instead of
    ``chunks``."""
    from .rules import get_rules

    rules = get_rules(rules)
    out = []
    shapes = [("DP", Strategy.from_shape(1, 1, n_gpus)), ("SDP", Strategy.from_shape(1, 1, n_gpus, sdp=True)),
              ("TP", Strategy.from_shape(1, n_gpus, 1)), ("PP", Strategy.from_shape(n_gpus, 1, 1))]
    for name, s in shapes:
        ch = chunks if rules.chunks == "galvatron2" else rules.chunks_for(model_name, global_bsz, s, n_gpus)
        t = layer_time_terms(layer, s, global_bsz, cluster, ch if s.pp > 1 else 1, extra_overhead_ms, rules)
        states = 4 * layer.param_mb / s.tp * ((1 / s.dp + 0.025) if s.sdp else 1)
        act = layer.act_mb(s.tp) * global_bsz / s.dp
        dp_mb = 2 * (s.dp - 1) / s.dp * layer.param_mb / s.tp
        msg = {"DP": dp_mb, "SDP": 1.5 * dp_mb,
               "TP": 2 * (s.tp - 1) / s.tp * global_bsz * layer.seq_len * layer.hidden * layer.tp_allreduces
               * layer.act_bytes / 2**20,
               "PP": 2 * global_bsz * layer.seq_len * layer.hidden * layer.act_bytes / 2**20 / n_gpus}[name]
        overhead_ms = t["extra_overhead_ms"] * cluster.time_inflation / DUMMY_LAYERS
        out.append(dict(kind=name, strategy=s, states_mb=states, act_mb=act, comm_mb=msg, time_s=t["total_s"],
                        overhead_ms=overhead_ms))
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


def term_rows(layer, strategies, global_bsz, cluster, chunks_of, extra_overhead_ms, rules=None,
              model=None):
    """Per strategy, the time terms in ms per layer, summing to the total (bubble shown as its own term).

    ``chunks_of(pp)`` gives the micro-batches, unless ``rules`` has a micro-batch rule other than
    ``galvatron2`` (``vldb2023``): then ``rules.chunks_for`` for ``model`` decides them per strategy.
    ``model_mb`` is the memory of the layers one GPU holds if every layer of ``model`` were this one
    (layer memory x L/pp: a pipeline stage keeps only its own layers), ``other_mb`` the memory outside the
    layers (embeddings, heads, context: ``other_memory_mb``, held by the first stage), ``peak_mb`` their sum,
    ``iter_ms`` the iteration's time (L x the layer's), so that memory and time are both whole-model figures
    per GPU."""
    from .rules import get_rules

    rules = get_rules(rules)
    n_layers = model.n_layers if model is not None else 1
    rows = []
    for s in strategies:
        if rules.chunks == "galvatron2" or model is None:
            m = chunks_of(s.pp)
        else:
            m = rules.chunks_for(model.name, global_bsz, s, cluster.n_gpus)
        t = layer_time_terms(layer, s, global_bsz, cluster, m, extra_overhead_ms, rules)
        scale = cluster.time_inflation / 24
        ideal = dict(fwd_ms=t["fwd_ms"], bwd_hidden_ms=t["bwd_ms"], dp_exposed_ms=t["dp_exposed_ms"],
                     tp_ms=t["tp_ms"], sdp_ms=t["sdp_ms"], extra_overhead_ms=t["extra_overhead_ms"])
        ideal = {k: v * scale for k, v in ideal.items()}
        # With PP a GPU computes 1/pp of the layers, but waits through the bubble: compute x (pp-1)/(pp m).
        comp = ideal["fwd_ms"] + ideal["bwd_hidden_ms"] + ideal["tp_ms"]
        ideal["bubble_ms"] = 0.0
        if s.pp > 1:
            for k in ("fwd_ms", "bwd_hidden_ms", "tp_ms"):
                ideal[k] /= s.pp
            ideal["bubble_ms"] = comp * (s.pp - 1) / (s.pp * m)
        total = t["total_s"] * 1e3
        assert abs(sum(ideal.values()) + t["p2p_ms"] * scale - total) < 1e-6 * max(total, 1.0)
        mem = layer_memory_mb(layer, s, global_bsz, rules)
        other = other_memory_mb(model, s, global_bsz) if model is not None else 0.0
        rows.append(dict(strategy=s, total_ms=total, mem_mb=mem, compute_ms=comp, chunks=m,
                         model_mb=mem * n_layers / s.pp, other_mb=other,
                         peak_mb=mem * n_layers / s.pp + other, iter_ms=total * n_layers, **ideal))
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
    """Backward compute C (fixed at ``bwd_ms``) overlapped with a gradient all-reduce G of growing length:
    C + G without overlap, max(C, G) + (kappa - 1) min(C, G) with it (the notation of section 5.3)."""
    import plotly.graph_objects as go

    comm = np.linspace(0, 3 * bwd_ms, 121)
    fig = go.Figure()
    fig.add_scatter(x=comm, y=comm + bwd_ms, name="no overlap: C + G", line=dict(color=PALETTE["bad"], dash="dot"))
    for k, colour in zip(kappas, (PALETTE["good"], PALETTE["primary"], PALETTE["secondary"])):
        fig.add_scatter(x=comm, y=overlap_ms(comm, bwd_ms, k), name=f"overlap, slowdown {k:g}",
                        line=dict(color=colour))
    fig.update_layout(xaxis_title="gradient all-reduce alone, G (ms)", yaxis_title="backward + all-reduce (ms)")
    return layout(fig, f"Backward compute (C = {bwd_ms:g} ms) overlapped with the gradient all-reduce G",
                  height=380)


def overlap_gap_figure(codes, gap_pct, kappa: float = 1.3):
    """Bars: how much the overlap slowdown ``kappa`` raises each strategy's estimate over kappa = 1 (%)."""
    import plotly.graph_objects as go

    fig = go.Figure(go.Bar(x=list(codes), y=list(gap_pct), marker_color=PALETTE["secondary"]))
    fig.update_layout(yaxis_title=f"slowdown {kappa:g} vs 1.0 (%)", xaxis_title="strategy",
                      xaxis_tickangle=-45)
    return layout(fig, "How much the overlap slowdown raises each estimate", height=400)


def _label_offsets(xs, ys, texts, width_px: float = 820, height_px: float = 340, char_px: float = 6.2,
                   line_px: float = 13):
    """Pixel offsets (ax, ay) for one annotation per point so that labels overlap neither each other nor the
    points: a greedy placement, points in order of crowding, each label at the first of 16 candidate spots
    (8 directions, 2 distances) whose box is free, else at the least crowded one. ``width_px``/``height_px``:
    the plot area the axes span (approximately)."""
    xs, ys = np.asarray(xs, float), np.asarray(ys, float)
    if len(xs) == 0:
        return []
    span = lambda v: (v.max() - v.min()) or 1.0
    px = (xs - xs.min()) / span(xs) * width_px
    py = (ys.max() - ys) / span(ys) * height_px            # screen y grows downwards
    dirs = [(0, -1), (1, 0), (0, 1), (-1, 0), (1, -1), (1, 1), (-1, 1), (-1, -1)]
    cands = [(dx * r, dy * r) for r in (16, 34) for dx, dy in dirs]
    boxes, out = [], [None] * len(xs)
    crowd = [sum(np.hypot(px - px[i], py - py[i]) < 60) for i in range(len(xs))]

    def overlap(b):
        x0, y0, x1, y1 = b
        hits = sum(not (x1 < c[0] or c[2] < x0 or y1 < c[1] or c[3] < y0) for c in boxes)
        pts = sum((x0 - 4 <= px) & (px <= x1 + 4) & (y0 - 4 <= py) & (py <= y1 + 4))
        return hits + pts

    for i in sorted(range(len(xs)), key=lambda k: -crowd[k]):
        w, h = char_px * len(texts[i]), line_px
        best = None
        for ax, ay in cands:
            cx = px[i] + ax + (w / 2 if ax > 0 else -w / 2 if ax < 0 else 0)
            cy = py[i] + ay
            box = (cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2)
            score = overlap(box)
            if best is None or score < best[0]:
                best = (score, ax, ay, box)
            if score == 0:
                break
        boxes.append(best[3])
        out[i] = (best[1] + (char_px * len(texts[i]) / 2 if best[1] > 0 else
                             -char_px * len(texts[i]) / 2 if best[1] < 0 else 0), best[2])
    return out


def mem_time_figure(rows, title, budget_gb: float | None = None):
    """One dot per strategy (``term_rows`` rows with ``model`` given): the peak memory of one GPU (GB, whole
    model: the layers it holds, L/pp of them for a pipeline stage, plus the "other" memory outside the layers)
    against the iteration's time (s), so that memory and time are normalised the same way for every strategy
    and a dot right of the ``budget_gb`` line (a vertical line) does not fit. Dots that do not fit are hollow."""
    import plotly.graph_objects as go

    pp = [r for r in rows if r["strategy"].pp > 1]
    flat = [r for r in rows if r["strategy"].pp == 1]
    fig = go.Figure()
    fits = lambda r: budget_gb is None or r["peak_mb"] <= budget_gb * 1024
    for group, name, colour in ((flat, "no pipeline", PALETTE["primary"]),
                                (pp, "with pipeline (pp > 1)", PALETTE["accent"])):
        xs = [r["peak_mb"] / 1024 for r in group]
        ys = [r["iter_ms"] / 1e3 for r in group]
        fig.add_scatter(x=xs, y=ys, mode="markers", text=[r["strategy"].code for r in group], name=name,
                        marker=dict(size=9, color=[colour if fits(r) else "white" for r in group],
                                    line=dict(color=colour, width=2)),
                        customdata=[[r["model_mb"] / 1024, r["other_mb"] / 1024] for r in group],
                        hovertemplate="%{text}: %{x:.2f} GB (layers %{customdata[0]:.2f} + other "
                                      "%{customdata[1]:.2f}), %{y:.2f} s<extra></extra>")
    xs = [r["peak_mb"] / 1024 for r in rows]
    ys = [r["iter_ms"] / 1e3 for r in rows]
    codes = [r["strategy"].code for r in rows]
    for x, y, code, (ax, ay) in zip(xs, ys, codes, _label_offsets(xs, ys, codes)):
        fig.add_annotation(x=x, y=y, text=code, ax=ax, ay=ay, showarrow=True, arrowwidth=0.6,
                           arrowcolor="#999", arrowhead=0, font=dict(size=10), standoff=4)
    if budget_gb is not None:
        fig.add_vline(x=budget_gb, line=dict(color=PALETTE["bad"], dash="dash"),
                      annotation_text=f"budget {budget_gb:g} GB", annotation_position="top")
    fig.update_layout(xaxis_title="peak memory per GPU: its layers + other (GB, whole model)",
                      yaxis_title="time per iteration (s, whole model)")
    return layout(fig, title, height=480)


def whole_model_figure(rows, budget_gb: float, title: str):
    """``report.whole_model_rows``: per-GPU memory of each pure strategy over the whole model (layers and
    "other", stacked, GB) against the budget line, and its throughput (samples/s), one bar pair per batch."""
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2, subplot_titles=("peak memory per GPU (GB)", "throughput (samples/s)"))
    x = [f"{r['kind']} B={r.get('global_bsz', '')}" for r in rows]
    fig.add_bar(x=x, y=[r["layers_mb"] / 1024 for r in rows], name="layers on the GPU",
                marker_color=PALETTE["primary"], row=1, col=1)
    fig.add_bar(x=x, y=[r["other_mb"] / 1024 for r in rows], name="other (embeddings, heads, context)",
                marker_color=PALETTE["neutral"], row=1, col=1)
    fig.add_hline(y=budget_gb, line=dict(color=PALETTE["bad"], dash="dash"), row=1, col=1,
                  annotation_text=f"budget {budget_gb:g} GB", annotation_position="top left")
    fits = [r["peak_mb"] <= budget_gb * 1024 for r in rows]
    for ok, name, colour in ((True, "throughput, fits the budget", PALETTE["good"]),
                             (False, "throughput, does not fit", PALETTE["bad"])):
        fig.add_bar(x=x, y=[r["throughput"] if f == ok else 0 for r, f in zip(rows, fits)], name=name,
                    marker_color=colour, row=1, col=2,
                    hovertemplate="%{x}: %{y:.2f} samples/s<extra></extra>")
    fig.update_layout(barmode="stack", xaxis_tickangle=-45, xaxis2_tickangle=-45)
    return layout(fig, title, height=420)


def transition_figure(layer, strategies, global_bsz, cluster):
    import plotly.graph_objects as go

    codes = [s.code for s in strategies]
    # Neighbours in a plan share its pipeline degree: pairs across degrees can never meet, and stay blank.
    z = np.array([[transition_s(layer, a, b, global_bsz, cluster) * 1e3 if a.pp == b.pp else np.nan
                   for b in strategies] for a in strategies])
    fig = go.Figure(go.Heatmap(z=z, x=codes, y=codes, colorscale="Blues", colorbar=dict(title="ms"),
                               hoverongaps=False, hovertemplate="from %{y} to %{x}: %{z:.3f} ms<extra></extra>"))
    fig.update_layout(xaxis_title="next layer", yaxis_title="previous layer", yaxis_autorange="reversed")
    return layout(fig, f"Slice-Gather cost between neighbouring layers of one pipeline degree "
                       f"(global batch {global_bsz}; blank: never neighbours)", height=560)


def dp_table_full(time_s, mem_mb, trans_s, budget_mb: int) -> np.ndarray:
    """The whole DP table for display: ``f[i, v, s]`` = least time (s) of layers 0..i using at most v MB,
    v = 0..budget, with layer i under strategy s; inf where nothing fits.

    Same recurrence as ``dynamic_program.dp_tables``, which computes only the memory levels a complete plan can
    pass through (its windows); inside those windows the two agree (tests/test_galvatron_figures.py)."""
    t, r = np.asarray(time_s, float), np.asarray(trans_s, float)
    mem = np.ceil(np.asarray(mem_mb, float) - 1e-9).astype(np.int64)
    L, S = t.shape
    E = int(math.floor(budget_mb))
    if E < 0:
        raise ValueError(f"budget_mb must be >= 0; got {budget_mb!r}")
    f = np.full((L, E + 1, S), np.inf)
    for s in range(S):
        f[0, mem[0, s]:, s] = t[0, s]
    for i in range(1, L):
        g = np.min(f[i - 1][:, :, None] + r[i][None, :, :], axis=1)   # g[u, s] = min_s' f[u, s'] + R(s', s)
        for s in range(S):
            if mem[i, s] <= E:
                f[i, mem[i, s]:, s] = g[:E + 1 - mem[i, s], s] + t[i, s]
    return f


def dp_table_frames(table, codes, title, max_cols: int = 240, path=None):
    """Slider over layers: the DP table filling up. Rows are (layer i, strategy s), columns memory levels v
    (MB); frame k shows f for layers 0..k and leaves the later layers empty; the last frame marks the answer,
    min_s f[L-1, E, s]. ``table`` is ``dp_table_full``'s array; columns are thinned to at most ``max_cols``
    (always keeping v = E). ``path``: the (layer, strategy, level) cells of the backtracking
    (``dp_readable.path``), drawn as a line of markers in the last frame."""
    import plotly.graph_objects as go

    L, V, S = table.shape
    E = V - 1
    stride = max(1, math.ceil(V / max_cols))
    cols = np.arange(E, -1, -stride)[::-1]
    ms = np.where(np.isfinite(table), table * 1e3, np.nan)[:, cols, :]        # (L, cols, S) in ms
    ylab = [f"layer {i}: {c}" for i in range(L) for c in codes]
    finite = ms[np.isfinite(ms)]
    zmin, zmax = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    best = int(np.nanargmin(np.where(np.isfinite(table[-1, E]), table[-1, E], np.nan))) \
        if np.isfinite(table[-1, E]).any() else None
    frames = []
    for k in range(L):
        z = np.full((L * S, len(cols)), np.nan)
        for i in range(k + 1):
            z[i * S:(i + 1) * S] = ms[i].T
        hm = go.Heatmap(z=np.round(z, 3), x=cols, y=ylab, colorscale="Viridis", zmin=zmin, zmax=zmax,
                        colorbar=dict(title="ms"), hoverongaps=False,
                        hovertemplate="%{y}, v = %{x} MB: %{z:.2f} ms<extra></extra>")
        last = k == L - 1 and best is not None
        mark = go.Scatter(x=[E] if last else [], y=[ylab[(L - 1) * S + best]] if last else [],
                          mode="markers", marker=dict(symbol="star", size=16, color=PALETTE["bad"],
                                                      line=dict(color="white", width=1)),
                          showlegend=False, hovertemplate="the answer: %{y} at v = E<extra></extra>")
        cells = path if (last and path) else []
        trail = go.Scatter(x=[v for _, _, v in cells], y=[ylab[i * S + j] for i, j, _ in cells],
                           mode="lines+markers", line=dict(color=PALETTE["bad"], width=2, dash="dot"),
                           marker=dict(symbol="circle-open", size=12, color=PALETTE["bad"], line=dict(width=2)),
                           showlegend=False,
                           hovertemplate="the plan: %{y} read at v = %{x} MB<extra></extra>")
        what = f"layers 0 to {k} filled" if k < L - 1 else \
            f"all {L} layers; the star marks the answer" + (", the circles the plan" if path else "")
        frames.append(Frame(label=f"layer {k}", data=[hm, mark, trail], title=f"{title}: {what}"))
    fig = frames_figure(frames, "after layer", active=L - 1)
    fig.update_layout(xaxis_title="memory allowed so far, v (MB)", yaxis_title="layer: strategy",
                      xaxis_range=[-stride / 2, E + stride / 2], yaxis_autorange="reversed")
    fig = layout(fig, frames[-1].title, height=140 + 22 * L * S)
    room = max(title_margin(f.title) for f in frames)
    fig.update_layout(margin=dict(t=room))  # the longest frame title fits too
    return fig


def comparison_figure(table, models, budgets, systems):
    """Grouped bars: throughput per system, one panel per model, budgets on the x axis."""
    from plotly.subplots import make_subplots

    cols = min(2, len(models))
    rows = math.ceil(len(models) / cols)
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=models, shared_yaxes=False,
                        vertical_spacing=0.14 if rows > 1 else 0.0, horizontal_spacing=0.1)
    colours = {sysname: SEQUENCE[i % len(SEQUENCE)] for i, sysname in enumerate(systems)}
    for j, m in enumerate(models):
        r, c = j // cols + 1, j % cols + 1
        for sysname in systems:
            fig.add_bar(x=[f"{b:g} GB" for b in budgets], y=[table[(m, b, sysname)] for b in budgets],
                        name=sysname, marker_color=colours[sysname], showlegend=(j == 0), row=r, col=c)
        if c == 1:
            fig.update_yaxes(title_text="samples/s", row=r, col=c)
    fig.update_layout(barmode="group")
    return layout(fig, "Estimated throughput: Galvatron against every baseline (0 = no plan fits)",
                  height=300 * rows + 80)


def _rects(plan, model):
    """Per layer of ``plan``: (stage, strategy, model-state MB, activation MB) per GPU, as ``plan_figure``
    draws them."""
    strats, layers, B = plan.strategies(), model.layers(), plan.global_bsz
    stage = [k for k, n in enumerate(plan.stage_sizes()) for _ in range(n)]
    return [(k, s, 4 * lt.param_mb / s.tp * ((1 / s.dp + 0.025) if s.sdp else 1.0),
             (lt.ckpt_act_mb() if s.ckpt else lt.act_mb(s.tp)) * B / s.dp)
            for k, s, lt in zip(stage, strats, layers)]


def stage_widest_mb(plan, model) -> float:
    """The largest activation memory of one stage of ``plan`` (MB per GPU): ``plan_figure``'s x extent."""
    per = {}
    for k, _, _, w in _rects(plan, model):
        per[k] = per.get(k, 0.0) + w
    return max(per.values())


def stage_tallest_mb(plan, model) -> float:
    """The largest model-state memory of one layer of ``plan`` (MB per GPU): ``plan_figure``'s y extent."""
    return max(h for _, _, h, _ in _rects(plan, model))


def plan_figure(plan, model, title, x_max_mb: float | None = None, y_max_mb: float | None = None):
    """Figure 5 of the paper, redrawn per pipeline stage: one rectangle per layer, height = model-state memory
    per GPU (MB), width = activation memory per GPU (MB), laid side by side within its stage (each stage is
    on other GPUs, so stages do not add up); colour = strategy. ``x_max_mb``/``y_max_mb`` fix the axes."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    strats, layers, B = plan.strategies(), model.layers(), plan.global_bsz
    sizes = plan.stage_sizes()
    codes = sorted({s.code for s in strats}, key=lambda c: [s.code for s in strats].index(c))
    colour = {c: SEQUENCE[i % len(SEQUENCE)] for i, c in enumerate(codes)}
    fig = make_subplots(rows=1, cols=len(sizes), shared_yaxes=True, horizontal_spacing=0.04,
                        subplot_titles=[f"stage {k} ({n} layers)" for k, n in enumerate(sizes)]
                        if len(sizes) > 1 else None)
    seen, i, widest, tallest = set(), 0, 0.0, 0.0
    for k, n in enumerate(sizes):
        x0 = 0.0
        for s, lt in zip(strats[i:i + n], layers[i:i + n]):
            h = 4 * lt.param_mb / s.tp * ((1 / s.dp + 0.025) if s.sdp else 1.0)
            w = (lt.ckpt_act_mb() if s.ckpt else lt.act_mb(s.tp)) * B / s.dp
            fig.add_scatter(x=[x0, x0 + w, x0 + w, x0, x0], y=[0, 0, h, h, 0], fill="toself", mode="lines",
                            line=dict(color="white", width=1), fillcolor=colour[s.code],
                            name=f"{s.code} ({s.name})", legendgroup=s.code, showlegend=s.code not in seen,
                            hovertext=f"stage {k}, layer {i}: {s.name}<br>model states {h:.0f} MB<br>"
                                      f"activations {w:.0f} MB", hoverinfo="text", row=1, col=k + 1)
            seen.add(s.code)
            x0 += w
            tallest = max(tallest, h)
            i += 1
        widest = max(widest, x0)
    fig.update_xaxes(range=[0, x_max_mb or widest * 1.02])
    fig.update_yaxes(range=[0, y_max_mb or tallest * 1.1])
    fig.update_xaxes(title_text="activation memory per GPU (MB, summed over the stage's layers)", row=1,
                     col=1)
    fig.update_yaxes(title_text="model-state memory per GPU (MB)", row=1, col=1)
    return layout(fig, title, height=380)


def lines_figure(x, series: dict, xtitle, ytitle, title, log_y=False, feasible: dict | None = None):
    """One line per series. ``feasible``: per series, one bool per point; the points where it is False
    (a search that found no plan) are drawn as crosses and named in the legend, not left to pass as data."""
    import plotly.graph_objects as go

    fig = go.Figure()
    marked = False
    for (name, ys), colour in zip(series.items(), SEQUENCE):
        ok = list(feasible[name]) if feasible else [True] * len(ys)
        fig.add_scatter(x=list(x), y=list(ys), name=name, mode="lines+markers", line=dict(color=colour))
        bad = [k for k, f in enumerate(ok) if not f]
        if bad:
            fig.add_scatter(x=[list(x)[k] for k in bad], y=[list(ys)[k] for k in bad], mode="markers",
                            name="no plan fits (search stops early)", legendgroup="infeasible",
                            showlegend=not marked,
                            marker=dict(symbol="x", size=13, color=PALETTE["bad"], line=dict(width=1)))
            marked = True
    fig.update_layout(xaxis_title=xtitle, yaxis_title=ytitle)
    if log_y:
        fig.update_yaxes(type="log")
    return layout(fig, title, height=380)


def search_effort_figure(x, times: dict, tried: dict, feasible: dict, title: str):
    """``report.time_searches``: per budget, the full search's time (left) and the (batch, pipeline degree)
    candidates it tried (right), against the model's depth; searches that found no plan as crosses."""
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2, subplot_titles=("search time (s, measured)",
                                                        "candidates tried (batch, pipeline degree)"))
    marked = False
    for (name, ts), colour in zip(times.items(), SEQUENCE):
        bad = [k for k, f in enumerate(feasible[name]) if not f]
        for col, ys in ((1, ts), (2, tried[name])):
            fig.add_scatter(x=list(x), y=list(ys), name=name, mode="lines+markers", legendgroup=name,
                            showlegend=col == 1, line=dict(color=colour), row=1, col=col)
            if bad:
                fig.add_scatter(x=[list(x)[k] for k in bad], y=[list(ys)[k] for k in bad], mode="markers",
                                name="no plan fits (search stops early)", legendgroup="infeasible",
                                showlegend=not marked, row=1, col=col,
                                marker=dict(symbol="x", size=13, color=PALETTE["bad"], line=dict(width=1)))
                marked = True
    fig.update_xaxes(title_text="layers", type="log", tickvals=list(x), ticktext=[str(v) for v in x])
    return layout(fig, title, height=380)


def stage_memory(plan, model, rules=None) -> list[dict]:
    """Per pipeline stage of ``plan``: the model states and activations of its layers on one GPU (MB), and the
    "other" memory (embeddings, heads, context) that the first stage holds. Used in: 03_the_search."""
    from .cost import other_memory_mb

    strats, layers, B = plan.strategies(), model.layers(), plan.global_bsz
    out, i = [], 0
    for k, n in enumerate(plan.stage_sizes()):
        states = act = 0.0
        for s, lt in zip(strats[i:i + n], layers[i:i + n]):
            st = 4 * lt.param_mb / s.tp * ((1 / s.dp + 0.025) if s.sdp else 1.0)
            states += st
            act += layer_memory_mb(lt, s, B, rules) - st
        other = other_memory_mb(model, strats[0], B) if k == 0 else 0.0
        out.append(dict(stage=k, layers=n, states_mb=states, act_mb=act, other_mb=other,
                        total_mb=states + act + other))
        i += n
    return out


def stage_memory_figure(plans: dict, model, budgets: dict, title: str, rules=None, y_max_gb: float = 24.0):
    """Per-GPU memory of each pipeline stage (GB; model states, activations, other, stacked) for several plans
    (``plans``: label -> Plan), with each plan's budget (``budgets``: label -> GB) as a line over its bars.
    The y axis is fixed to ``y_max_gb`` so that plans compare at a glance."""
    import plotly.graph_objects as go

    fig = go.Figure()
    parts = (("states_mb", "model states", PALETTE["primary"]), ("act_mb", "activations", PALETTE["secondary"]),
             ("other_mb", "other (first stage)", PALETTE["neutral"]))
    xs_all = []
    for label, plan in plans.items():
        rows = stage_memory(plan, model, rules)
        xs = [f"{label}, stage {r['stage']}" for r in rows]
        xs_all += xs
        for key, name, colour in parts:
            fig.add_bar(x=xs, y=[r[key] / 1024 for r in rows], name=name, marker_color=colour,
                        legendgroup=key, showlegend=label == next(iter(plans)))
        fig.add_scatter(x=xs, y=[budgets[label]] * len(xs), mode="lines+markers", name="budget",
                        line=dict(color=PALETTE["bad"], dash="dash"), marker=dict(symbol="line-ew", size=30),
                        legendgroup="budget", showlegend=label == next(iter(plans)))
    fig.update_layout(barmode="stack", yaxis_title="memory per GPU (GB)", yaxis_range=[0, y_max_gb])
    return layout(fig, title, height=420)


def count_table(gpus=(2, 4, 8, 16, 32, 64)):
    return [(n, len(generate(n, pruned=False)), count_formula(n, False), len(generate(n)), count_formula(n),
             len(generate(n, ckpt=True))) for n in gpus]
