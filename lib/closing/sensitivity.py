"""Stage 2's sensitivity: the same chain with another step and other straggler parameters.

Three steps: Meta's reported step on its layout with the gap between the model's step and Meta's counted as
computation (the chain's), the same with the gap counted as communication (a what-if;
``meta_run.split_step``), and the planner's pick (a what-if: the cost model's own computation and
communication). Three tails of the step model: the page's
own parameters (Part III: 1 GPU in 10,000 slow, 1.5x, 1% jitter, not measured on H100s) and a milder and a
harsher one around them, chosen by this book as bounds to look at, not measured either.

Used in: book/closing/01_one_run.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from lib.straggler.model import StepModel

from .meta_run import MetaStart, split_step
from .run import OneRun, one_run


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


@dataclass(frozen=True)
class Case:
    """One row of the sensitivity table: which step, which tail, and the chain's result."""

    step: str
    tail: Tail
    run: OneRun


#: The steps of the table, in order: the chain's, its what-if split, the planner's pick.
STEPS = ("Meta's, gap as compute", "Meta's, gap as communication", "the planner's pick")


def sensitivity(start: MetaStart, pick: OneRun, tails=TAILS) -> list[Case]:
    """The chain at each of ``STEPS`` under every tail (the failure stage changes only with the backups'
    GPUs). ``start``: Meta's run (``meta_run.meta_start``); ``pick``: the planner's pick (``one_run``)."""
    steps = zip(STEPS, (split_step(start, "compute"), split_step(start, "communication"), pick.est))
    return [Case(name, t, one_run(replace(start.job, **t.fields()), est)) for name, est in steps for t in tails]
