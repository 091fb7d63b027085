"""The closing chapter's numbers as the prose quotes them (``{glue:text}``), every one labelled, and its two
tables: the estimate beside Llama 3, and stage 2's sensitivity.

Used in: book/closing/01_one_run.
"""

from __future__ import annotations

from lib.galvatron.search.analytic import SHAPES
from lib.html_table import HTMLTable

from .llama3 import (LLAMA3_EFFECTIVE_TRAINING, LLAMA3_GPUS, LLAMA3_PP, LLAMA3_TFLOPS, LLAMA3_TP, SOURCES,
                     llama3_dp, llama3_step_s, model_flops_per_token)
from .run import OneRun, backup_replicas

#: Llama 3 405B's reported throughput on 16,384 GPUs (quoted from its paper, Table 4): 400 TFLOP/s per GPU.
LLAMA3_TFLOPS_16K = LLAMA3_TFLOPS[LLAMA3_GPUS]
#: Short keys of the sensitivity cases, for glue names: step (plan, meta) x tail (milder, page, harsher).
STEP_KEYS = {"the plan's": "plan", "at Meta's throughput": "meta"}
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


def glue_texts(r: OneRun) -> dict[str, str]:
    """Name -> text for every number the chapter's prose quotes."""
    e, j = r.est, r.job
    return {
        "n_gpus": f"{j.n_gpus:,} GPUs", "n_nodes": f"{j.n_gpus // 8:,} nodes",
        "global_bsz": f"{j.global_bsz:,} sequences", "tokens_per_gpu": f"{j.tokens_per_gpu:,} tokens",
        "plan": plan_text(r), "plan_summary": e.plan.summary(), "rules": j.rules,
        "step_s": f"{e.step_s:.2f} s", "compute_s": f"{e.compute_s:.2f} s", "sync_s": f"{e.sync_s:.2f} s",
        "mem_gb": f"{e.mem_gb:.1f} GiB", "budget_gb": f"{j.budget_gb:g} GiB",
        "search_s": f"{e.search_s:.1f} s",
        "tflops": f"{model_tflops_per_gpu(r):.0f} TFLOP/s", "llama3_tflops": f"{LLAMA3_TFLOPS_16K:.0f} TFLOP/s",
        "llama3_step_s": f"{llama3_step_s():.1f} s",
        "step_ratio": f"{e.step_s / llama3_step_s():.2f}", "tokens_s": f"{tokens_per_s_per_gpu(r):.0f} tokens/s",
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
    }


def sensitivity_glue(cases) -> dict[str, str]:
    """Name -> text for stage 2's sensitivity: ``<step>_<tail>_<eff|eff_b|gp|gp_b>`` and the Meta-like step's
    parts ``meta_step_s``, ``meta_sync_s``, ``meta_backup_gpus``."""
    out = {}
    for c in cases:
        k, r = f"{STEP_KEYS[c.step]}_{TAIL_KEYS[c.tail.name]}", c.run
        out.update({f"{k}_eff": f"{r.eff_no_backup:.1%}", f"{k}_eff_b": f"{r.eff_backup:.1%}",
                    f"{k}_gp": f"{r.goodput_no_backup:.1%}", f"{k}_gp_b": f"{r.goodput_backup:.1%}"})
        if c.step == "at Meta's throughput":
            out.update(meta_step_s=f"{r.est.step_s:.2f} s", meta_sync_s=f"{r.est.sync_s:.2f} s",
                       meta_backup_gpus=f"{r.backup_gpus:,} GPUs")
    for c in cases:
        out[f"tail_{TAIL_KEYS[c.tail.name]}"] = c.tail.text()
    return out


def tokens_per_s_per_gpu(r: OneRun) -> float:
    """Tokens per second per GPU of the estimated step."""
    return r.job.global_bsz * SHAPES[r.job.model].seq_len / (r.est.step_s * r.job.n_gpus)


def meta_glue(meta, published) -> dict[str, str]:
    """Name -> text for Meta's layout priced under the practice rules (``practice_plan.price``) against the
    published run's tokens/s/GPU (``published``: a ``published.Run``)."""
    t = meta.terms
    out = {"meta_cfg": meta.label(), "meta_cfg_tokens": f"{t['tokens_per_s_per_gpu']:.0f} tokens/s",
           "meta_cfg_step_s": f"{t['step_s']:.2f} s", "meta_cfg_peak": f"{peak_gib(t):.1f} GiB",
           "meta_cfg_error": "no published run", "llama3_tokens": "no published run",
           "meta_micro": f"{t['micro_batches']:,}", "meta_bubble": f"{meta.bubble_share:.0%}"}
    if published is not None:
        pub = published.measured.tokens_per_s_per_gpu
        out.update(meta_cfg_error=f"{t['tokens_per_s_per_gpu'] / pub - 1:+.1%}",
                   llama3_tokens=f"{pub:.0f} tokens/s")
    return out


def llama3_table(r: OneRun, meta=None, published=None, interleaved=None) -> HTMLTable:
    """The estimate beside Llama 3 405B, each value labelled estimated or quoted, with Llama 3's source.
    ``meta`` (a ``practice_plan.PracticePlan`` of Meta's layout) adds a column, Meta's layout as the practice
    rules price it, and a row of peak memory per GPU; ``interleaved`` (``practice_plan.meta_interleaved``)
    adds the same layout interleaved as Llama 3's section 3.3.2 describes; ``published`` (the published run)
    adds Llama 3's tokens/s/GPU."""
    e, j = r.est, r.job
    meta_plan = f"TP {LLAMA3_TP} x PP {LLAMA3_PP} x DP {llama3_dp(LLAMA3_GPUS)}, CP 1 (quoted)"
    lo, hi = 380, max(LLAMA3_TFLOPS.values())
    rows = [
        ("GPUs", f"{j.n_gpus:,} (input)", f"{LLAMA3_GPUS:,} H100 (quoted)", SOURCES["gpus"]),
        ("plan", f"{plan_text(r)} (estimated: the search, {j.rules} rules)", meta_plan, SOURCES["plan"]),
        ("TFLOP/s per GPU", f"{model_tflops_per_gpu(r):.0f} (estimated)",
         f"{LLAMA3_TFLOPS_16K:.0f} (quoted; {lo}-{hi:.0f} over its rows)", SOURCES["tflops"]),
        ("step time", f"{e.step_s:.1f} s (estimated)",
         f"{llama3_step_s():.1f} s (estimated from its quoted TFLOP/s and 16M tokens)", SOURCES["tflops"]),
        ("kept share / effective training time", f"{r.fail_no_backup['kept']:.1%} (estimated)",
         f"> {LLAMA3_EFFECTIVE_TRAINING:.0%} (quoted)", SOURCES["effective"]),
        ("goodput, no backups / backups", f"{r.goodput_no_backup:.1%} / {r.goodput_backup:.1%} (estimated)",
         "not reported", ""),
    ]
    if published is not None:
        rows.insert(2, ("tokens/s per GPU", f"{tokens_per_s_per_gpu(r):.0f} (estimated)",
                        f"{published.measured.tokens_per_s_per_gpu:.0f} (estimated from its quoted TFLOP/s "
                        f"with NVIDIA DGXC's FLOP formula, data/published_runs/)", SOURCES["tflops"]))
    head = ("", "this book's plan", "Llama 3 405B", "Llama 3's source")
    if meta is None:
        return _llama3_html(j, head, rows)
    at = [row[0] for row in rows].index("step time") + 1
    rows.insert(at, ("peak memory per GPU", _memory(e.plan.terms, j.budget_gb), "not reported", ""))
    priced = [("Meta's layout, priced", meta, "the published layout; its nulls filled as validate fills them")]
    if interleaved is not None:
        priced.append(("Meta's layout interleaved, priced", interleaved,
                       "interleaved as Llama 3's section 3.3.2 describes: our reading, VP not stated"))
    for k, (name, plan, how) in enumerate(priced):
        col = _priced_column(j, plan, how)
        rows = [(*row[:2 + k], col.get(row[0], "not estimated"), *row[2 + k:]) for row in rows]
        head = (*head[:2 + k], name, *head[2 + k:])
    return _llama3_html(j, head, rows)


def peak_gib(t: dict) -> float:
    """A priced layout's peak memory per GPU in GiB (2^30 bytes), the unit of ``Job.budget_gb``: the chapter
    states every memory in GiB."""
    return t["peak_bytes"] / 2**30


def _memory(t: dict, usable_gib: float) -> str:
    """Peak memory against the usable memory, with the headroom (or the shortfall) stated."""
    peak = peak_gib(t)
    verdict = (f"fits, {usable_gib - peak:.1f} GiB spare" if t["fits"]
               else f"does not fit, {peak - usable_gib:.1f} GiB over")
    return f"{peak:.1f} GiB of {usable_gib:g} usable (estimated; {verdict})"


def _priced_column(j, plan, how: str) -> dict:
    """One layout priced under practice (a ``practice_plan.PracticePlan``), as a column of the table."""
    t = plan.terms
    return {"GPUs": f"{j.n_gpus:,} (input)", "plan": f"{plan.label()} ({how})",
            "tokens/s per GPU": f"{t['tokens_per_s_per_gpu']:.0f} (estimated)",
            "TFLOP/s per GPU": f"{t['tflops_per_gpu']:.0f} (estimated)",
            "step time": f"{t['step_s']:.1f} s (estimated)", "peak memory per GPU": _memory(t, j.budget_gb)}


def _llama3_html(j, head, rows) -> HTMLTable:
    return HTMLTable(head, tuple(rows),
                     f"{j.model} on {j.n_gpus:,} GPUs of h100-cluster beside Llama 3 405B (arXiv:2407.21783), "
                     f"{j.rules} cost rules", left=tuple(range(len(head))))


def sensitivity_table(cases) -> HTMLTable:
    """Stage 2 under each step and tail: step efficiency and goodput, without and with backup replicas."""
    rows = tuple((c.step, f"{c.tail.name}: {c.tail.text()}", f"{c.run.est.step_s:.1f} s",
                  f"{c.run.eff_no_backup:.1%}", f"{c.run.eff_backup:.1%}", f"{c.run.goodput_no_backup:.1%}",
                  f"{c.run.goodput_backup:.1%}") for c in cases)
    head = ("step", "straggler tail", "seconds", "step eff.", "step eff., backups", "goodput", "goodput, backups")
    return HTMLTable(head, rows, "every value estimated (the failure stage is the same in every row)",
                     nowrap=(2, 3, 4, 5, 6), left=(0, 1))
