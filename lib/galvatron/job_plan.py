"""``python -m lib.galvatron plan --model M --gpus N --gpu G --global-batch B --seq-len S``: the planner for a
reader's own job. The ``practice`` search (``search/practice_search.search_top``) prices every layout of its
bounded space under the job's software stack (``data/stacks/``, ``stacks.py``) and prints the fastest that
fit: tokens/s/GPU, model FLOPs utilisation (6 x parameters + attention per token, against the GPU's dense
16-bit peak), peak memory on the fullest GPU against the usable capacity, and the step split by kind
(``practice_report.breakdown``; estimated, nothing here is measured). Then the flags of the first layout for
Megatron-LM (Megatron-Core of 2025: uneven and interleaved pipeline flags, custom FSDP for ZeRO-2/3) and the
names NeMo gives the same settings, and a torchtitan TOML: as this book maps the fields, to be checked
against the version you run.

``--model`` is a Hugging Face ``config.json`` (``num_hidden_layers``, ``hidden_size``,
``num_attention_heads``, ``num_key_value_heads``, ``intermediate_size``, ``vocab_size``; a gated MLP where
``hidden_act`` is ``silu`` or ``swiglu``) or a name of ``search/analytic.SHAPES``. Bad input: one line naming
the flag or the config field, exit 2 (``lib.cli_errors``).

Used in: ``__main__.py`` (``plan --model``), benchmarks/bench_practice.py, tests/galvatron/test_job_plan.py.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, replace

from lib.cli_errors import UserError, check_int

from .plausibility import best_published_mfu  # noqa: F401  (re-exported: plan's report names it)

GATED_ACTS = ("silu", "swiglu", "swish")
KINDS = ("gemm", "attention", "recompute", "tp", "head", "bubble", "p2p", "dp", "other")


def read_model(spec: str, seq_len: int):
    """The ``TransformerShape`` of ``spec`` (an HF config.json path or an ``analytic.SHAPES`` name) at
    ``seq_len`` tokens; UserError naming ``--model`` or the config's field."""
    import os

    from .search.analytic import SHAPES

    if spec in SHAPES:
        return replace(SHAPES[spec], seq_len=seq_len)
    if not os.path.isfile(spec):
        raise UserError(f"--model {spec!r}: not a file and not a known model; allowed: a Hugging Face "
                        f"config.json or one of {', '.join(sorted(SHAPES))}")
    try:
        with open(spec) as f:
            cfg = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise UserError(f"--model {spec}: not a readable JSON file ({type(e).__name__})") from None
    return shape_from_config(cfg, os.path.basename(spec), seq_len, where=f"--model {spec}")


def shape_from_config(cfg, name: str, seq_len: int, where: str = "--model"):
    """The ``TransformerShape`` of a Hugging Face config's fields (a dict) at ``seq_len`` tokens; UserError
    naming ``where`` and the field. Used by :func:`read_model` and the chapter's "plan your own job" widget
    (``widgets.PlanYourJob``)."""
    from .model_limits import HF_FIELDS, LIMITS
    from .search.analytic import TransformerShape

    if not isinstance(cfg, dict):
        raise UserError(f"{where}: the config must be a JSON object")

    def field(key, default=None):
        v = cfg.get(key, default)
        hi = LIMITS[HF_FIELDS[key]]
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= hi:
            raise UserError(f"{where}: field {key}: {v!r}; allowed: an integer in [1, {hi}] (far beyond "
                            f"any published run; larger is a typo)")
        return v

    layers, hidden, heads = field("num_hidden_layers"), field("hidden_size"), field("num_attention_heads")
    kv = field("num_key_value_heads", heads)
    if hidden % heads or heads % kv:
        raise UserError(f"{where}: field num_attention_heads: {heads} must divide hidden_size {hidden} "
                        f"and be a multiple of num_key_value_heads {kv}")
    act = str(cfg.get("hidden_act", cfg.get("activation_function", "gelu"))).lower()
    return TransformerShape(name, layers, hidden, heads, seq_len,
                            ffn_hidden=field("intermediate_size", 4 * hidden), vocab=field("vocab_size"),
                            gated_mlp=act in GATED_ACTS, n_kv_heads=kv)


def make_job(shape, gpu: str, gpus: int, global_batch: int, gpus_per_node: int = 8, fabric: str | None = None):
    """The ``layout.Job`` of the reader's job: bf16, no dropout (today's LLMs train without it). ``fabric``:
    a fabric of ``data/hardware/fabrics/fabrics.json`` whose published collective measurements price the
    traffic between nodes (None: the GPU type's default port at its link efficiency)."""
    from .search.efficiency import gpu_names, load_gpu
    from .search.fabrics import fabric_names, port_for
    from .search.layout import Job

    if gpu not in gpu_names():
        raise UserError(f"--gpu {gpu!r}: unknown GPU type; allowed: {', '.join(gpu_names())}")
    if fabric is not None and fabric not in fabric_names():
        raise UserError(f"--fabric {fabric!r}: unknown fabric; allowed: {', '.join(fabric_names())} "
                        "(data/hardware/fabrics/fabrics.json)")
    check_int("--gpus", gpus, 1, 1 << 20)
    check_int("--global-batch", global_batch, 1, 1 << 30, "sequences per step")
    if gpus > gpus_per_node and gpus % gpus_per_node:
        raise UserError(f"--gpus {gpus}: whole nodes of {gpus_per_node} GPUs; allowed: a multiple of "
                        f"{gpus_per_node} (or at most one node)")
    return Job(shape=shape, gpu=load_gpu(gpu), n_gpus=gpus, gpus_per_node=min(gpus_per_node, gpus),
               port_gb_s=port_for(gpu, fabric), global_batch=global_batch, dtype="bf16", dropout=False,
               fabric=fabric or "")


def plan(job, stack: str | None = None, top: int = 5) -> dict:
    """The report of ``plan``: {"model", "gpus", "gpu", "stack", "global_batch", "seq_len",
    "usable_gb", "peak_tflops", "priced", "layouts": [{"config", "label", "tokens_per_s_per_gpu", "mfu",
    "tflops_per_gpu", "peak_gb", "fits", "step_s", "step_by_kind_s"}], "best_published_mfu" ({"mfu", "run"}
    of ``best_published_mfu``, the plausibility check: a pick above it is faster than anything published
    on that GPU type and stack), "stated_error" (the model's held-out median |error| on the GPU type,
    ``plausibility.py``), "lead_over_second" (#1's lead over #2 with its range under that error,
    ``plausibility.lead_range``; null with one layout), "megatron", "nemo", "torchtitan"}; each layout also
    has "plausibility" (``plausibility.mfu_check``: implausible above the best published MFU x (1 + error))."""
    from .search.practice_search import search_top
    from .plausibility import best_published_mfu, lead_range, mfu_check, stated_error

    check_int("--top", top, 1, 100)
    stack, rules = _stack_rules(stack)
    found, priced = search_top(job, rules, top)
    if not found:
        raise UserError(f"--gpus {job.n_gpus}: no layout fits: none of {job.shape.name} with --global-batch "
                        f"{job.global_batch} fits in {job.gpu.usable_mem_bytes / 1e9:.1f} GB per GPU "
                        f"({priced:,} priced); allowed: more GPUs, a smaller --global-batch or a smaller "
                        "--seq-len")
    peak = job.gpu.flops(job.dtype)
    rows = [_row(cfg, est, peak) for cfg, est in found]
    first, first_est = found[0]
    err = stated_error(job.gpu.name)
    best = best_published_mfu(job.gpu.name, stack)
    for r in rows:
        r["plausibility"] = mfu_check(r["mfu"], best, err)
    lead = None
    if len(rows) > 1:
        lead = lead_range(rows[0]["tokens_per_s_per_gpu"], rows[1]["tokens_per_s_per_gpu"], err)
    return {"model": job.shape.name, "gpus": job.n_gpus, "gpu": job.gpu.name, "stack": stack,
            "fabric": job.fabric or None,
            "global_batch": job.global_batch, "seq_len": job.shape.seq_len,
            "usable_gb": round(job.gpu.usable_mem_bytes / 1e9, 2), "peak_tflops": peak / 1e12, "priced": priced,
            "layouts": rows, "best_published_mfu": best, "stated_error": err, "lead_over_second": lead,
            "megatron": megatron_flags(job, first, first_est), "nemo": nemo_settings(job, first),
            "torchtitan": torchtitan_toml(job, first)}


def _stack_rules(stack: str | None) -> tuple:
    """(the stack ``stack`` names, an alias resolved, ``practice`` as it applies to that stack); UserError
    naming ``--stack`` for an unknown one."""
    from .search.rules import PRACTICE
    from .stacks import resolve_stack, stack_rules

    try:
        stack = resolve_stack(stack)                 # an alias ("megatron", "torchtitan") to its stack
        return stack, stack_rules(PRACTICE, stack)
    except ValueError as e:
        raise UserError(f"--stack: {e}") from None


def _row(cfg, est, peak: float) -> dict:
    """One layout of ``plan``'s report: its config, label, tokens/s/GPU, MFU against ``peak`` FLOP/s, peak
    memory, step and the step split by kind."""
    from .search.step_kinds import breakdown

    b = breakdown(est)
    return {"config": asdict(cfg), "label": cfg.label(),
            "tokens_per_s_per_gpu": round(est["tokens_per_s_per_gpu"], 3),
            "tflops_per_gpu": round(est["tflops_per_gpu"], 2),
            "mfu": round(est["tflops_per_gpu"] * 1e12 / peak, 4),
            "peak_gb": round(est["peak_gb"], 2), "fits": est["fits"], "step_s": round(est["step_s"], 4),
            "step_by_kind_s": {k: round(b[k], 4) for k in KINDS if k in b}}


def price(job, config, stack: str | None = None) -> dict:
    """One layout of ``job`` (a ``ParallelConfig`` or the ``config`` dict of a ``plan`` layout) priced under
    ``practice`` and ``stack``'s rules (estimated): a layout row of ``plan``'s report. The same layout under
    two stacks shows what each stack waits for. ``--stack``-style UserError for an unknown stack."""
    from .search.cost import step_estimate
    from .search.layout import ParallelConfig

    cfg = config if isinstance(config, ParallelConfig) else ParallelConfig(**config)
    _, rules = _stack_rules(stack)
    return _row(cfg, step_estimate(job, cfg, rules), job.gpu.flops(job.dtype))


def across_stacks(job, stack: str, other: str = "megatron-lm", top: int = 5) -> list[tuple[dict, dict]]:
    """``stack``'s ``top`` layouts for ``job``, each priced under ``other`` and under ``stack`` (rows of
    ``price``, estimated): (other's row, stack's row) pairs, ``stack``'s fastest first. Its own rows are
    ``plan``'s, as priced by the search."""
    rows = [{k: v for k, v in r.items() if k != "plausibility"} for r in plan(job, stack, top)["layouts"]]
    return [(price(job, r["config"], other), r) for r in rows]


def across_stacks_table(pairs, stack: str, other: str = "megatron-lm"):
    """The pairs of ``across_stacks`` as a table: each layout's tokens/s/GPU and TP seconds under both."""
    from .search.report import Table

    return Table(["layout", f"{other} tokens/s/GPU", f"{stack} tokens/s/GPU", f"TP s ({other})",
                  f"TP s ({stack})"],
                 [[o["label"], f"{o['tokens_per_s_per_gpu']:.0f}", f"{s['tokens_per_s_per_gpu']:.0f}",
                   f"{o['step_by_kind_s']['tp']:.2f}", f"{s['step_by_kind_s']['tp']:.2f}"] for o, s in pairs],
                 caption=f"Estimated (practice under each stack's rules): {stack}'s fastest layouts, priced "
                         f"under both stacks")


def _uneven(job, est) -> tuple[int, int] | None:
    """(first, last) stage layers where the stages are uneven, else None."""
    layers = est["stage_layers"]
    return (layers[0], layers[-1]) if len(set(layers)) > 1 else None


def megatron_flags(job, cfg, est) -> list[str]:
    """Megatron-LM (Megatron-Core) flags of layout ``cfg``."""
    sh = job.shape
    f = [f"--tensor-model-parallel-size {cfg.tp}", f"--pipeline-model-parallel-size {cfg.pp}",
         f"--context-parallel-size {cfg.cp}", f"--micro-batch-size {cfg.micro_batch}",
         f"--global-batch-size {job.global_batch}", f"--seq-length {sh.seq_len}", "--bf16"]
    chunks = est["chunk_layers"]
    if cfg.vp > 1:
        f.append(f"--num-virtual-stages-per-pipeline-rank {cfg.vp}")
    if chunks[0][0] == 0 or chunks[-1][-1] == 0:      # an embedding-only / head-only chunk (Llama 3's)
        f += ["--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split"]
    elif _uneven(job, est):
        first, last = _uneven(job, est)
        f += [f"--decoder-first-pipeline-num-layers {first}", f"--decoder-last-pipeline-num-layers {last}"]
    if cfg.sequence_parallel:
        f.append("--sequence-parallel")
    f += {0: ["--overlap-grad-reduce"],
          1: ["--use-distributed-optimizer", "--overlap-grad-reduce", "--overlap-param-gather"],
          2: ["--use-custom-fsdp", "--data-parallel-sharding-strategy optim_grads"],
          3: ["--use-custom-fsdp", "--data-parallel-sharding-strategy optim_grads_params"]}[cfg.zero]
    if cfg.recompute in ("selective", "op"):     # op-level (torchtitan's) has no Megatron-LM flag: the nearest
        f.append("--recompute-granularity selective")
    elif cfg.recompute == "full":
        f += ["--recompute-granularity full", "--recompute-method uniform", "--recompute-num-layers 1"]
    return f


def nemo_settings(job, cfg) -> dict:
    """The same layout under NeMo 2's names (``recipe.trainer.strategy`` and ``recipe.data``)."""
    return {"tensor_model_parallel_size": cfg.tp, "pipeline_model_parallel_size": cfg.pp,
            "virtual_pipeline_model_parallel_size": cfg.vp if cfg.vp > 1 else None,
            "context_parallel_size": cfg.cp, "sequence_parallel": cfg.sequence_parallel,
            "micro_batch_size": cfg.micro_batch, "global_batch_size": job.global_batch}


def torchtitan_toml(job, cfg) -> str:
    """A torchtitan job file's parallelism, training and checkpointing sections for layout ``cfg``: FSDP2
    shards over the data-parallel ranks for ZeRO-2/3 (ZeRO-2: no reshard after forward), plain replication
    (DDP) for ZeRO-0; torchtitan has no ZeRO-1, so ZeRO-1 is written as ZeRO-2 and said so."""
    shard = cfg.zero >= 1
    lines = ["[parallelism]",
             f"data_parallel_replicate_degree = {1 if shard else cfg.dp}",
             f"data_parallel_shard_degree = {cfg.dp if shard else 1}",
             f'fsdp_reshard_after_forward = "{"always" if cfg.zero == 3 else "never"}"',
             f"tensor_parallel_degree = {cfg.tp}", f"context_parallel_degree = {cfg.cp}",
             f"pipeline_parallel_degree = {cfg.pp}"]
    if cfg.pp > 1:
        lines += [f'pipeline_parallel_schedule = "{"Interleaved1F1B" if cfg.vp > 1 else "1F1B"}"',
                  f"pipeline_parallel_microbatch_size = {cfg.micro_batch}"]
    lines += ["", "[training]", f"global_batch_size = {job.global_batch}",
              f"local_batch_size = {job.global_batch // cfg.dp}", f"seq_len = {job.shape.seq_len}",
              'mixed_precision_param = "bfloat16"', "", "[activation_checkpoint]",
              f'mode = "{"selective" if cfg.recompute == "op" else cfg.recompute}"']
    if cfg.recompute == "op":
        lines.append('selective_ac_option = "op"')
    if cfg.zero == 1:
        lines.insert(0, "# ZeRO-1 has no torchtitan equivalent: written as FSDP2 without resharding (ZeRO-2)")
    return "\n".join(lines)


def text(report: dict) -> str:
    """The report as the terminal prints it."""
    fabric = f", {report['fabric']} fabric" if report.get("fabric") else ""
    out = [f"{report['model']} on {report['gpus']:,} x {report['gpu']} ({report['stack']} stack{fabric}), global batch "
           f"{report['global_batch']:,} x {report['seq_len']:,} tokens: {report['priced']:,} layouts priced "
           f"(estimated, practice rules; usable {report['usable_gb']:.1f} GB per GPU)"]
    out.append(f"{'#':>2s} {'layout':52s} {'tokens/s/GPU':>12s} {'MFU':>6s} {'peak GB':>8s}  step by kind (s)")
    for i, r in enumerate(report["layouts"], 1):
        kinds = ", ".join(f"{k} {v:.2f}" for k, v in r["step_by_kind_s"].items() if v >= 0.005)
        out.append(f"{i:2d} {r['label']:52s} {r['tokens_per_s_per_gpu']:12.1f} {r['mfu']:6.1%} "
                   f"{r['peak_gb']:8.1f}  {kinds}")
    best = report["best_published_mfu"]
    if best is not None:
        top = report["layouts"][0]["mfu"]
        bound = report["layouts"][0]["plausibility"]["bound"]
        out.append(f"plausibility: #1's MFU {top:.1%} against the best published on {report['gpu']} "
                   f"({report['stack']}): {best['mfu']:.1%} ({best['run']}, quoted throughput)"
                   + ("; ABOVE it: an extrapolation" if top > best["mfu"] else "")
                   + (f"; above it by more than the model's held-out error ({bound:.1%}): implausible"
                      if top > bound else ""))
    lead = report["lead_over_second"]
    if lead is not None:
        out.append(f"#1's lead over #2: {lead['lead']:+.1%}, {lead['low']:+.1%} to {lead['high']:+.1%} under the "
                   f"model's held-out error of {report['stated_error']:.1%} on {report['gpu']}"
                   + ("" if lead["real"] else ": not a real lead"))
    out += ["", "Megatron-LM flags for #1:", "  " + " ".join(report["megatron"]), "",
            "NeMo 2 (recipe.trainer.strategy / recipe.data) for #1:",
            "  " + ", ".join(f"{k}={v}" for k, v in report["nemo"].items() if v is not None), "",
            "torchtitan job file for #1:", report["torchtitan"]]
    return "\n".join(out)


def main(args) -> int:
    """``plan --model``: ``args`` from ``__main__``'s parser."""
    if args.seq_len is None or args.global_batch is None:
        missing = "--seq-len" if args.seq_len is None else "--global-batch"
        raise UserError(f"{missing}: required with --model")
    check_int("--seq-len", args.seq_len, 1, 1 << 20, "tokens per sequence")
    job = make_job(read_model(args.model, args.seq_len), args.gpu, args.gpus, args.global_batch,
                   fabric=args.fabric)
    report = plan(job, args.stack, args.top)
    print(json.dumps(report) if args.json else text(report))
    return 0 if math.isfinite(report["layouts"][0]["tokens_per_s_per_gpu"]) else 1
