"""The closing chapter's stage 1 under the ``practice`` cost rules: the planner of
``lib/galvatron/search/practice_search.py`` picks the layout (TP, CP, PP, DP, interleaving, micro-batch, ZeRO
stage, recompute) and ``cost.step_estimate`` prices its whole step; nothing here is measured.

The global batch is the user's, not a knob: ``Job.global_bsz`` sequences of the shape's length (Llama 3 405B
on 16,384 GPUs: 2,048 sequences of 8,192 tokens, as the published run in
``data/published_runs/calibration.json`` states). The memory limit is ``Job.budget_gb``.

The step is split for Part III's step model as follows: ``compute_s`` is the pipeline's time (each stage's
computation, the tensor-parallel messages inside its layers and the pipeline bubble), the part a slow GPU
stretches, since a 1F1B pipeline runs at the pace of its slowest stage; ``sync_s`` is the communication the
overlap leaves at the step's end: the pipeline sends not hidden and the data-parallel / ZeRO collectives.

A data-parallel replica under this plan is tp x cp x pp GPUs (context-parallel ranks hold different parts of
the same sequences, so no other GPU can stand in for one): that is the unit a backup replaces.

Used in: lib/closing/run.py (``search_plan`` when ``Job.rules == "practice"``; it builds the ``PlanEstimate``,
so this module does not import run), book/closing/01_one_run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from lib import hardware
from lib.galvatron.search.analytic import SHAPES
from lib.galvatron.search.cost import step_estimate
from lib.galvatron.search.efficiency import load_gpu
from lib.galvatron.search.layout import Job as LayoutJob
from lib.galvatron.search.layout import ParallelConfig
from lib.galvatron.search.practice_search import search_practice
from lib.galvatron.search.rules import get_rules
from lib.galvatron.stacks import stack_rules

from .llama3 import LLAMA3_PP, LLAMA3_TP, llama3_dp

#: The software stack of Meta's Llama 3 runs (``data/stacks/meta-llama3.json``): its FSDP queues each
#: micro-batch's reduce-scatters under the next micro-batch's compute (the paper's section 3.3.2).
META_STACK = "meta-llama3"
#: The GPU type (``data/hardware/gpus/``) of each cluster profile the closing chapter can run on.
CLUSTER_GPU = {"h100-cluster": "h100-sxm-80gb"}
#: Models without dropout layers (Llama's architecture has none, as the published runs state).
NO_DROPOUT = ("llama3-8b", "llama3-70b", "llama3-405b")


@dataclass(frozen=True)
class PracticePlan:
    """A layout the practice search picked (or Meta's, priced), with ``cost.step_estimate``'s terms."""

    config: ParallelConfig
    terms: dict
    priced: int = 0                   # layouts the search priced (0: priced alone, not searched)

    def label(self) -> str:
        return self.config.label()

    @property
    def bubble_share(self) -> float:
        """The pipeline's idle time as a share of its useful time: (pp - 1) / (vp m) for 1F1B and interleaved
        1F1B with m micro-batches per pipeline (Narayanan et al. 2021); 0 without pipelining."""
        c = self.config
        return (c.pp - 1) / (c.vp * self.terms["micro_batches"])

    def summary(self) -> str:
        t = self.terms
        return (f"{self.label()}: {t['micro_batches']} micro-batches of {self.config.micro_batch}, "
                f"{t['schedule']} schedule; step {t['step_s']:.2f} s = pipeline {t['pipeline_s']:.2f} s "
                f"+ exposed sends {t['p2p_s']:.2f} s + exposed data-parallel {t['dp_s']:.2f} s; "
                f"{t['tokens_per_s_per_gpu']:.1f} tokens/s/GPU, {t['tflops_per_gpu']:.0f} TFLOP/s/GPU, "
                f"peak {t['peak_bytes'] / 2**30:.1f} GiB")


def practice_job(job) -> LayoutJob:
    """The closing ``Job`` as the practice cost model's ``layout.Job``: the model shape, the cluster's GPU
    type with ``budget_gb`` as its usable memory, the cluster's port speed, the global batch in sequences."""
    gpu_name = CLUSTER_GPU.get(job.cluster)
    if gpu_name is None:
        raise ValueError(f"cluster must be one of {sorted(CLUSTER_GPU)} under the practice rules; "
                         f"got {job.cluster!r}")
    prof = hardware.load_cluster(job.cluster)
    gpu = replace(load_gpu(gpu_name), usable_mem_bytes=job.budget_gb * 2**30)
    return LayoutJob(shape=SHAPES[job.model], gpu=gpu, n_gpus=job.n_gpus, gpus_per_node=prof.gpus_per_node,
                     port_gb_s=prof.fabric["peak_bw_bytes_per_s"] / 1e9, global_batch=job.global_bsz,
                     dtype="bf16", dropout=job.model not in NO_DROPOUT)


def meta_config(n_gpus: int) -> ParallelConfig:
    """Meta's layout for Llama 3 405B (Table 4): TP 8, PP 16, DP = GPUs / 128, ZeRO-2 (section 3.3.2: its
    FSDP "shards optimizer states and gradients"), sequence parallel, micro-batch 1, no recompute, plain
    1F1B: the fields of the published run with its unstated ones at the documented defaults
    (``published.to_config``), for GPU counts at which no run was published."""
    return ParallelConfig(tp=LLAMA3_TP, pp=LLAMA3_PP, dp=llama3_dp(n_gpus), sequence_parallel=True, zero=2)


def meta_rules():
    """``practice`` as it applies to Meta's stack (``META_STACK``)."""
    return stack_rules(get_rules("practice"), META_STACK)


def meta_interleaved(job) -> PracticePlan:
    """Meta's layout (``meta_beside``'s) with the interleaving Llama 3's paper describes, priced under
    ``practice`` as it applies to Meta's stack: section 3.3.2 uses an interleaved schedule and takes one layer
    from the first and the last stage, so that "the first model chunk on the first stage has only the
    embedding, and the last model chunk on the last stage has only output projection and loss calculation":
    chunks of one layer, (layers + 2) / PP of them per stage (126 layers, PP 16: VP 8). The paper does not state
    VP, so ``data/published_runs/`` keeps it null; ``validate``'s fill by search (``fills.py``) picks the same
    VP 8."""
    meta, _ = meta_beside(job)
    layers = SHAPES[job.model].n_layers
    if (layers + 2) % meta.config.pp:
        raise ValueError(f"{job.model}: {layers} layers + 2 are not a whole number of one-layer chunks per "
                         f"stage for pp={meta.config.pp}")
    return price(job, meta.config.with_(vp=(layers + 2) // meta.config.pp), meta_rules())


def published_llama3(n_gpus: int):
    """The published Llama 3 405B run on ``n_gpus`` (8,192 or 16,384) of the calibration set
    (``practice_report.calibration_runs``, ``data/published_runs/calibration.json``), or None."""
    from lib.galvatron.practice_report import calibration_runs

    return next((r for r in calibration_runs() if r.name == f"llama3-405b-{n_gpus}-8192"), None)


def price(job, cfg: ParallelConfig, rules="practice") -> PracticePlan:
    """One layout priced under ``practice`` (or ``rules``: practice as it applies to a published run's stack,
    ``validate.run_rules``) for ``job`` (no search)."""
    return PracticePlan(cfg, step_estimate(practice_job(job), cfg, rules))


def search(job) -> tuple[PracticePlan, float]:
    """(the practice search's pick for ``job``, seconds the search took). ValueError when nothing fits."""
    t0 = time.perf_counter()
    cfg, terms, priced = search_practice(practice_job(job), "practice")
    took = time.perf_counter() - t0
    if cfg is None:
        raise ValueError(f"no layout for {job.model} on {job.n_gpus} GPUs fits budget_gb={job.budget_gb} "
                         f"under the practice rules ({priced} priced)")
    return PracticePlan(cfg, terms, priced), took


def meta_beside(job) -> tuple[PracticePlan, object]:
    """Meta's layout on ``job``'s GPUs priced under ``practice`` as it applies to Meta's stack (``META_STACK``)
    and the published run it comes from (the run's own fields, its unstated ones filled as ``validate`` fills
    them: each searched alone for the fastest setting that fits, ``fills.py``), or ``meta_config`` and None
    where no run was published at that size."""
    run = published_llama3(job.n_gpus) if job.model == "llama3-405b" else None
    if run is None:     # Meta's layout at another size, under Meta's stack as the published runs name it
        return price(job, meta_config(job.n_gpus), meta_rules()), None
    from lib.galvatron.fills import SEARCHED, fill_by_search
    from lib.galvatron.published import to_config
    from lib.galvatron.validate import run_rules

    rules = run_rules(run, "practice")
    nulls = [f for f in SEARCHED if getattr(run.config, f) is None]
    cfg, _, _ = fill_by_search(practice_job(job), to_config(run), nulls, rules)
    return price(job, cfg, rules), run
