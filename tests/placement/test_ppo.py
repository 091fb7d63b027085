"""PPO's clipped objective, checked against a computation by hand on a fixed batch."""

import math

import pytest
import torch

from lib.placement import ppo


def test_clipped_loss_matches_a_manual_computation():
    old = torch.log(torch.tensor([0.2, 0.5, 0.1, 0.4]))
    new = torch.log(torch.tensor([0.3, 0.45, 0.1, 0.2]))  # ratios 1.5, 0.9, 1.0, 0.5
    adv = torch.tensor([1.0, -2.0, 3.0, -1.0])
    clip = 0.2
    # by hand: max(r A, clip(r) A) per sample
    #   r=1.5, A=1:  max(1.5, 1.2)      = 1.5    (a cost above baseline: the pessimistic side is unclipped)
    #   r=0.9, A=-2: max(-1.8, -1.8)    = -1.8
    #   r=1.0, A=3:  max(3, 3)          = 3
    #   r=0.5, A=-1: max(-0.5, -0.8)    = -0.5   (a cheap sample made rarer: no clip on the pessimistic side)
    want = (1.5 - 1.8 + 3.0 - 0.5) / 4
    assert ppo.clipped_loss(new, old, adv, clip).item() == pytest.approx(want, rel=1e-6)
    assert ppo.clip_fraction(new, old, clip) == pytest.approx(0.5)  # 1.5 and 0.5 are outside [0.8, 1.2]


def test_clipping_stops_the_gradient_where_it_binds():
    old = torch.log(torch.tensor([0.5, 0.5]))
    new = torch.log(torch.tensor([0.75, 0.25])).requires_grad_()  # ratios 1.5 and 0.5
    adv = torch.tensor([-1.0, 1.0])  # sample 0 cheap and made likelier, sample 1 costly and made rarer: both clipped
    ppo.clipped_loss(new, old, adv, 0.2).backward()
    assert new.grad.tolist() == [0.0, 0.0]


def test_at_ratio_one_the_gradient_is_reinforces():
    logp = torch.log(torch.tensor([0.3, 0.6, 0.1])).requires_grad_()
    adv = torch.tensor([0.5, -1.0, 2.0])
    ppo.clipped_loss(logp, logp.detach(), adv, 0.2).backward()
    g_ppo = logp.grad.clone()
    logp.grad = None
    (adv * logp).mean().backward()
    assert torch.allclose(g_ppo, logp.grad)


@pytest.mark.parametrize("epochs, clip, field", [(0, 0.2, "ppo_epochs"), (1.5, 0.2, "ppo_epochs"),
                                                  (True, 0.2, "ppo_epochs"), (4, 0.0, "ppo_clip"),
                                                  (4, 1.0, "ppo_clip"), (4, math.nan, "ppo_clip")])
def test_bad_settings_are_one_line_errors(epochs, clip, field):
    with pytest.raises(ValueError, match=f"^{field} "):
        ppo.check_ppo(epochs, clip)
