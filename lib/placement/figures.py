"""Figures of Part I drawn from run logs (never from memory): learning curves, head-to-head, phases.

Each function returns a plotly figure; chapters display it with ``lib.viz.show`` and the command line writes
it to HTML. Times are plotted in milliseconds. Used in: Part I, chapters 2-3.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from lib.placement.env import OOM_PENALTY_S, PHASES
from lib.viz import PALETTE, SEQUENCE, layout

#: Colours of a step's phases and copies (timelines and phase bars) and of the GPUs (placement strips): two
#: disjoint sets, so that no colour means a phase in one figure and a GPU in another on the same page.
PHASE_COLOURS = {"forward": PALETTE["primary"], "backward": PALETTE["secondary"], "copy": PALETTE["bad"],
                 "optimizer": PALETTE["good"]}
DEVICE_COLOURS = ("#7A5BB5", "#B8860B", "#1B9AAA", "#5A5F68", "#D67FB0", "#8C564B", "#17BECF", "#BCBD22")


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


def _feasible_mean_ms(rec) -> float:
    """Mean step time (ms) of an update's samples that fit in memory (NaN when none did)."""
    ok = [t for t, o in zip(rec["step_s"], rec["oom"]) if not o]
    return float(np.mean(ok) * 1e3) if ok else float("nan")


def learning_curves(results: Mapping[str, object], title: str | None = None, show_best: bool = True,
                    height: int = 420):
    """Mean step time of the K sampled placements that fit in memory, per update (solid), and the best timing
    found so far (dotted), on a linear axis in ms. Out-of-memory samples are not averaged in at their 10 s
    charge (it would dwarf everything else): when a run has any, a lower panel shows their share per update."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    any_oom = any(any(r["oom"]) for res in results.values() for r in res.records)
    fig = (make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.72, 0.28], vertical_spacing=0.06)
           if any_oom else go.Figure())
    at = dict(row=1, col=1) if any_oom else {}
    for i, (label, res) in enumerate(results.items()):
        colour = SEQUENCE[i % len(SEQUENCE)]
        x = np.array([r["update"] for r in res.records])
        y = np.array([_feasible_mean_ms(r) for r in res.records])
        fig.add_trace(go.Scatter(x=x, y=y, mode="lines", name=f"{label}: sample mean", legendgroup=label,
                                 line=dict(color=colour, width=1.5)), **at)
        if show_best:
            best = np.array([r["best_step_s"] * 1e3 if r["best_step_s"] < OOM_PENALTY_S else np.nan
                             for r in res.records])
            fig.add_trace(go.Scatter(x=x, y=best, mode="lines", name=f"{label}: best so far", legendgroup=label,
                                     line=dict(color=colour, dash="dot")), **at)
        k = first_identical(res)
        if k is not None:
            fig.add_trace(go.Scatter(x=[k], y=[y[k]], mode="markers", name=f"{label}: all K identical",
                                     legendgroup=label, marker=dict(color=colour, symbol="x", size=11)), **at)
        if any_oom:
            share = [float(np.mean(r["oom"])) for r in res.records]
            fig.add_trace(go.Scatter(x=x, y=share, mode="lines", name=f"{label}: share out of memory",
                                     legendgroup=label, showlegend=any(share), line=dict(color=colour, width=1)),
                          row=2, col=1)
    if any_oom:
        fig.update_yaxes(title="step time (ms)", row=1, col=1)
        fig.update_yaxes(title="out of memory", range=[0, 1.05], tickformat=".0%", row=2, col=1)
        fig.update_xaxes(title="update", row=2, col=1)
    else:
        fig.update_yaxes(title="step time (ms)")
        fig.update_xaxes(title="update")
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
                        height: int | None = None):
    """Confirmation step times as dots with mean ± std whiskers, one row per entry, fastest on top, on an axis
    zoomed to the entries that fit (a bar from zero would hide 1 ms differences). Out-of-memory entries are
    marked "out of memory" at the axis's right end, not drawn at their 10 s charge. ``quoted_ms`` (ms, keyed by
    entry label or by side) adds the write-up's numbers as hollow diamonds."""
    import plotly.graph_objects as go

    rows = h2h.rows()
    name = {"rl": "RL pick", "single_gpu": "best single GPU", "human_2gpu": "best human split"}
    labels = [r["placement"] if r["role"] == "fixed" else f"{name.get(r['side'], r['side'])} ({r['placement']})"
              for r in rows]
    fits = [r for r in rows if not r["oom"]]
    quoted = []
    if quoted_ms:
        for lbl, r in zip(labels, rows):
            q = quoted_ms.get(r["placement"], quoted_ms.get(r["side"]))
            if q is not None:
                quoted.append((lbl, float(q)))
    lo = min([r["mean_ms"] - r["std_ms"] for r in fits] + [q for _, q in quoted], default=0.0)
    hi = max([r["mean_ms"] + r["std_ms"] for r in fits] + [q for _, q in quoted], default=1.0)
    pad = max(1.0, 0.08 * (hi - lo))
    right = hi + 3 * pad  # room for the out-of-memory marks
    fig = go.Figure()
    kinds = (("RL pick", lambda r: r["side"] == h2h.rl_side and r["role"] == "pick", PALETTE["primary"]),
             ("another side's pick", lambda r: r["side"] != h2h.rl_side and r["role"] == "pick",
              PALETTE["secondary"]),
             ("fixed hand-made placement", lambda r: r["role"] == "fixed", PALETTE["neutral"]))
    for kind, match, colour in kinds:
        sel = [(lbl, r) for lbl, r in zip(labels, rows) if match(r) and not r["oom"]]
        if sel:
            fig.add_trace(go.Scatter(
                y=[l for l, _ in sel], x=[r["mean_ms"] for _, r in sel], mode="markers", name=kind,
                marker=dict(color=colour, size=10), error_x=dict(type="data", array=[r["std_ms"] for _, r in sel],
                                                                  color=colour, thickness=1.5),
                hovertemplate="%{y}: %{x:.1f} ms<extra></extra>"))
    ooms = [lbl for lbl, r in zip(labels, rows) if r["oom"]]
    if ooms:
        fig.add_trace(go.Scatter(y=ooms, x=[right - pad] * len(ooms), mode="markers+text", name="out of memory",
                                 text=["out of memory"] * len(ooms), textposition="middle left",
                                 textfont=dict(color=PALETTE["bad"]), hoverinfo="y+text",
                                 marker=dict(symbol="x", size=11, color=PALETTE["bad"])))
    if quoted:
        fig.add_trace(go.Scatter(y=[l for l, _ in quoted], x=[q for _, q in quoted], mode="markers",
                                 name="the write-up (quoted)",
                                 marker=dict(symbol="diamond-open", size=12, color=PALETTE["accent"], line_width=2),
                                 hovertemplate="%{y}: %{x:.0f} ms (quoted)<extra></extra>"))
    fig.update_xaxes(title="step time (ms), mean ± std over confirmation rounds", range=[lo - pad, right],
                     zeroline=False)
    fig.update_yaxes(autorange="reversed", categoryorder="array", categoryarray=labels)
    return layout(fig, title, height or 150 + 34 * len(rows))


def phase_figure(pt, title: str | None = None, height: int = 320):
    """Per-phase medians (forward, backward, optimizer) as stacked bars, one bar per placement."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for j, ph in enumerate(PHASES):
        fig.add_trace(go.Bar(y=list(pt.labels), x=[p[ph] * 1e3 for p in pt.phase_s], orientation="h", name=ph,
                             marker_color=PHASE_COLOURS.get(ph, SEQUENCE[j])))
    fig.update_layout(barmode="stack")
    fig.update_xaxes(title="milliseconds")
    return layout(fig, title, height)


def placement_strip(placements: Mapping[str, tuple], names=None, n_devices: int = 4, title: str | None = None,
                    height: int | None = None):
    """Placements as coloured strips: one row per placement, one cell per node, colour = device."""
    import plotly.graph_objects as go

    labels = list(placements)
    z = np.array([list(placements[k]) for k in labels], dtype=float)
    # categorical: each device one flat band of the scale (no gradient between devices), labelled GPU d
    scale = []
    for i in range(n_devices):
        c = DEVICE_COLOURS[i % len(DEVICE_COLOURS)]
        scale += [[i / n_devices, c], [(i + 1) / n_devices, c]]
    hover = None
    if names is not None:
        hover = [[f"{names[j]}: GPU {int(z[i, j])}" for j in range(z.shape[1])] for i in range(len(labels))]
    fig = go.Figure(go.Heatmap(z=z, y=labels, colorscale=scale, zmin=-0.5, zmax=n_devices - 0.5, xgap=1, ygap=2,
                               text=hover, hoverinfo="text" if hover else None,
                               colorbar=dict(title="device", tickvals=list(range(n_devices)),
                                             ticktext=[f"GPU {d}" for d in range(n_devices)])))
    fig.update_xaxes(title="node (chain order)")
    fig.update_yaxes(autorange="reversed")
    return layout(fig, title, height or 120 + 40 * len(labels))


# --- chapter 1: the game ---


def params_figure(graph, title: str | None = None, height: int = 420):
    """Parameters per node (millions), one colour per op type."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for k, op in enumerate(dict.fromkeys(n.op for n in graph.nodes)):
        nodes = [n for n in graph.nodes if n.op == op]
        fig.add_bar(x=[n.index for n in nodes], y=[n.params / 1e6 for n in nodes], name=op,
                    marker_color=SEQUENCE[k % len(SEQUENCE)], hovertext=[n.name for n in nodes])
    fig.update_xaxes(title="node, in chain order")
    fig.update_yaxes(title="parameters (millions)")
    return layout(fig, title, height)


def groups_figure(graph, groups, title: str | None = None, height: int = 280):
    """The co-location groups along the chain: alternating shades, each cell labelled with its group."""
    import plotly.graph_objects as go

    group_of = np.zeros(graph.n_nodes, dtype=int)
    for g, members in enumerate(groups):
        group_of[list(members)] = g
    fig = go.Figure(go.Heatmap(z=[group_of % 2], x=[n.name for n in graph.nodes], y=["group"], showscale=False,
                               colorscale=[[0, PALETTE["light"]], [1, PALETTE["primary"]]], xgap=2,
                               text=[[str(g) for g in group_of]], texttemplate="%{text}", hoverinfo="x+text"))
    fig.update_xaxes(tickangle=-60, tickfont=dict(size=9), title="node")
    return layout(fig, title, height)


def memory_figure(sim, placements: Mapping[str, tuple], cap_gib: float | None = None, cap_label: str = "",
                  title: str | None = None, height: int = 460):
    """Stacked per-device peak memory (GiB) of each placement's devices, by part, with the cap as a line."""
    import plotly.graph_objects as go

    fig = go.Figure()
    parts = list(sim.memory_breakdown(next(iter(placements.values()))))
    x = [f"{label}<br>GPU {d}" for label, p in placements.items() for d in sorted(set(p))]
    for k, part in enumerate(parts):
        y = [sim.memory_breakdown(p)[part][d] / 2**30 for p in placements.values() for d in sorted(set(p))]
        fig.add_bar(x=x, y=y, name=part, marker_color=SEQUENCE[k % len(SEQUENCE)])
    if cap_gib is not None:
        fig.add_hline(y=cap_gib, line_dash="dash", line_color=PALETTE["bad"], annotation_text=cap_label,
                      annotation_position="top left")
    fig.update_layout(barmode="stack")
    fig.update_yaxes(title="GiB at the step's peak")
    fig.update_xaxes(tickfont=dict(size=10))
    return layout(fig, title, height)


def timeline_figure(events, title: str | None = None, height: int = 320):
    """One step's timeline: forward, backward, copies and optimizer per lane (ms)."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for kind, c in PHASE_COLOURS.items():
        ev = [e for e in events if e.kind == kind]
        fig.add_bar(y=[e.lane for e in ev], x=[(e.end_s - e.start_s) * 1e3 for e in ev],
                    base=[e.start_s * 1e3 for e in ev], orientation="h", name=kind, marker_color=c,
                    hovertext=[e.label for e in ev])
    fig.update_layout(barmode="overlay")
    fig.update_xaxes(title="milliseconds into the step")
    fig.update_yaxes(categoryorder="array", categoryarray=sorted({e.lane for e in events}, reverse=True))
    return layout(fig, title, height)


def random_placements_figure(samples_ms: Mapping[str, Sequence[float]], quoted_ms: Mapping[str, float] = (),
                             title: str | None = None, height: int = 420):
    """Overlaid histograms of random placements' step times (ms), with the write-up's means as lines."""
    import plotly.graph_objects as go

    allv = np.concatenate([np.asarray(v, dtype=float) for v in samples_ms.values()])
    bins = dict(size=max(1.0, (allv.max() - allv.min()) / 80))
    fig = go.Figure()
    for k, (label, v) in enumerate(samples_ms.items()):
        fig.add_histogram(x=list(v), name=label, marker_color=(PALETTE["secondary"], PALETTE["primary"])[k % 2],
                          opacity=0.7, xbins=bins)
    for label, v in dict(quoted_ms).items():
        fig.add_vline(x=v, line_dash="dot", line_color=PALETTE["neutral"], annotation_text=label)
    fig.update_layout(barmode="overlay")
    fig.update_xaxes(title="step time (ms)")
    fig.update_yaxes(title="placements")
    return layout(fig, title, height)


def best_of_many_figure(results, title: str | None = None, height: int = 420):
    """For each :class:`~lib.placement.report.BestOfMany`, the fastest timing so far minus the true time."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for k, r in enumerate(results):
        y = r.best_so_far_minus_truth_ms
        fig.add_scatter(x=np.arange(1, len(y) + 1), y=y, name=r.label, line_color=SEQUENCE[k % len(SEQUENCE)])
    fig.update_xaxes(type="log", title="timings taken of the same placement")
    fig.update_yaxes(title="best so far minus true time (ms)")
    return layout(fig, title, height)


# --- chapter 2: the placer ---


def feature_labels(inputs) -> list[str]:
    """One label per row of :func:`features_figure`: the op types, the shape numbers, the adjacency offsets."""
    from lib.placement.placer import ADJ_WINDOW, MAX_DIMS

    labels = [f"op: {t}" for t in inputs.op_types]
    labels += [f"shape dim {i}" for i in range(MAX_DIMS)] + ["log elements", "log nodes in item"]
    labels += [f"fed by item {o:+d}" for o in range(-ADJ_WINDOW, 0)]
    labels += [f"feeds item {o:+d}" for o in range(1, ADJ_WINDOW + 1)]
    labels += ["farther inputs", "farther consumers"]
    if len(labels) != len(inputs.op_types) + inputs.numeric.shape[1]:
        raise ValueError(f"{len(labels)} labels for {len(inputs.op_types) + inputs.numeric.shape[1]} feature rows")
    return labels


def features_figure(inputs, names, title: str | None = None, height: int = 620):
    """What the placer reads: one column per node, one labelled row per input number, with a colour bar."""
    import plotly.graph_objects as go

    fig = go.Figure(go.Heatmap(z=np.hstack([inputs.op_mix, inputs.numeric]).T, x=list(names),
                               y=feature_labels(inputs), colorscale="Blues", showscale=True,
                               colorbar=dict(title="value")))
    fig.update_yaxes(autorange="reversed", tickfont=dict(size=9))
    fig.update_xaxes(tickangle=-60, tickfont=dict(size=9), title="node")
    return layout(fig, title, height)


def same_as_previous_figure(x, share, n_devices: int, title: str | None = None, height: int = 380):
    """The share of decisions equal to the previous node's, per update, against a uniform placer's."""
    import plotly.graph_objects as go

    fig = go.Figure(go.Scatter(x=list(x), y=list(share), mode="lines", line=dict(color=PALETTE["primary"]),
                               name="sampled placements"))
    fig.add_hline(y=1 / n_devices, line_dash="dot", line_color=PALETTE["neutral"], annotation_text="uniform")
    fig.update_yaxes(title="same device as previous node", range=[0, 1.02], tickformat=".0%")
    fig.update_xaxes(title="update")
    return layout(fig, title, height)


def one_node_moves_figure(moves, names, pair: tuple[int, int], pair_label: str, title: str | None = None,
                          height: int = 420):
    """Each node's best one-node move from ``moves``' starting placement (ms; clipped, the clipped ones labelled),
    and the two nodes of ``pair`` moved together."""
    import plotly.graph_objects as go

    best_ms = moves.best_s * 1e3
    together = moves.jumps_s[pair_label] * 1e3
    top = max(20.0, 3 * abs(together))  # a few moves cost hundreds of ms: clip them, label them
    fig = go.Figure(go.Bar(x=list(names), y=np.minimum(best_ms, top), name="one node moved",
                           marker_color=[PALETTE["bad"] if v > 0 else PALETTE["good"] for v in best_ms],
                           text=[f"{v:+.0f}" if v > top else "" for v in best_ms], textposition="inside"))
    fig.add_scatter(x=[names[pair[0]], names[pair[1]]], y=[together] * 2, mode="markers",
                    marker=dict(symbol="diamond", size=12, color=PALETTE["accent"]), name=pair_label + " together")
    fig.update_yaxes(title="step time change (ms), clipped", range=[min(-5.0, 1.5 * best_ms.min()), top])
    fig.update_xaxes(tickangle=-60, tickfont=dict(size=9), title="node moved")
    return layout(fig, title, height)


def collapse_sensitivity_figure(study: dict, title: str | None = None, height: int = 520,
                                quoted: tuple[float, str] = (16, "the write-up: 16")):
    """Updates to collapse against each placer choice (``lib.placement.collapse_study``): one dot per random
    seed (hollow at the right edge: not collapsed within the study's updates), a bar from the fastest to the
    slowest seed and a diamond at the median (censored seeds counted at the cap)."""
    import plotly.graph_objects as go

    from lib.placement.collapse_summary import summary

    cap = study["max_updates"]
    rows = summary(study)
    labels = [f"{r['factor']}: {r['value']}" for r in rows]
    fig = go.Figure()
    fig.add_scatter(x=[r["median"] for r in rows], y=labels, mode="markers", name="median over seeds",
                    marker=dict(symbol="diamond", size=11, color=PALETTE["primary"]),
                    error_x=dict(type="data", symmetric=False, array=[r["high"] - r["median"] for r in rows],
                                 arrayminus=[r["median"] - r["low"] for r in rows], color=PALETTE["neutral"]))
    xs, ys, xc, yc = [], [], [], []
    for lab, r in zip(labels, study["rows"]):
        for c in r["collapse"]:
            (xs if c is not None else xc).append(c if c is not None else cap)
            (ys if c is not None else yc).append(lab)
    fig.add_scatter(x=xs, y=ys, mode="markers", name="one seed", marker=dict(size=7, color=PALETTE["secondary"],
                                                                              opacity=0.7))
    if xc:
        fig.add_scatter(x=xc, y=yc, mode="markers", name=f"one seed, not collapsed in {cap}",
                        marker=dict(size=8, symbol="circle-open", color=PALETTE["secondary"]))
    fig.add_vline(x=quoted[0], line_dash="dot", line_color=PALETTE["neutral"], annotation_text=quoted[1])
    fig.update_xaxes(title="update at which all K samples are one placement", range=[-1, cap + 3])
    fig.update_yaxes(autorange="reversed")
    return layout(fig, title, height)


def collapse_groups_figure(study: dict, title: str | None = None, height: int = 480):
    """The collapse over co-location groups (``lib.placement.collapse_groups``), drawn like the 40-node study:
    one row per experiment and setting, against the write-up's "about a hundred updates"."""
    rows = [{**r, "factor": f"{r['experiment']}, {r['factor']}"} for r in study["rows"]]
    fig = collapse_sensitivity_figure({**study, "rows": rows}, title, height,
                                      quoted=(100, "the write-up: about 100"))
    # no legend: the page audit found it on the title of this figure; the chapter's prose names the marks
    return fig.update_layout(showlegend=False)


def timelines_figure(traces: Mapping[str, list], title: str | None = None, height: int = 420):
    """Several placements' one-step timelines on one time axis: one lane per placement and device (ms)."""
    from dataclasses import replace as _replace

    events = [_replace(e, lane=f"{label} · {e.lane}") for label, evs in traces.items() for e in evs]
    fig = timeline_figure(events, title, height)
    order = [f"{label} · {lane}" for label, evs in traces.items() for lane in sorted({e.lane for e in evs})]
    fig.update_yaxes(categoryorder="array", categoryarray=list(reversed(order)))
    return fig
