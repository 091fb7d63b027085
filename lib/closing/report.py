"""The closing chapter's numbers as the prose quotes them (``{glue:text}``), every one labelled, and its
tables: Meta's run beside its priced layout and the planner's pick (stage 1), the three stages of each run
with the absolute column (tokens/s per GPU x step efficiency x kept share) beside goodput, and stage 2's
sensitivity. Memory is in GiB (2^30 bytes) throughout, the unit of ``Job.budget_gb``.

Used in: book/closing/01_one_run.
"""

from __future__ import annotations

from lib.book import signed_pct
from lib.html_table import HTMLTable

from .llama3 import (LLAMA3_EFFECTIVE_TRAINING, LLAMA3_GPUS, LLAMA3_PP, LLAMA3_TFLOPS, LLAMA3_TP, SOURCES,
                     llama3_dp, llama3_step_s, model_flops_per_token)
from .run import OneRun, backup_replicas
from .sensitivity import STEPS

#: Llama 3 405B's reported throughput on 16,384 GPUs (quoted from its paper, Table 4): 400 TFLOP/s per GPU.
LLAMA3_TFLOPS_16K = LLAMA3_TFLOPS[LLAMA3_GPUS]
#: Short keys of the sensitivity cases, for glue names: step (plan, meta) x tail (milder, page, harsher).
STEP_KEYS = dict(zip(STEPS, ("meta", "metacomm", "pick")))
TAIL_KEYS = {"milder": "milder", "the page's": "page", "harsher": "harsher"}


def model_tflops_per_gpu(r: OneRun) -> float:
    """Model FLOP/s per GPU of the estimated step: model FLOPs per token (6 x parameters + attention, as
    Table 4 counts, ``llama3.model_flops_per_token``) x tokens per step / (step x GPUs), TFLOP/s
    (recomputation not counted, as model FLOPs utilisation counts)."""
    return tokens_per_s_per_gpu(r) * model_flops_per_token(r.job.model) / 1e12


def plan_text(r: OneRun) -> str:
    """The plan's degrees, and on how many layers its data parallelism is sharded (FSDP / ZeRO-3); under the
    practice rules the layout's label (TP, PP, DP, CP, VP, micro-batch, ZeRO stage, SP, recompute)."""
    e = r.est
    if not hasattr(e.plan, "strategies"):
        return e.plan.label()
    strategies = e.plan.strategies()
    n_sdp = sum(s.sdp for s in strategies)
    sharded = f" (FSDP on {n_sdp} of {len(strategies)} layers)" if n_sdp else ""
    return f"tp {e.tp} x pp {e.pp} x dp {e.dp}{sharded}"


def glue_texts(r: OneRun, prefix: str = "") -> dict[str, str]:
    """Name -> text for every number the chapter's prose quotes of one run (each name after ``prefix``)."""
    e, j = r.est, r.job
    out = {
        "n_gpus": f"{j.n_gpus:,} GPUs", "n_nodes": f"{j.n_gpus // 8:,} nodes",
        "global_bsz": f"{j.global_bsz:,} sequences", "tokens_per_gpu": f"{j.tokens_per_gpu:,} tokens",
        "plan": plan_text(r), "plan_summary": e.plan.summary(), "rules": j.rules,
        "step_s": f"{e.step_s:.2f} s", "compute_s": f"{e.compute_s:.2f} s", "sync_s": f"{e.sync_s:.2f} s",
        "mem_gb": f"{e.mem_gb:.1f} GiB", "budget_gb": f"{j.budget_gb:g} GiB",
        "search_s": f"{e.search_s:.1f} s",
        "tflops": f"{model_tflops_per_gpu(r):.0f} TFLOP/s", "llama3_tflops": f"{LLAMA3_TFLOPS_16K:.0f} TFLOP/s",
        "llama3_step_s": f"{llama3_step_s():.1f} s",
        "step_ratio": f"{e.step_s / llama3_step_s():.2f}", "tokens_s": f"{r.tokens_per_s_per_gpu:.0f} tokens/s",
        "eff_no_backup": f"{r.eff_no_backup:.1%}", "eff_backup": f"{r.eff_backup:.1%}",
        "backup_replicas": f"{backup_replicas(j, e):,} replicas", "backup_gpus": f"{r.backup_gpus:,} GPUs",
        "replica_gpus": f"{e.replica_gpus:,} GPUs", "dp_replicas": f"{e.dp:,} data-parallel replicas",
        "state_tb": f"{e.model_state_bytes / 1e12:.2f} TB", "storage": f"{j.storage_bw_gb_per_s / 1e3:g} TB/s",
        "checkpoint_s": f"{r.fail_no_backup['checkpoint_min'] * 60:.1f} s",
        "mtbf_min": f"{r.fail_no_backup['mtbf_min']:,.0f} min",
        "interval_min": f"{r.fail_no_backup['interval_min']:.1f} min",
        "kept": f"{r.fail_no_backup['kept']:.1%}", "kept_backup": f"{r.fail_backup['kept']:.1%}",
        "goodput_no_backup": f"{r.goodput_no_backup:.1%}", "goodput_backup": f"{r.goodput_backup:.1%}",
        "llama3_effective": f"{LLAMA3_EFFECTIVE_TRAINING:.0%}",
        "delivered": f"{r.delivered(False):.0f} tokens/s", "delivered_b": f"{r.delivered(True):.0f} tokens/s",
        "tokens_eff_b": f"{r.tokens_per_s_per_gpu * r.eff_backup:.0f} tokens/s",
        "mem_headroom": f"{j.budget_gb - e.mem_gb:.1f} GiB",
    }
    return {prefix + k: v for k, v in out.items()}


def sensitivity_glue(cases) -> dict[str, str]:
    """Name -> text for stage 2's sensitivity: ``<step>_<tail>_<eff|eff_b|gp|gp_b|dl_b>`` (``dl_b``: tokens/s
    per GPU x step efficiency x kept share, with backups) for the steps ``meta``, ``metacomm`` and ``pick``,
    the tails ``milder``, ``page``, ``harsher``, and each tail's text ``tail_<tail>``."""
    out = {}
    for c in cases:
        k, r = f"{STEP_KEYS[c.step]}_{TAIL_KEYS[c.tail.name]}", c.run
        out.update({f"{k}_eff": f"{r.eff_no_backup:.1%}", f"{k}_eff_b": f"{r.eff_backup:.1%}",
                    f"{k}_gp": f"{r.goodput_no_backup:.1%}", f"{k}_gp_b": f"{r.goodput_backup:.1%}",
                    f"{k}_dl_b": f"{r.delivered(True):.0f} tokens/s"})
    for c in cases:
        out[f"tail_{TAIL_KEYS[c.tail.name]}"] = c.tail.text()
    return out


def tokens_per_s_per_gpu(r: OneRun) -> float:
    """Tokens per second per GPU of the run's step (``OneRun.tokens_per_s_per_gpu``)."""
    return r.tokens_per_s_per_gpu


def meta_glue(start) -> dict[str, str]:
    """Name -> text for Meta's run (``meta_run.MetaStart``): its layout priced under the practice rules, and
    Meta's reported tokens/s/GPU and step ("no published run" where none was published for the job)."""
    t, j = start.priced.terms, start.job
    peak = peak_gib(t)
    out = {"meta_cfg": start.priced.label(), "meta_cfg_tokens": f"{t['tokens_per_s_per_gpu']:.0f} tokens/s",
           "meta_cfg_step_s": f"{t['step_s']:.2f} s", "meta_cfg_peak": f"{peak:.1f} GiB",
           "meta_cfg_headroom": f"{j.budget_gb - peak:.1f} GiB", "meta_pipeline_s": f"{t['pipeline_s']:.2f} s",
           "meta_model_sync_s": f"{start.model_sync_s:.2f} s", "meta_dp_s": f"{t['dp_s']:.2f} s",
           "meta_cfg_error": "no published run", "llama3_tokens": "no published run",
           "llama3_step": "no published run",
           "meta_micro": f"{t['micro_batches']:,}", "meta_bubble": f"{start.priced.bubble_share:.0%}"}
    if start.reported_tokens_s is not None:
        out.update(meta_cfg_error=signed_pct(start.error), llama3_tokens=f"{start.reported_tokens_s:.0f} tokens/s",
                   llama3_step=f"{start.reported_step_s:.2f} s")
    return out


def held_glue(gpu: str) -> dict[str, str]:
    """Name -> text for the practice model's stated error on GPU type ``gpu`` (``plausibility.stated_error``:
    the median |error| over the published runs on ``gpu`` no constant was fitted to and no stack rule chosen
    on), how many runs that is,
    and how many runs its efficiency constants were fitted to."""
    from lib.galvatron.plausibility import heldout_runs, stated_error
    from lib.galvatron.search.efficiency import load_gpu

    return {"stated_error": f"{stated_error(gpu):.1%}", "n_held": f"{len(heldout_runs(gpu))}",
            "n_fitted": f"{len(load_gpu(gpu).fitted_to)}"}


def stage1_table(start, pick: OneRun, rel: float) -> HTMLTable:
    """Stage 1: Meta's layout priced under practice, Meta's reported figures, and the planner's pick (a
    what-if, its tokens/s with ``rel``, the model's stated error on the GPU type, as its range); memory
    against the usable."""
    t, p, j = start.priced.terms, pick.est.plan.terms, start.job
    tok = pick.tokens_per_s_per_gpu
    reported = start.reported_tokens_s
    rows = (
        ("layout", f"{start.priced.label()} (Table 4 and §3.3.2; VP and SP filled by search)",
         f"TP {LLAMA3_TP} x PP {LLAMA3_PP} x DP {llama3_dp(LLAMA3_GPUS)}, interleaved, ZeRO-2 (quoted)",
         f"{pick.est.plan.label()} (the search)"),
        ("tokens/s per GPU", f"{t['tokens_per_s_per_gpu']:.0f} (estimated)",
         "not published" if reported is None else f"{reported:.0f} (from its quoted 400 TFLOP/s)",
         f"{tok:.0f}, {tok * (1 - rel):.0f}-{tok * (1 + rel):.0f} with the stated error (estimated)"),
        ("step time", f"{t['step_s']:.2f} s (estimated)",
         "not published" if reported is None else f"{start.reported_step_s:.2f} s (from its tokens/s)",
         f"{pick.est.step_s:.2f} s (estimated)"),
        ("against Meta's tokens/s", "-" if reported is None else signed_pct(start.error), "",
         "-" if reported is None else signed_pct(tok / reported - 1)),
        ("peak memory per GPU", _memory(t, j.budget_gb), "not reported", _memory(p, j.budget_gb)),
    )
    head = ("", "Meta's layout, priced", f"Meta's run ({SOURCES['tflops']}, §3.3.2)", "the planner's pick")
    return HTMLTable(head, rows, f"{j.model} on {j.n_gpus:,} GPUs of h100-cluster, {j.rules} cost rules; "
                     f"stated error {rel:.1%}: the median |error| on the published runs of this GPU type no "
                     f"constant was fitted to and no stack rule chosen on", left=(0, 1, 2, 3))


def chain_table(runs) -> HTMLTable:
    """The three stages of each run (``[(name, OneRun)]``): step, tokens/s per GPU, step efficiency, kept share,
    goodput and the absolute column, tokens/s per GPU x step efficiency x kept share (without / with backup
    replicas). Goodput is against each run's own ideal step; the absolute column compares runs."""
    rows = tuple((name, f"{r.est.step_s:.2f} s", f"{r.tokens_per_s_per_gpu:.0f}",
                  f"{r.eff_no_backup:.1%} / {r.eff_backup:.1%}",
                  f"{r.fail_no_backup['kept']:.1%} / {r.fail_backup['kept']:.1%}",
                  f"{r.goodput_no_backup:.1%} / {r.goodput_backup:.1%}",
                  f"{r.delivered(False):.0f} / {r.delivered(True):.0f}") for name, r in runs)
    head = ("run", "step", "tokens/s per GPU", "step efficiency", "kept share", "goodput",
            "tokens/s per GPU x step eff. x kept")
    return HTMLTable(head, rows, "every value estimated; pairs: without / with backup replicas",
                     nowrap=(1, 2, 3, 4, 5, 6), left=(0,))


def peak_gib(t: dict) -> float:
    """A priced layout's peak memory per GPU in GiB (2^30 bytes), the unit of ``Job.budget_gb``: the chapter
    states every memory in GiB."""
    return t["peak_bytes"] / 2**30


def _memory(t: dict, usable_gib: float) -> str:
    """Peak memory against the usable memory, with the headroom (or the shortfall) stated."""
    peak = peak_gib(t)
    verdict = (f"fits, {usable_gib - peak:.1f} GiB spare" if t["fits"]
               else f"does not fit, {peak - usable_gib:.1f} GiB over")
    return f"{peak:.1f} GiB of {usable_gib:g} GiB usable (estimated; {verdict})"


def sensitivity_table(cases) -> HTMLTable:
    """Stage 2 under each step and tail: step efficiency and goodput, without and with backup replicas."""
    rows = tuple((c.step, f"{c.tail.name}: {c.tail.text()}", f"{c.run.est.step_s:.2f} s",
                  f"{c.run.est.compute_s:.2f} / {c.run.est.sync_s:.2f} s",
                  f"{c.run.eff_no_backup:.1%} / {c.run.eff_backup:.1%}",
                  f"{c.run.goodput_no_backup:.1%} / {c.run.goodput_backup:.1%}",
                  f"{c.run.delivered(True):.0f}") for c in cases)
    head = ("step", "straggler tail", "seconds", "T_c / T_sync", "step eff.", "goodput",
            "tokens/s per GPU x step eff. x kept, backups")
    return HTMLTable(head, rows, "every value estimated; pairs: without / with backup replicas",
                     nowrap=(2, 3, 4, 5, 6), left=(0, 1))
