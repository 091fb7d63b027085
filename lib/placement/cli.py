"""Batch work for Part I: ``python -m lib.placement train|evaluate|figures``, reading and writing ``data/runs/``.

    python -m lib.placement train --preset 49m --profile 4xT4-pcie --colocate --n-iters 250 --lr 1e-3
    python -m lib.placement train --colocate --baseline leave_one_out --n-micro 4        # experiment B
    python -m lib.placement train --colocate --baseline leave_one_out --mem-cap 0.24     # experiment C
    python -m lib.placement evaluate --run <name>        # head-to-head of the run's picks, <name>.eval.jsonl
    python -m lib.placement figures                      # every figure from every log, as HTML
    python -m lib.placement train --colocate --algorithm ppo --ppo-epochs 4   # chapter 4: PPO
    python -m lib.placement train --policy hierarchical --n-groups 16        # chapter 4: learned groups
    python -m lib.placement train --profile 1xH200 --node-profile data/runs/gpu_check_<host>_<utc>.json

This module only parses and checks the arguments (every number's range before any work starts); the work is
``lib.placement.experiment``'s, which the chapters call too. ``--device real`` uses the GPUs of this machine.
A mistake is one line on stderr and exit 2 (``lib.cli_errors``); ``--debug`` shows its traceback; a run another
process is writing is refused the same way. Used in: book/placement/02_the_placer, 03_colocation.
"""

from __future__ import annotations

import glob
import json
import os
import sys

from lib.cli_errors import OneLineParser, UserError, check_float, check_int, run_cli
from lib.runlog_schema import check_log
from lib.placement.experiment import (DEFAULT_OUT, EnvSpec, evaluate_run, figures, resolve_run, spec_on_device,
                                      train_run)


PROG = "python -m lib.placement"
SEED_MAX = 2**32 - 1  # numpy and torch both take 32-bit seeds without surprises


def _parser() -> OneLineParser:
    from lib.placement.reinforce_run import TrainConfig  # torch-free: the placer's defaults, one source

    p = OneLineParser(prog=PROG, description=__doc__.split("\n")[0])
    p.add_argument("--debug", action="store_true", help="show the traceback of an error")
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train", help="train a placer with REINFORCE (resumes an existing log)")
    t.add_argument("--debug", action="store_true", help="show the traceback of an error")
    t.add_argument("--repair", action="store_true",
                   help="drop a truncated last line of the log (keeping every complete record), then resume")
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
    t.add_argument("--hidden", type=int, default=TrainConfig.hidden,
                   help=f"LSTM size (default {TrainConfig.hidden}, the 2018 authors' code's)")
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
    t.add_argument("--algorithm", choices=("reinforce", "ppo"), default="reinforce", help="the update (chapter 4)")
    t.add_argument("--ppo-epochs", type=int, default=4, help="PPO: gradient steps per batch")
    t.add_argument("--ppo-clip", type=float, default=0.2, help="PPO: the ratio's clip range")
    t.add_argument("--policy", choices=("placer", "hierarchical"), default="placer",
                   help="hierarchical: a grouper learns the groups (chapter 4; not with --colocate)")
    t.add_argument("--n-groups", type=int, default=16, help="groups the hierarchical policy learns")
    e = sub.add_parser("evaluate", help="the head-to-head protocol for a run's picks")
    e.add_argument("--debug", action="store_true", help="show the traceback of an error")
    e.add_argument("--run", required=True, help="run name or log path")
    e.add_argument("--out", default=DEFAULT_OUT)
    e.add_argument("--rounds-select", type=int, default=4)
    e.add_argument("--rounds-confirm", type=int, default=8)
    e.add_argument("--steps-per-round", type=int, default=10)
    e.add_argument("--seed", type=int, default=0, help="shuffling seed; the simulated machine is seed + 1")
    e.add_argument("--device", choices=("sim", "real"), default=None, help="default: the run's own")
    f = sub.add_parser("figures", help="every figure from every log in --out, as HTML")
    f.add_argument("--debug", action="store_true", help="show the traceback of an error")
    f.add_argument("--out", default=DEFAULT_OUT)
    f.add_argument("--fig-dir", default=None)
    return p


def check_train_args(a) -> None:
    """Every number of ``train`` finite and within a range that says why; the names before any work starts."""
    from lib import hardware
    from lib.gpt import PRESETS

    check_int("--n-iters", a.n_iters, 0, 100_000, "each update is one record and one checkpoint; "
              "100000 updates is hours on the simulator")
    check_int("--k", a.k, 1, 1024, "placements sampled and measured per update")
    if a.baseline == "leave_one_out" and a.k < 2:
        raise UserError(f"--k: {a.k} is too few for the leave-one-out baseline; allowed: --k >= 2")
    check_float("--lr", a.lr, 0, 1, lo_open=True, why="Adam's step; above 1 the placer diverges")
    check_int("--n-micro", a.n_micro, 1, 1024, "micro-batches per step, dividing the batch")
    if a.mem_cap is not None:
        check_float("--mem-cap", a.mem_cap, 0, 1, lo_open=True, why="a fraction of each device's memory")
    check_float("--entropy", a.entropy, 0, 10, why="bonus weight; the costs are sqrt(seconds), below 1")
    check_int("--hidden", a.hidden, 1, 1024, "LSTM size; the 2018 authors used 512")
    check_int("--env-seed", a.env_seed, 0, SEED_MAX, "a 32-bit seed")
    check_int("--seed", a.seed, 0, SEED_MAX, "a 32-bit seed")
    check_int("--threads", a.threads, 1, max(1, os.cpu_count() or 1), "this machine's CPU count")
    check_int("--ppo-epochs", a.ppo_epochs, 1, 100, "epochs over each batch of sampled placements")
    check_float("--ppo-clip", a.ppo_clip, 0, 0.99, lo_open=True, why="the ratio's clip range, e.g. 0.2")
    check_int("--n-groups", a.n_groups, 1, 1024, "groups the grouper assigns nodes to")
    if a.policy == "hierarchical" and a.colocate:
        raise UserError("--colocate: the hierarchical policy learns its own groups; allowed: --policy placer "
                         "with --colocate, or --policy hierarchical without it")
    if a.preset not in PRESETS:
        raise UserError(f"--preset: unknown GPT preset {a.preset!r}; allowed: {', '.join(sorted(PRESETS))}")
    batch = PRESETS[a.preset].batch_size
    if batch % a.n_micro:
        divisors = [d for d in range(1, batch + 1) if batch % d == 0]
        raise UserError(f"--n-micro: {a.n_micro} does not divide the batch of {a.preset} ({batch}); allowed: "
                         f"{', '.join(map(str, divisors))}")
    if a.device == "sim" and a.profile not in hardware.names():
        raise UserError(f"--profile: unknown hardware profile {a.profile!r}; allowed: "
                         f"{', '.join(hardware.names())}")
    if a.node_profile is not None:
        check_node_profile(a.node_profile)
    check_out_folder(a.out)
    if a.name is not None and (not a.name or os.sep in a.name or a.name.startswith(".")):
        raise UserError(f"--name: {a.name!r} is not a file name; allowed: a name without '/' or a leading '.'")


def check_node_profile(path: str) -> None:
    """``--node-profile`` must be a JSON object (a gpu_check report; its fields are checked when it is read)."""
    if not os.path.isfile(path):
        raise FileNotFoundError(2, "no such file (--node-profile)", path)
    from lib.readback import read_json

    report = read_json(path, "--node-profile")  # missing, not UTF-8, truncated, not JSON: one line naming it
    if not isinstance(report, dict):
        raise UserError(f"--node-profile {path}: a JSON {type(report).__name__}, not a gpu_check report (an object)")


def check_out_folder(out: str) -> None:
    """``--out`` must be a folder (a missing one is created) that this process may write."""
    if not out.strip():
        raise UserError("--out: empty; allowed: a folder (default data/runs)")
    if os.path.exists(out) and not os.path.isdir(out):
        raise NotADirectoryError(20, "not a folder (--out)", out)
    if os.path.isdir(out) and not os.access(out, os.W_OK):
        raise PermissionError(13, "folder not writable (--out)", out)
    from lib.atomic import check_out_dir

    check_out_dir("--out", out)  # under a file, a name too long, a folder that takes no new file


def check_evaluate_args(a) -> None:
    check_out_folder(a.out)  # the evaluation log goes there
    check_int("--rounds-select", a.rounds_select, 1, 1000, "each round times every candidate")
    check_int("--rounds-confirm", a.rounds_confirm, 2, 1000, "each round times every pick; two for a spread")
    check_int("--steps-per-round", a.steps_per_round, 1, 10_000, "timed steps per placement and round")
    check_int("--seed", a.seed, 0, SEED_MAX - 1, "a 32-bit seed; the machine is seed + 1")


def main(argv=None) -> int:
    """The CLI: one line and exit 2 for a mistake (``--debug``: the traceback), 0 when done."""
    return run_cli(_main, argv)


def _main(argv=None) -> int:
    from lib.placement.reinforce import TrainConfig

    a = _parser().parse_args(argv)
    if a.cmd == "train":
        check_train_args(a)
        import torch

        torch.set_num_threads(a.threads)
        spec = EnvSpec(a.device, a.profile, a.preset, a.n_micro, a.mem_cap, a.noise, a.env_seed, a.node_profile)
        cfg = TrainConfig(n_iters=a.n_iters, k=a.k, lr=a.lr, baseline=a.baseline, entropy=a.entropy,
                          stop_when_identical=a.stop_when_identical, hidden=a.hidden, seed=a.seed,
                          algorithm=a.algorithm, ppo_epochs=a.ppo_epochs, ppo_clip=a.ppo_clip, policy=a.policy,
                          n_groups=a.n_groups)
        name = a.name
        if name is None and (a.algorithm != "reinforce" or a.policy != "placer"):
            from lib.placement.break_it import run_name

            name = run_name(spec, cfg, a.colocate)  # chapter 4's runs: the name says algorithm and policy
        res = train_run(spec, cfg, a.colocate, a.out, name, resume=not a.no_resume, progress=not a.quiet,
                        repair=a.repair)
        from lib.placement.env import OOM_PENALTY_S

        best_oom = bool(res.top) and res.top[0][1] >= OOM_PENALTY_S  # the penalty is no time: null, said so
        print(json.dumps({"log": res.path, "updates": res.n_updates,
                          "best_ms": res.top[0][1] * 1e3 if res.top and not best_oom else None,
                          "best_over_memory_cap": best_oom, "best": list(res.top[0][0]) if res.top else None,
                          "favourite": list(res.favourite) if res.favourite else None,
                          "stopped_early": res.stopped_early}))
    elif a.cmd == "evaluate":
        check_evaluate_args(a)
        path = resolve_run(a.run, a.out)
        check_log(path)
        spec = spec_on_device(path, a.device, a.seed) if a.device is not None else None
        h2h, _ = evaluate_run(path, spec, a.rounds_select, a.rounds_confirm, a.steps_per_round, a.seed)
        for r in h2h.rows():  # an out-of-memory placement has no time: its penalty is never printed as one
            t = (f"{'over the memory cap':>19}" if r["oom"] else
                 f"{r['mean_ms']:8.1f} ± {r['std_ms']:5.1f} ms  (se {r['sem_ms']:.2f})")
            print(f"{r['side']:>11}  {r['placement']:<28} {t}")
        rl, other = h2h.entry(h2h.rl_side), h2h.best_other
        if rl.oom or other.oom:
            who = "the RL pick" if rl.oom else f"{other.label}"
            print(f"RL pick vs best other: no gap, {who} is over the memory cap; {h2h.source}")
        else:
            print(f"RL pick vs best other: {h2h.gap_s * 1e3:+.1f} ms = {h2h.gap_se:+.1f} standard errors; "
                  f"{h2h.source}")
    else:
        if not os.path.isdir(a.out):
            raise FileNotFoundError(2, "no such folder (--out)", a.out)
        from lib.atomic import check_out_dir

        check_out_dir("--fig-dir", a.fig_dir or os.path.join(a.out, "figures"))
        for path in sorted(glob.glob(os.path.join(a.out, "*.jsonl"))):  # every log checked before any figure
            check_log(path)
        rows = figures(a.out, a.fig_dir)
        for r in rows:
            print(json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
