"""The closing chain's start: Meta's own run. Llama 3 405B's stated layout (Table 4: TP 8, PP 16, DP 128;
section 3.3.2: interleaved, ZeRO-2) priced under ``practice`` (``practice_plan.meta_beside``), and Meta's
reported step beside it (from the published run's tokens/s/GPU, ``data/published_runs/calibration.json``).

Stage 2 needs the step split into computation (T_c, which a slow GPU stretches) and communication left at the
step's end (T_sync). Meta reports only the whole step; the model prices both parts but its step differs from
Meta's. ``split_step`` puts that gap on one side: ``"compute"`` (the default: the model's least certain term
is its compute rate, extrapolated from models a third of Llama 3's width) keeps the model's T_sync and gives
the rest of Meta's step to T_c; ``"communication"`` keeps the model's T_c and gives the rest to T_sync (a
what-if). The model's held-out error is ``lib.galvatron.plausibility.stated_error`` of the job's GPU type (the
book's one definition); ``within`` says whether a figure lies inside an estimate's range under it.

Every number is estimated from quoted figures or the profiles; nothing here is measured.
Used in: book/closing/01_one_run.
"""

from __future__ import annotations

from dataclasses import dataclass

from lib.galvatron.search.analytic import SHAPES

from .practice_plan import PracticePlan, meta_beside
from .run import Job, OneRun, PlanEstimate, model_state_bytes, one_run

#: Where the gap between the model's step and Meta's is counted (``split_step``).
GAPS = ("compute", "communication")


@dataclass(frozen=True)
class MetaStart:
    """Meta's layout priced under ``practice`` (``priced``) beside Meta's reported figures (None where no run
    was published for the job: another model, GPU count or batch)."""

    job: Job
    priced: PracticePlan
    reported_tokens_s: float | None   # tokens/s/GPU (data/published_runs/, from Table 4's TFLOP/s)

    @property
    def reported_step_s(self) -> float | None:
        """Meta's step: its tokens per step / (GPUs x reported tokens/s/GPU), estimated from quoted figures."""
        if self.reported_tokens_s is None:
            return None
        return _tokens_per_step(self.job) / (self.job.n_gpus * self.reported_tokens_s)

    @property
    def error(self) -> float | None:
        """The priced layout's tokens/s/GPU over Meta's reported one, minus 1 (no constant was fitted to Llama 3's
        runs, but Meta's stack's queued reduce-scatters were chosen on them: ``data/stacks/meta-llama3.json``)."""
        if self.reported_tokens_s is None:
            return None
        return self.priced.terms["tokens_per_s_per_gpu"] / self.reported_tokens_s - 1

    @property
    def model_sync_s(self) -> float:
        """The model's communication left at the step's end: exposed sends and data-parallel traffic."""
        t = self.priced.terms
        return max(t["step_s"] - t["pipeline_s"], 0.0)


def _tokens_per_step(job: Job) -> int:
    return job.global_bsz * SHAPES[job.model].seq_len


def meta_start(job: Job) -> MetaStart:
    """Meta's layout on the job's GPUs priced under ``practice`` and, where the published run is the job's
    (Llama 3 405B at its GPUs and its batch), Meta's reported tokens/s/GPU."""
    priced, published = meta_beside(job)
    if published is not None and published.global_batch * published.model.seq_len != _tokens_per_step(job):
        published = None  # another batch than Meta measured at: its step is not this job's
    return MetaStart(job, priced, None if published is None else published.measured.tokens_per_s_per_gpu)


def split_step(start: MetaStart, gap: str = "compute") -> PlanEstimate:
    """Meta's step (the model's where none was reported) split for stage 2, Meta's replicas of TP x PP GPUs.
    ``gap="compute"``: T_sync is the model's, T_c the rest of Meta's step. ``gap="communication"``: T_c is the
    model's pipeline time, T_sync the rest. ValueError where the step leaves nothing for the other part."""
    if gap not in GAPS:
        raise ValueError(f"gap must be one of {list(GAPS)}; got {gap!r}")
    t, c, job = start.priced.terms, start.priced.config, start.job
    step = start.reported_step_s or t["step_s"]
    compute = step - start.model_sync_s if gap == "compute" else min(t["pipeline_s"], step)
    if gap == "communication" and t["pipeline_s"] >= step:
        raise ValueError(f"gap='communication': Meta's step {step:.2f} s leaves no communication beside the "
                         f"model's pipeline of {t['pipeline_s']:.2f} s")
    if compute <= 0:
        raise ValueError(f"gap='compute': Meta's step {step:.2f} s is shorter than the model's communication "
                         f"{start.model_sync_s:.2f} s")
    return PlanEstimate(plan=start.priced, step_s=step, compute_s=compute, mem_gb=t["peak_bytes"] / 2**30,
                        tp=c.tp, pp=c.pp, dp=c.dp, cp=c.cp, model_state_bytes=model_state_bytes(job),
                        search_s=0.0)


def meta_run(job: Job, gap: str = "compute", start: MetaStart | None = None) -> OneRun:
    """The three-stage chain on Meta's run: its step split by ``gap`` (``split_step``), stragglers, failures."""
    return one_run(job, split_step(start or meta_start(job), gap))


def within(value: float, reference: float, rel: float) -> bool:
    """Whether ``reference`` lies inside ``value`` x (1 -/+ ``rel``): a lead of ``value`` over ``reference``
    smaller than the model's error is not told apart from it."""
    return value * (1 - rel) <= reference <= value * (1 + rel)
