"""One estimated step split by kind, from ``cost.step_estimate``'s dict: what ``plan`` prints per layout and
chapter 9's tables show. numpy only (no published-runs reader), so the browser's live widgets can use it.

Used in: ``lib/galvatron/job_plan.py``, ``lib/galvatron/practice_report.py``.
"""

from __future__ import annotations

import numpy as np


def bubble_share(e: dict) -> float:
    """The share of a step spent in the pipeline bubble: (pipeline time - m x the slowest stage's time) /
    step."""
    return bubble_s(e) / e["step_s"]


def bubble_s(e: dict) -> float:
    """The pipeline's idle seconds in one step: its time less the slowest stage's busy time."""
    return e["pipeline_s"] - e["micro_batches"] * max(e["stage_s"])


def breakdown(e: dict) -> dict:
    """One step's seconds by kind (estimated), on the slowest pipeline stage: ``gemm`` (matrix multiplies,
    forward and backward), ``attention`` (the attention core's kernel, forward and backward), ``recompute``,
    ``tp`` (tensor-parallel messages left exposed), ``head`` (output layer), ``bubble`` (the pipeline's idle
    time), ``p2p`` and ``dp`` (exposed sends and data-parallel / ZeRO messages). They add up to ``step_s``
    (``cp`` messages, when any, are in ``other``)."""
    m = e["micro_batches"]
    last = len(e["stage_s"]) - 1
    per = {"gemm": 3.0 * (e["fwd_s"] - e["attention_s"]), "attention": 3.0 * e["attention_s"],
           "recompute": e["recompute_s"], "tp": e["tp_s"]}
    slow = int(np.argmax(e["stage_s"]))
    n = e["stage_layers"][slow]
    out = {k: m * n * v for k, v in per.items()}
    out["head"] = m * e["head_s"] if slow == last else 0.0
    out["bubble"] = bubble_s(e)
    out["p2p"], out["dp"] = e["p2p_s"], e["dp_s"]
    out["other"] = e["step_s"] - sum(out.values())
    return out


__all__ = ["breakdown", "bubble_s", "bubble_share"]
