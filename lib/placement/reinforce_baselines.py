"""REINFORCE's cost and baselines: what each sampled placement's log-probability is pushed by.

Cost c_k = sqrt(step time in seconds) (the paper's choice: it shrinks the 10 s out-of-memory charge relative
to real step times). The advantage of sample k is c_k - b_k with b_k one of:

- ``moving_average``: the paper's exponential moving average of past batch-mean costs; every sample of a batch
  gets the value *before* this batch is folded in (the first batch uses its own mean);
- ``leave_one_out``: the mean of the other K-1 costs of the same batch (needs K >= 2).

Used in: Part I, chapters 2-3.
"""

from __future__ import annotations

import numpy as np

BASELINES = ("moving_average", "leave_one_out")


def costs_of(step_s: np.ndarray) -> np.ndarray:
    """Per-sample costs: the square root of the step times (seconds)."""
    return np.sqrt(np.asarray(step_s, dtype=float))


def moving_average(costs: np.ndarray, previous: float | None, decay: float) -> tuple[np.ndarray, float]:
    """Per-sample baselines (all equal to the average before this batch) and the updated average."""
    mean = float(np.mean(costs))
    b = mean if previous is None else previous
    return np.full(len(costs), b), decay * b + (1 - decay) * mean


def leave_one_out(costs: np.ndarray) -> np.ndarray:
    """Per-sample baselines: the mean of the other K-1 costs. ValueError for fewer than 2 samples."""
    k = len(costs)
    if k < 2:
        raise ValueError(f"the leave-one-out baseline needs at least 2 samples; got {k}")
    return (costs.sum() - costs) / (k - 1)
