"""Figures of the one-slow-GPU chapter: the step view, step efficiency by cluster size, two weeks one row per day,
and the kept share against the checkpoint interval. Each is a plotly figure with one slider over precomputed
frames (``lib.viz.frames_figure``), so it stays interactive in the static book. Used in:
book/stragglers/01_the_one_slow_gpu.
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

from lib.straggler.model import (FailureModel, StepModel, backup_count, checkpoint_shares, expected_step_s,
                                 max_of_exponentials, optimal_interval_min, p_wait, step_efficiency, young_daly_min)
from lib.straggler.simulate import FailureGaps, RunResult, simulate_run
from lib.viz import PALETTE, Frame, frames_figure, layout

#: What the page printed (one seeded run, rounded), quoted to be shown next to our exact values.
PAGE_EFFICIENCY = {(8, 0): 0.975, (16_384, 0): 0.71, (16_384, 328): 0.90, (8, 1): 0.87}
PAGE_CLAIMS = {"eff_8": "97.5%", "wait_16k": "81%", "step_16k_s": "1.54 s", "eff_16k": "71%",
               "eff_16k_backups": "90%", "eff_8_backup": "87%", "mtbf_h": "3.1 h", "yd_min": "about 19 min (19.3)",
               "best_min": "18.6 min", "kept_yd": "87.5%", "ckpt_often": "23%", "lost_rarely": "29%"}
STEP_VIEW_SIZES = (8, 64, 512, 4096, 16_384)
CLUSTER_SIZES = tuple(2**i for i in range(3, 17))  # 8 .. 65,536
BACKUP_SHARES = (0.005, 0.01, 0.02, 0.05, 0.10)


def _base(height: int, **kw) -> dict:
    """The house layout (``lib.viz.layout``: legend right of the plot, house margins) plus ``kw`` (axes).

    No title and no top margin here: ``frames_figure`` wraps every frame's title with ``viz.wrap_title`` and
    grows the top margin to ``viz.title_margin`` of the longest one."""
    base = layout(go.Figure(), height=height).layout.to_plotly_json()
    base.update(**kw)
    return base


def _count(n: int, word: str) -> str:
    """``"1 failure"``, ``"3 failures"``: a count with a noun that agrees with it."""
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def _gpus(n: int, b: int) -> str:
    return _count(n, "GPU") + (f" + {_count(b, 'backup')}" if b else "")


# ----------------------------------------------------------------------------------------------- step view
def step_view_draw(n_gpus: int, n_backup: int, rng: np.random.Generator, n_show: int = 192,
                   model: StepModel = StepModel()) -> dict:
    """One step, ``n_show`` GPUs shown (all of them if fewer): every slow GPU and the slowest healthy one are
    always among them, the other healthy GPUs are drawn below the healthy maximum. Times are compute (s)."""
    m, total = model, n_gpus + n_backup
    shown = min(n_show, total)
    x_max = float(max_of_exponentials(n_gpus, rng.random()))
    n_slow = min(int(rng.poisson(total * m.p_slow)), shown - 1)
    slow = np.sort(m.slow_factor * m.compute_s * (1 + m.jitter * rng.standard_exponential(n_slow)))
    covered = slow[len(slow) - min(n_slow, n_backup):] if n_backup else slow[:0]  # the backups cover the slowest
    waited = slow[:len(slow) - len(covered)]
    # other healthy GPUs: X | X < x_max by inverse CDF
    u = rng.random(shown - 1 - n_slow)
    others = m.compute_s * (1 + m.jitter * -np.log1p(-u * -np.expm1(-x_max)))
    healthy_max = m.compute_s * (1 + m.jitter * x_max)
    close = max(healthy_max, waited.max() if len(waited) else 0.0)
    pos = rng.permutation(shown)
    return {"healthy": (pos[:len(others)], others), "slowest_healthy": (pos[len(others):len(others) + 1], [healthy_max]),
            "waited": (pos[len(others) + 1:len(others) + 1 + len(waited)], waited),
            "covered": (pos[len(others) + 1 + len(waited):], covered), "close_s": close, "step_s": close + m.sync_s,
            "shown": shown, "n_slow": n_slow}


def step_view_pair(n_gpus: int, n_backup: int, rng: np.random.Generator, n_show: int = 192,
                   model: StepModel = StepModel()) -> tuple[dict, dict]:
    """The same step of the same cluster without and with ``n_backup`` backups, from one draw: the ``n_gpus``
    GPUs keep their times and places; with backups, the backups' own slow GPUs (as many as the model gives
    ``n_backup`` more GPUs, drawn after the shared ones) join the slow ones at the right, and the backups cover
    the slowest of them. Each dict as :func:`step_view_draw`'s."""
    plain = step_view_draw(n_gpus, 0, rng, n_show, model)
    m = model
    k = min(int(rng.poisson(n_backup * m.p_slow)), n_backup)
    extra = m.slow_factor * m.compute_s * (1 + m.jitter * rng.standard_exponential(k))
    pos_w, times_w = plain["waited"]
    pos = np.concatenate([np.asarray(pos_w, dtype=int), plain["shown"] + np.arange(k)])
    times = np.concatenate([np.asarray(times_w, dtype=float), extra])
    order = np.argsort(times, kind="stable")
    pos, times = pos[order], times[order]
    n_cov = min(len(times), n_backup)
    waited, covered = (pos[:len(times) - n_cov], times[:len(times) - n_cov]), (pos[len(times) - n_cov:],
                                                                                   times[len(times) - n_cov:])
    healthy_max = float(plain["slowest_healthy"][1][0])
    close = max(healthy_max, float(waited[1].max()) if len(waited[1]) else 0.0)
    backed = dict(plain, waited=waited, covered=covered, close_s=close, step_s=close + m.sync_s,
                  shown=plain["shown"] + k, n_slow=plain["n_slow"] + k)
    return plain, backed


def step_view_figure(sizes=STEP_VIEW_SIZES, backup_share: float = 0.02, seed: int = 0, active: int | None = None,
                     model: StepModel = StepModel()):
    """Frames over cluster sizes, each without and with backups: one drawn step, ``n_show`` GPUs as bars."""
    frames, ranges = [], []
    for n in sizes:
        b_n = backup_count(n, backup_share)
        # one draw per size: the same cluster without and with backups
        pair = step_view_pair(n, b_n, np.random.default_rng([seed, n]), model=model)
        for b, d in zip((0, b_n), pair):
            ranges.append([-1.5, d["shown"] + 0.5])
            bars = []
            for key, name, colour in (("healthy", "healthy GPU", PALETTE["primary"]),
                                      ("slowest_healthy", "slowest healthy GPU", PALETTE["accent"]),
                                      ("waited", "slow GPU (waited for)", PALETTE["bad"]),
                                      ("covered", "slow GPU (covered by a backup)", PALETTE["neutral"])):
                x, y = d[key]
                bars.append(go.Bar(x=np.asarray(x).tolist(), y=np.round(y, 5).tolist(), name=name,
                                   marker_color=colour, width=0.8))
            line_x = [-1, d["shown"]]
            bars.append(go.Scatter(x=line_x, y=[d["close_s"]] * 2, mode="lines", name="step closes (then sync)",
                                   line=dict(color=PALETTE["bad"], dash="dash")))
            bars.append(go.Scatter(x=line_x, y=[model.compute_s] * 2, mode="lines", name="compute without delay",
                                   line=dict(color=PALETTE["neutral"], dash="dot")))
            title = (f"{_gpus(n, b)}: {d['shown']:,} shown, {d['n_slow']:,} slow; this step "
                     f"{d['step_s']:.3f} s against an ideal {model.ideal_step_s:.2f} s")
            frames.append(Frame(label=_gpus(n, b), data=bars, title=title))
    active = len(frames) - 1 if active is None else active
    base = _base(480, barmode="overlay", xaxis=dict(title="GPU (position in the sample shown)", range=ranges[active]),
                 yaxis=dict(title="compute time this step (s)", range=[0.98, 1.62]))
    fig = frames_figure(frames, "cluster", active=active, base_layout=base)
    for fr, r in zip(fig.frames, ranges):
        fr.layout.update(xaxis=dict(range=r))  # plotly's animate does not autorange: each frame its own
    return fig


# ----------------------------------------------------------------------------------------------- cluster size
def efficiency_curves(sizes=CLUSTER_SIZES, shares=BACKUP_SHARES, model: StepModel = StepModel()) -> dict:
    """Exact step efficiency by cluster size: ``plain`` and, per backup share, ``with backups``."""
    return {"sizes": list(sizes), "plain": [step_efficiency(n, 0, model) for n in sizes],
            "backups": {s: [step_efficiency(n, backup_count(n, s), model) for n in sizes] for s in shares}}


def page_marks(share: float) -> list[tuple[tuple[int, int], float]]:
    """The page's quoted step efficiencies that apply to a figure at backup ``share``: the plain ones always, the
    backup ones (the page's 2%: 1 backup on 8 GPUs, 328 on 16,384) only at that share."""
    return [((n, b), v) for (n, b), v in PAGE_EFFICIENCY.items() if b == 0 or b == backup_count(n, share)
            and math.isclose(share, 0.02)]


def efficiency_figure(n_gpus: int = 16_384, shares=BACKUP_SHARES, active_share: float = 0.02,
                      sizes=CLUSTER_SIZES, model: StepModel = StepModel()):
    """Step efficiency against the number of GPUs, plain and with backups (slider: the backup share)."""
    c = efficiency_curves(sizes, shares, model)
    mine = step_efficiency(n_gpus, 0, model)
    frames = []
    for s in shares:
        page = page_marks(s)  # the page's backup figures are for 2% backups: only in that frame
        b = backup_count(n_gpus, s)
        mine_b = step_efficiency(n_gpus, b, model)
        data = [
            go.Scatter(x=c["sizes"], y=c["plain"], mode="lines+markers", name="no backups",
                       line=dict(color=PALETTE["primary"])),
            go.Scatter(x=c["sizes"], y=c["backups"][s], mode="lines+markers", name=f"{s:.1%} backups (charged)",
                       line=dict(color=PALETTE["good"])),
            go.Scatter(x=[n_gpus, n_gpus], y=[mine, mine_b], mode="markers", name="your cluster",
                       marker=dict(color=PALETTE["accent"], size=13)),
            go.Scatter(x=[k[0] for k, _ in page], y=[v for _, v in page], mode="markers", name="the page (quoted)",
                       marker=dict(color=PALETTE["secondary"], symbol="diamond-open", size=11, line_width=2)),
        ]
        title = (f"{_count(n_gpus, 'GPU')}: {mine:.1%} plain, {mine_b:.1%} with {_count(b, 'backup')} ({s:.1%}); "
                 f"exact expected values")
        frames.append(Frame(label=f"{s:.1%}", data=data, title=title))
    span = [*c["sizes"], n_gpus]
    base = _base(460, xaxis=dict(title="GPUs in the cluster (log scale)", type="log",
                                 range=[math.log10(min(span)) - 0.1, math.log10(max(span)) + 0.1]),
                 yaxis=dict(title="step efficiency (% of the ideal step rate)", tickformat=".0%",
                            range=[0.6, 1.0]))
    return frames_figure(frames, "backups", active=list(shares).index(active_share), base_layout=base)


# ----------------------------------------------------------------------------------------------- two weeks
def _by_day(start_min: float, end_min: float):
    """Split a span into (day, start_h, length_h) pieces, one per calendar day it touches."""
    out, t = [], start_min
    while t < end_min - 1e-9:
        day = int(t // 1440)
        e = min(end_min, (day + 1) * 1440)
        out.append((day + 1, (t - day * 1440) / 60, (e - t) / 60))
        t = e
    return out


def day_rows(run: RunResult, checkpoint_min: float = 1.0, restart_min: float = 5.0) -> dict:
    """The recorded run as bars per day: ``kept`` training (checkpoint slivers on top), ``lost`` (thrown away
    by a failure), ``restart``; ``checkpoints`` holds (day, mid-hour) of every checkpoint write."""
    seg, tau = run.interval_min + checkpoint_min, run.interval_min
    rows = {"kept": [], "lost": [], "restart": [], "checkpoints": []}
    for t0, t1, n_full, failed in run.gaps:
        saved_end = t0 + n_full * seg if failed else t1
        rows["kept"] += _by_day(t0, saved_end)
        writes = t0 + np.arange(n_full) * seg + tau + checkpoint_min / 2
        rows["checkpoints"] += [(int(w // 1440) + 1, (w % 1440) / 60) for w in writes]
        if failed:
            rows["lost"] += _by_day(saved_end, t1)
            rows["restart"] += _by_day(t1, min(t1 + restart_min, run.run_min))
    return rows


def _bars(pieces, name, colour, pattern=None):
    day, start, length = (np.array(v) for v in zip(*pieces)) if pieces else ([], [], [])
    return go.Bar(y=list(map(int, day)), x=np.round(length, 4).tolist(), base=np.round(start, 4).tolist(),
                  orientation="h", name=name, marker=dict(color=colour, pattern=pattern, line_width=0))


def day_traces(run, failure: FailureModel) -> list:
    """The traces of one recorded run, one row per day: kept, thrown away, restarts, checkpoints written.
    Used by the timeline figure and chapter 10's five-ways panel."""
    rows = day_rows(run, failure.checkpoint_min, failure.restart_min)
    ck = rows["checkpoints"]
    return [_bars(rows["kept"], "training kept", PALETTE["good"]),
            _bars(rows["lost"], "training thrown away", PALETTE["bad"], dict(shape="/", fgcolor="white")),
            _bars(rows["restart"], "restart", PALETTE["neutral"]),
            go.Scatter(x=[round(h, 4) for _, h in ck], y=[d for d, _ in ck], mode="markers",
                       name="checkpoint written", marker=dict(symbol="line-ns", size=14, line=dict(
                           width=1.2, color=PALETTE["primary"])))]


def timeline_figure(n_gpus: int = 16_384, intervals_min=None, active_min: float | None = None, days: float = 14.0,
                    seed: int = 0, failure: FailureModel = FailureModel()):
    """One row per day of one seeded run, one frame per checkpoint interval; every frame sees the same failures."""
    mtbf = failure.cluster_mtbf_min(n_gpus)
    yd = young_daly_min(mtbf, failure.checkpoint_min)
    intervals_min = sorted(intervals_min or interval_choices(yd))
    gaps = FailureGaps(np.random.default_rng(seed))
    frames = []
    for tau in intervals_min:
        run = simulate_run(tau, mtbf, gaps, days * 1440, failure.checkpoint_min, failure.restart_min, record=True)
        data = day_traces(run, failure)
        title = (f"every {tau:.1f} min: {_count(run.failures, 'failure')}; {run.lost_share:.1%} thrown away "
                 f"(with restarts); "
                 f"{run.checkpoint_share:.1%} writing checkpoints; {run.kept_share:.1%} kept")
        frames.append(Frame(label=f"{tau:.1f} min", data=data, title=title))
    active = _nearest(intervals_min, active_min if active_min is not None else yd)
    n_days = math.ceil(days)
    base = _base(200 + 24 * n_days, barmode="overlay", bargap=0.25,
                 xaxis=dict(title="hour of the day (h)", range=[0, 24], dtick=3),
                 yaxis=dict(title="day of the run", range=[n_days + 0.5, 0.5], dtick=1))
    return frames_figure(frames, "checkpoint interval", active=active, base_layout=base)


# ----------------------------------------------------------------------------------------------- interval curve
def interval_choices(yd_min: float, extra=()) -> list[float]:
    """The intervals the sliders offer: the five rows' settings, the exact best's neighbourhood, and a sweep."""
    return sorted({round(v, 6) for v in (1, 2, 3, yd_min / 6, 5, 10, 15, yd_min, 30, 60, 6 * yd_min, 120, 240, 480,
                                          *extra)})


def _nearest(values, v) -> int:
    return int(np.argmin([abs(math.log(x / v)) for x in values]))


def interval_grid(marks_min, n: int = 140) -> np.ndarray:
    """Checkpoint intervals (min) for a curve over the interval: 0.5 min to 16 h, widened so that every interval
    in ``marks_min`` (a Young-Daly line, the reader's interval) lies well inside."""
    lo, hi = min([0.5, *(v / 1.5 for v in marks_min)]), max([960.0, *(1.5 * v for v in marks_min)])
    return np.geomspace(lo, hi, n)


def interval_figure(n_gpus: int = 16_384, backup_share: float = 0.0, intervals_min=None,
                    active_min: float | None = None, days: float = 14.0, seed: int = 0,
                    failure: FailureModel = FailureModel()):
    """Kept share against the checkpoint interval (exact), the Young-Daly line, the exact best, and the reader's
    setting as a dot (slider), next to one seeded run of ``days`` days at that setting."""
    b = backup_count(n_gpus, backup_share)
    mtbf = failure.cluster_mtbf_min(n_gpus, b)
    yd, best = young_daly_min(mtbf, failure.checkpoint_min), optimal_interval_min(mtbf, failure.checkpoint_min)
    intervals_min = sorted(intervals_min or interval_choices(yd))
    grid = interval_grid([yd, best, *intervals_min], 300)
    kept = checkpoint_shares(grid, mtbf, failure.checkpoint_min, failure.restart_min)["kept"]
    static = [
        go.Scatter(x=np.round(grid, 4).tolist(), y=np.round(kept, 5).tolist(), mode="lines",
                   name="kept share (exact expected)", line=dict(color=PALETTE["good"])),
        go.Scatter(x=[yd, yd], y=[0, 1], mode="lines", name=f"Young-Daly {yd:.1f} min",
                   line=dict(color=PALETTE["neutral"], dash="dash")),
        go.Scatter(x=[best], y=[float(checkpoint_shares(best, mtbf, failure.checkpoint_min,
                                                        failure.restart_min)["kept"])],
                   mode="markers", name=f"exact best {best:.1f} min", marker=dict(color=PALETTE["primary"], size=9)),
    ]
    gaps = FailureGaps(np.random.default_rng(seed))
    frames = []
    for tau in intervals_min:
        exp = float(checkpoint_shares(tau, mtbf, failure.checkpoint_min, failure.restart_min)["kept"])
        run = simulate_run(tau, mtbf, gaps, days * 1440, failure.checkpoint_min, failure.restart_min)
        dots = [go.Scatter(x=[tau], y=[exp], mode="markers", name="your setting",
                           marker=dict(color=PALETTE["accent"], size=14)),
                go.Scatter(x=[tau], y=[run.kept_share], mode="markers", name=f"one {days:g}-day run (seed {seed})",
                           marker=dict(color=PALETTE["accent"], size=10, symbol="x"))]
        title = (f"every {tau:.1f} min on {_gpus(n_gpus, b)}: {exp:.1%} kept expected, "
                 f"{run.kept_share:.1%} in this run")
        frames.append(Frame(label=f"{tau:.1f} min", data=static + dots, title=title))
    active = _nearest(intervals_min, active_min if active_min is not None else yd)
    base = _base(460, xaxis=dict(title="checkpoint interval (min)", type="log",
                                 range=[math.log10(grid[0]), math.log10(grid[-1])]),
                 yaxis=dict(title="time kept (% of the run)", tickformat=".0%", range=[0, 1]))
    return frames_figure(frames, "your interval", active=active, base_layout=base)


def chapter_figures(n_gpus: int = 16_384, interval_min: float = 120.0, backup_share: float = 0.0, days: float = 14.0,
                    seed: int = 0) -> dict:
    """Every slider figure of the chapter, all frames precomputed (what the benchmark times). The step view and
    the cluster-size curve use ``backup_share`` when it is above zero, else the page's 2%."""
    yd = young_daly_min(FailureModel().cluster_mtbf_min(n_gpus))
    intervals = interval_choices(yd, extra=(interval_min,))
    sizes = tuple(sorted({*STEP_VIEW_SIZES, n_gpus}))
    share = backup_share if backup_share > 0 else 0.02  # with no backups of your own, show the page's 2%
    return {
        "step_view": step_view_figure(sizes, share, seed, active=2 * sizes.index(n_gpus)),
        "efficiency": efficiency_figure(n_gpus, tuple(sorted({*BACKUP_SHARES, share})), share),
        "timeline": timeline_figure(n_gpus, intervals, interval_min, days, seed),
        "interval": interval_figure(n_gpus, 0.0, intervals, interval_min, days, seed),
    }


def exact_claims(step: StepModel = StepModel(), failure: FailureModel = FailureModel()) -> dict:
    """The page's claims as exact expected values of the model, at the page's own settings (keys of PAGE_CLAIMS)."""
    n, b = 16_384, backup_count(16_384)
    m = failure.cluster_mtbf_min(n)
    yd = young_daly_min(m, failure.checkpoint_min)
    shares = lambda tau: checkpoint_shares(tau, m, failure.checkpoint_min, failure.restart_min)
    return {"eff_8": step_efficiency(8, 0, step), "wait_16k": p_wait(n, 0, step),
            "step_16k_s": expected_step_s(n, 0, step), "eff_16k": step_efficiency(n, 0, step),
            "eff_16k_backups": step_efficiency(n, b, step), "eff_8_backup": step_efficiency(8, backup_count(8), step),
            "mtbf_h": m / 60, "yd_min": yd, "best_min": optimal_interval_min(m, failure.checkpoint_min),
            "kept_yd": float(shares(yd)["kept"]), "ckpt_often": float(shares(yd / 6)["checkpoint"]),
            "lost_rarely": float(shares(6 * yd)["lost"])}


def claims_table(exact: dict | None = None) -> list[tuple[str, str, str]]:
    """(figure, the page's printed value, our exact expected value), formatted for a table."""
    exact = exact or exact_claims()
    what = {"eff_8": "8 GPUs: step efficiency", "wait_16k": "16,384 GPUs: steps waiting for a slow GPU",
            "step_16k_s": "16,384 GPUs: mean step", "eff_16k": "16,384 GPUs: step efficiency",
            "eff_16k_backups": "16,384 + 328 backups: step efficiency", "eff_8_backup": "8 + 1 backup: step efficiency",
            "mtbf_h": "cluster MTBF", "yd_min": "Young-Daly interval", "best_min": "exact best interval",
            "kept_yd": "time kept at Young-Daly", "ckpt_often": "writing checkpoints at YD/6 ('every 3 minutes')",
            "lost_rarely": "thrown away at 6 YD ('every 2 hours')"}
    units = {"_s": " s", "_h": " h", "_min": " min"}
    fmt = lambda k, v: next((f"{v:.5g}{u}" for end, u in units.items() if k.endswith(end)), f"{v:.2%}")
    return [(what[k], PAGE_CLAIMS[k], fmt(k, exact[k])) for k in PAGE_CLAIMS]
