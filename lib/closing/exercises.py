"""Reference answers to the exercises of the closing chapter (chapter 11), computed with the library; see
lib/exercises.py. Each is a whole computation through the chapter's stages, not one line of arithmetic.

Used in: the exercises at the end of book/closing/01_one_run.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from lib.straggler import model as sm

from .meta_run import meta_run
from .run import Job, OneRun, failure_stage, one_run, step_efficiency

#: The chapter's job at its defaults: Llama 3 405B on 16,384 GPUs under the practice cost rules (its chain runs
#: on Meta's run, ``meta_run_of``; the planner's pick, ``run_of``, is the what-if of exercise 11.1).
CHAPTER_JOB = Job(rules="practice")
#: Exercise 11.1's model: Llama 3 70B, carried through the three stages on the chapter's 16,384 GPUs.
OTHER_MODEL = "llama3-70b"
#: Exercise 11.4's target: the kept share at which failures and checkpoints alone use up Meta's 10%.
KEPT_TARGET = 0.90


@lru_cache(maxsize=8)
def run_of(job: Job) -> OneRun:
    """``one_run`` of a job, cached: several answers share one search."""
    return one_run(job)


@lru_cache(maxsize=8)
def meta_run_of(job: Job) -> OneRun:
    """The chain on Meta's run for ``job`` (``meta_run.meta_run``, the gap counted as compute), cached."""
    return meta_run(job)


def other_model_goodput(job: Job = CHAPTER_JOB) -> float:
    """Exercise 11.1: Llama 3 70B's goodput with backup replicas on the job's cluster (its own search)."""
    return run_of(replace(job, model=OTHER_MODEL)).goodput_backup


def goodput_at(r: OneRun, replicas: int, interval_min: float) -> float:
    """Goodput of ``r``'s plan with ``replicas`` backup replicas and a checkpoint every ``interval_min``."""
    job = replace(r.job, backup_share=replicas / r.est.dp)
    eff = step_efficiency(job, r.est, replicas > 0)
    f = failure_stage(job, r.est, replicas > 0)
    kept = float(sm.checkpoint_shares(interval_min, f["mtbf_min"], f["checkpoint_min"], job.restart_min)["kept"])
    return kept * eff


def best_goodput(r: OneRun, max_replicas: int = 64) -> tuple[float, int, float]:
    """Exercise 11.2: the best goodput over 0..``max_replicas`` backup replicas (fewer than the plan's
    data-parallel replicas), each at its exact best interval (``lib.straggler.model.optimal_interval_min``):
    (goodput, replicas, interval in minutes)."""
    best = (-1.0, 0, 0.0)
    for b in range(0, min(max_replicas, r.est.dp - 1) + 1):
        job = replace(r.job, backup_share=b / r.est.dp)
        f = failure_stage(job, r.est, b > 0)
        tau = sm.optimal_interval_min(f["mtbf_min"], f["checkpoint_min"])
        best = max(best, (goodput_at(r, b, tau), b, tau))
    return best


def halved_sync(r: OneRun) -> OneRun:
    """The chain of ``r`` if the communication left at the step's end were halved (same computation)."""
    return one_run(r.job, replace(r.est, step_s=r.est.compute_s + r.est.sync_s / 2))


def halved_sync_delivered(r: OneRun) -> float:
    """Exercise 11.3: tokens/s per GPU x step efficiency x kept share, with backups, if the communication left
    at the step's end were halved. (Its goodput falls: it is measured against the shorter step's own ideal.)"""
    return halved_sync(r).delivered(True)


def kept_at_bandwidth(r: OneRun, gb_per_s: float) -> float:
    """The kept share (no backups, Young-Daly interval) if checkpoints were written at ``gb_per_s``."""
    return failure_stage(replace(r.job, storage_bw_gb_per_s=gb_per_s), r.est, False)["kept"]


def bandwidth_for_kept(r: OneRun, kept: float = KEPT_TARGET) -> float:
    """Exercise 11.4: the storage bandwidth (GB/s) at which the kept share falls to ``kept`` (bisection on a
    log scale; the kept share grows with the bandwidth)."""
    lo, hi = 1e-3, r.job.storage_bw_gb_per_s * 1e3
    if not kept_at_bandwidth(r, lo) < kept < kept_at_bandwidth(r, hi):
        raise ValueError(f"kept must lie between the kept shares at {lo} and {hi} GB/s; got {kept!r}")
    for _ in range(100):
        mid = (lo * hi) ** 0.5
        lo, hi = (mid, hi) if kept_at_bandwidth(r, mid) < kept else (lo, mid)
    return (lo * hi) ** 0.5


ANSWERS: dict[str, dict] = {
    "ch11.1": dict(answer=other_model_goodput,
                   what="Llama 3 70B's goodput with backup replicas on the chapter's 16,384 GPUs (estimated)",
                   rel_tol=2e-3, stated="85.7%"),
    "ch11.2": dict(answer=lambda: best_goodput(meta_run_of(CHAPTER_JOB))[0],
                   what="the best goodput of Meta's run over the backup replicas and the checkpoint interval "
                        "(estimated)", rel_tol=1e-3, stated="83.2%"),
    "ch11.3": dict(answer=lambda: halved_sync_delivered(meta_run_of(CHAPTER_JOB)),
                   what="tokens/s per GPU x step efficiency x kept share, with backups, when the communication "
                        "left at the end of Meta's step is halved (estimated)", unit="tokens/s", rel_tol=5e-3,
                   stated=128),
    "ch11.4": dict(answer=lambda: bandwidth_for_kept(meta_run_of(CHAPTER_JOB)),
                   what="the storage bandwidth at which the kept share falls to 90% (estimated)", unit="GB/s",
                   rel_tol=2e-2, stated=193),
}
