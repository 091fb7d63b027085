"""The GPipe schedule as a plain function: all forwards, then all backwards in reverse, blocking send/recv.

Stage ``s`` rank ``j`` talks only to rank ``j`` of stages ``s-1`` and ``s+1``, with plain ``dist.send`` /
``dist.recv`` (never ``batch_isend_irecv``, which can hang on gloo). The order of messages is the same on both
ends, so blocking calls cannot deadlock. Used in: book/galvatron/04_from_plan_to_run.
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from .memory import region


def gpipe_step(runner, step: int, reduce_loss: bool = True) -> float | None:
    """One training iteration of ``runner`` (a ``StageRunner``). On the last stage returns the global loss
    (``reduce_loss``) or this rank's share of it; ``None`` on other stages. Receive buffers are labelled
    communication for ``memory.StepMemory``."""
    g = runner.grid
    prev = g.global_rank(runner.stage - 1, runner.j) if not runner.first else None
    nxt = g.global_rank(runner.stage + 1, runner.j) if not runner.last else None
    batch = runner.make_batch(step)
    saved = []
    for m in range(runner.plan.chunks):
        x_in = None
        if prev is not None:
            with region("comm"):
                x_in = torch.empty(runner.boundary_shape, device=runner.dev)
            dist.recv(x_in, src=prev)
            x_in.requires_grad_()
        y = runner.forward_micro(m, x_in, batch)
        if nxt is not None:
            dist.send(y.detach().contiguous(), dst=nxt)
        saved.append((x_in, y))
    loss = 0.0
    for m in reversed(range(runner.plan.chunks)):
        x_in, y = saved[m]
        if m == 0:
            runner.sync.arm()  # the last backward: launch gradient all-reduces as buckets complete
        if nxt is None:
            y.backward()
            loss += float(y.detach())
        else:
            with region("comm"):
                gy = torch.empty_like(y)
            dist.recv(gy, src=nxt)
            y.backward(gy)
        if prev is not None:
            dist.send(x_in.grad.contiguous(), dst=prev)
        saved[m] = None
    runner.sync.finish()
    runner.step_optimizer()
    if not runner.last:
        return None
    if not reduce_loss:
        return loss
    return reduce_stage_loss(runner, loss)


def reduce_stage_loss(runner, loss: float) -> float:
    """Sum the loss shares of the last stage's ranks (one all-reduce on the stage group)."""
    t = torch.tensor([loss], dtype=torch.float64, device=runner.dev)  # NCCL reduces device tensors only
    sg = runner.pool.stage_group()
    if sg is not None:
        dist.all_reduce(t, group=sg)
    return float(t[0])


def _sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def timed_steps(runner, warmup: int, steps: int) -> dict:
    """Run ``warmup`` + ``steps`` iterations; per-iteration seconds (after a barrier) and losses."""
    losses, times = [], []
    for s in range(warmup + steps):
        dist.barrier()
        _sync(runner.dev)
        t0 = time.perf_counter()
        loss = gpipe_step(runner, s, reduce_loss=False)  # no extra collective inside the timed region
        _sync(runner.dev)
        dt = time.perf_counter() - t0
        if s >= warmup:
            times.append(dt)
        losses.append(loss)
    if runner.last:
        losses = [reduce_stage_loss(runner, x) for x in losses]
    return {"iter_s": times, "losses": losses}
