"""REINFORCE: the update's sign, the baselines, top-5 bookkeeping, logs, and exact kill-and-resume."""

import os
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from lib import runlog
from lib.placement.env import Measurement
from lib.placement.reinforce import RunResult, TrainConfig, Trainer, merge_top, train


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def chain_graph(n, name="toy"):
    nodes = tuple(SimpleNamespace(index=i, name=f"n{i}", op=("embedding", "mlp", "add")[i % 3], out_shape=(4, 8),
                                  inputs=() if i == 0 else (i - 1,)) for i in range(n))
    return SimpleNamespace(name=f"{name}-{n}", nodes=nodes)


class ToyEnv:
    """Step time = sum of per-node device costs + a penalty per cross-device edge (+ optional noise)."""

    def __init__(self, n_nodes=6, device_cost_s=(0.05, 0.01, 0.05), cross_s=0.002, noise_s=0.0, seed=0):
        self.n_nodes, self.n_devices = n_nodes, len(device_cost_s)
        self.cost = np.asarray(device_cost_s)
        self.cross_s, self.noise_s = cross_s, noise_s
        self.rng = np.random.default_rng(seed)
        self.calls = 0

    def measure(self, placement):
        self.calls += 1
        p = np.asarray(placement)
        t = self.cost[p].sum() + self.cross_s * np.count_nonzero(p[1:] != p[:-1])
        if self.noise_s:
            t += abs(self.rng.normal(0, self.noise_s))
        return Measurement(step_s=float(t), oom=False, peak_mem_bytes=(0,) * self.n_devices, source="toy")

    def describe(self):
        return f"toy env {self.cost.tolist()}"


def test_policy_learns_the_fast_device():
    env, g = ToyEnv(6), chain_graph(6)
    cfg = TrainConfig(n_iters=60, k=8, lr=3e-2, hidden=16, seed=0)
    res = train(env, g, cfg, progress=False)
    first = np.mean(res.records[0]["step_s"])
    last = np.mean([np.mean(r["step_s"]) for r in res.records[-5:]])
    assert last < first * 0.6
    assert sum(d == 1 for d in res.favourite) >= 5  # device 1 is five times cheaper
    assert res.top[0][0] == (1,) * 6


def test_update_direction_raises_cheaper_samples():
    """One update with the leave-one-out baseline: log-prob of below-baseline samples goes up."""
    env, g = ToyEnv(4), chain_graph(4)
    tr = Trainer(env, g, TrainConfig(k=8, lr=1e-2, baseline="leave_one_out", hidden=8, grad_clip=None))
    gen_state = tr.gen.get_state()
    s = tr.placer.sample(8, tr.gen)
    tr.gen.set_state(gen_state)  # step() will draw the same samples
    before = s.log_prob.detach()
    rec = tr.step()
    assert rec["placements"] == s.actions.tolist()
    after = tr.placer.evaluate(s.actions).log_prob.detach()
    adv = np.array(rec["costs"]) - np.array(rec["baseline"])
    delta = (after - before).numpy()
    best, worst = int(np.argmin(adv)), int(np.argmax(adv))
    assert delta[best] > 0 > delta[worst]
    assert np.corrcoef(adv, delta)[0, 1] < 0


def test_baselines():
    env, g = ToyEnv(3), chain_graph(3)
    tr = Trainer(env, g, TrainConfig(k=4, baseline_decay=0.9))
    c = np.array([1.0, 2.0, 3.0, 6.0])
    assert np.allclose(tr.baselines(c), 3.0)  # first batch: its own mean
    assert tr.baseline == pytest.approx(3.0)
    assert np.allclose(tr.baselines(c + 1), 3.0)  # the value before folding the batch in
    assert tr.baseline == pytest.approx(0.9 * 3 + 0.1 * 4)
    loo = Trainer(env, g, TrainConfig(k=4, baseline="leave_one_out"))
    assert np.allclose(loo.baselines(c), [(12 - x) / 3 for x in c])


def test_costs_are_sqrt_step_time_and_top_is_distinct_and_sorted():
    env, g = ToyEnv(5, noise_s=0.003), chain_graph(5)
    res = train(env, g, TrainConfig(n_iters=5, k=8, top_n=5, hidden=8), progress=False)
    for r in res.records:
        assert np.allclose(r["costs"], np.sqrt(r["step_s"]))
    times = [s for _, s in res.top]
    assert times == sorted(times) and len({p for p, _ in res.top}) == len(res.top) == 5
    seen = {}
    for r in res.records:
        for p, s in zip(r["placements"], r["step_s"]):
            seen[tuple(p)] = min(s, seen.get(tuple(p), np.inf))
    brute = sorted(seen.values())[:5]
    assert np.allclose(times, brute)


def test_merge_top_keeps_fastest_timing_per_placement():
    top = merge_top([], [[0, 0], [1, 1], [0, 0]], [0.3, 0.2, 0.1], 5)
    assert top == [([0, 0], 0.1), ([1, 1], 0.2)]


def test_stop_when_identical():
    env, g = ToyEnv(3, device_cost_s=(1.0, 0.01)), chain_graph(3)
    cfg = TrainConfig(n_iters=400, k=4, lr=0.1, hidden=8, stop_when_identical=True)
    res = train(env, g, cfg, progress=False)
    assert res.stopped_early and res.records[-1]["identical"] and len(res.records) < 400
    assert all(not r["identical"] for r in res.records[:-1])


def test_nodes_and_groups():
    env, g = ToyEnv(6), chain_graph(6)
    res = train(env, g, TrainConfig(n_iters=2, k=3, hidden=8), groups=((0, 1), (2, 3, 4), (5,)), progress=False)
    for r in res.records:
        for p in r["placements"]:
            assert p[0] == p[1] and p[2] == p[3] == p[4]


class Kill(Exception):
    pass


def _kill_after_3(rec):
    """A callback that kills a run once its third update is logged."""
    if rec["update"] == 2:
        raise Kill


@pytest.mark.parametrize("baseline", ["moving_average", "leave_one_out"])
def test_kill_and_resume_gives_identical_logs(tmp_path, baseline):
    g = chain_graph(6)
    cfg = TrainConfig(n_iters=6, k=4, hidden=8, baseline=baseline, entropy=0.01, seed=3)
    full = str(tmp_path / "full.jsonl")
    train(ToyEnv(6, noise_s=0.004, seed=5), g, cfg, log_path=full, progress=False)

    part = str(tmp_path / "part.jsonl")

    with pytest.raises(Kill):
        train(ToyEnv(6, noise_s=0.004, seed=5), g, cfg, log_path=part, progress=False, callback=_kill_after_3)
    assert len(runlog.read(part)[1]) == 3
    # a fresh process: a new environment object whose RNG has to come back from the checkpoint
    train(ToyEnv(6, noise_s=0.004, seed=99), g, cfg, log_path=part, progress=False)
    h1, r1 = runlog.read(full)
    h2, r2 = runlog.read(part)
    assert r1 == r2 and len(r1) == 6
    assert h1["config"] == h2["config"]
    assert RunResult.from_log(part).top == RunResult.from_log(full).top


def test_resume_after_crash_between_record_and_checkpoint(tmp_path):
    """A record written but not checkpointed is dropped and redone; a half-written line is ignored."""
    g, cfg = chain_graph(5), TrainConfig(n_iters=4, k=3, hidden=8, seed=1)
    full = str(tmp_path / "full.jsonl")
    train(ToyEnv(5, noise_s=0.002), g, cfg, log_path=full, progress=False)
    part = str(tmp_path / "part.jsonl")
    train(ToyEnv(5, noise_s=0.002), g, TrainConfig(**{**cfg.to_dict(), "n_iters": 2}), log_path=part,
          progress=False)
    header, recs = runlog.read(part)
    # simulate: update 2's record reached the log (the checkpoint did not), then a half line
    with open(part, "a") as f:
        f.write('{"kind": "update", "update": 2, "bogus": 1}\n{"kind": "upd')
    train(ToyEnv(5, noise_s=0.002), g, cfg, log_path=part, progress=False)
    assert runlog.read(part)[1] == runlog.read(full)[1]


def test_resume_refuses_another_model_or_config(tmp_path):
    path = str(tmp_path / "run.jsonl")
    train(ToyEnv(4), chain_graph(4), TrainConfig(n_iters=1, k=2, hidden=8), log_path=path, progress=False)
    with pytest.raises(ValueError, match="another model"):
        train(ToyEnv(4), chain_graph(4, name="other"), TrainConfig(n_iters=2, k=2, hidden=8), log_path=path,
              progress=False)
    with pytest.raises(ValueError, match="another config.*lr"):
        train(ToyEnv(4), chain_graph(4), TrainConfig(n_iters=2, k=2, hidden=8, lr=0.5), log_path=path,
              progress=False)
    os.unlink(path + ".ckpt.pt")
    with pytest.raises(ValueError, match="no checkpoint"):
        train(ToyEnv(4), chain_graph(4), TrainConfig(n_iters=2, k=2, hidden=8), log_path=path, progress=False)


def test_bad_config():
    with pytest.raises(ValueError, match="leave-one-out.*k >= 2"):
        TrainConfig(k=1, baseline="leave_one_out")
    with pytest.raises(ValueError, match="baseline must be one of"):
        TrainConfig(baseline="ema")
    with pytest.raises(ValueError, match="unknown TrainConfig keys"):
        TrainConfig.from_dict({"k": 8, "lr_decay": 0.9})
    with pytest.raises(ValueError, match="graph has 3 nodes"):
        Trainer(ToyEnv(4), chain_graph(3), TrainConfig())


def test_measurement_cache_only_when_asked():
    env, g = ToyEnv(3, device_cost_s=(1.0, 0.01)), chain_graph(3)
    train(env, g, TrainConfig(n_iters=30, k=8, lr=0.1, hidden=8, cache_measurements=True), progress=False)
    assert env.calls < 30 * 8
    env2 = ToyEnv(3, device_cost_s=(1.0, 0.01))
    train(env2, g, TrainConfig(n_iters=3, k=8, hidden=8), progress=False)
    assert env2.calls == 24


def test_kill_and_resume_on_the_noisy_simulator(tmp_path):
    """The simulator's noise generator is checkpointed too, so a resumed noisy run matches an unbroken one."""
    from lib.gpt import gpt_graph, preset
    from lib.graph import colocate
    from lib.placement.sim_env import NoiseModel, SimPlacementEnv

    g = gpt_graph(preset("ci"))
    groups = colocate(g)
    make = lambda: SimPlacementEnv(g, "4xT4-pcie", noise=NoiseModel(), seed=4)  # noqa: E731
    cfg = TrainConfig(n_iters=4, k=4, hidden=8, baseline="leave_one_out")
    full, part = str(tmp_path / "full.jsonl"), str(tmp_path / "part.jsonl")
    train(make(), g, cfg, groups=groups, log_path=full, progress=False)
    train(make(), g, TrainConfig(**{**cfg.to_dict(), "n_iters": 2}), groups=groups, log_path=part, progress=False)
    train(make(), g, cfg, groups=groups, log_path=part, progress=False)
    assert runlog.read(part)[1] == runlog.read(full)[1]
    assert any(len(set(r["step_s"])) > 1 for r in runlog.read(full)[1])


def test_resuming_with_fewer_updates_leaves_the_log_alone(tmp_path):
    path = str(tmp_path / "run.jsonl")
    g = chain_graph(4)
    train(ToyEnv(4), g, TrainConfig(n_iters=4, k=2, hidden=8), log_path=path, progress=False)
    with open(path) as f:
        before = f.read()
    res = train(ToyEnv(4), g, TrainConfig(n_iters=2, k=2, hidden=8), log_path=path, progress=False)
    with open(path) as f:
        assert f.read() == before
    assert res.n_updates == 4


def test_the_parts_live_in_their_own_modules_and_are_re_exported():
    from lib.placement import reinforce, reinforce_baselines, reinforce_checkpoint, reinforce_run

    for name in reinforce.__all__:
        assert hasattr(reinforce, name), name
    assert reinforce.TrainConfig is reinforce_run.TrainConfig
    assert reinforce.checkpoint_path is reinforce_checkpoint.checkpoint_path
    assert reinforce.BASELINES == reinforce_baselines.BASELINES == ("moving_average", "leave_one_out")


def test_baseline_functions():
    from lib.placement.reinforce_baselines import costs_of, leave_one_out, moving_average

    c = np.array([1.0, 2.0, 3.0, 6.0])
    assert np.allclose(costs_of([4.0, 9.0]), [2.0, 3.0])
    b, avg = moving_average(c, None, 0.9)
    assert np.allclose(b, 3.0) and avg == pytest.approx(3.0)
    b, avg = moving_average(c, 0.0, 0.5)  # a previous average of 0 is a value, not "no history"
    assert np.allclose(b, 0.0) and avg == pytest.approx(1.5)
    assert np.allclose(leave_one_out(c), [11 / 3, 10 / 3, 3.0, 2.0])
    with pytest.raises(ValueError, match="at least 2 samples"):
        leave_one_out(c[:1])


def test_checkpoints_every_interval_and_a_kill_redoes_what_came_after(tmp_path):
    """Inside run() the checkpoint is written at most every checkpoint_every_s (here: only after the first update,
    then at the end); a run killed after three updates resumes from update 1, redoes 2 and 3, and ends with the
    uninterrupted run's log."""
    import torch as _torch

    from lib.placement.reinforce import checkpoint_path

    g, cfg = chain_graph(6), TrainConfig(n_iters=6, k=4, hidden=8, seed=4)
    full = str(tmp_path / "full.jsonl")
    train(ToyEnv(6, noise_s=0.004, seed=5), g, cfg, log_path=full, progress=False)
    part = str(tmp_path / "part.jsonl")

    t = Trainer(ToyEnv(6, noise_s=0.004, seed=5), g, cfg, log_path=part, checkpoint_every_s=1e9)
    with pytest.raises(Kill):
        t.run(progress=False, callback=_kill_after_3)
    assert len(runlog.read(part)[1]) == 3
    assert _torch.load(checkpoint_path(part), weights_only=False)["n_updates"] == 1  # no save after a kill
    done = Trainer(ToyEnv(6, noise_s=0.004, seed=99), g, cfg, log_path=part, checkpoint_every_s=1e9)
    assert len(done.records) == 1  # the log was cut back to its checkpoint
    done.run(progress=False)
    assert runlog.read(part)[1] == runlog.read(full)[1]
    assert _torch.load(checkpoint_path(part), weights_only=False)["n_updates"] == 6  # saved at the end
    with pytest.raises(ValueError, match="checkpoint_every_s"):
        Trainer(ToyEnv(6), g, cfg, checkpoint_every_s=-1)
