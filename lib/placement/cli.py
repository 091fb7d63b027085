"""Batch work for Part I: ``python -m lib.placement train|evaluate|figures``, reading and writing ``data/runs/``.

    python -m lib.placement train --preset 49m --profile 4xT4-pcie --colocate --n-iters 250 --lr 1e-3
    python -m lib.placement train --colocate --baseline leave_one_out --n-micro 4        # experiment B
    python -m lib.placement train --colocate --baseline leave_one_out --mem-cap 0.24     # experiment C
    python -m lib.placement evaluate --run <name>        # head-to-head of the run's picks, <name>.eval.jsonl
    python -m lib.placement figures                      # every figure from every log, as HTML
    python -m lib.placement train --profile 1xH200 --node-profile data/runs/gpu_check_<host>_<utc>.json

This module only parses the arguments; the work is ``lib.placement.experiment``'s, which the chapters call too.
``--device real`` uses the GPUs of this machine. Used in: book/placement/02_the_placer, 03_colocation.
"""

from __future__ import annotations

import argparse
import json
import sys

from lib.placement.experiment import (DEFAULT_OUT, EnvSpec, evaluate_run, figures, resolve_run, spec_on_device,
                                      train_run)


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
        path = resolve_run(a.run, a.out)
        spec = spec_on_device(path, a.device, a.seed) if a.device is not None else None
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
