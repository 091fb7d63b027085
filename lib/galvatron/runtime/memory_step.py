"""One training step of a stage runner measured by category: ``memory.StepMemory`` around ``pipeline.gpipe_step``.

Kept apart from ``memory`` (which the pipeline, TP and SDP code import to label their buffers) so that the
accounting does not import the schedule it accounts. Used in: ``jobs.run_job`` (every train result's memory
record), book/galvatron/04_from_plan_to_run.
"""

from __future__ import annotations

import torch

from .memory import MemoryRecord, StepMemory
from .pipeline import gpipe_step


def model_state_tensors(runner) -> list:
    """Every tensor of ``runner``'s model states: its parameters (FSDP2's local shards), their gradients and
    the optimizer's state tensors."""
    out = []
    for p in runner.params:
        out.append(p)
        if p.grad is not None:
            out.append(p.grad)
    for state in runner.opt.state.values():
        out += [v for v in state.values() if isinstance(v, torch.Tensor)]
    return out


def measure_step(runner, step: int) -> MemoryRecord:
    """Run one training step of ``runner`` (a ``StageRunner``) under ``StepMemory``; its peak by category.
    Run it after at least one step, so that gradients and optimizer states already exist."""
    cuda = runner.dev.type == "cuda"
    if cuda:
        torch.cuda.synchronize(runner.dev)
        torch.cuda.reset_peak_memory_stats(runner.dev)
        base = torch.cuda.memory_allocated(runner.dev)
    tracker = StepMemory()
    tracker.register_model_states(model_state_tensors(runner))
    with tracker:
        gpipe_step(runner, step, reduce_loss=False)
    peak_cuda = None
    if cuda:
        torch.cuda.synchronize(runner.dev)
        peak_cuda = int(torch.cuda.max_memory_allocated(runner.dev))
        peak_cuda = max(peak_cuda, base)
    return tracker.record(peak_cuda)
