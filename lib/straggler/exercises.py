"""Reference answers to the exercises of Part III (chapter 9), computed with the library; see lib/exercises.py.

Used in: the exercises at the end of book/stragglers/01_the_one_slow_gpu.
"""

from __future__ import annotations

from lib.straggler.model import (FailureModel, backup_count, checkpoint_shares, step_efficiency,
                                 young_daly_min)
from lib.straggler.report import daly_higher_order_min

#: Exercise 8.2/8.3's inputs: a cluster MTBF of 3 hours and a 5-minute checkpoint (stated in the questions).
MTBF_MIN, CHECKPOINT_MIN = 180.0, 5.0
#: Exercise 8.5's checkpoint that grows with the cluster: 1 minute at 16,384 GPUs, proportional to the GPUs.
BASE_GPUS, BIG_GPUS = 16_384, 65_536


def growing_checkpoint_min(n_gpus: int, base_min: float = 1.0, base_gpus: int = BASE_GPUS) -> float:
    """Exercise 8.5's cost term: a checkpoint that takes ``base_min`` at ``base_gpus`` and grows with the GPUs."""
    return base_min * n_gpus / base_gpus


def kept_at_young_daly(n_gpus: int, checkpoint_min: float, failure: FailureModel = FailureModel()) -> float:
    """Expected kept share of a cluster of ``n_gpus`` checkpointing at its Young-Daly interval."""
    m = failure.cluster_mtbf_min(n_gpus)
    tau = young_daly_min(m, checkpoint_min)
    return float(checkpoint_shares(tau, m, checkpoint_min, failure.restart_min)["kept"])


ANSWERS: dict[str, dict] = {
    "ch9.1": dict(answer=lambda: FailureModel().cluster_mtbf_min(16_384),
                  what="the cluster MTBF of 16,384 GPUs from Meta's per-GPU figure", unit="min",
                  rel_tol=1e-2),
    "ch9.2": dict(answer=lambda: young_daly_min(MTBF_MIN, CHECKPOINT_MIN),
                  what="the Young-Daly interval at M = 3 h, delta = 5 min", unit="min", rel_tol=1e-2),
    "ch9.3": dict(answer=lambda: daly_higher_order_min(MTBF_MIN, CHECKPOINT_MIN),
                  what="Daly's higher-order interval at M = 3 h, delta = 5 min", unit="min", rel_tol=1e-2),
    "ch9.4": dict(answer=lambda: step_efficiency(16_384, backup_count(16_384, 0.02)),
                  what="the step efficiency of 16,384 GPUs with 2% backups", rel_tol=1e-3),
    "ch9.5": dict(answer=lambda: kept_at_young_daly(BIG_GPUS, growing_checkpoint_min(BIG_GPUS)),
                  what="the kept share at 65,536 GPUs, Young-Daly, a checkpoint growing with the cluster",
                  rel_tol=1e-3),
}
