"""Sharded AdamW by hand: the same updated parameters as plain AdamW, with the state split over devices."""

import pytest
import torch

from lib.placement.sharded_adamw import ShardedAdamW, shard_assignment


def test_shard_assignment_balances_largest_first():
    assert shard_assignment([10, 1, 7, 3, 3], 2) == (0, 1, 1, 1, 0)  # loads 13 and 11
    assert shard_assignment([5, 5, 5], 4) == (0, 1, 2)
    assert shard_assignment([], 3) == ()
    with pytest.raises(ValueError, match="n_devices 0"):
        shard_assignment([1], 0)


def test_updated_parameters_equal_plain_adamw_on_cpu_logical_devices():
    torch.manual_seed(0)
    a = torch.nn.Sequential(torch.nn.Embedding(50, 16), torch.nn.Linear(16, 32), torch.nn.ReLU(),
                            torch.nn.Linear(32, 50))
    b = torch.nn.Sequential(torch.nn.Embedding(50, 16), torch.nn.Linear(16, 32), torch.nn.ReLU(),
                            torch.nn.Linear(32, 50))
    b.load_state_dict(a.state_dict())
    plain = torch.optim.AdamW(a.parameters(), lr=1e-2, weight_decay=0.1)
    sharded = ShardedAdamW(b.parameters(), ["cpu"] * 4, lr=1e-2, weight_decay=0.1)
    assert sorted(set(sharded.owners)) == [0, 1, 2, 3]  # every logical device holds a shard
    gen = torch.Generator().manual_seed(1)
    for _ in range(5):
        x = torch.randint(0, 50, (8, 6), generator=gen)
        for model, opt in ((a, plain), (b, sharded)):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x).reshape(-1, 50), x.roll(1, 1).reshape(-1))
            loss.backward()
            opt.step()
    for pa, pb in zip(a.parameters(), b.parameters()):
        assert torch.equal(pa, pb)
    per_device = sharded.state_bytes()
    total = sum(p.numel() * 4 for p in a.parameters())
    assert sum(per_device) == 3 * total  # master copy + two moments, split over the devices
    assert max(per_device) < 3 * total  # no device holds it all


def test_a_parameter_without_gradient_is_left_alone():
    w = torch.nn.Parameter(torch.ones(3))
    v = torch.nn.Parameter(torch.ones(3))
    opt = ShardedAdamW([w, v], ["cpu", "cpu"], lr=0.1)
    (w * 2).sum().backward()
    opt.step()
    assert not torch.equal(w.detach(), torch.ones(3)) and torch.equal(v.detach(), torch.ones(3))


def test_bad_owners_are_refused():
    with pytest.raises(ValueError, match="owners"):
        ShardedAdamW([torch.nn.Parameter(torch.ones(2))], ["cpu"], owners=[1])
