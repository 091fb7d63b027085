"""PPO's clipped objective for the placer (Schulman et al. 2017), written for *costs*, not rewards.

REINFORCE (``reinforce.py``) takes one gradient step per batch of K sampled placements. PPO reuses the batch:
``epochs`` steps on the same K placements, each re-scoring them under the current placer (``Placer.evaluate``)
and weighting by the probability ratio r_k = π(P_k) / π_old(P_k), clipped to [1 - ε, 1 + ε] so that no step
moves the policy far from the one that sampled them. With advantages A_k = c_k - b_k (a cost above its baseline
is *bad*), the loss to minimise is the pessimistic one,

    L = (1/K) Σ_k max(r_k A_k, clip(r_k, 1 - ε, 1 + ε) A_k)  -  β (1/K) Σ_k H_k,

the mirror image of PPO's ``min`` for rewards. At r = 1 (the first epoch) its gradient is REINFORCE's.
Used in: Part I, chapter 4 ("Then break it").
"""

from __future__ import annotations

import math

import torch


def check_ppo(epochs: int, clip: float) -> None:
    """One-line errors for PPO's two settings."""
    if isinstance(epochs, bool) or not isinstance(epochs, int) or not 1 <= epochs <= 100:
        raise ValueError(f"ppo_epochs {epochs!r}: must be an integer in [1, 100] (epochs over each batch)")
    if isinstance(clip, bool) or not isinstance(clip, (int, float)) or not math.isfinite(clip) or not 0 < clip < 1:
        raise ValueError(f"ppo_clip {clip!r}: must be a number in (0, 1) (the ratio's clip range, e.g. 0.2)")


def clipped_loss(log_prob: torch.Tensor, old_log_prob: torch.Tensor, adv: torch.Tensor, clip: float) -> torch.Tensor:
    """The mean pessimistic clipped surrogate for costs (see the module doc); differentiable in ``log_prob``."""
    ratio = torch.exp(log_prob - old_log_prob.detach())
    adv = adv.detach()
    return torch.maximum(ratio * adv, torch.clamp(ratio, 1.0 - clip, 1.0 + clip) * adv).mean()


def clip_fraction(log_prob: torch.Tensor, old_log_prob: torch.Tensor, clip: float) -> float:
    """The share of samples whose ratio is outside the clip range (a diagnostic logged per update)."""
    ratio = torch.exp(log_prob.detach() - old_log_prob.detach())
    return float(((ratio < 1.0 - clip) | (ratio > 1.0 + clip)).float().mean())
