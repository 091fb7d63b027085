"""Sharded AdamW by hand, in the simulator: the model on one GPU, AdamW's state and update split over all.

The human baseline of chapter 4 (the write-up's closing caveat): keep every node on GPU ``g``, deal the
parameters to all N devices in balanced shards (``sharded_adamw.shard_assignment`` over the nodes' parameter
counts: the simulator knows parameters per node, so a shard is whole nodes, where the real executor deals
tensors), and replace the optimizer phase of the single-GPU step by

1. every gradient shard copied from g to its owner (4 bytes per parameter over the link g -> d),
2. AdamW on each owner over its shard (the engine's per-device AdamW time: fixed part + per parameter),
3. the updated parameters copied back (4 bytes per parameter over d -> g).

Copies follow the engine's rule (``sim_engine._copy``: a copy waits for both streams and every channel of its
link, and blocks them), so the copies out of g run one after another, g updates its own shard after sending,
and the copies back queue on g's stream. Forward and backward are the single-GPU step's, from
``StepEngine.simulate``. Host issue time of the sharded phase is not charged (a few launches).

Memory: g keeps weights and gradients (8 bytes per parameter) plus the moments of its own shard (8 bytes per
parameter of it); every other owner holds its shard's master weights, moments and a gradient buffer (16 bytes
per parameter), times the allocator overhead.

``ShardedOptimizerEnv(env)`` wraps a ``SimPlacementEnv``: every single-GPU placement is measured as the sharded
baseline on that GPU; any other placement as before. So the head-to-head of chapters 2-3 (``evaluate``) runs
it unchanged. Used in: Part I, chapter 4 ("Then break it").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from lib.placement.env import Measurement, validate_placement
from lib.placement.memory import with_overhead
from lib.placement.sharded_adamw import shard_assignment
from lib.placement.sim_engine import _copy
from lib.placement.sim_noise import jittered_steps

BYTES_PER_ELEMENT = 4  # fp32 gradients and parameters


@dataclass(frozen=True)
class ShardedStep:
    """One noiseless sharded-AdamW step with the model on ``owner_gpu`` (seconds; parameters per device)."""

    owner_gpu: int
    forward_s: float
    backward_s: float
    optimizer_s: float  # from the end of backward to the last parameter back on the model's GPU
    shard_params: tuple[int, ...]
    single_gpu_optimizer_s: float  # the unsharded AdamW phase of the same single-GPU step, for comparison

    @property
    def step_s(self) -> float:
        return self.forward_s + self.backward_s + self.optimizer_s


def shards(env, n_devices: int | None = None) -> tuple[int, ...]:
    """Parameters per device when the nodes' parameters are dealt to ``n_devices`` (default: all) owners."""
    n = env.n_devices if n_devices is None else n_devices
    counts = [int(x) for x in env.engine._params]
    owners = shard_assignment(counts, n)
    out = [0] * n
    for c, d in zip(counts, owners):
        out[d] += c
    return tuple(out)


def sharded_step(env, gpu: int) -> ShardedStep:
    """The step time of the sharded baseline with the model on ``gpu`` (see the module doc)."""
    n = env.n_devices
    if isinstance(gpu, bool) or not isinstance(gpu, (int, np.integer)) or not 0 <= gpu < n:
        raise ValueError(f"gpu {gpu!r}: must be a device index in 0..{n - 1}")
    g, eng = int(gpu), env.engine
    f, b, s = eng.simulate((g,) * env.n_nodes)
    P = shards(env)
    links = {(a, c): env.profile.link(a, c) for a in range(n) for c in range(n) if a != c}
    free = [0.0] * n
    free[g] = b
    chan = [0.0] * eng._n_channels
    others = [d for d in range(n) if d != g and P[d]]
    for d in others:  # 1. gradients to their owners
        _copy(free, chan, eng._chans[g][d], g, d, b, links[g, d].copy_s(BYTES_PER_ELEMENT * P[d]))
        free[d] += eng._adam_fixed[d] + P[d] * eng._adam_per_param[d]  # 2. the owner's update
    if P[g]:
        free[g] += eng._adam_fixed[g] + P[g] * eng._adam_per_param[g]
    for d in others:  # 3. parameters back
        _copy(free, chan, eng._chans[d][g], d, g, b, links[d, g].copy_s(BYTES_PER_ELEMENT * P[d]))
    return ShardedStep(g, f, b - f, max(free[g], b) - b, P, s - b)


def sharded_peaks(env, gpu: int) -> tuple[int, ...]:
    """Per-device peak bytes of the sharded baseline with the model on ``gpu`` (see the module doc)."""
    g = int(gpu)
    base = env.memory.peaks((g,) * env.n_nodes)[g]
    P = shards(env)
    total = sum(P)
    moments_off = 2 * BYTES_PER_ELEMENT * (total - P[g])
    out = []
    for d in range(env.n_devices):
        if d == g:
            out.append(int(base - with_overhead(moments_off, env.alloc_overhead)))
        else:
            out.append(with_overhead(4 * BYTES_PER_ELEMENT * P[d], env.alloc_overhead) if P[d] else 0)
    return tuple(out)


class ShardedOptimizerEnv:
    """``env`` with every single-GPU placement measured as the sharded-AdamW baseline on that GPU."""

    def __init__(self, env):
        self.base = env
        self.graph, self.n_nodes, self.n_devices = env.graph, env.n_nodes, env.n_devices
        self.source = env.source

    @property
    def rng(self):
        return self.base.rng

    def measure(self, placement: Sequence[int]) -> Measurement:
        p = validate_placement(placement, self.n_nodes, self.n_devices)
        if len(set(p)) > 1:
            return self.base.measure(p)
        g = p[0]
        peaks = sharded_peaks(self.base, g)
        if any(pk > cap for pk, cap in zip(peaks, self.base.cap_bytes)):
            return Measurement.out_of_memory(self.n_devices, self.source, peaks)
        st = sharded_step(self.base, g)
        phases = {"forward": st.forward_s, "backward": st.backward_s, "optimizer": st.optimizer_s}
        if self.base.noise is None:
            return Measurement(st.step_s, False, peaks, phases, self.source, ())
        # the sharded step spans every device: the multi-device jitter
        steps = jittered_steps(st.step_s, tuple(range(self.n_devices)), self.base.noise, self.base.rng)
        step = float(np.median(steps))
        phases = {k: v * step / st.step_s for k, v in phases.items()}
        return Measurement(step, False, peaks, phases, self.source, tuple(float(x) for x in steps))

    def set_sync_phases(self, flag: bool) -> None:
        self.base.set_sync_phases(flag)

    @property
    def sync_phases(self):
        return self.base.sync_phases

    def describe(self) -> str:
        return self.base.describe() + f"; single-GPU placements with AdamW sharded over all {self.n_devices} GPUs"
