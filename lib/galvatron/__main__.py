"""Command line: ``python -m lib.galvatron run --plan plan.json`` under ``torchrun`` (any nodes, any ranks).

    torchrun --nproc-per-node 2 -m lib.galvatron run --plan plan.json --steps 5
    torchrun --nnodes 2 --node-rank R --nproc-per-node 1 --master-addr HOST --master-port P \\
        -m lib.galvatron run --plan plan.json

The plan is either a Galvatron plan JSON (``pp_deg``, ``tp_sizes_enc``, ... as written by ``search/engine.py``) or a
runtime plan (``RunPlan.to_dict``). Rank 0 prints one JSON line with every rank's iteration time and peak memory
and, with ``--out``, writes it to a file. Used in: book/galvatron/04_from_plan_to_run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def _parser() -> argparse.ArgumentParser:
    from .runtime.sdp import SDP_IMPLS

    ap = argparse.ArgumentParser(prog="python -m lib.galvatron")
    sub = ap.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("run", help="run a plan on this rank (start it with torchrun)")
    run.add_argument("--plan", required=True, help="plan JSON file")
    for k, v in (("vocab", 64), ("seq-len", 16), ("d-model", 32), ("n-head", 4), ("n-layer", None)):
        run.add_argument(f"--{k}", type=int, default=v)
    run.add_argument("--steps", type=int, default=5)
    run.add_argument("--warmup", type=int, default=2)
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--lr", type=float, default=0.1)
    run.add_argument("--optimizer", default="sgd", choices=["sgd", "adam"])
    run.add_argument("--backend", default=None, help="gloo or nccl (default: nccl with --device cuda)")
    run.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    run.add_argument("--sdp-impl", default="auto", choices=SDP_IMPLS,
                     help="SDP layers by FSDP2's fully_shard, by hand, or FSDP2 where this torch/backend allows")
    run.add_argument("--check", action="store_true", help="compare with the single-process reference")
    run.add_argument("--out", default=None, help="write the summary JSON here (rank 0)")
    return ap


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    with open(args.plan) as f:
        plan_dict = json.load(f)
    saved = dict(os.environ)
    try:
        if "RANK" not in os.environ:  # started without torchrun: one rank on this machine
            from .runtime.processes import free_port

            os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                              MASTER_PORT=str(free_port()))
        return _run(args, plan_dict)
    finally:  # a caller in the same process (a test, a notebook) gets its environment back
        os.environ.clear()
        os.environ.update(saved)


def _run(args, plan_dict: dict) -> int:
    from .runtime.plan import load_plan

    world = int(os.environ["WORLD_SIZE"])
    plan = load_plan(plan_dict, world)
    model = {"vocab": args.vocab, "seq_len": args.seq_len, "d_model": args.d_model, "n_head": args.n_head,
             "n_layer": args.n_layer or len(plan.layers)}
    backend = args.backend or ("nccl" if args.device == "cuda" else "gloo")
    job = {"kind": "check" if args.check else "train", "plan": plan_dict, "model": model, "steps": args.steps,
           "warmup": args.warmup, "seed": args.seed, "lr": args.lr, "optimizer": args.optimizer,
           "backend": backend, "device": args.device, "sdp_impl": args.sdp_impl}
    from .runtime.launch import run_rank

    results = run_rank(job, gather=True)
    if int(os.environ.get("RANK", "0")) == 0:
        summary = {"plan": plan.label(), "world_size": world, "ranks": results}
        line = json.dumps(summary)
        print(line, flush=True)
        if args.out:
            from lib import atomic

            atomic.write_text(args.out, line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
