"""Batch work for Part I: ``python -m lib.placement train|evaluate|figures``, reading and writing ``data/runs/``.

    python -m lib.placement train --preset 49m --profile 4xT4-pcie --colocate --n-iters 250 --lr 1e-3
    python -m lib.placement train --colocate --baseline leave_one_out --n-micro 4        # experiment B
    python -m lib.placement train --colocate --baseline leave_one_out --mem-cap 0.24     # experiment C
    python -m lib.placement evaluate --run <name>        # head-to-head of the run's picks, <name>.eval.jsonl
    python -m lib.placement figures                      # every figure from every log, as HTML
    python -m lib.placement train --profile 1xH200 --node-profile data/runs/gpu_check_<host>_<utc>.json

The functions below (``EnvSpec``, ``make_env``, ``train_run``, ``evaluate_run``) are what the chapters call,
so a chapter and the command line produce the same logs. ``--device real`` uses the GPUs of this machine.
Used in: Part I, chapters 2-3.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
from dataclasses import asdict, dataclass, replace

import numpy as np

from lib import runlog

DEFAULT_OUT = os.path.join("data", "runs")


@dataclass(frozen=True)
class EnvSpec:
    """Which environment a run used: simulated (``profile``) or real (``device="real"``), and its settings."""

    device: str = "sim"
    profile: str = "4xT4-pcie"
    preset: str = "49m"
    n_micro: int = 1
    mem_cap: float | None = None
    noise: bool = False
    env_seed: int = 0
    node_profile: str | None = None  # a gpu_check report whose measured node times replace the roofline (sim)

    def __post_init__(self):
        if self.device not in ("sim", "real"):
            raise ValueError(f"device must be 'sim' or 'real'; got {self.device!r}")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "EnvSpec":
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


def make_env(spec: EnvSpec):
    """Build the environment a spec describes (the simulator, or real CUDA devices)."""
    if spec.device == "sim":
        from lib.placement.sim_env import NoiseModel, SimPlacementEnv

        nodes = None
        if spec.node_profile:
            from lib.gpt import gpt_graph, preset
            from lib.placement.sim_engine import NodeProfile

            g = gpt_graph(preset(spec.preset))
            nodes = NodeProfile.from_report(spec.node_profile, g.name).scaled_to(g.batch // spec.n_micro)
        return SimPlacementEnv(spec.preset, spec.profile, n_micro=spec.n_micro, mem_cap=spec.mem_cap,
                               noise=NoiseModel() if spec.noise else None, seed=spec.env_seed, node_profile=nodes)
    import torch

    from lib.placement.torch_env import TorchPlacementEnv

    n = torch.cuda.device_count()
    if n < 2:
        raise ValueError(f"--device real needs at least 2 CUDA devices; this machine has {n}")
    return TorchPlacementEnv(spec.preset, [f"cuda:{i}" for i in range(n)], n_micro=spec.n_micro,
                             mem_cap=spec.mem_cap, seed=spec.env_seed)


def run_name(spec: EnvSpec, cfg, colocate: bool) -> str:
    """A file name that says what the run was, e.g. ``49m_4xT4-pcie_m1_coloc_ma_lr0.001_ent0_s0``."""
    where = spec.profile if spec.device == "sim" else "real"
    base = {"moving_average": "ma", "leave_one_out": "loo"}[cfg.baseline]
    name = f"{spec.preset}_{where}_m{spec.n_micro}_{'coloc' if colocate else 'nodes'}_{base}_lr{cfg.lr:g}_ent{cfg.entropy:g}"
    if spec.mem_cap is not None:
        name += f"_cap{spec.mem_cap:g}"
    if spec.noise:
        name += f"_noise{spec.env_seed}"
    if cfg.stop_when_identical:
        name += "_stop"
    return name + f"_s{cfg.seed}"


def train_run(spec: EnvSpec, cfg, colocate: bool = True, out_dir: str = DEFAULT_OUT, name: str | None = None,
              resume: bool = True, progress: bool = True):
    """Train (or resume) one run on ``spec`` and return its :class:`RunResult`; the log is ``<out>/<name>.jsonl``."""
    from lib.graph import colocate as colocate_groups
    from lib.placement.reinforce import RunResult, train

    env = make_env(spec)
    if spec.device == "sim" and not spec.noise:
        cfg = replace(cfg, cache_measurements=True)  # deterministic: identical placements give identical times
    groups = colocate_groups(env.graph) if colocate else None
    path = os.path.join(out_dir, (name or run_name(spec, cfg, colocate)) + ".jsonl")
    info = {**spec.to_dict(), "describe": env.describe()}
    train(env, env.graph, cfg, groups=groups, log_path=path, resume=resume, progress=progress, env_info=info)
    return RunResult.from_log(path)  # what the chapters show is what the log on disk says


def evaluate_run(run_path: str, spec: EnvSpec | None = None, rounds_select: int = 4, rounds_confirm: int = 8,
                 steps_per_round: int = 10, seed: int = 0, phase_steps: int = 12, out_path: str | None = None,
                 progress: bool = False):
    """The head-to-head of a run's picks on ``spec`` (default: the run's own environment with noise on and
    another machine seed); writes ``<run>.eval.jsonl`` and returns ``(HeadToHead, PhaseTiming)`` read back from
    it."""
    from lib.placement.evaluate import head_to_head, phase_timing, seed_sides
    from lib.placement.reinforce import RunResult, check_signature, model_signature

    run = RunResult.from_log(run_path)
    if spec is None:
        spec = replace(EnvSpec.from_dict(run.header["env"]), noise=True, env_seed=seed + 1)
    env = make_env(spec)
    groups = run.header["model"]["groups"]
    check_signature(run.header, model_signature(env.graph, groups, env.n_devices), run_path)
    sides, fixed = seed_sides(run, env.graph, env.n_devices)
    h2h = head_to_head(env, sides, fixed, rounds_select, rounds_confirm, steps_per_round,
                       rng=np.random.default_rng(seed), progress=progress)
    best_gpu = h2h.entry("single_gpu")
    pair = [("winner: " + h2h.winner.label, h2h.winner.placement)]
    if h2h.winner.label != best_gpu.label and not best_gpu.oom:  # under a memory cap one GPU may not fit
        pair.append(("best single GPU: " + best_gpu.label, best_gpu.placement))
    phases = phase_timing(env, pair, phase_steps) if not h2h.winner.oom else None
    stem = run_path[:-len(".jsonl")] if run_path.endswith(".jsonl") else run_path
    out_path = out_path or stem + ".eval.jsonl"
    header = runlog.make_header({"rounds_select": rounds_select, "rounds_confirm": rounds_confirm,
                                 "steps_per_round": steps_per_round, "phase_steps": phase_steps,
                                 "run": os.path.basename(run_path)},
                                {**spec.to_dict(), "describe": env.describe()}, seed, run_kind="evaluate",
                                model=run.header["model"])
    log = runlog.RunLog.create(out_path, header)
    log.append(h2h.to_dict())
    if phases is not None:
        log.append({"kind": "phase_timing", **phases.to_dict()})
    _, h2h_logged, phases_logged = read_evaluation(out_path)
    return h2h_logged, phases_logged


def read_evaluation(path: str):
    """``(header, HeadToHead, PhaseTiming | None)`` from an ``.eval.jsonl`` log."""
    from lib.placement.evaluate import HeadToHead, PhaseTiming

    header, recs = runlog.read(path)
    if header.get("run_kind") != "evaluate":
        raise ValueError(f"{path!r} is not an evaluation log (run_kind={header.get('run_kind')!r})")
    h2h = next(HeadToHead.from_dict(r) for r in recs if r["kind"] == "head_to_head")
    ph = next((PhaseTiming.from_dict({k: v for k, v in r.items() if k != "kind"}) for r in recs
               if r["kind"] == "phase_timing"), None)
    return header, h2h, ph


def _resolve_run(run: str, out_dir: str) -> str:
    for cand in (run, os.path.join(out_dir, run), os.path.join(out_dir, run + ".jsonl")):
        if os.path.isfile(cand):
            return cand
    raise ValueError(f"no run log {run!r} (looked in {out_dir!r}); list them with: ls {out_dir}")


def _write_html(fig, path: str) -> None:
    from lib import atomic

    atomic.write_text(path, fig.to_html(include_plotlyjs="cdn", full_html=True))


def figures(out_dir: str = DEFAULT_OUT, fig_dir: str | None = None) -> list[dict]:
    """Every figure from every log in ``out_dir`` (HTML under ``fig_dir``); returns one summary row per run."""
    from lib.placement import figures as F
    from lib.placement.reinforce import RunResult

    fig_dir = fig_dir or os.path.join(out_dir, "figures")
    rows = []
    for path in sorted(glob.glob(os.path.join(out_dir, "*.jsonl"))):
        name = os.path.basename(path)[: -len(".jsonl")]
        kind = runlog.read(path)[0].get("run_kind")
        if kind == "reinforce":
            res = RunResult.from_log(path)
            if not res.records:
                continue
            _write_html(F.learning_curves({name: res}, title=name), os.path.join(fig_dir, name + ".html"))
            first = F.first_identical(res)
            rows.append({"run": name, "updates": res.n_updates, "first_mean_ms": res.records[0]["mean_step_s"] * 1e3,
                         "last_mean_ms": res.records[-1]["mean_step_s"] * 1e3, "best_ms": res.top[0][1] * 1e3,
                         "all_identical_at": first})
        elif kind == "evaluate":
            _, h2h, ph = read_evaluation(path)
            _write_html(F.head_to_head_figure(h2h, title=name), os.path.join(fig_dir, name + ".html"))
            if ph is not None:
                _write_html(F.phase_figure(ph, title=name), os.path.join(fig_dir, name + ".phases.html"))
    return rows


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m lib.placement", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train", help="train a placer with REINFORCE (resumes an existing log)")
    t.add_argument("--device", choices=("sim", "real"), default="sim")
    t.add_argument("--profile", default="4xT4-pcie", help="hardware profile of the simulator (data/hardware)")
    t.add_argument("--preset", default="49m", help="GPT preset: ci, 49m or 163m")
    t.add_argument("--colocate", action="store_true", help="place co-location groups instead of nodes")
    t.add_argument("--n-iters", type=int, default=250)
    t.add_argument("--k", type=int, default=8, help="placements sampled per update")
    t.add_argument("--lr", type=float, default=1e-3)
    t.add_argument("--baseline", choices=("moving_average", "leave_one_out"), default="moving_average")
    t.add_argument("--n-micro", type=int, default=1)
    t.add_argument("--mem-cap", type=float, default=None, help="fraction of each device's memory, e.g. 0.24")
    t.add_argument("--entropy", type=float, default=0.0, help="entropy bonus weight, e.g. 0.01")
    t.add_argument("--stop-when-identical", action="store_true")
    t.add_argument("--hidden", type=int, default=64, help="LSTM size (the 2018 authors' code: 512)")
    t.add_argument("--noise", action="store_true", help="simulate timing noise (sim only)")
    t.add_argument("--env-seed", type=int, default=0, help="the simulated machine (noise) seed")
    t.add_argument("--node-profile", default=None,
                   help="gpu_check report (data/runs/gpu_check_*.json): measured node times replace the roofline")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--out", default=DEFAULT_OUT)
    t.add_argument("--name", default=None, help="log name (default: from the settings)")
    t.add_argument("--no-resume", action="store_true", help="start over even if the log exists")
    t.add_argument("--quiet", action="store_true", help="no progress bar")
    t.add_argument("--threads", type=int, default=1, help="torch CPU threads for the placer (small LSTMs: 1)")
    e = sub.add_parser("evaluate", help="the head-to-head protocol for a run's picks")
    e.add_argument("--run", required=True, help="run name or log path")
    e.add_argument("--out", default=DEFAULT_OUT)
    e.add_argument("--rounds-select", type=int, default=4)
    e.add_argument("--rounds-confirm", type=int, default=8)
    e.add_argument("--steps-per-round", type=int, default=10)
    e.add_argument("--seed", type=int, default=0, help="shuffling seed; the simulated machine is seed + 1")
    e.add_argument("--device", choices=("sim", "real"), default=None, help="default: the run's own")
    f = sub.add_parser("figures", help="every figure from every log in --out, as HTML")
    f.add_argument("--out", default=DEFAULT_OUT)
    f.add_argument("--fig-dir", default=None)
    return p


def main(argv=None) -> int:
    from lib.placement.reinforce import TrainConfig

    a = _parser().parse_args(argv)
    if a.cmd == "train":
        import torch

        torch.set_num_threads(a.threads)
        spec = EnvSpec(a.device, a.profile, a.preset, a.n_micro, a.mem_cap, a.noise, a.env_seed, a.node_profile)
        cfg = TrainConfig(n_iters=a.n_iters, k=a.k, lr=a.lr, baseline=a.baseline, entropy=a.entropy,
                          stop_when_identical=a.stop_when_identical, hidden=a.hidden, seed=a.seed)
        res = train_run(spec, cfg, a.colocate, a.out, a.name, resume=not a.no_resume, progress=not a.quiet)
        print(json.dumps({"log": res.path, "updates": res.n_updates, "best_ms": res.top[0][1] * 1e3 if res.top else None,
                          "best": list(res.top[0][0]) if res.top else None,
                          "favourite": list(res.favourite) if res.favourite else None,
                          "stopped_early": res.stopped_early}))
    elif a.cmd == "evaluate":
        path = _resolve_run(a.run, a.out)
        spec = None
        if a.device is not None:
            from lib.placement.reinforce import RunResult

            base = EnvSpec.from_dict(RunResult.from_log(path).header["env"])
            spec = replace(base, device=a.device, noise=a.device == "sim", env_seed=a.seed + 1)
        h2h, _ = evaluate_run(path, spec, a.rounds_select, a.rounds_confirm, a.steps_per_round, a.seed)
        for r in h2h.rows():
            print(f"{r['side']:>11}  {r['placement']:<28} {r['mean_ms']:8.1f} ± {r['std_ms']:5.1f} ms  "
                  f"(se {r['sem_ms']:.2f})")
        print(f"RL pick vs best other: {h2h.gap_s * 1e3:+.1f} ms = {h2h.gap_se:+.1f} standard errors; {h2h.source}")
    else:
        rows = figures(a.out, a.fig_dir)
        for r in rows:
            print(json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
