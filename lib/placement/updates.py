"""The trainer's two hooks: which policy it trains (``make_policy``) and how one batch updates it (``update``).

``Trainer`` (``reinforce.py``) is the one training loop of Part I: sample K placements, time them, compute the
costs and baselines, update, log. What varies is chosen by ``TrainConfig``:

- ``policy``: ``"placer"``, the seq2seq placer of chapter 2 (over nodes, or over co-location groups), or
  ``"hierarchical"``, the grouper + placer of Mirhoseini et al. (2018) (``grouper.py``), which learns its own
  ``n_groups`` groups and so takes no fixed co-location rule;
- ``algorithm``: ``"reinforce"``, one gradient step per batch (the update of chapters 2-3, unchanged), or
  ``"ppo"``, ``ppo_epochs`` steps on the same batch, each re-scoring the K placements under the current policy
  and descending the clipped loss of ``ppo.py``. The first PPO epoch uses the sampling pass itself (ratio 1),
  so with one epoch PPO's gradient is REINFORCE's.

The extra fields PPO adds to each run-log record are ``ppo_loss`` (per epoch) and ``clip_fraction`` (the share
of samples outside the clip range, measured before each epoch's step after the first, averaged over them).
Used in: Part I, chapter 4 ("Then break it").
"""

from __future__ import annotations

import torch

from lib.placement.placer import Placer, Samples

ALGORITHMS = ("reinforce", "ppo")
POLICIES = ("placer", "hierarchical")


def make_policy(config, inputs, graph, n_devices: int):
    """The policy the config names (built under the caller's seeded RNG)."""
    kw = dict(hidden=config.hidden, op_embed=config.op_embed, dev_embed=config.dev_embed,
              logit_tanh=config.logit_tanh, init=config.init, temperature=config.temperature)
    if config.policy == "hierarchical":
        from lib.placement.grouper import HierarchicalPlacer

        return HierarchicalPlacer(graph, n_devices, n_groups=config.n_groups, **kw)
    return Placer(inputs, n_devices, kw.pop("hidden"), kw.pop("op_embed"), kw.pop("dev_embed"),
                  kw.pop("logit_tanh"), **kw)


def rescore(policy, items) -> Samples:
    """Log-probabilities and entropies of the latest batch under the policy's current weights."""
    if hasattr(policy, "evaluate_latent"):  # the hierarchical placer: its groups and rows are the actions
        return policy.evaluate_latent(policy.last_groups, policy.last_rows)
    return policy.evaluate(items)


def _descend(trainer, loss: torch.Tensor) -> None:
    trainer.opt.zero_grad()
    loss.backward()
    if trainer.config.grad_clip is not None:
        torch.nn.utils.clip_grad_norm_(trainer.placer.parameters(), trainer.config.grad_clip)
    trainer.opt.step()


def update(trainer, s: Samples, items, adv: torch.Tensor) -> tuple[torch.Tensor, dict]:
    """Update ``trainer.placer`` from one batch; returns the (first) loss and the record's extra fields."""
    cfg = trainer.config
    if cfg.algorithm == "reinforce":
        loss = (adv * s.log_prob).mean() - cfg.entropy * s.entropy.mean()
        _descend(trainer, loss)
        return loss, {}
    from lib.placement.ppo import clip_fraction, clipped_loss

    old = s.log_prob.detach()
    losses, fracs, first = [], [], None
    for epoch in range(cfg.ppo_epochs):
        cur = s if epoch == 0 else rescore(trainer.placer, items)
        if epoch > 0:
            fracs.append(clip_fraction(cur.log_prob, old, cfg.ppo_clip))
        loss = clipped_loss(cur.log_prob, old, adv, cfg.ppo_clip) - cfg.entropy * cur.entropy.mean()
        _descend(trainer, loss)
        first = loss if first is None else first
        losses.append(float(loss.detach()))
    return first, {"ppo_loss": losses, "clip_fraction": sum(fracs) / len(fracs) if fracs else 0.0}
