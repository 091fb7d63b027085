"""Pictures of the chapter "From the paper to practice": pipeline timelines (GPipe, 1F1B, interleaved 1F1B)
and their activations in flight, what ZeRO 1/2/3 shards, what 16-bit training changes, sequence and context
parallelism's activation memory, and the parity plot of the ablation.

The timelines come from :func:`pipeline_timeline`, a small event simulation of each schedule's order of
operations (forward 1 unit, backward 2 units per micro-batch and stage, split over ``vp`` chunks): it does not
use ``search/schedules.py``'s formulas, so the tests can hold those formulas (bubble, micro-batches in flight)
to it. Used in: book/galvatron/05_from_paper_to_practice.ipynb.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lib.viz import PALETTE, SEQUENCE, layout
from .search.activations import layer_activation_bytes
from .search.precision import bytes_per_value
from .search.schedules import SCHEDULES


@dataclass(frozen=True)
class Op:
    """One forward (``kind`` "F") or backward ("B") of micro-batch ``mb``, model chunk ``chunk``, on
    ``stage``, from ``start`` to ``end`` (time units: a whole stage's forward of one micro-batch is 1)."""

    stage: int
    kind: str
    mb: int
    chunk: int
    start: float
    end: float


def _orders(schedule: str, pp: int, m: int, vp: int) -> list:
    """Each stage's list of (kind, mb, chunk) in the order the schedule runs them (Megatron-LM's orders)."""
    if schedule == "gpipe":
        return [[("F", i, 0) for i in range(m)] + [("B", i, 0) for i in range(m)] for _ in range(pp)]
    n = m * vp

    def fwd(k):   # k-th forward chunk-micro-batch of a stage: groups of pp micro-batches per chunk
        return ("F", (k // (pp * vp)) * pp + k % pp, (k // pp) % vp)

    def bwd(k):
        return ("B", (k // (pp * vp)) * pp + k % pp, vp - 1 - (k // pp) % vp)

    orders = []
    for r in range(pp):
        warm = min(n, (pp - r - 1) * 2 + (vp - 1) * pp) if vp > 1 else min(n, pp - r - 1)
        seq = [fwd(k) for k in range(warm)]
        f, b = warm, 0
        while f < n:
            seq.append(fwd(f))
            seq.append(bwd(b))
            f, b = f + 1, b + 1
        seq += [bwd(k) for k in range(b, n)]
        orders.append(seq)
    return orders


def pipeline_timeline(schedule: str, pp: int, m: int, vp: int = 1, fwd: float = 1.0, bwd: float = 2.0,
                      chunk_fwd=None) -> list:
    """Every operation of one step of ``schedule`` on ``pp`` equal stages with ``m`` micro-batches, as a list
    of :class:`Op`, each starting as soon as its stage is free and its input has arrived (no send time).
    Interleaving needs ``m`` a multiple of ``pp`` (as in Megatron-LM). ``chunk_fwd`` (``pp`` lists of ``vp``
    forward times, backward ``bwd / fwd`` times each) makes the stages and chunks uneven; None: every chunk's
    forward is ``fwd / vp``."""
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}; got {schedule!r}")
    if min(pp, m, vp) < 1 or (schedule != "interleaved" and vp != 1):
        raise ValueError(f"pp, m, vp must be >= 1 and vp = 1 unless interleaved; got {pp}, {m}, {vp}")
    if schedule == "interleaved" and m % pp:
        raise ValueError(f"interleaved needs micro-batches m={m} to be a multiple of pp={pp}")
    orders = _orders(schedule, pp, m, vp)
    if chunk_fwd is None:
        tf, tb = [[fwd / vp] * vp for _ in range(pp)], [[bwd / vp] * vp for _ in range(pp)]
    else:
        if len(chunk_fwd) != pp or any(len(row) != vp for row in chunk_fwd):
            raise ValueError(f"chunk_fwd must be {pp} lists of {vp} forward times; got {chunk_fwd!r}")
        tf = [[float(t) for t in row] for row in chunk_fwd]
        tb = [[t * bwd / fwd for t in row] for row in tf]
    done, free, pos, ops = {}, [0.0] * pp, [0] * pp, []

    def dep(r, kind, mb, c):
        if kind == "F":
            return ("F", r - 1, mb, c) if r > 0 else (("F", pp - 1, mb, c - 1) if c > 0 else None)
        if r < pp - 1:
            return ("B", r + 1, mb, c)
        return ("B", 0, mb, c + 1) if c < vp - 1 else ("F", r, mb, c)

    left = sum(len(o) for o in orders)
    while left:
        moved = False
        for r in range(pp):
            if pos[r] == len(orders[r]):
                continue
            kind, mb, c = orders[r][pos[r]]
            d = dep(r, kind, mb, c)
            if d is not None and d not in done:
                continue
            start = max(free[r], done[d] if d is not None else 0.0)
            end = start + (tf if kind == "F" else tb)[r][c]
            done[(kind, r, mb, c)] = end
            free[r] = end
            ops.append(Op(r, kind, mb, c, start, end))
            pos[r] += 1
            left -= 1
            moved = True
        if not moved:
            raise RuntimeError(f"schedule {schedule} deadlocked at pp={pp}, m={m}, vp={vp}")
    return ops


def step_length(ops) -> float:
    return max(o.end for o in ops)


def peak_in_flight(ops, pp: int, vp: int = 1) -> list:
    """Per stage, the most micro-batches whose activations it holds at once (a chunk counts 1/vp): a forward
    adds them when it starts, its backward frees them when it ends."""
    out = []
    for r in range(pp):
        ev = sorted([(o.start, 1) for o in ops if o.stage == r and o.kind == "F"]
                    + [(o.end, -1) for o in ops if o.stage == r and o.kind == "B"], key=lambda e: (e[0], e[1]))
        cur = top = 0
        for _, d in ev:
            cur += d
            top = max(top, cur)
        out.append(top / vp)
    return out


def timelines_figure(pp: int = 4, m: int = 8, vp: int = 2):
    """Three timelines, one per schedule, stages as rows; a bar per forward (light) and backward (dark),
    coloured by micro-batch; the step length and the bubble in each panel's title."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    cases = [("gpipe", 1), ("1f1b", 1), ("interleaved", vp)]
    titles = []
    data = []
    for sch, v in cases:
        ops = pipeline_timeline(sch, pp, m, v)
        T = step_length(ops)
        ideal = 3.0 * m
        name = {"gpipe": "GPipe", "1f1b": "1F1B", "interleaved": f"interleaved 1F1B, vp = {v}"}[sch]
        titles.append(f"{name}: step {T:g} units, bubble {T - ideal:g} ({(T - ideal) / ideal:.0%} of compute)")
        data.append(ops)
    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, subplot_titles=titles, vertical_spacing=0.09)
    for row, ops in enumerate(data, start=1):
        for kind, light in (("F", True), ("B", False)):
            sel = [o for o in ops if o.kind == kind]
            fig.add_trace(go.Bar(
                orientation="h", base=[o.start for o in sel], x=[o.end - o.start for o in sel],
                y=[f"stage {o.stage}" for o in sel],
                marker=dict(color=[SEQUENCE[o.mb % len(SEQUENCE)] for o in sel],
                            opacity=0.45 if light else 1.0, line=dict(color="white", width=0.5)),
                text=[str(o.mb) for o in sel], textposition="inside", insidetextanchor="middle",
                name="forward" if light else "backward", showlegend=False,
                hovertemplate="%{y}: " + kind + " micro-batch %{text}<extra></extra>"), row=row, col=1)
        fig.update_yaxes(autorange="reversed", row=row, col=1)
    fig.update_layout(barmode="overlay")
    fig.update_xaxes(title_text="time (units: one stage's forward of one micro-batch)", row=3, col=1)
    layout(fig, f"{pp} stages, {m} micro-batches; light: forward (1 unit), dark: backward (2 units); "
                "numbers: micro-batch", height=640)
    return fig


def in_flight_figure(pp: int = 4, m: int = 8, vp: int = 2):
    """Peak micro-batches of activations held per stage under each schedule (from the event simulation)."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for i, (sch, v, name) in enumerate((("gpipe", 1, "GPipe"), ("1f1b", 1, "1F1B"),
                                        ("interleaved", vp, f"interleaved, vp = {vp}"))):
        peaks = peak_in_flight(pipeline_timeline(sch, pp, m, v), pp, v)
        fig.add_trace(go.Bar(x=[f"stage {r}" for r in range(pp)], y=peaks, name=name,
                             marker_color=SEQUENCE[i]))
    fig.update_layout(barmode="group", yaxis_title="micro-batches held (peak)")
    return layout(fig, f"Activations in flight, {pp} stages, {m} micro-batches", height=360)


def zero_parts(stage: int, d: int, p: float = 2, g: float = 4, o: float = 12) -> dict:
    """Bytes per parameter on one GPU under ZeRO ``stage`` over ``d`` ranks, by part."""
    if stage not in (0, 1, 2, 3):
        raise ValueError(f"zero stage must be 0, 1, 2 or 3; got {stage!r}")
    return {"weights": p / d if stage >= 3 else p, "gradients": g / d if stage >= 2 else g,
            "master weights and Adam": o / d if stage >= 1 else o}


def zero_figure(d: int = 8, p: float = 2, g: float = 4, o: float = 12):
    """Stacked bytes per parameter for plain DP and ZeRO 1, 2, 3 over ``d`` ranks (mixed precision)."""
    import plotly.graph_objects as go

    fig = go.Figure()
    stages = [0, 1, 2, 3]
    names = ["plain DP", "ZeRO-1", "ZeRO-2", "ZeRO-3"]
    for i, part in enumerate(("weights", "gradients", "master weights and Adam")):
        fig.add_trace(go.Bar(x=names, y=[zero_parts(s, d, p, g, o)[part] for s in stages], name=part,
                             marker_color=SEQUENCE[i]))
    fig.update_layout(barmode="stack", yaxis_title="bytes per parameter per GPU")
    return layout(fig, f"What ZeRO shards over {d} data-parallel ranks (2-byte weights, "
                       f"{g:g}-byte gradients, 12 bytes of fp32 state)", height=380)


def precision_figure():
    """Bytes per value under the previous fp32 rule and under mixed precision (``precision.py``)."""
    import plotly.graph_objects as go

    fields = ("param", "grad", "optimizer", "activation", "message")
    labels = ("weights", "gradients", "optimizer state", "activations", "parameter messages")
    fig = go.Figure()
    for i, (mixed, name) in enumerate(((False, "fp32 rule (vldb2023)"), (True, "mixed precision (practice)"))):
        b = bytes_per_value(mixed)
        fig.add_trace(go.Bar(x=list(labels), y=[getattr(b, f) for f in fields], name=name,
                             marker_color=SEQUENCE[i]))
    fig.update_layout(barmode="group", yaxis_title="bytes per value")
    return layout(fig, "What 16-bit training changes: bytes per parameter or activation value", height=360)


def activation_rows(s: int, h: int, a: int, ffn: int, tps=(1, 2, 4, 8), cps=(1, 2, 4, 8), b: int = 1) -> dict:
    """GB one layer keeps for one micro-batch: {setting: [GB per tp]} for TP alone, TP + SP, TP + SP with
    selective recompute, full recompute (all without fused attention), and {cp: GB} with TP 8, SP, fused
    attention and context parallelism."""
    gb = 1e9
    rows = {}
    for name, kw in (("TP only", dict()), ("TP + SP", dict(sp=True)),
                     ("TP + SP + selective recompute", dict(sp=True, recompute="selective")),
                     ("full recompute", dict(sp=True, recompute="full"))):
        rows[name] = [layer_activation_bytes(s, b, h, a, ffn, t, **kw) / gb for t in tps]
    cp_rows = {c: layer_activation_bytes(s, b, h, a, ffn, max(tps), sp=True, fused_attention=True, cp=c) / gb
               for c in cps}
    return {"tp": rows, "cp": cp_rows}


def activations_figure(s: int, h: int, a: int, ffn: int, name: str, tps=(1, 2, 4, 8), cps=(1, 2, 4, 8)):
    """Two panels: one layer's activations against the TP degree under each setting (Korthikanti et al.'s
    formulas), and against the context-parallel degree."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    r = activation_rows(s, h, a, ffn, tps, cps)
    fig = make_subplots(rows=1, cols=2, subplot_titles=("against TP (no fused attention)",
                                                        f"against CP (TP {max(tps)}, SP, fused attention)"))
    for i, (lab, ys) in enumerate(r["tp"].items()):
        fig.add_trace(go.Scatter(x=list(tps), y=ys, mode="lines+markers", name=lab,
                                 line=dict(color=SEQUENCE[i])), row=1, col=1)
    fig.add_trace(go.Scatter(x=list(cps), y=list(r["cp"].values()), mode="lines+markers",
                             name="context parallel", line=dict(color=SEQUENCE[4])), row=1, col=2)
    fig.update_xaxes(type="log", tickvals=list(tps), title_text="TP degree", row=1, col=1)
    fig.update_xaxes(type="log", tickvals=list(cps), title_text="CP degree", row=1, col=2)
    fig.update_yaxes(type="log", title_text="GB per layer per sequence", row=1, col=1)
    fig.update_yaxes(type="log", row=1, col=2)
    return layout(fig, f"Activations one layer keeps for backward, {name}, {s:,} tokens", height=400)


def parity_figure(ab, steps: tuple, fitted: set, names: tuple | None = None):
    """Estimated against published tokens/s/GPU (log-log) for some steps of an ``Ablation`` (legend entries
    ``names``, default the steps' names), the diagonal and a +-15% band; held-out runs as circles, fitted
    runs as diamonds."""
    import plotly.graph_objects as go

    pub = ab.published
    shown = ab.estimate[list(steps)]
    lo = min(pub.min(), np.nanmin(shown)) / 1.5
    hi = max(pub.max(), np.nanmax(shown)) * 1.5
    fig = go.Figure()
    xs = np.geomspace(lo, hi, 50)
    for k, dash in ((1.0, "solid"), (1.15, "dot"), (1 / 1.15, "dot")):
        fig.add_trace(go.Scatter(x=xs, y=k * xs, mode="lines", line=dict(color=PALETTE["neutral"], dash=dash,
                                 width=1), showlegend=k == 1.15, name="+-15%" if k != 1 else "",
                                 hoverinfo="skip"))
    is_fit = np.array([n in fitted for n in ab.runs])
    for c, i in enumerate(steps):
        est = ab.estimate[i]
        fig.add_trace(go.Scatter(
            x=pub, y=est, mode="markers", name=(names or [ab.steps[k] for k in steps])[c],
            marker=dict(color=SEQUENCE[c % len(SEQUENCE)], size=9,
                        symbol=["diamond" if f else "circle" for f in is_fit]),
            text=list(ab.runs), hovertemplate="%{text}: published %{x:,.1f}, estimate %{y:,.1f}<extra></extra>"))
    fig.update_xaxes(type="log", title_text="published tokens/s/GPU (quoted)", range=np.log10([lo, hi]))
    fig.update_yaxes(type="log", title_text="estimated tokens/s/GPU", range=np.log10([lo, hi]))
    return layout(fig, "Estimate against published, each published configuration (diamonds: fitted runs)",
                  height=480)


def attention_shares(gpu, h: int, seqs=(2048, 4096, 8192, 16384, 32768, 65536), ffn: int | None = None) -> dict:
    """Share of a layer's compute time (per token, forward; backward scales both parts alike) spent in the
    causal attention core, priced at the GEMMs' rate of the efficiency curve and at the attention kernel's
    quoted rate (``gpu.attention_fraction``): {"gemm rate": [...], "kernel rate": [...]} over ``seqs``."""
    from .search.activations import attention_flops_per_token
    from .search.efficiency import efficiency

    ffn = 4 * h if ffn is None else ffn
    gemm = 2.0 * (4 * h * h + 2 * h * ffn)                 # QKV, out-projection and the MLP, FLOPs per token
    eff = efficiency(gpu, h)
    out = {"gemm rate": [], "kernel rate": []}
    for s in seqs:
        a = attention_flops_per_token(s, h, causal_skip=True)
        for key, rate in (("gemm rate", eff), ("kernel rate", gpu.attention_fraction)):
            t_a = a / rate
            out[key].append(t_a / (t_a + gemm / eff))
    return out


def attention_figure(gpu, h: int, name: str, seqs=(2048, 4096, 8192, 16384, 32768, 65536)):
    """The attention core's share of a layer's compute time against the sequence length, at the GEMMs'
    rate and at the attention kernel's quoted rate (``attention_shares``)."""
    import plotly.graph_objects as go

    r = attention_shares(gpu, h, seqs)
    fig = go.Figure()
    for i, (key, label) in enumerate((("gemm rate", "at the GEMMs' fitted rate (before)"),
                                      ("kernel rate", f"at the kernel's quoted {gpu.attention_fraction:.0%} "
                                                      f"of peak (practice)"))):
        fig.add_trace(go.Scatter(x=list(seqs), y=[100 * v for v in r[key]], mode="lines+markers",
                                 name=label, line=dict(color=SEQUENCE[i])))
    fig.update_xaxes(type="log", tickvals=list(seqs), ticktext=[f"{s // 1024}K" for s in seqs],
                     title_text="sequence length (tokens)")
    fig.update_yaxes(title_text="attention's share of compute time (%)", range=[0, 100])
    return layout(fig, f"The attention core's share of a layer's compute, {name} on {gpu.name} (estimated)",
                  height=380)


def error_per_run_figure(ab, steps: tuple, fitted: set, names: tuple | None = None, band: float = 0.15):
    """Each published configuration's signed error (estimate / published - 1) after some steps of an
    ``Ablation``, one column per run (sorted by the last step's error), the +-``band`` band shaded. Fitted
    runs as diamonds, held-out runs as circles; an open marker where the configuration does not fit. A
    log-log parity plot squeezes a 20% miss into a hair's width; here it is a fifth of the axis."""
    import plotly.graph_objects as go

    last = ab.error[steps[-1]]
    order = np.argsort(np.where(np.isfinite(last), last, np.inf), kind="mergesort")
    runs = [ab.runs[j] for j in order]
    fig = go.Figure()
    fig.add_hrect(y0=-100 * band, y1=100 * band, fillcolor=PALETTE["light"], opacity=0.6, line_width=0)
    fig.add_hline(y=0, line=dict(color=PALETTE["neutral"], width=1))
    is_fit = np.array([ab.runs[j] in fitted for j in order])
    width = 0.6
    for c, i in enumerate(steps):
        err, fits = 100 * ab.error[i][order], ab.fits[i][order]
        x = np.arange(len(runs)) + (c - (len(steps) - 1) / 2) * width / max(len(steps), 1)
        symbols = [("diamond" if f else "circle") + ("" if ok else "-open") for f, ok in zip(is_fit, fits)]
        fig.add_trace(go.Scatter(
            x=x, y=err, mode="markers", name=(names or [ab.steps[k] for k in steps])[c],
            marker=dict(color=SEQUENCE[c % len(SEQUENCE)], size=9, symbol=symbols),
            text=runs, hovertemplate="%{text}: %{y:+.1f}%<extra></extra>"))
    fig.update_xaxes(tickvals=list(range(len(runs))), ticktext=runs, tickangle=-60, tickfont=dict(size=10))
    fig.update_yaxes(title_text="error, estimate / published - 1 (%)", zeroline=False)
    fig = layout(fig, f"Signed error per published run; shaded: within {band:.0%} "
                      "(diamonds fitted, open: does not fit)", height=520)
    fig.update_layout(margin=dict(b=170))
    return fig


def sweep_figure(rows: list, title: str):
    """Measured against estimated tokens/s/GPU for each layout of one sweep (``rows``: report rows of
    ``validate`` with ``name``, ``published``, ``estimate``, ``fits``): two bars per layout, sorted by the
    measurement, the planner's favourite (the highest estimate among those that fit) outlined and named."""
    import plotly.graph_objects as go

    from .ranking import top1_regret

    rows = sorted(rows, key=lambda r: -r["published"])
    labels = [r["name"].split("#", 1)[1] for r in rows]
    _, fav = top1_regret([r["published"] for r in rows], [r["estimate"] for r in rows],
                         [r["fits"] for r in rows])
    fig = go.Figure()
    fig.add_trace(go.Bar(x=labels, y=[r["published"] for r in rows], name="measured (quoted)",
                         marker_color=PALETTE["secondary"]))
    outline = [3 if j == fav else 0 for j in range(len(rows))]
    fig.add_trace(go.Bar(x=labels, y=[r["estimate"] for r in rows], name="estimated (practice)",
                         marker=dict(color=PALETTE["primary"],
                                     line=dict(color=PALETTE["accent"], width=outline))))
    top = max(max(r["published"], r["estimate"]) for r in rows)
    fig.add_annotation(x=labels[fav], y=top * 1.08, text="planner's favourite", showarrow=False,
                       font=dict(color=PALETTE["accent"]))
    fig.update_yaxes(title_text="tokens/s/GPU", range=[0, top * 1.15])
    fig.update_xaxes(title_text="layout, fastest measured first")
    fig.update_layout(barmode="group")
    return layout(fig, title, height=420)


def sweep_scatter(rows: list, tp: dict, title: str):
    """Estimated against measured tokens/s/GPU of a sweep's layouts, one marker colour per tensor-parallel
    degree (``rows``: ``validate``'s report rows; ``tp``: {run name: its TP degree}), the line where the two
    agree, and the planner's favourite (the highest estimate that fits) and the fastest measured layout
    named. A point above the line is priced too fast."""
    import plotly.graph_objects as go

    from .ranking import top1_regret

    pub = [r["published"] for r in rows]
    est = [r["estimate"] for r in rows]
    _, fav = top1_regret(pub, est, [r["fits"] for r in rows])
    best = int(np.argmax(pub))
    lo, hi = 0.95 * min(pub + est), 1.05 * max(pub + est)
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=[lo, hi], y=[lo, hi], mode="lines", name="estimate = measurement",
                             line=dict(color=PALETTE["neutral"], dash="dot", width=1)))
    for j, d in enumerate(sorted(set(tp.values()))):
        idx = [i for i, r in enumerate(rows) if tp[r["name"]] == d]
        fig.add_trace(go.Scatter(x=[pub[i] for i in idx], y=[est[i] for i in idx], mode="markers",
                                 name=f"TP {d}", marker=dict(size=10, color=SEQUENCE[j % len(SEQUENCE)]),
                                 text=[rows[i]["name"].split("#", 1)[1] for i in idx],
                                 hovertemplate="%{text}<br>measured %{x:.1f}, estimated %{y:.1f}<extra></extra>"))
    for i, text, ay in ((fav, "planner's favourite", -30), (best, "fastest measured", 30)):
        fig.add_annotation(x=pub[i], y=est[i], text=text, showarrow=True, arrowhead=2, ax=-70, ay=ay,
                           font=dict(color=PALETTE["accent"]))
    fig.update_xaxes(title_text="measured tokens/s/GPU (quoted)", range=[lo, hi])
    fig.update_yaxes(title_text="estimated tokens/s/GPU (practice)", range=[lo, hi])
    return layout(fig, title, height=460)


def playbook_figure(report: dict, title: str):
    """Estimated over measured tokens/s/GPU of each of the Ultra-Scale Playbook's best layouts (``report``:
    ``playbook_report.playbook_report``) by node count, priced on the fabric as the playbook measured it
    with its loss read as latency (the file's reading) and as bandwidth, and on the default port, each run's
    three estimates joined; the four model sizes side by side at each count."""
    import plotly.graph_objects as go

    models = sorted({r["model"] for r in report["rows"]}, key=lambda m: float(m.rstrip("B")))
    shift = {m: (i - (len(models) - 1) / 2) * 0.12 for i, m in enumerate(models)}
    fig = go.Figure()
    x0, x1 = -0.5, 6.5
    fig.add_shape(type="rect", x0=x0, x1=x1, y0=0.85, y1=1.15, line_width=0,
                  fillcolor=PALETTE["light"], opacity=0.6, layer="below")
    fig.add_shape(type="line", x0=x0, x1=x1, y0=1, y1=1, line=dict(color=PALETTE["neutral"], width=1))
    xs = {r["name"]: np.log2(r["nodes"]) + shift[r["model"]] for r in report["rows"]}
    for r in report["rows"]:
        ys = [1 + r[k] for k in ("error", "error_bandwidth", "error_default")]
        fig.add_trace(go.Scatter(x=[xs[r["name"]]] * 2, y=[min(ys), max(ys)],
                                 mode="lines", line=dict(color=PALETTE["neutral"], width=1),
                                 showlegend=False, hoverinfo="skip"))
    for key, name, sym, color in (("error", "EFA, loss read as latency", "circle", PALETTE["primary"]),
                                  ("error_bandwidth", "EFA, loss read as bandwidth", "x-thin-open",
                                   PALETTE["neutral"]),
                                  ("error_default", "default port (50 GB/s x link efficiency)",
                                   "circle-open", PALETTE["secondary"])):
        fig.add_trace(go.Scatter(
            x=[xs[r["name"]] for r in report["rows"]], y=[1 + r[key] for r in report["rows"]], mode="markers",
            name=name, marker=dict(symbol=sym, size=9, color=color, line=dict(width=2, color=color)),
            text=[f"{r['model']}, {r['nodes']} nodes: {r['config']}" for r in report["rows"]],
            hovertemplate="%{text}<br>estimated / measured %{y:.2f}<extra></extra>"))
    fig.update_xaxes(title_text="nodes of 8 H100 (the four model sizes side by side, smallest left)",
                     tickvals=list(range(7)), ticktext=[str(2**i) for i in range(7)], range=[x0, x1])
    fig.update_yaxes(title_text="estimated / measured tokens/s/GPU", type="log",
                     tickvals=[0.25, 0.5, 0.85, 1, 1.15, 2, 4])
    return layout(fig, title, height=460)


def fabric_readings_figure(r: dict, title: str):
    """Bus bandwidth per GPU of an all-reduce over every GPU of 2-64 nodes (``r``:
    ``playbook_report.fabric_readings``): the published points (quoted) and the network's price of the
    benchmark's message and of a larger one, the fabric's loss read as latency (solid) and as bandwidth
    (dotted). Read as latency the network reproduces the published points from 4 nodes on; read as
    bandwidth it runs below them (its NVLink phases come on top), and a larger message gains nothing."""
    import plotly.graph_objects as go

    x = r["nodes"]
    mb, gb = r["message_bytes"] / 2**20, r["large_bytes"] / 2**30
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=x, y=[b / 1e9 for b in r["published"]], mode="markers",
                             name=f"published, {mb:.0f} MB (quoted)",
                             marker=dict(size=11, color=PALETTE["neutral"], symbol="circle-open",
                                         line=dict(width=2))))
    styles = (("latency", "solid", PALETTE["primary"]), ("bandwidth", "dot", PALETTE["secondary"]))
    for reading, dash, color in styles:
        for size, label, width in (("message", f"{mb:.0f} MB", 1.5), ("large", f"{gb:.0f} GB", 3)):
            fig.add_trace(go.Scatter(
                x=x, y=[b / 1e9 for b in r[reading][size]], mode="lines",
                name=f"read as {reading}, {label}", line=dict(color=color, dash=dash, width=width),
                hovertemplate=f"%{{x}} nodes, read as {reading}, {label}: %{{y:.0f}} GB/s<extra></extra>"))
    fig.update_xaxes(title_text="nodes of 8 H100 (every GPU in one all-reduce)", type="log",
                     tickvals=x, ticktext=[str(n) for n in x])
    fig.update_yaxes(title_text="bus bandwidth per GPU (GB/s)", rangemode="tozero")
    return layout(fig, title, height=420)
