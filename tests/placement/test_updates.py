"""The trainer's hooks (updates.py): REINFORCE unchanged, PPO through the Trainer, the hierarchical policy's logs."""

import numpy as np
import pytest
import torch

from lib import runlog
from lib.graph import colocate
from lib.placement.experiment import EnvSpec, make_env
from lib.placement.placer import expand
from lib.placement.reinforce import RunResult, TrainConfig, Trainer
from lib.placement.reinforce_baselines import costs_of

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SMALL = dict(hidden=16, op_embed=4, dev_embed=4)


@pytest.fixture(scope="module")
def env():
    return make_env(EnvSpec(preset="ci"))


def _old_step(t):
    """The update of chapters 2-3 as it was written before the hooks (one REINFORCE step), for comparison."""
    cfg = t.config
    s = t.placer.sample(cfg.k, t.gen)
    items = s.actions.tolist()
    placements = [expand(a, t.groups, t.env.n_nodes) for a in items]
    step_s = np.array([t.env.measure(p).step_s for p in placements])
    costs = costs_of(step_s)
    adv = torch.tensor(costs - t.baselines(costs), dtype=torch.float32)
    loss = (adv * s.log_prob).mean() - cfg.entropy * s.entropy.mean()
    t.opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(t.placer.parameters(), cfg.grad_clip)
    t.opt.step()
    return placements, step_s.tolist(), float(loss.detach())


def test_default_reinforce_is_the_update_of_chapters_2_and_3(env):
    cfg = TrainConfig(n_iters=4, seed=3, **SMALL)
    new, old = Trainer(env, env.graph, cfg, groups=colocate(env.graph)), Trainer(env, env.graph, cfg,
                                                                                  groups=colocate(env.graph))
    for _ in range(4):
        rec = new.step()
        placements, step_s, loss = _old_step(old)
        assert rec["placements"] == [list(p) for p in placements] and rec["step_s"] == step_s
        assert rec["loss"] == loss and "clip_fraction" not in rec
    for a, b in zip(new.placer.parameters(), old.placer.parameters()):
        assert torch.equal(a, b)


def test_config_header_unchanged_at_defaults_and_explicit_otherwise():
    d = TrainConfig().to_dict()
    assert not {"algorithm", "ppo_epochs", "ppo_clip", "policy", "n_groups"} & set(d)
    ppo = TrainConfig(algorithm="ppo").to_dict()
    assert ppo["algorithm"] == "ppo" and ppo["ppo_epochs"] == 4 and ppo["ppo_clip"] == 0.2
    assert TrainConfig.from_dict(ppo) == TrainConfig(algorithm="ppo")
    assert TrainConfig(policy="hierarchical").to_dict()["n_groups"] == 16


@pytest.mark.parametrize("bad, match", [({"algorithm": "a2c"}, "algorithm 'a2c'"),
                                        ({"policy": "tree"}, "policy 'tree'"),
                                        ({"ppo_epochs": 0}, "ppo_epochs 0"), ({"ppo_clip": 1.5}, "ppo_clip 1.5"),
                                        ({"n_groups": 0}, "n_groups 0")])
def test_bad_settings_are_one_line(bad, match):
    with pytest.raises(ValueError, match=match):
        TrainConfig(**bad)


def test_ppo_through_the_trainer_updates_the_placer_and_logs_clip_fraction(env, tmp_path):
    cfg = TrainConfig(n_iters=3, seed=1, algorithm="ppo", ppo_epochs=3, ppo_clip=0.1, lr=1e-2, **SMALL)
    t = Trainer(env, env.graph, cfg, groups=colocate(env.graph), log_path=str(tmp_path / "ppo.jsonl"))
    before = [p.detach().clone() for p in t.placer.parameters()]
    res = t.run(progress=False)
    assert any(not torch.equal(a, b) for a, b in zip(before, t.placer.parameters()))
    _, recs = runlog.read(str(tmp_path / "ppo.jsonl"))
    assert len(recs) == 3
    for r in recs:
        assert len(r["ppo_loss"]) == 3 and 0.0 <= r["clip_fraction"] <= 1.0
    assert any(r["clip_fraction"] > 0 for r in recs)  # lr 1e-2, clip 0.1: the later epochs leave the range
    assert res.config.algorithm == "ppo"


def test_ppo_with_one_epoch_is_reinforce(env):
    base = dict(n_iters=3, seed=2, **SMALL)
    a = Trainer(env, env.graph, TrainConfig(**base), groups=colocate(env.graph))
    b = Trainer(env, env.graph, TrainConfig(algorithm="ppo", ppo_epochs=1, **base), groups=colocate(env.graph))
    for _ in range(3):
        ra, rb = a.step(), b.step()
        assert ra["placements"] == rb["placements"]
    for pa, pb in zip(a.placer.parameters(), b.placer.parameters()):
        assert torch.allclose(pa, pb, atol=1e-6)


@pytest.mark.parametrize("algorithm", ["reinforce", "ppo"])
def test_hierarchical_run_writes_a_normal_run_log(env, tmp_path, algorithm):
    path = str(tmp_path / f"h_{algorithm}.jsonl")
    cfg = TrainConfig(n_iters=3, k=4, seed=0, policy="hierarchical", n_groups=4, algorithm=algorithm, **SMALL)
    t = Trainer(env, env.graph, cfg, log_path=path)
    grouper_before = [p.detach().clone() for p in t.placer.grouper.parameters()]
    t.run(progress=False)
    res = RunResult.from_log(path)
    assert res.n_updates == 3 and res.config.policy == "hierarchical" and res.config.n_groups == 4
    assert all(len(p) == env.n_nodes for p, _ in res.top) and len(res.favourite) == env.n_nodes
    assert res.header["model"]["groups"] is None
    assert any(not torch.equal(a, b) for a, b in zip(grouper_before, t.placer.grouper.parameters()))
    # resumes like any run: a longer run continues the same log
    cfg2 = TrainConfig(**{**cfg.__dict__, "n_iters": 4})
    Trainer(env, env.graph, cfg2, log_path=path).run(progress=False)
    assert RunResult.from_log(path).n_updates == 4


def test_hierarchical_refuses_fixed_groups(env):
    with pytest.raises(ValueError, match="groups: the hierarchical policy"):
        Trainer(env, env.graph, TrainConfig(policy="hierarchical", **SMALL), groups=colocate(env.graph))


def test_evaluate_latent_matches_the_sampled_log_probabilities(env):
    cfg = TrainConfig(policy="hierarchical", n_groups=5, **SMALL)
    t = Trainer(env, env.graph, cfg)
    s = t.placer.sample(3, torch.Generator().manual_seed(0))
    ev = t.placer.evaluate_latent(t.placer.last_groups, t.placer.last_rows)
    assert torch.allclose(ev.log_prob, s.log_prob, atol=1e-5) and torch.equal(ev.actions, s.actions)
