"""The closing chapter's numbers as the prose quotes them (``{glue:text}``), every one labelled.

Used in: book/closing/01_one_run.
"""

from __future__ import annotations

from lib.galvatron.search.analytic import SHAPES

from .run import LLAMA3_EFFECTIVE_TRAINING, OneRun, backup_replicas

#: Llama 3 405B's reported throughput on 16,384 GPUs (quoted from its paper, Table 4): 400 TFLOP/s per GPU.
LLAMA3_TFLOPS_16K = 400.0


def model_tflops_per_gpu(r: OneRun) -> float:
    """Model FLOP/s per GPU of the estimated step: 6 x parameters x tokens per step / (step x GPUs), TFLOP/s
    (recomputation not counted, as model FLOPs utilisation counts)."""
    shape = SHAPES[r.job.model]
    tokens = r.job.global_bsz * shape.seq_len
    return 6 * shape.n_params() * tokens / (r.est.step_s * r.job.n_gpus) / 1e12


def glue_texts(r: OneRun) -> dict[str, str]:
    """Name -> text for every number the chapter's prose quotes."""
    e, j = r.est, r.job
    return {
        "n_gpus": f"{j.n_gpus:,} GPUs", "n_nodes": f"{j.n_gpus // 8:,} nodes",
        "global_bsz": f"{j.global_bsz:,} sequences", "tokens_per_gpu": f"{j.tokens_per_gpu:,} tokens",
        "plan": f"tp {e.tp} x pp {e.pp} x dp {e.dp}", "plan_summary": e.plan.summary(),
        "step_s": f"{e.step_s:.2f} s", "compute_s": f"{e.compute_s:.2f} s", "sync_s": f"{e.sync_s:.2f} s",
        "mem_gb": f"{e.mem_gb:.1f} GiB", "budget_gb": f"{j.budget_gb:g} GiB",
        "search_s": f"{e.search_s:.1f} s",
        "tflops": f"{model_tflops_per_gpu(r):.0f} TFLOP/s", "llama3_tflops": f"{LLAMA3_TFLOPS_16K:.0f} TFLOP/s",
        "eff_no_backup": f"{r.eff_no_backup:.1%}", "eff_backup": f"{r.eff_backup:.1%}",
        "backup_replicas": f"{backup_replicas(j, e):,} replicas", "backup_gpus": f"{r.backup_gpus:,} GPUs",
        "replica_gpus": f"{e.replica_gpus:,} GPUs",
        "state_tb": f"{e.model_state_bytes / 1e12:.2f} TB", "storage": f"{j.storage_bw_gb_per_s / 1e3:g} TB/s",
        "checkpoint_s": f"{r.fail_no_backup['checkpoint_min'] * 60:.1f} s",
        "mtbf_min": f"{r.fail_no_backup['mtbf_min']:,.0f} min", "interval_min": f"{r.fail_no_backup['interval_min']:.1f} min",
        "kept": f"{r.fail_no_backup['kept']:.1%}", "kept_backup": f"{r.fail_backup['kept']:.1%}",
        "goodput_no_backup": f"{r.goodput_no_backup:.1%}", "goodput_backup": f"{r.goodput_backup:.1%}",
        "llama3_effective": f"{LLAMA3_EFFECTIVE_TRAINING:.0%}",
    }
