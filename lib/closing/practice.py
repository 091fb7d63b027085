"""Stage 1 under the ``practice`` cost rules: the practice planner (``lib.galvatron.search.practice_search``:
mixed precision, 1F1B and interleaved schedules, ZeRO stages, context parallelism, a hierarchical network)
picks the layout and prices its step, and the result is handed to the chain as a ``PlanEstimate``.

The chain splits a step into T_c, what a slow GPU stretches, and T_sync, what it does not. Here T_c is the
pipeline's time (``pipeline_s``: every stage's computation, the bubble, and the tensor- and context-parallel
messages inside layers, which wait for the slowest GPU of their group) and T_sync the rest (the exposed
pipeline sends and data-parallel collectives). A backup replica is tp x cp x pp GPUs. The checkpoint still
writes 16 bytes per parameter (``run.model_state_bytes``).

The planner lands with the practice rules; it is imported only when a job names them.
Used in: book/closing/01_one_run (``cost_rules = "practice"``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from lib import hardware
from lib.galvatron.search.analytic import SHAPES

#: The practice planner's GPU profile (``data/hardware/gpus/``) for each cluster profile's GPU.
GPU_OF_CLUSTER = {"h100-cluster": "h100-sxm-80gb"}


@dataclass(frozen=True)
class PracticePlan:
    """The practice planner's layout (a ``layout.ParallelConfig``), its estimate, and how many it priced."""

    config: object
    estimate: dict
    priced: int

    def summary(self) -> str:
        c, e = self.config, self.estimate
        return (f"tp {c.tp} x cp {c.cp} x pp {c.pp} x dp {c.dp}, {e['micro_batches']} micro-batches of "
                f"{c.micro_batch}, {e['schedule']} vp {e['vp']}, ZeRO-{e['zero']}, recompute {e['recompute']} "
                f"(practice rules; {self.priced:,} layouts priced)")

    def strategies(self) -> list:
        return []  # no layer-wise strategies: one layout for every layer


def practice_job(job):
    """The practice planner's ``layout.Job`` for a chain ``Job``: its shape, GPU, cluster and global batch."""
    from lib.galvatron.search.efficiency import load_gpu
    from lib.galvatron.search.layout import Job as LayoutJob

    if job.cluster not in GPU_OF_CLUSTER:
        raise ValueError(f"cluster must be one of {sorted(GPU_OF_CLUSTER)} under rules='practice'; "
                         f"got {job.cluster!r}")
    hw = hardware.load_cluster(job.cluster, job.node_count())
    return LayoutJob(shape=SHAPES[job.model], gpu=load_gpu(GPU_OF_CLUSTER[job.cluster]), n_gpus=job.n_gpus,
                     gpus_per_node=hw.gpus_per_node, port_gb_s=float(hw.fabric["peak_bw_bytes_per_s"]) / 1e9,
                     global_batch=job.global_bsz)


def practice_layout(job) -> tuple[PracticePlan, float]:
    """The practice planner's best layout for ``job`` and the seconds the search took; ``run.search_plan``
    turns it into the chain's ``PlanEstimate`` (see the module docstring for the split of its step).
    ValueError when no layout fits."""
    from lib.galvatron.search.practice_search import search_practice

    t0 = time.perf_counter()
    cfg, est, priced = search_practice(practice_job(job), "practice")
    if cfg is None:
        raise ValueError(f"no layout for {job.model} on {job.n_gpus} GPUs fits under rules='practice' "
                         f"({priced} priced)")
    return PracticePlan(cfg, est, priced), time.perf_counter() - t0
