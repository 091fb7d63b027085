"""The learning dynamics the write-up reports, with the placer's defaults (the 2018 authors' code's values).

The write-up (4 x T4, 40 nodes, moving-average baseline, lr 1e-3, K = 8): all 8 samples identical by update 16;
leave-one-out at the same learning rate collapses faster, within about 5 updates. These tests run the 40-node
game on the noisy simulator (profile 4xT4-pcie) for four random seeds.
"""

from dataclasses import replace

import numpy as np
import pytest
import torch

from lib.placement.collapse_study import collapse_update, read_study, summary
from lib.placement.experiment import EnvSpec, make_env
from lib.placement.placer import Placer, PlacerInputs
from lib.placement.reinforce import TrainConfig

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SEEDS = (0, 1, 2, 3)
LIMIT = 30  # the bound (the write-up: 16)


def dates(**changes):
    torch.set_num_threads(1)  # a module-scoped fixture runs before the per-test one_torch_thread fixture
    out = []
    for s in SEEDS:
        env = make_env(EnvSpec(noise=True, env_seed=s))
        out.append(collapse_update(env, env.graph, replace(TrainConfig(), seed=s, **changes), LIMIT + 1))
    return out


@pytest.fixture(scope="module")
def moving_average():
    return dates()


def test_moving_average_collapses_by_update_30_on_three_of_four_seeds(moving_average):
    assert sum(d is not None and d <= LIMIT for d in moving_average) >= 3, moving_average


def test_leave_one_out_collapses_no_later_than_the_moving_average(moving_average):
    loo = dates(baseline="leave_one_out")
    cap = LIMIT + 1
    ma = np.median([cap if d is None else d for d in moving_average])
    assert np.median([cap if d is None else d for d in loo]) <= ma, (loo, moving_average)


def test_glorot_init_is_the_2018_codes():
    class G:  # a 3-node chain
        name = "toy"
        nodes = tuple(type("N", (), dict(index=i, name=f"n{i}", op="mlp", out_shape=(2, 4), inputs=(i - 1,) if i
                                         else ()))() for i in range(3))
    inputs = PlacerInputs.from_graph(G)
    torch.manual_seed(0)
    p = Placer(inputs, 4, hidden=8, init="glorot", forget_bias=1.0)
    h = 8
    assert torch.all(p.decoder.bias_ih[h:2 * h] == 1.0) and torch.all(p.decoder.bias_ih[:h] == 0.0)
    assert torch.all(p.encoder.bias_hh_l0 == 0.0) and torch.all(p.out.bias == 0.0)
    w = p.out.weight  # (4, 16): Glorot bound sqrt(6 / (16 + 4))
    assert w.abs().max() <= np.sqrt(6 / 20) and w.abs().max() > 0.5 * np.sqrt(6 / 20)
    torch.manual_seed(0)
    q = Placer(inputs, 4, hidden=8, init="torch")
    assert q.out.weight.abs().max() <= 1 / np.sqrt(16)  # PyTorch: uniform(+-1/sqrt(fan_in))
    assert not torch.all(q.decoder.bias_ih[h:2 * h] == 1.0)
    with pytest.raises(ValueError, match="init"):
        Placer(inputs, 4, hidden=8, init="xavier")
    with pytest.raises(ValueError, match="temperature"):
        Placer(inputs, 4, hidden=8, temperature=0.0)


def test_temperature_flattens_the_policy():
    class G:
        name = "toy"
        nodes = tuple(type("N", (), dict(index=i, name=f"n{i}", op="mlp", out_shape=(2, 4), inputs=(i - 1,) if i
                                         else ()))() for i in range(5))
    inputs = PlacerInputs.from_graph(G)
    ent = []
    for t in (1.0, 4.0):
        torch.manual_seed(0)
        p = Placer(inputs, 4, hidden=16, temperature=t)
        with torch.no_grad():
            p.out.weight.mul_(50)  # sharp logits
        ent.append(float(p.evaluate(np.zeros((1, 5), dtype=int)).entropy[0].detach()))
    assert ent[1] > ent[0] + 0.5


def test_config_checks_and_old_logs():
    with pytest.raises(ValueError, match="init"):
        TrainConfig(init="he")
    with pytest.raises(ValueError, match="temperature"):
        TrainConfig(temperature=-1.0)
    old = {k: v for k, v in TrainConfig(hidden=64).to_dict().items() if k not in ("init", "temperature")}
    assert TrainConfig.from_dict(old).init == "torch"  # a log from before the choice existed


def test_committed_study_has_every_setting_and_a_summary():
    study = read_study()
    rows = summary(study)
    assert rows[0]["factor"] == "defaults" and len(rows) == len(study["rows"]) >= 8
    for r in rows:
        assert 0 <= r["low"] <= r["median"] <= r["high"] <= study["max_updates"]
        assert 0 <= r["collapsed"] <= r["n"] == len(study["seeds"])
