"""Reference answers to the exercises of Part III (chapter 10), computed with the library; see lib/exercises.py.

Used in: the exercises at the end of book/stragglers/01_the_one_slow_gpu.
"""

from __future__ import annotations

from dataclasses import dataclass

from lib.straggler.model import (FailureModel, StepModel, backup_count, checkpoint_shares, optimal_interval_min,
                                 step_efficiency, step_efficiency_drop_slowest, young_daly_min)
from lib.straggler.production_exercises import checkpoint_for_kept_s, size_law_alpha
from lib.straggler.report import daly_higher_order_min

#: Exercise 10.2/10.3's inputs: a cluster MTBF of 3 hours and a 5-minute checkpoint (stated in the questions).
MTBF_MIN, CHECKPOINT_MIN = 180.0, 5.0
#: Exercise 10.5's and 10.6's larger cluster; 10.6's checkpoint is 1 minute at 16,384 GPUs and grows with them.
BASE_GPUS, BIG_GPUS = 16_384, 65_536
#: Exercise 10.5 searches backups from none to the page's 2% of its cluster (1,311 GPUs).
MAX_BACKUPS = backup_count(BIG_GPUS, 0.02)


def growing_checkpoint_min(n_gpus: int, base_min: float = 1.0, base_gpus: int = BASE_GPUS) -> float:
    """Exercise 10.6's cost term: a checkpoint that takes ``base_min`` at ``base_gpus`` and grows with the GPUs."""
    return base_min * n_gpus / base_gpus


def kept_at_young_daly(n_gpus: int, checkpoint_min: float, failure: FailureModel = FailureModel()) -> float:
    """Expected kept share of a cluster of ``n_gpus`` checkpointing at its Young-Daly interval."""
    m = failure.cluster_mtbf_min(n_gpus)
    tau = young_daly_min(m, checkpoint_min)
    return float(checkpoint_shares(tau, m, checkpoint_min, failure.restart_min)["kept"])


@dataclass(frozen=True)
class Choice:
    """Exercise 10.5's answer: backups, interval (min), and the expected kept share, step efficiency, goodput."""

    n_backup: int
    interval_min: float
    kept: float
    step_efficiency: float

    @property
    def goodput(self) -> float:
        return self.kept * self.step_efficiency


def goodput_at(n_gpus: int, n_backup: int, step: StepModel = StepModel(),
               failure: FailureModel = FailureModel()) -> Choice:
    """Expected goodput of ``n_gpus`` + ``n_backup`` GPUs at the exact best interval of that cluster (backups fail
    too, so their MTBF is shorter)."""
    m = failure.cluster_mtbf_min(n_gpus, n_backup)
    tau = optimal_interval_min(m, failure.checkpoint_min)
    kept = float(checkpoint_shares(tau, m, failure.checkpoint_min, failure.restart_min)["kept"])
    return Choice(n_backup, tau, kept, step_efficiency(n_gpus, n_backup, step))


def best_choice(n_gpus: int = BIG_GPUS, max_backups: int = MAX_BACKUPS, step: StepModel = StepModel(),
                failure: FailureModel = FailureModel()) -> Choice:
    """Exercise 10.5: the backups (0 .. ``max_backups``) and interval with the highest expected goodput."""
    return max((goodput_at(n_gpus, b, step, failure) for b in range(max_backups + 1)), key=lambda c: c.goodput)


ANSWERS: dict[str, dict] = {
    "ch10.1": dict(answer=lambda: FailureModel().cluster_mtbf_min(16_384),
                  what="the cluster MTBF of 16,384 GPUs from Meta's per-GPU figure", unit="min",
                  rel_tol=1e-2, stated=186),
    "ch10.2": dict(answer=lambda: young_daly_min(MTBF_MIN, CHECKPOINT_MIN),
                  what="the Young-Daly interval at M = 3 h, delta = 5 min", unit="min", rel_tol=1e-2,
                  stated=42.4),
    "ch10.3": dict(answer=lambda: daly_higher_order_min(MTBF_MIN, CHECKPOINT_MIN),
                  what="Daly's higher-order interval at M = 3 h, delta = 5 min", unit="min", rel_tol=1e-2,
                  stated=39.2),
    "ch10.4": dict(answer=lambda: step_efficiency_drop_slowest(16_384, backup_count(16_384, 0.02)),
                  what="the step efficiency of 16,384 + 328 GPUs that drop the 328 slowest", rel_tol=2e-3,
                  stated=0.947),
    "ch10.5": dict(answer=lambda: best_choice().goodput,
                  what="the best expected goodput of 65,536 GPUs over backups and intervals", rel_tol=2e-3,
                  stated="65.8%"),
    "ch10.6": dict(answer=lambda: kept_at_young_daly(BIG_GPUS, growing_checkpoint_min(BIG_GPUS)),
                  what="the kept share at 65,536 GPUs, Young-Daly, a checkpoint growing with the cluster",
                  rel_tol=1e-3, stated="57.6%"),
    "ch10.8": dict(answer=checkpoint_for_kept_s,
                  what="the checkpoint write at which 9,600 GPUs with a 5-minute restart keep 97% at the best interval",
                  unit="s", rel_tol=0.1, stated=2.1),
    "ch10.9": dict(answer=size_law_alpha,
                  what="the size-law exponent fitted to Kokolis et al.'s three measured MTTFs", rel_tol=1e-2,
                  stated=0.83),
}
