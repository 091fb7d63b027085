"""Chapter 4's experiments ("Then break it"): the write-up's open questions, each through the run log and the
head-to-head protocol of chapters 2-3.

- ``train`` wraps ``experiment.train_run`` with a run name that also says the algorithm and the policy;
- ``sharded_head_to_head`` runs the head-to-head with the sharded-AdamW baseline (``sim_sharded``) in place of
  the single GPU, logged as an ``.eval.jsonl`` that ``experiment.read_evaluation`` reads;
- ``sharding_table``: the noiseless single-GPU and sharded steps on one profile, phase by phase;
- ``fit_table``: which hand-made placements fit in memory, with their peaks;
- ``samples_to_within`` / ``efficiency_table`` / ``best_so_far_figure``: sample efficiency of several runs per
  method (placements evaluated until the best found is within ``tol`` of a reference), with t intervals;
- ``machine_transfer``: a run's picks re-evaluated on other simulated machines (machine seeds).

Every number is from the simulator unless the spec says ``device="real"``; tables say their source.
Used in: Part I, chapter 4 ("Then break it").
"""

from __future__ import annotations

import math
import os
from dataclasses import replace
from typing import Mapping, Sequence

import numpy as np

from lib import runlog
from lib.html_table import HTMLTable

#: Two-sided 95 % Student-t quantiles t_{0.975, df} for df = 1..10 (standard table); 1.96 beyond.
T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228)


def run_name(spec, cfg, colocate: bool) -> str:
    """``experiment.run_name`` plus the algorithm and the policy when they are not chapters 2-3's."""
    from lib.placement.experiment import run_name as base

    name = base(spec, cfg, colocate)
    extra = ""
    if cfg.algorithm == "ppo":
        extra += f"_ppo{cfg.ppo_epochs}c{cfg.ppo_clip:g}"
    if cfg.policy == "hierarchical":
        extra += f"_hier{cfg.n_groups}"
    if cfg.hidden != 512:
        extra += f"_h{cfg.hidden}"
    return name[: name.rfind("_s")] + extra + name[name.rfind("_s"):]


def train(spec, cfg, colocate: bool = True, out_dir: str = "data/runs", progress: bool = False):
    """One run (resumed when its log exists); the hierarchical policy learns its groups (no co-location)."""
    from lib.placement.experiment import train_run

    colocate = colocate and cfg.policy == "placer"
    return train_run(spec, cfg, colocate=colocate, out_dir=out_dir, name=run_name(spec, cfg, colocate),
                     progress=progress)


def sharded_head_to_head(run_path: str, spec, rounds_select: int = 4, rounds_confirm: int = 8,
                         steps_per_round: int = 10, seed: int = 0, out_path: str | None = None):
    """The head-to-head of a run's picks against the sharded-AdamW baseline (model on one GPU, every GPU
    choosable), the human two-GPU split and the fixed baselines, on ``spec``; logged and read back."""
    from lib.placement.evaluate import head_to_head, rank_devices, seed_sides
    from lib.placement.experiment import independent_noise, make_env, read_evaluation
    from lib.placement.reinforce import RunResult, check_signature, model_signature
    from lib.placement.sim_sharded import ShardedOptimizerEnv

    if spec.device != "sim":
        raise ValueError(f"device {spec.device!r}: the sharded baseline is simulated here; on GPUs use "
                         "TorchPlacementEnv(optimizer='sharded')")
    run = RunResult.from_log(run_path)
    base = make_env(spec)
    independent_noise(base, spec, seed, run_path + ".sharded")
    check_signature(run.header, model_signature(base.graph, run.header["model"]["groups"], base.n_devices),
                    run_path)
    env = ShardedOptimizerEnv(base)
    rng = np.random.default_rng(seed)
    order = rank_devices(base, rounds_select, steps_per_round, rng)  # the GPUs themselves, unsharded
    sides, fixed = seed_sides(run, base.graph, base.n_devices, gpu_order=order)
    sides["sharded_adamw"] = [(f"GPU {g} + sharded AdamW", p) for g, (_, p) in enumerate(sides.pop("single_gpu"))]
    h2h = head_to_head(env, sides, fixed, rounds_select, rounds_confirm, steps_per_round, rng=rng)
    stem = run_path[:-len(".jsonl")] if run_path.endswith(".jsonl") else run_path
    out_path = out_path or stem + ".sharded.eval.jsonl"
    header = runlog.make_header({"rounds_select": rounds_select, "rounds_confirm": rounds_confirm,
                                 "steps_per_round": steps_per_round, "baseline": "sharded_adamw",
                                 "run": os.path.basename(run_path)},
                                {**spec.to_dict(), "describe": env.describe()}, seed, run_kind="evaluate",
                                model=run.header["model"])
    log = runlog.RunLog.create(out_path, header)
    log.append(h2h.to_dict())
    return read_evaluation(out_path)[1]


def sharding_table(profiles: Sequence[str], preset: str = "49m", gpu: int = 0) -> HTMLTable:
    """Per profile (noiseless simulator): the single-GPU step and the sharded-AdamW step, phase by phase."""
    from lib.placement.sim_env import SimPlacementEnv
    from lib.placement.sim_sharded import sharded_step

    rows = []
    for prof in profiles:
        env = SimPlacementEnv(preset, prof)
        st = sharded_step(env, gpu)
        one = st.forward_s + st.backward_s + st.single_gpu_optimizer_s
        rows.append((prof, f"{(st.forward_s + st.backward_s) * 1e3:.1f}", f"{st.single_gpu_optimizer_s * 1e3:.2f}",
                     f"{st.optimizer_s * 1e3:.2f}", f"{one * 1e3:.1f}", f"{st.step_s * 1e3:.1f}",
                     f"{(one - st.step_s) / one * 100:+.1f}%"))
    return HTMLTable(("profile", "forward + backward (ms)", "AdamW, one GPU (ms)", "AdamW sharded, copies incl. (ms)",
                      "step, one GPU (ms)", "step, sharded (ms)", "sharded saves"), tuple(rows),
                     caption=f"simulated (noiseless), GPT {preset}, model on GPU {gpu}", nowrap=(1, 2, 3, 4, 5, 6))


def fit_table(env) -> HTMLTable:
    """Every hand-made placement of ``env``'s graph: fits or not, its largest per-device peak, its step."""
    from lib.placement import baselines as bl
    from lib.placement.sim_sharded import ShardedOptimizerEnv

    cands = (bl.single_devices(env.graph, env.n_devices)[:1] + bl.human_two_gpu(env.graph, env.n_devices)[:1]
             + list(bl.fixed_baselines(env.graph, env.n_devices)))
    rows = []
    for label, p in cands:
        m = env.measure(p)
        rows.append((label, "no (out of memory)" if m.oom else "yes", f"{max(m.peak_mem_bytes) / 1e9:.2f}",
                     "-" if m.oom else f"{m.step_s * 1e3:.0f}"))
    sh = ShardedOptimizerEnv(env).measure(cands[0][1])
    rows.append(("GPU 0 + sharded AdamW", "no (out of memory)" if sh.oom else "yes",
                 f"{max(sh.peak_mem_bytes) / 1e9:.2f}", "-" if sh.oom else f"{sh.step_s * 1e3:.0f}"))
    cap = min(env.cap_bytes) / 1e9
    return HTMLTable(("placement", "fits", "largest peak (GB)", "step (ms)"), tuple(rows),
                     caption=f"{env.describe()}; memory available per GPU {cap:.2f} GB", nowrap=(2, 3))


def best_so_far(res) -> tuple[np.ndarray, np.ndarray]:
    """(placements evaluated, best step time found so far in seconds), one point per update."""
    n, best, xs, ys = 0, math.inf, [], []
    for r in res.records:
        n += len(r["step_s"])
        best = min(best, min(r["step_s"]))
        xs.append(n)
        ys.append(best)
    return np.array(xs), np.array(ys)


def samples_to_within(res, ref_s: float, tol: float = 0.02) -> int | None:
    """Placements evaluated until the run's best is within ``tol`` of ``ref_s`` (None: never in the run)."""
    if not ref_s > 0 or not 0 <= tol < 1:
        raise ValueError(f"ref_s {ref_s!r} must be > 0 and tol {tol!r} in [0, 1)")
    xs, ys = best_so_far(res)
    hit = np.nonzero(ys <= ref_s * (1 + tol))[0]
    return int(xs[hit[0]]) if hit.size else None


def t_interval(values: Sequence[float]) -> tuple[float, float]:
    """Mean and the half-width of its two-sided 95 % Student-t interval (nan for fewer than 2 values)."""
    v = np.asarray(values, dtype=float)
    if v.size < 2:
        return (float(v.mean()) if v.size else math.nan), math.nan
    df = v.size - 1
    t = T975[df - 1] if df <= len(T975) else 1.96
    return float(v.mean()), float(t * v.std(ddof=1) / math.sqrt(v.size))


def efficiency(groups: Mapping[str, Sequence], tol: float = 0.005) -> tuple[float, dict]:
    """The reference (the best step time any run found) and, per method, its runs' samples-to-``tol``
    (``None`` for a run that never gets there: it is shown as "> budget", never averaged as its budget),
    how many runs got there, their best times and the budget."""
    ref = min(r.top[0][1] for runs in groups.values() for r in runs)
    out = {}
    for label, runs in groups.items():
        hits = [samples_to_within(r, ref, tol) for r in runs]
        budget = [sum(len(rec["step_s"]) for rec in r.records) for r in runs]
        out[label] = {"samples": hits, "reached": sum(h is not None for h in hits),
                      "best_s": [r.top[0][1] for r in runs], "budget": max(budget)}
    return ref, out


def samples_text(samples: Sequence[int | None], budget: int) -> str:
    """Each run's placements-to-within, in order; a run that never got there is "> budget"."""
    return ", ".join(f"> {budget}" if h is None else str(h) for h in samples)


def efficiency_table(groups: Mapping[str, Sequence], tol: float = 0.005, source: str = "",
                     single_s: float | None = None) -> HTMLTable:
    """Per method: how many runs reached the band, each run's placements to get there, their mean ± 95% t
    interval only when every run got there, and the best found. ``single_s``: the single GPU's step, so that
    the caption can say how much of the possible gain the band leaves."""
    ref, eff = efficiency(groups, tol)
    rows = []
    for label, e in eff.items():
        done = [h for h in e["samples"] if h is not None]
        m, h = t_interval(done)
        mean = f"{m:.0f} ± {h:.0f}" if len(done) == len(e["samples"]) and len(done) > 1 else "-"
        bm, bh = t_interval([b * 1e3 for b in e["best_s"]])
        rows.append((label, f"{e['reached']} of {len(e['samples'])}", samples_text(e["samples"], e["budget"]),
                     mean, f"{bm:.1f} ± {bh:.1f}", e["budget"]))
    share = "" if single_s is None else (f" (the band is {tol * ref / (single_s - ref):.0%} of the "
                                         f"{(single_s - ref) * 1e3:.1f} ms by which that beats one GPU)")
    cap = (f"placements evaluated until the best found is within {tol:.1%} of {ref * 1e3:.1f} ms, the best any "
           f"run found{share}; '> budget': never within it; mean ± 95% t interval over seeds only when every "
           f"run got there; {source}")
    return HTMLTable(("method", "reached", "placements to within, per seed", "mean", "best found (ms)",
                      "budget"), tuple(rows), caption=cap, nowrap=(3, 4))


def best_so_far_figure(groups: Mapping[str, Sequence], title: str):
    """Best step time found so far against placements evaluated: each method's mean over its seeds."""
    import plotly.graph_objects as go

    from lib.viz import layout

    fig = go.Figure()
    for label, runs in groups.items():
        curves = [best_so_far(r) for r in runs]
        n = min(len(x) for x, _ in curves)
        xs = curves[0][0][:n]
        ys = np.mean([y[:n] for _, y in curves], axis=0) * 1e3
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name=label))
    n_runs = min(len(runs) for runs in groups.values())
    fig.update_xaxes(title_text="placements evaluated")
    fig.update_yaxes(title_text=f"best step found, mean of {n_runs} (ms)")
    return layout(fig, title, height=380)


def machine_transfer(run_path: str, spec, machine_seeds: Sequence[int], rounds_select: int = 4,
                     rounds_confirm: int = 8, steps_per_round: int = 10) -> list[dict]:
    """The run's picks against every single GPU on each machine (simulated machine seeds, noise on): the RL pick's
    gain over the best single GPU there, measured and without noise. Every side chooses its GPUs on each machine
    (the RL pick among the relabellings of its placement); ``as_trained_q_ms`` is the same pick's noiseless gain
    with the GPUs it was trained on. The first seed is the training machine's."""
    from lib.placement.experiment import evaluate_run, make_env
    from lib.placement.reinforce import RunResult
    from lib.placement.relabel import base_label

    stem = run_path[:-len(".jsonl")]
    trained = dict(RunResult.from_log(run_path).candidates())
    rows = []
    for s in machine_seeds:
        where = replace(spec, noise=True, env_seed=int(s))
        h2h, _ = evaluate_run(run_path, where, rounds_select, rounds_confirm, steps_per_round, seed=int(s),
                              phase_steps=1, out_path=f"{stem}.machine{s}.eval.jsonl")
        rl, one = h2h.entry("rl"), h2h.entry("single_gpu")
        se_ms = math.hypot(rl.sem_s, one.sem_s) * 1e3  # the standard error of the gain (independent rounds)
        gain_ms = (one.mean_s - rl.mean_s) * 1e3
        q = lambda e: math.nan if e.noiseless_s is None else e.noiseless_s * 1e3
        env = make_env(where)
        singles = [t for d in range(env.n_devices) if (t := env.noiseless_s((d,) * env.n_nodes)) is not None]
        best_gpu_q = min(singles) * 1e3 if singles else math.nan
        as_trained = env.noiseless_s(trained[base_label(rl.label)])
        rows.append({"machine": int(s), "rl_ms": rl.mean_s * 1e3, "rl_label": rl.label, "gpu_ms": one.mean_s * 1e3,
                     "gpu_label": one.label, "gain_ms": gain_ms, "gain_se_ms": se_ms,
                     "gain_z": gain_ms / se_ms if se_ms > 0 else math.copysign(math.inf, gain_ms),
                     "gain_pct": (one.mean_s - rl.mean_s) / one.mean_s * 100, "se": h2h.gap_se,
                     "rl_q_ms": q(rl), "gpu_q_ms": best_gpu_q, "gain_q_ms": best_gpu_q - q(rl),
                     "as_trained_q_ms": best_gpu_q - (math.nan if as_trained is None else as_trained * 1e3)})
    return rows


def transfer_table(rows: Sequence[dict], home: int, source: str) -> HTMLTable:
    out = tuple((f"{r['machine']}" + (" (trained here)" if r["machine"] == home else ""), r["rl_label"],
                 f"{r['rl_ms']:.1f} ({r['rl_q_ms']:.1f})", r["gpu_label"], f"{r['gpu_ms']:.1f} ({r['gpu_q_ms']:.1f})",
                 f"{r['gain_ms']:+.1f} ± {r['gain_se_ms']:.1f}", f"{r['gain_q_ms']:+.1f}",
                 f"{r['as_trained_q_ms']:+.1f}") for r in rows)
    return HTMLTable(("machine seed", "RL pick", "RL (ms)", "best single GPU", "GPU (ms)", "gain ± SE (ms)",
                      "gain without noise (ms)", "gain without noise, GPUs as trained (ms)"), out,
                     caption=f"head-to-head on each machine, confirmation means (in brackets: without noise; the "
                             f"GPU column's noiseless time is the machine's fastest GPU); {source}",
                     nowrap=(2, 4, 5, 6, 7))


def transfer_summary(rows: Sequence[dict], home: int, min_se: float = 2.0) -> dict:
    """The gain on the training machine and the mean gain elsewhere, each with its standard error; their
    difference in standard errors; the machine-specific share of the home gain, only when the home gain is
    itself clear (at least ``min_se`` standard errors; otherwise a share of noise means nothing: NaN); and the
    same without noise (``home_q_ms``, ``away_q_ms``, ``specific_q_share``), also with the GPUs as trained
    (``*_trained_q_ms``, ``specific_trained_q_share``), when the rows have them."""
    h = next(r for r in rows if r["machine"] == home)
    away = [r for r in rows if r["machine"] != home]
    mean_away = float(np.mean([r["gain_ms"] for r in away])) if away else math.nan
    away_se = math.sqrt(sum(r["gain_se_ms"] ** 2 for r in away)) / len(away) if away else math.nan
    diff_se = math.hypot(h["gain_se_ms"], away_se)
    home_clear = h["gain_ms"] >= min_se * h["gain_se_ms"]
    share = (h["gain_ms"] - mean_away) / h["gain_ms"] if home_clear else math.nan
    out = {"home_ms": h["gain_ms"], "home_se_ms": h["gain_se_ms"], "away_ms": mean_away, "away_se_ms": away_se,
           "diff_z": (h["gain_ms"] - mean_away) / diff_se if diff_se > 0 else math.nan,
           "home_clear": bool(home_clear), "specific_share": share}
    for key, name in (("gain_q_ms", "q"), ("as_trained_q_ms", "trained_q")):
        if key in h:
            home_q = h[key]
            away_q = float(np.mean([r[key] for r in away])) if away else math.nan
            out[f"home_{name}_ms"], out[f"away_{name}_ms"] = home_q, away_q
            out[f"specific_{name}_share"] = (home_q - away_q) / home_q if home_q > 0 else math.nan
    return out


def verdict_table(h2hs: Mapping[str, object], rl_side: str = "rl") -> HTMLTable:
    """One row per head-to-head (keyed by what it is, e.g. a profile): the RL pick, the best other entry, each
    with its noiseless time on the same machine where known, the gap in standard errors and the verdict's
    first words."""
    q = lambda e: "" if e.noiseless_s is None else f" ({e.noiseless_s * 1e3:.1f})"
    rows = []
    for key, h in h2hs.items():
        rl, other = h.entry(rl_side), h.best_other
        v = {"win": "RL wins", "loss": "RL loses", "tie": "no clear winner"}[h.outcome()]
        rows.append((key, f"{rl.mean_s * 1e3:.1f} ± {rl.sem_s * 1e3:.1f}{q(rl)}", other.label,
                     f"{other.mean_s * 1e3:.1f} ± {other.sem_s * 1e3:.1f}{q(other)}", f"{h.gap_se:+.1f}", v))
    return HTMLTable(("machine", "RL pick ± SE (ms)", "best other", "other ± SE (ms)", "gap (SE)",
                      "verdict (2-SE rule)"), tuple(rows),
                     caption="head-to-head, confirmation means (in brackets: without noise on the same machine); "
                             "simulated, noise on, a machine seed other than the training one", nowrap=(1, 3, 4))


def clip_fractions(runs: Sequence) -> tuple[float, float]:
    """The mean and the largest per-update clip fraction over PPO runs' logs."""
    vals = [r["clip_fraction"] for res in runs for r in res.records if "clip_fraction" in r]
    if not vals:
        raise ValueError("no clip_fraction in these runs' records: are they PPO runs?")
    return float(np.mean(vals)), float(np.max(vals))


def noiseless_table(runs: Mapping[str, object], preset: str = "49m", gpu: int = 0) -> HTMLTable:
    """Per profile (key) and its run: noiseless step times of the single GPU, the sharded baseline, the best
    hand-made placement and the run's best pick (its fastest top placement, re-simulated without noise)."""
    from lib.placement import baselines as bl
    from lib.placement.sim_env import SimPlacementEnv
    from lib.placement.sim_sharded import sharded_step

    rows = []
    for prof, run in runs.items():
        env = SimPlacementEnv(preset, prof)
        one = env.measure((gpu,) * env.n_nodes).step_s
        sh = sharded_step(env, gpu).step_s
        hand = [(lbl, env.measure(p)) for lbl, p in bl.human_two_gpu(env.graph, env.n_devices)
                + list(bl.fixed_baselines(env.graph, env.n_devices))]
        hand_lbl, hand_m = min(((lbl, m) for lbl, m in hand if not m.oom), key=lambda x: x[1].step_s)
        rl = min(env.measure(p).step_s for p, _ in run.top)
        rows.append((prof, f"{one * 1e3:.2f}", f"{sh * 1e3:.2f}", hand_lbl, f"{hand_m.step_s * 1e3:.2f}",
                     f"{rl * 1e3:.2f}", f"{(one - rl) / one * 100:+.1f}%"))
    return HTMLTable(("profile", "single GPU (ms)", "sharded AdamW (ms)", "best hand-made", "hand-made (ms)",
                      "RL best pick (ms)", "RL vs single GPU"), tuple(rows),
                     caption=f"simulated without noise, GPT {preset}; the RL pick is the fastest of the run's top "
                             "placements, re-simulated", nowrap=(1, 2, 4, 5, 6))
