"""The chapter's three estimates on paper, each a two-line calculation, before the exact model confirms them.

1. Steps that wait: N p slow GPUs per step on average, none with probability e^(-N p), so 1 - e^(-N p) of steps
   wait for one (a slow GPU is always later than every healthy one when (F - 1) / J is large).
2. The slowest healthy GPU: the maximum of N exponential delays of mean J T_c is J T_c H_N late on average,
   H_N ~ ln N + 0.577; backups that cover every slow GPU leave this, which is where they stop.
3. The checkpoint interval: per minute, delta / tau goes to writing and, with failures every M minutes that each
   throw away half an interval on average, tau / 2M to lost work (plus R / M to restarts). The minimum of
   delta / tau + tau / 2M is at tau = sqrt(2 delta M), where the loss is sqrt(2 delta / M) + R / M.

numpy-free pure functions. Used in: book/stragglers/01_the_one_slow_gpu (section "Three estimates on paper").
"""

from __future__ import annotations

import math

from lib.straggler.model import FailureModel, StepModel, _check, _check_gpus, harmonic


def slow_per_step(n_gpus: int, model: StepModel = StepModel()) -> float:
    """N p: the expected number of slow GPUs in one step."""
    _check_gpus(n_gpus)
    return n_gpus * model.p_slow


def wait_share(n_gpus: int, model: StepModel = StepModel()) -> float:
    """1 - e^(-N p): the share of steps with at least one slow GPU."""
    return -math.expm1(-slow_per_step(n_gpus, model))


def mean_step_s(n_gpus: int, model: StepModel = StepModel()) -> float:
    """The mean step if a step with a slow GPU takes F T_c and one without takes T_c (1 + J H_N), plus sync."""
    w = wait_share(n_gpus, model)
    healthy = model.compute_s * (1 + healthy_late(n_gpus, model))
    return model.sync_s + (1 - w) * healthy + w * model.slow_factor * model.compute_s


def healthy_late(n_gpus: int, model: StepModel = StepModel()) -> float:
    """J H_N: how late the slowest of N healthy GPUs is, as a share of the compute time."""
    _check_gpus(n_gpus)
    return model.jitter * harmonic(n_gpus)


def backup_ceiling(n_gpus: int, n_backup: int, model: StepModel = StepModel()) -> float:
    """Step efficiency when backups cover every slow GPU: ideal / (T_c (1 + J H_N) + sync) x N / (N + b)."""
    _check_gpus(n_gpus, n_backup)
    step = model.compute_s * (1 + healthy_late(n_gpus, model)) + model.sync_s
    return model.ideal_step_s / step * n_gpus / (n_gpus + n_backup)


def overhead(interval_min: float, mtbf_min: float, checkpoint_min: float = 1.0) -> float:
    """delta / tau + tau / 2M: the share lost to writing and to thrown-away work (first order)."""
    _check(interval_min > 0, "interval_min", interval_min, "> 0")
    _check(mtbf_min > 0, "mtbf_min", mtbf_min, "> 0")
    return checkpoint_min / interval_min + interval_min / (2 * mtbf_min)


def kept_at_young_daly(mtbf_min: float, failure: FailureModel = FailureModel()) -> float:
    """1 - sqrt(2 delta / M) - R / M: the first-order kept share at tau = sqrt(2 delta M)."""
    _check(mtbf_min > 0, "mtbf_min", mtbf_min, "> 0")
    return 1 - math.sqrt(2 * failure.checkpoint_min / mtbf_min) - failure.restart_min / mtbf_min
