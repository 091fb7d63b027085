"""Reference answers to the exercises of the closing chapter (chapter 10), computed with the library; see
lib/exercises.py.

Used in: the exercises at the end of book/closing/01_one_run.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from lib.straggler.model import FailureModel, backup_count

from .run import Job, model_state_bytes, one_run

#: Exercise 9.4's plan shape: Llama 3 405B's on 16,384 GPUs, tp 8 x pp 16 x dp 128 (quoted from its paper).
LLAMA3_TP, LLAMA3_PP, LLAMA3_DP = 8, 16, 128


@lru_cache(maxsize=8)
def run_of(job: Job):
    """``one_run`` of a job, cached: several answers share one search."""
    return one_run(job)


def checkpoint_min_by_hand(job: Job = Job()) -> float:
    return model_state_bytes(job) / (job.storage_bw_gb_per_s * 1e9) / 60.0


def llama3_backup_gpus(share: float = 0.02) -> int:
    return backup_count(LLAMA3_DP, share) * LLAMA3_TP * LLAMA3_PP


ANSWERS: dict[str, dict] = {
    "ch10.1": dict(answer=lambda: FailureModel().cluster_mtbf_min(Job().n_gpus),
                  what="the cluster MTBF of the chapter's default cluster, from Meta's per-GPU figure",
                  unit="min", rel_tol=1e-2),
    "ch10.2": dict(answer=checkpoint_min_by_hand,
                  what="minutes to write one checkpoint of the default model's states", unit="min",
                  rel_tol=2e-2),
    "ch10.3": dict(answer=lambda: run_of(replace(Job(), storage_bw_gb_per_s=Job().storage_bw_gb_per_s / 4))
                  .fail_no_backup["interval_min"],
                  what="the Young-Daly interval with a quarter of the storage bandwidth", unit="min",
                  rel_tol=1e-2),
    "ch10.4": dict(answer=llama3_backup_gpus,
                  what="backup GPUs for 2% backup replicas of Llama 3's tp 8 x pp 16 x dp 128 plan",
                  unit="GPUs", rel_tol=0.0, abs_tol=0.5),
    "ch10.5": dict(answer=lambda: run_of(Job()).goodput_backup,
                  what="the default job's goodput with backup replicas (estimated)", rel_tol=1e-3),
}
