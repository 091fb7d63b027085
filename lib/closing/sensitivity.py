"""Stage 2's sensitivity: the same chain with another step and other straggler parameters.

Two steps: the plan's (the cost model's computation and communication) and one at Meta's reported throughput
(``meta_estimate``: the step that 400 model TFLOP/s per GPU implies, Meta's TP 8 x PP 16 layout, and the cost
model's computation, the rest of the step counted as communication). Three tails of the step model: the page's
own parameters (Part III: 1 GPU in 10,000 slow, 1.5x, 1% jitter, not measured on H100s) and a milder and a
harsher one around them, chosen by this book as bounds to look at, not measured either.

Used in: book/closing/01_one_run.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from lib.straggler.model import StepModel

from .llama3 import LLAMA3_GPUS, LLAMA3_PP, LLAMA3_TFLOPS, LLAMA3_TP, llama3_dp, step_at_tflops_s
from .run import OneRun, PlanEstimate, one_run


@dataclass(frozen=True)
class Tail:
    """A straggler tail of Part III's step model: share of slow GPUs, their slowdown, every GPU's jitter."""

    name: str
    p_slow: float
    slow_factor: float
    jitter: float

    def fields(self) -> dict:
        return {"p_slow": self.p_slow, "slow_factor": self.slow_factor, "jitter": self.jitter}

    def text(self) -> str:
        return f"1 in {1 / self.p_slow:,.0f} slow, {self.slow_factor:g}x, jitter {self.jitter:.1%}"


#: The page's tail (Part III's defaults) between a milder and a harsher one (this book's choice of bounds).
PAGE_TAIL = Tail("the page's", StepModel.p_slow, StepModel.slow_factor, StepModel.jitter)
TAILS = (Tail("milder", 1e-5, 1.2, 0.005), PAGE_TAIL, Tail("harsher", 1e-3, 2.0, 0.02))


def meta_estimate(r: OneRun, tflops_per_gpu: float = LLAMA3_TFLOPS[LLAMA3_GPUS]) -> PlanEstimate:
    """The plan estimate of a step at Meta's reported throughput: Meta's TP 8 x PP 16 x DP N/128 layout (so a
    backup replica is 128 GPUs), the step that ``tflops_per_gpu`` implies for the job's tokens, and the cost
    model's computation of ``r``'s plan; the rest of the step is communication. ValueError if the step
    leaves no room for the computation."""
    j, e = r.job, r.est
    step = step_at_tflops_s(j.model, j.global_bsz * _seq(j), j.n_gpus, tflops_per_gpu)
    if step <= e.compute_s:
        raise ValueError(f"tflops_per_gpu={tflops_per_gpu} gives a step of {step:.2f} s, no longer than the "
                         f"plan's computation {e.compute_s:.2f} s: nothing left for communication")
    return replace(e, tp=LLAMA3_TP, pp=LLAMA3_PP, dp=llama3_dp(j.n_gpus), cp=1, step_s=step)


def _seq(job) -> int:
    from lib.galvatron.search.analytic import SHAPES

    return SHAPES[job.model].seq_len


@dataclass(frozen=True)
class Case:
    """One row of the sensitivity table: which step, which tail, and the chain's result."""

    step: str
    tail: Tail
    run: OneRun


def sensitivity(r: OneRun, tails=TAILS) -> list[Case]:
    """The chain at the plan's step and at Meta's, under every tail (the failure stage does not change)."""
    steps = (("the plan's", r.est), ("at Meta's throughput", meta_estimate(r)))
    return [Case(name, t, one_run(replace(r.job, **t.fields()), est)) for name, est in steps for t in tails]
