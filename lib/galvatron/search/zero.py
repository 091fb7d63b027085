"""ZeRO stages 1, 2 and 3 (Rajbhandari et al. 2020): what each shards over the ``d`` data-parallel ranks,
and which collectives it adds.

Model-state bytes per parameter, with ``p`` (16-bit working weights), ``g`` (gradient) and ``o`` (fp32
master weights and Adam moments) bytes (``precision.py``):

====== ======================== ==========================================================
stage  bytes per parameter      collectives per step (on the ``d`` ranks)
====== ======================== ==========================================================
0      p + g + o                all-reduce of the gradients (g bytes) once per step
1      p + g + o/d              reduce-scatter of the gradients (g), all-gather of the weights (p)
2      p + (g + o)/d            reduce-scatter per micro-batch (gradients stay sharded), all-gather once
3      (p + g + o)/d            all-gather of the weights before forward and backward, reduce-scatter of
                                the gradients, every micro-batch
====== ======================== ==========================================================

With ``p = 2, g = 2, o = 12`` (the ZeRO paper's mixed precision) ZeRO-2 is 2 + 14/d bytes per parameter.
A reduce-scatter followed by an all-gather of the same buffer moves what one all-reduce does, so with
``p = g`` ZeRO-1 costs plain data parallelism's traffic. With fp32 gradients (``g = 4``, as Megatron-LM
reduces them for bf16) and bf16 weights (``p = 2``) it moves g + p = 6 bytes per parameter (before the ring's
(d - 1)/d), against the 2g = 8 of plain DP's all-reduce. Used in: ``cost.py`` (``step_estimate``).
"""

from __future__ import annotations

STAGES = (0, 1, 2, 3)


def state_bytes_per_param(stage: int, d: int, p: float, g: float, o: float) -> float:
    """Model-state bytes per parameter on one GPU under ZeRO ``stage`` over ``d`` ranks."""
    if stage not in STAGES:
        raise ValueError(f"zero stage must be one of {STAGES}; got {stage!r}")
    if d < 1:
        raise ValueError(f"data-parallel size must be >= 1; got {d!r}")
    return {0: p + g + o, 1: p + g + o / d, 2: p + (g + o) / d, 3: (p + g + o) / d}[stage]


def collectives(stage: int, params: float, p: float, g: float, gather_after_step: bool = False) -> dict:
    """Bytes of each collective for ``params`` parameters held by this rank before sharding:
    ``per_step`` and ``per_micro_batch`` lists of (kind, bytes, phase), phase "fwd" or "bwd" (what compute
    it may hide under) or "step" (between the optimizer step and the next forward, under no compute).
    ``gather_after_step``: ZeRO-1 and ZeRO-2's all-gather of the updated weights ends the optimizer step, which
    waits for it (phase "step"; DeepSpeed, nanotron); otherwise it runs under the next forward ("fwd")."""
    if stage not in STAGES:
        raise ValueError(f"zero stage must be one of {STAGES}; got {stage!r}")
    gather = "step" if gather_after_step else "fwd"
    if stage == 0:
        return {"per_step": [("all-reduce", params * g, "bwd")], "per_micro_batch": []}
    if stage == 1:
        return {"per_step": [("reduce-scatter", params * g, "bwd"), ("all-gather", params * p, gather)],
                "per_micro_batch": []}
    if stage == 2:
        return {"per_step": [("all-gather", params * p, gather)],
                "per_micro_batch": [("reduce-scatter", params * g, "bwd")]}
    return {"per_step": [], "per_micro_batch": [("all-gather", params * p, "fwd"), ("all-gather", params * p, "bwd"),
                                                ("reduce-scatter", params * g, "bwd")]}
