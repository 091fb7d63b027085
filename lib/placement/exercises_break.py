"""Reference answers to the exercises of chapter 4 ("Then break it"), computed with the library; see
lib/exercises.py. Simulated numbers are from the noiseless simulator (profile named in each) at the chapter's
defaults.
"""

from __future__ import annotations

import math


def _env(preset: str = "49m", profile: str = "4xT4-pcie", **kw):
    from lib.placement.sim_env import SimPlacementEnv

    return SimPlacementEnv(preset, profile, **kw)


def shard1_copy_ms() -> float:
    """ch4.1: one copy of GPU 1's gradient shard over the 4xT4 bus (ms)."""
    from lib.placement.sim_sharded import BYTES_PER_ELEMENT, shards

    env = _env()
    return env.profile.link(0, 1).copy_s(BYTES_PER_ELEMENT * shards(env)[1]) * 1e3


def break_even_bw_gbs() -> float:
    """ch4.2: the link bandwidth (GB/s) at which the 4xT4 sharded phase's copies alone take as long as the
    single-GPU AdamW step: 2 x 4 bytes x (parameters off GPU 0) / AdamW time."""
    from lib.placement.sim_sharded import shards, sharded_step

    env = _env()
    st = sharded_step(env, 0)
    off = sum(shards(env)) - shards(env)[0]
    return 2 * 4 * off / st.single_gpu_optimizer_s / 1e9


def single_163m_fraction() -> float:
    """ch4.3: the 163m single-GPU peak as a fraction of a T4's usable memory."""
    env = _env("163m")
    return env.peak_memory((0,) * env.n_nodes)[0] / env.cap_bytes[0]


def ppo_loss_example() -> float:
    """ch4.4: the clipped loss of a three-sample batch (ratios 1.3, 0.7, 1.05; advantages 1, -1, 2; clip 0.2)."""
    import torch

    from lib.placement.ppo import clipped_loss

    ratio = torch.tensor([1.3, 0.7, 1.05])
    return float(clipped_loss(ratio.log(), torch.zeros(3), torch.tensor([1.0, -1.0, 2.0]), 0.2))


def log10_hierarchical_actions() -> float:
    """ch4.5: log10 of the hierarchical policy's joint choices on the 49m GPT (16 groups, 4 GPUs), over
    log10 of the co-location rule's 4^13 placements: the difference in digits."""
    from lib.graph import colocate

    env = _env()
    n_groups = 16
    joint = env.n_nodes * math.log10(n_groups) + n_groups * math.log10(env.n_devices)
    return joint - len(colocate(env.graph)) * math.log10(env.n_devices)


def fastest_gpu_machine1() -> int:
    """ch4.6: the fastest GPU (smallest speed factor) of simulated machine seed 1."""
    from lib.placement.sim_env import NoiseModel

    env = _env(noise=NoiseModel(), seed=1)
    f = env.device_time_factors
    return int(min(range(len(f)), key=lambda d: f[d]))


ANSWERS = {
    "ch4.1": dict(answer=shard1_copy_ms, what="one gradient-shard copy, 4xT4 bus", unit="ms", rel_tol=0.02,
                  stated=12.3),
    "ch4.2": dict(answer=break_even_bw_gbs, what="the break-even link bandwidth", unit="GB/s", rel_tol=0.05,
                  stated=14.5),
    "ch4.3": dict(answer=single_163m_fraction, what="163m on one T4, share of its memory", rel_tol=0.05,
                  stated=0.61),
    "ch4.4": dict(answer=ppo_loss_example, what="the clipped loss of the batch", rel_tol=1e-3, stated=0.9),
    "ch4.5": dict(answer=log10_hierarchical_actions, what="extra decimal digits of choices", unit="digits",
                  rel_tol=0.01, stated=50),
    "ch4.6": dict(answer=fastest_gpu_machine1, what="machine 1's fastest GPU", rel_tol=0.0, stated=3),
}
