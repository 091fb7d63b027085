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
        steps = jittered_steps(st.step_s, tuple(range(self.n_devices)), self.base.noise, self.base.rng,
                               self.base.noise_scale)
        step = float(np.median(steps))
        phases = {k: v * step / st.step_s for k, v in phases.items()}
        return Measurement(step, False, peaks, phases, self.source, tuple(float(x) for x in steps))

    def noiseless_s(self, placement: Sequence[int]) -> float | None:
        """As :meth:`SimPlacementEnv.noiseless_s`, a single-GPU placement with its AdamW sharded."""
        p = validate_placement(placement, self.n_nodes, self.n_devices)
        if len(set(p)) > 1:
            return self.base.noiseless_s(p)
        if any(pk > cap for pk, cap in zip(sharded_peaks(self.base, p[0]), self.base.cap_bytes)):
            return None
        return float(sharded_step(self.base, p[0]).step_s)

    def set_sync_phases(self, flag: bool) -> None:
        self.base.set_sync_phases(flag)

    @property
    def sync_phases(self):
        return self.base.sync_phases

    def describe(self) -> str:
        return self.base.describe() + f"; single-GPU placements with AdamW sharded over all {self.n_devices} GPUs"


def sharded_over_used_step(env, placement: Sequence[int]) -> float:
    """A practitioner's sharded AdamW for a split model (seconds, noiseless): ``placement`` runs forward and
    backward as usual; then the AdamW state of all its parameters is dealt evenly over the GPUs it already uses
    (ZeRO stage 1 within the placement). A GPU holding more than its even share sends the excess gradients to
    GPUs holding less, every GPU updates its share, and the excess parameters come back. Copies follow the
    engine's rule (both streams and the link's channels blocked); each GPU starts when its own backward ends.
    On a single GPU this is the plain step."""
    p = validate_placement(placement, env.n_nodes, env.n_devices)
    eng = env.engine
    trace: list = []
    f, b, s = eng.simulate(p, trace)
    used = sorted(set(p))
    held = [0] * env.n_devices
    for i, d in enumerate(p):
        held[d] += int(eng._params[i])
    if len(used) == 1:
        return s
    free = [0.0] * env.n_devices
    for d in used:  # each GPU's own backward end (its last backward box, or the forward end if it has none)
        ends = [e.end_s for e in trace if e.lane == f"gpu{d}" and e.kind == "backward"]
        free[d] = max(ends) if ends else f
    share = sum(held) / len(used)
    give = {d: held[d] - share for d in used if held[d] > share}
    take = {d: share - held[d] for d in used if held[d] < share}
    flows = []  # (from, to, parameters): greedy, largest surplus to largest deficit
    for a in sorted(give, key=give.get, reverse=True):
        for r in sorted(take, key=take.get, reverse=True):
            n = min(give[a], take[r])
            if n > 0:
                flows.append((a, r, int(round(n))))
                give[a] -= n
                take[r] -= n
    chan = [0.0] * eng._n_channels
    link = lambda a, c: env.profile.link(a, c)
    for a, r, n in flows:  # 1. excess gradients to the GPUs with room
        _copy(free, chan, eng._chans[a][r], a, r, 0.0, link(a, r).copy_s(BYTES_PER_ELEMENT * n))
    for d in used:  # 2. every GPU updates its even share
        free[d] += eng._adam_fixed[d] + share * eng._adam_per_param[d]
    for a, r, n in flows:  # 3. the updated parameters back
        _copy(free, chan, eng._chans[r][a], r, a, 0.0, link(r, a).copy_s(BYTES_PER_ELEMENT * n))
    return max(max(free[d] for d in used), b)
