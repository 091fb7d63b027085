"""Reference answers to the exercises of the section "The page against production clusters" (chapter 10),
computed with the library. Used in: lib/straggler/exercises.py (``ANSWERS``) and the exercises of
book/stragglers/01_the_one_slow_gpu.
"""

from __future__ import annotations

import math

import numpy as np

from lib.straggler import calibration as cal
from lib.straggler.model import FailureModel, checkpoint_shares, optimal_interval_min

#: Exercise 10.8's job: ByteRobust's 9,600 GPUs and 97% ETTR (held out), at the page's failure rate and restart.
BYTEROBUST_GPUS, BYTEROBUST_ETTR = 9_600, 0.97


def kept_at_best(checkpoint_min: float, n_gpus: int = BYTEROBUST_GPUS,
                 failure: FailureModel = FailureModel()) -> float:
    """The expected kept share of ``n_gpus`` at the exact best interval for a checkpoint of ``checkpoint_min``."""
    m = failure.cluster_mtbf_min(n_gpus)
    tau = optimal_interval_min(m, checkpoint_min)
    return float(checkpoint_shares(tau, m, checkpoint_min, failure.restart_min)["kept"])


def checkpoint_for_kept_s(target: float = BYTEROBUST_ETTR, n_gpus: int = BYTEROBUST_GPUS,
                          failure: FailureModel = FailureModel()) -> float:
    """Exercise 10.8: the checkpoint write (seconds) at which ``n_gpus`` keep ``target`` at the best interval
    (bisection on a share that falls as the write grows); ValueError if even a free checkpoint falls short."""
    if kept_at_best(1e-9, n_gpus, failure) <= target:
        raise ValueError(f"no checkpoint is fast enough: the restarts alone cost more than 1 - {target:g}")
    lo, hi = 1e-9, 60.0
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if kept_at_best(mid, n_gpus, failure) > target else (lo, mid)
    return 60 * math.sqrt(lo * hi)


def size_law_alpha() -> float:
    """Exercise 10.9: the slope of ln(1 / MTTF) against ln N over Kokolis et al.'s three measured MTTFs."""
    obs = cal._observations()
    x = np.log([obs[n]["job"]["gpus"] for n in cal.FIT_MTTF])
    y = -np.log([obs[n]["value"] for n in cal.FIT_MTTF])
    return float(np.polyfit(x, y, 1)[0])
