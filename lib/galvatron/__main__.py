"""Command line: ``python -m lib.galvatron run --plan plan.json`` under ``torchrun`` (any nodes, any ranks).

    torchrun --nproc-per-node 2 -m lib.galvatron run --plan plan.json --steps 5
    python -m lib.galvatron launch --nproc-per-node 2 run --plan plan.json --steps 5   # same, quieter on failure
    torchrun --nnodes 2 --node-rank R --nproc-per-node 1 --master-addr HOST --master-port P \\
        -m lib.galvatron run --plan plan.json

The plan is either a Galvatron plan JSON (``pp_deg``, ``tp_sizes_enc``, ... as written by ``search/engine.py``) or a
runtime plan (``RunPlan.to_dict``). Rank 0 prints one JSON line with every rank's iteration time and peak memory
(by category: ``runtime/memory.py``, checked before it is written) and, with ``--out``, writes it to a file.

``python -m lib.galvatron plan --plan plan.json --print-torchrun --megatron`` (or ``--search bert-huge-32 --gpus 8
--budget-gb 16 --out plan.json``) prints the plan, the command that runs it and Megatron-LM's flags for it.
``plan --model CONFIG.json --gpus N --gpu h100-sxm-80gb --global-batch B --seq-len S [--stack megatron-lm]
[--fabric efa-p5] [--top 5] [--json]`` plans the reader's own job under the practice rules (``job_plan.py``).
``python -m lib.galvatron validate --runs FILE...`` judges the cost model against published runs and sweeps
(``validate.py``).
``python -m lib.galvatron memory`` measures each rank's memory by category for DP, SDP, TP and PP on local gloo
ranks and prints the cost model's estimate beside it (chapter 8's comparison).

Errors (``lib.cli_errors``): a user's mistake (a flag out of range, a bad plan file, ranks started with
different plans or arguments) is one line ``error: ...`` from rank 0 and exit 2 on every rank; a rank that refuses
its own flags or plan before the ranks meet also says so on its node (``error: rank R: ...``), as rank 0 cannot
know; ``--debug`` shows the traceback. The process group and every collective time out after ``--timeout-s`` (60 s), so a missing or
dead peer is one line ``error: rank R: ...`` and exit 1 within that time. ``--check`` exits 1 when the error
against the single-process reference exceeds ``--tol`` or anything is not finite.
Used in: book/galvatron/04_from_plan_to_run.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import sys

from lib.cli_errors import OneLineParser, UserError, is_user_error, one_line, run_cli

# Upper bounds, and why: this CLI runs the book's small GPT on CPU ranks or one GPU each; beyond these a run
# takes minutes to hours or exhausts memory, which is a typo rather than an experiment.
LIMITS = {"vocab": (1, 1 << 20), "seq_len": (1, 1 << 16), "d_model": (1, 1 << 16), "n_head": (1, 1 << 12),
          "n_layer": (1, 4096), "steps": (1, 10_000), "warmup": (0, 10_000), "seed": (0, 2**32 - 1)}
WHY = "larger runs the book's small model for hours or exhausts memory"
#: Why the seed is 32-bit: each step's batch seeds a generator with ``seed * 1_000_003 + step``, which must stay
#: within the 64-bit range torch takes (a 63-bit seed overflowed there, after the ranks had met).
WHY_SEED = "a 32-bit seed; each step's batch seed, seed * 1000003 + step, must fit torch's 64 bits"


def _parser() -> OneLineParser:
    from .runtime.sdp import SDP_IMPLS

    ap = OneLineParser(prog="python -m lib.galvatron")
    sub = ap.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("run", help="run a plan on this rank (start it with torchrun, or launch)")
    sub.add_parser("launch", help="torchrun's options, then run ...: torchrun without its failure report "
                                  "(exit code: the failed rank's)", add_help=False)
    pl = sub.add_parser("plan", help="describe a plan (a file, or a search's): the command that runs it, "
                                     "Megatron-LM's equivalent")
    pl.add_argument("--plan", default=None, help="plan JSON file (or --search)")
    pl.add_argument("--search", default=None, metavar="MODEL",
                    help="search a plan for a published model profile (bert-huge-32, ...) instead")
    pl.add_argument("--gpus", type=int, default=8, help="--search: GPUs of the published cluster (8 or 16)")
    pl.add_argument("--budget-gb", type=float, default=16.0, help="--search: memory budget per GPU, GB")
    pl.add_argument("--rules", default="galvatron2",
                    help="--search: the cost rules, galvatron2 (default) or vldb2023 (the paper's artifact)")
    pl.add_argument("--out", default=None, help="--search: write the plan JSON here (the command runs it)")
    pl.add_argument("--print-torchrun", action="store_true", help="print the torchrun command that runs it")
    pl.add_argument("--megatron", action="store_true", help="print Megatron-LM's flags for it")
    pl.add_argument("--nnodes", type=int, default=1, help="--print-torchrun: nodes (default 1)")
    pl.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="--print-torchrun: cpu or cuda")
    pl.add_argument("--model", default=None, help="plan your own job (job_plan.py): a Hugging Face "
                    "config.json or a model name (llama3-70b, ...), with --gpus, --gpu, --global-batch, --seq-len")
    pl.add_argument("--gpu", default="h100-sxm-80gb", help="--model: the GPU type (data/hardware/gpus/)")
    pl.add_argument("--global-batch", type=int, default=None, help="--model: sequences per step")
    pl.add_argument("--seq-len", type=int, default=None, help="--model: tokens per sequence")
    pl.add_argument("--stack", default=None, help="--model: the software stack (data/stacks/: megatron-lm, "
                    "the default, fsdp, deepspeed, nanotron, ...; or an alias such as megatron, nemo, torchtitan)")
    pl.add_argument("--fabric", default=None, help="--model: the fabric between nodes, priced at its published "
                    "collective measurements (data/hardware/fabrics/fabrics.json: efa-p5, ib-ndr-400, ...); "
                    "default: the GPU type's port")
    pl.add_argument("--top", type=int, default=5, help="--model: how many layouts to print (default 5)")
    pl.add_argument("--json", action="store_true", help="--model: print the report as JSON")
    sub.add_parser("validate", add_help=False, help="the cost model against published training runs and "
                   "sweeps (validate.py; validate --help for its flags)")
    mem = sub.add_parser("memory", help="measure each rank's memory by category for DP, SDP, TP and PP on "
                                        "local gloo ranks and set the cost model's estimate beside it")
    for k, v in (("world-size", 2), ("vocab", 64), ("seq-len", 64), ("d-model", 128), ("n-head", 4),
                 ("n-layer", 4), ("global-bsz", 16)):
        mem.add_argument(f"--{k}", type=int, default=v)
    mem.add_argument("--timeout-s", type=float, default=300.0, help="seconds the ranks may take in all")
    mem.add_argument("--out", default=None, help="write the rows and every rank's record as JSON here")
    run.add_argument("--plan", required=True, help="plan JSON file")
    for k, v in (("vocab", 64), ("seq-len", 16), ("d-model", 32), ("n-head", 4), ("n-layer", None)):
        run.add_argument(f"--{k}", type=int, default=v)
    run.add_argument("--steps", type=int, default=5)
    run.add_argument("--warmup", type=int, default=2)
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--lr", type=float, default=0.1)
    run.add_argument("--optimizer", default="sgd", choices=["sgd", "adam"])
    run.add_argument("--backend", default=None, choices=["gloo", "nccl"],
                     help="gloo or nccl (default: nccl with --device cuda)")
    run.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    run.add_argument("--sdp-impl", default="auto", choices=SDP_IMPLS,
                     help="SDP layers by FSDP2's fully_shard, by hand, or FSDP2 where this torch/backend allows")
    run.add_argument("--check", action="store_true",
                     help="compare with the single-process reference; exit 1 if the error exceeds --tol")
    run.add_argument("--tol", type=float, default=None, help="--check's tolerance (default 1e-4)")
    run.add_argument("--timeout-s", type=float, default=60.0,
                     help="seconds the ranks wait for each other (start-up and every collective); default 60")
    run.add_argument("--out", default=None, help="write the summary JSON here (rank 0)")
    run.add_argument("--allow-nonfinite", action="store_true",
                     help="exit 0 even when the loss becomes NaN or infinite (default: exit 1)")
    run.add_argument("--debug", action="store_true", help="show tracebacks of user errors too")
    return ap


def check_args(args) -> None:
    """Every flag within its range (``ValueError`` naming the flag), before any work or any peer."""
    for k, (lo, hi) in LIMITS.items():
        v = getattr(args, k)
        if v is not None and not lo <= v <= hi:
            flag = f"--{k.replace('_', '-')}"
            raise UserError(f"{flag} {v} is out of range; {flag} must be an integer in [{lo}, {hi}] "
                            f"(the upper bound: {WHY_SEED if k == 'seed' else WHY})")
    if not (math.isfinite(args.lr) and 0 < args.lr <= 1e3):
        raise UserError(f"--lr {args.lr} is not allowed; --lr must be a finite number in (0, 1000]")
    if args.tol is not None and not (math.isfinite(args.tol) and args.tol >= 0):
        raise UserError(f"--tol {args.tol} is not allowed; --tol must be a finite number >= 0")
    if not (math.isfinite(args.timeout_s) and 1 <= args.timeout_s <= 3600):
        raise UserError(f"--timeout-s {args.timeout_s} is out of range; allowed: [1, 3600] seconds")
    if args.check and args.optimizer != "sgd":
        raise UserError(f"--check with --optimizer {args.optimizer}: the single-process reference takes SGD steps, "
                        f"so every other optimizer would fail the check; allowed: --check with --optimizer sgd")
    if args.out is not None and os.environ.get("RANK", "0") == "0":  # rank 0 writes it: checked before any work
        from lib.atomic import check_out_file

        check_out_file("--out", args.out)
    if args.d_model % args.n_head:
        raise UserError(f"--n-head {args.n_head} does not divide --d-model {args.d_model}; pick a divisor")
    backend = args.backend or ("nccl" if args.device == "cuda" else "gloo")
    if args.device == "cuda" or backend == "nccl":
        import torch

        if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
            flag = "--device cuda" if args.device == "cuda" else "--backend nccl"
            raise UserError(f"{flag}: no CUDA device is visible; use --device cpu"
                             + (" --backend gloo" if args.backend == "nccl" else ""))


def read_plan(path: str) -> dict:
    """The plan file, parsed and schema-checked (``runtime.plan.validated``): errors name the file and field."""
    from lib.readback import read_json

    from .runtime.plan import validated

    d = read_json(path, "--plan")
    validated(d, os.path.basename(path))
    return d


def main(argv=None) -> int:
    return run_cli(_main, argv)


def _refused_before_the_group(e: BaseException, argv) -> None:
    """A rank that refuses its own flags or plan does so before any process group exists, so rank 0 may never
    hear of it (another node may have been started with other arguments): the first rank of each node other
    than node 0 says it on that node's terminal, naming itself. Rank 0's line comes from ``run_cli``."""
    rank, local = os.environ.get("RANK"), os.environ.get("LOCAL_RANK", "0")
    if rank not in (None, "0") and local == "0" and "--debug" not in argv:
        print(f"error: rank {rank}: {one_line(e)}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def _stop_deferred():
    """torchrun stops every rank (SIGTERM) once one has exited. Every rank checks its flags and plan after
    importing torch (about a second), and only rank 0 says why it refuses them; so rank 1, refusing first, got rank 0
    stopped before its line and the user saw no reason (seen in CI under load). Until this rank has checked its own
    inputs a stop waits: refused, it says why and exits 2; accepted, the stop then takes effect as before."""
    stops = []
    try:
        before = signal.signal(signal.SIGTERM, lambda *_: stops.append(1))
    except ValueError:  # not the main thread (a notebook's worker, a test's): no stop can reach it here
        yield
        return
    try:
        yield
    finally:  # refused: the error goes on up to run_cli, which says it
        signal.signal(signal.SIGTERM, before)
    if stops:
        os.kill(os.getpid(), signal.SIGTERM)


def _main(argv) -> int:
    if argv[:1] == ["launch"]:  # torchrun without its own failure report (runtime/quiet_launch.py)
        from .runtime.quiet_launch import launch

        return launch(argv[1:])
    if argv[:1] == ["plan"]:
        return _plan_cmd(_parser().parse_args(argv))
    if argv[:1] == ["memory"]:
        return _memory_cmd(_parser().parse_args(argv))
    if argv[:1] == ["validate"]:  # the cost model against published runs (validate.py)
        from .validate import main as validate_main

        return validate_main(argv[1:])
    with _stop_deferred():
        try:
            args = _parser().parse_args(argv)
            check_args(args)
            plan_dict = read_plan(args.plan)
        except (UserError, OSError, ValueError) as e:
            if is_user_error(e):
                _refused_before_the_group(e, argv)
            raise
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


def _plan_cmd(args) -> int:
    """``plan``: a plan file (or a searched plan, written to ``--out``) as one summary line, then with
    ``--print-torchrun`` the command that runs it and with ``--megatron`` Megatron-LM's flags for it."""
    from lib.cli_errors import check_float, check_int

    from .search.plan import Plan

    if sum(x is not None for x in (args.plan, args.search, args.model)) != 1:
        raise UserError("plan: give exactly one of --plan FILE, --search MODEL or --model MODEL")
    if args.model is not None:  # the reader's own job under the practice rules (job_plan.py)
        from .job_plan import main as job_plan_main

        return job_plan_main(args)
    check_int("--nnodes", args.nnodes, 1, 65536, "nodes, at most the plan's GPUs")
    if args.out is not None:  # before the search: a bad --out must not cost a search, nor a flag after it
        if args.search is None:
            raise UserError("--out: only with --search (it writes the searched plan); --plan FILE is read")
        from lib.atomic import check_out_file

        check_out_file("--out", args.out)
    if args.search is not None:
        from .search.engine import search
        from .search.profiles import load_model, model_names, published_cluster

        if args.search not in model_names():
            raise UserError(f"--search {args.search!r} is not a published model; allowed: {model_names()}")
        from .search.engine import check_gpus

        check_gpus(check_int("--gpus", args.gpus, 1), "--gpus")  # within the range the search tries
        check_float("--budget-gb", args.budget_gb, 0, 1e4, lo_open=True)
        if args.print_torchrun and args.gpus % args.nnodes:
            raise UserError(f"--nnodes {args.nnodes} does not divide --gpus {args.gpus}; allowed: a divisor")
        from .search.rules import PRESETS

        if args.rules not in PRESETS:
            raise UserError(f"--rules {args.rules!r} is not a rule set; allowed: {sorted(PRESETS)}")
        res = search(load_model(args.search), published_cluster(args.gpus), args.budget_gb, rules=args.rules)
        if not res.feasible:
            raise UserError(f"--budget-gb {args.budget_gb:g}: no plan of {args.search} fits on "
                             f"{args.gpus} GPUs; allowed: a larger budget")
        plan, path = res.plan, args.out or "plan.json"
        if args.out:
            from lib import atomic

            atomic.write_text(args.out, plan.to_json() + "\n")
    else:
        d = read_plan(args.plan)  # the runtime's schema first: one line naming the file and field
        try:  # the published format's own checks (lib.galvatron.search.plan) raise UserError
            plan, path = Plan.from_dict(d), args.plan
        except UserError as e:
            raise UserError(f"--plan {args.plan}: {e}") from None
    if args.print_torchrun and (args.nnodes > plan.world_size or plan.world_size % args.nnodes):
        raise UserError(f"--nnodes {args.nnodes} does not divide the plan's {plan.world_size} GPUs; allowed: "
                        f"a divisor of {plan.world_size}")
    if args.print_torchrun:  # the command must start a run: the runtime's own check, before it is printed
        from .runtime.plan import load_plan

        try:
            load_plan(plan.to_dict(), plan.world_size, os.path.basename(path)).check_runnable()
        except UserError as e:
            raise UserError(f"--print-torchrun: run would refuse {path}: {e}; allowed: a plan run can start "
                            f"(or describe this one without --print-torchrun)") from None
    print(plan.summary())
    if args.print_torchrun:
        print(plan.to_torchrun(path, nnodes=args.nnodes, device=args.device))
    if args.megatron:
        from .runtime.megatron import megatron_settings

        m = megatron_settings(plan)
        print("megatron-lm:", " ".join(m.flags))
        for line in m.none:
            print("  no equivalent:", line)
    return 0


def _memory_cmd(args) -> int:
    """``memory``: the chapter's memory comparison from the command line (DP, SDP under FSDP2 and by hand, TP,
    2-stage pipelines at 2 and 4 micro-batches; Adam), printed as a table and, with ``--out``, as JSON."""
    from lib.cli_errors import check_float, check_int

    from .runtime import memory_report as mr
    from .runtime.model import ModelConfig
    from .runtime.profiler import memory_profile

    check_int("--world-size", args.world_size, 1, 64, "local gloo ranks on this machine")
    for k in ("vocab", "seq_len", "d_model", "n_head", "n_layer"):
        lo, hi = LIMITS[k]
        check_int(f"--{k.replace('_', '-')}", getattr(args, k), lo, hi, WHY)
    check_int("--global-bsz", args.global_bsz, 1, 1 << 16, "samples per step; the ranks hold them all")
    check_float("--timeout-s", args.timeout_s, 1, 3600)
    if args.out is not None:
        from lib.atomic import check_out_file

        check_out_file("--out", args.out)
    if args.d_model % args.n_head or args.n_head % args.world_size:
        raise UserError(f"--n-head {args.n_head} must divide --d-model {args.d_model} and be divisible by "
                         f"--world-size {args.world_size} (the TP plan splits the heads over every rank)")
    if args.global_bsz % args.world_size:
        raise UserError(f"--global-bsz {args.global_bsz} must be a multiple of --world-size {args.world_size}")
    cfg = ModelConfig(vocab=args.vocab, seq_len=args.seq_len, d_model=args.d_model, n_head=args.n_head,
                      n_layer=args.n_layer)
    plans = mr.memory_plans(args.world_size, args.n_layer, args.global_bsz)
    measured = mr.measure_memory(plans, cfg, args.world_size, timeout_s=args.timeout_s)
    if "sdp" in plans:
        hand = {"sdp, hand-written": plans["sdp"]}
        measured.update(mr.measure_memory(hand, cfg, args.world_size, "manual", timeout_s=args.timeout_s))
        plans.update(hand)
    rows = mr.stage_rows(plans, memory_profile(cfg), measured)
    print(f"MB per rank; {mr.MEASURED}; {mr.ESTIMATED}; each cell: estimated / measured (error)")
    print(mr.format_memory_rows(rows))
    if args.out:
        from lib import atomic

        atomic.write_json(args.out, {"model": cfg.to_dict(), "world_size": args.world_size,
                                     "plans": {n: p.to_dict() for n, p in plans.items()}, "rows": rows,
                                     "measured": measured})
    return 0


def _is_peer_failure(e: BaseException) -> bool:
    """A peer that died, or a collective past its timeout: the run failed, but no line of ours is wrong."""
    import torch.distributed as dist

    text = str(e).lower()
    return isinstance(e, getattr(dist, "DistError", ())) or (
        isinstance(e, RuntimeError) and any(w in text for w in ("gloo", "nccl", "connection", "timed out",
                                                                "timeout", "socket", "peer")))


def _run(args, plan_dict: dict) -> int:
    from .runtime.jobs import CHECK_TOL, judge_checks
    from .runtime.plan import load_plan

    world, rank = int(os.environ["WORLD_SIZE"]), int(os.environ["RANK"])
    source = os.path.basename(args.plan)
    try:
        plan = load_plan(plan_dict, world, source)
        plan.validate(args.n_head, args.n_layer or len(plan.layers), world)
    except (UserError, OSError, ValueError) as e:
        if is_user_error(e):
            _refused_before_the_group(e, sys.argv[1:])
        raise
    model = {"vocab": args.vocab, "seq_len": args.seq_len, "d_model": args.d_model, "n_head": args.n_head,
             "n_layer": args.n_layer or len(plan.layers)}
    backend = args.backend or ("nccl" if args.device == "cuda" else "gloo")
    job = {"kind": "check" if args.check else "train", "plan": plan_dict, "model": model, "steps": args.steps,
           "warmup": args.warmup, "seed": args.seed, "lr": args.lr, "optimizer": args.optimizer,
           "backend": backend, "device": args.device, "sdp_impl": args.sdp_impl, "timeout_s": args.timeout_s}
    # What every rank must share, by the name a user would fix: the plan's content, then each flag.
    job["agree"] = {"the plan": plan_dict, **{f"--{k}": job[k] for k in (
        "steps", "warmup", "seed", "lr", "optimizer", "backend", "device", "sdp_impl", "timeout_s")},
        "--vocab/--seq-len/--d-model/--n-head/--n-layer": model, "--check": args.check, "--tol": args.tol}
    from .runtime.launch import run_rank

    try:
        results = run_rank(job, gather=True)
    except UserError:  # the ranks' agreement refused their inputs: every rank knows it, rank 0 says it
        raise
    except Exception as e:
        if args.debug or not _is_peer_failure(e):
            raise
        first = one_line(e).split(" Exception raised from")[0][:300]
        print(f"error: rank {rank}: the distributed run failed (a peer exited, or no answer within --timeout-s "
              f"{args.timeout_s:g} s): {type(e).__name__}: {first}", file=sys.stderr, flush=True)
        if "TORCHELASTIC_RUN_ID" in os.environ:
            _exit_now(1)
        return 1
    code = 0
    if args.check:
        ok, verdict = judge_checks(results, CHECK_TOL if args.tol is None else args.tol)
        code = 0 if ok else 1
    bad = nonfinite_losses(results)
    if bad and not args.allow_nonfinite:
        code = 1
    if rank == 0:
        from .runtime.memory_report import validate_summary

        summary = validate_summary({"plan": plan.label(), "world_size": world, "ranks": results})
        line = strict_json(summary)
        print(line, flush=True)
        if args.check:
            print(verdict, file=sys.stderr if code else sys.stdout, flush=True)
        if bad:
            print(f"{'warning' if args.allow_nonfinite else 'error'}: the loss is not finite ({bad}; null in the "
                  f"summary): the run diverged; lower --lr, or pass --allow-nonfinite to accept it",
                  file=sys.stderr, flush=True)
        if args.out:
            from lib import atomic

            atomic.write_text(args.out, line + "\n")
    return code


def _exit_now(code: int) -> None:
    """End this process at once, its streams flushed: a rank whose peer failed (unwinding the interpreter,
    torch's and gloo's threads, a process group whose peer is stopped, took 1-2 s more of the launch's time),
    or ``launch`` once its ranks are done. Only where nothing is left to write and a caller reads the code."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def nonfinite_losses(results: list) -> str:
    """Where a rank's loss is NaN or infinite, in words (``rank 1, plan 0, step 7``); empty when all finite."""
    for r in results:
        for i, run in enumerate(r.get("runs", ()) or r.get("checks", ())):
            for s, x in enumerate(run.get("losses") or ()):
                if x is not None and not math.isfinite(float(x)):
                    return f"rank {r.get('rank')}, plan {i}, step {s}: {x}"
    return ""


def _finite_or_null(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: _finite_or_null(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_finite_or_null(x) for x in v]
    return v


def strict_json(obj) -> str:
    """``obj`` as strict JSON (RFC 8259): a NaN or infinity becomes ``null``, never a bare ``NaN`` token."""
    return json.dumps(_finite_or_null(obj), allow_nan=False)


if __name__ == "__main__":
    _code = main()
    if sys.argv[1:2] == ["launch"]:  # torchrun's agent leaves threads whose teardown took 0.8 s after every run
        _exit_now(_code)
    sys.exit(_code)
