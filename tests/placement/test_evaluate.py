"""The head-to-head protocol: one pick per side, fresh confirmation timings, honest statistics."""

import math

import numpy as np
import pytest

from lib.placement.env import Measurement
from lib.placement.evaluate import HeadToHead, head_to_head, phase_timing, time_round


class LedgerEnv:
    """Each placement has a true step time; every call returns true time + noise and is written to a ledger."""

    def __init__(self, true_s: dict, n_nodes=4, n_devices=4, noise_s=0.001, samples=5, seed=0, oom=()):
        self.true_s, self.n_nodes, self.n_devices = true_s, n_nodes, n_devices
        self.noise_s, self.samples, self.oom = noise_s, samples, set(oom)
        self.rng = np.random.default_rng(seed)
        self.ledger = []  # (call index, placement, samples)

    def measure(self, placement):
        p = tuple(placement)
        if p in self.oom:
            self.ledger.append((len(self.ledger), p, ()))
            return Measurement.out_of_memory(self.n_devices, "ledger")
        base = self.true_s.get(p, 1.0)
        xs = tuple(float(base + self.noise_s * self.rng.standard_normal()) for _ in range(self.samples))
        self.ledger.append((len(self.ledger), p, xs))
        phases = {"forward": base * 0.3, "backward": base * 0.6, "optimizer": base * 0.1}
        return Measurement(step_s=float(np.median(xs)), oom=False, peak_mem_bytes=(0,) * self.n_devices,
                           phase_s=phases, source="ledger", samples_s=xs)

    def describe(self):
        return "ledger env"


RL = [("top1", (0, 1, 1, 2)), ("top2", (0, 1, 1, 1)), ("favourite", (1, 1, 2, 2))]
HUMAN = [("pair01", (0, 0, 1, 1)), ("pair23", (2, 2, 3, 3)), ("pair02", (0, 0, 2, 2))]
FIXED = [("4-way", (0, 1, 2, 3))]


def setup(seed=0, **kw):
    true = {p: 0.2 + 0.01 * i for i, (_, p) in enumerate(RL + HUMAN + FIXED)}
    true.update({(d,) * 4: 0.25 + 0.001 * d for d in range(4)})
    true[(0, 1, 1, 1)] = 0.15  # the RL side's best is its second candidate
    true[(2, 2, 3, 3)] = 0.18
    env = LedgerEnv(true, seed=seed, **kw)
    sides = {"rl": RL, "single_gpu": [(f"gpu{d}", (d,) * 4) for d in range(4)], "human_2gpu": HUMAN}
    return env, sides


def test_one_pick_per_side_and_the_right_ones():
    env, sides = setup()
    res = head_to_head(env, sides, FIXED, rng=np.random.default_rng(0))
    picks = [e for e in res.entries if e.role == "pick"]
    assert sorted(e.side for e in picks) == ["human_2gpu", "rl", "single_gpu"]
    assert res.entry("rl").label == "top2" and res.entry("human_2gpu").label == "pair23"
    assert res.entry("single_gpu").label == "gpu0"
    assert [e.label for e in res.entries if e.role == "fixed"] == ["4-way"]
    assert res.winner.label == "top2" and res.best_other.label == "pair23"
    assert len(res.selection) == 3 + 4 + 3 and all(len(s.round_s) == 4 for s in res.selection)


def test_confirmation_never_reuses_selection_timings():
    env, sides = setup(samples=5)
    res = head_to_head(env, sides, FIXED, rounds_select=4, rounds_confirm=8, steps_per_round=10,
                       rng=np.random.default_rng(1))
    n_cands = sum(len(v) for v in sides.values())
    calls_per_round = 2  # 10 timed steps from measurements of 5 samples each
    n_select_calls = 4 * n_cands * calls_per_round
    assert len(env.ledger) == n_select_calls + 8 * 4 * calls_per_round
    confirm_calls = env.ledger[n_select_calls:]
    for e in res.entries:
        mine = [xs for _, p, xs in confirm_calls if p == e.placement]
        assert len(mine) == 8 * calls_per_round
        expect = [np.mean(mine[2 * r] + mine[2 * r + 1]) for r in range(8)]
        assert np.allclose(e.confirm_s, expect)
    # and the selection timings are the mean of exactly the first 4*... calls for each candidate
    for s in res.selection:
        mine = [xs for _, p, xs in env.ledger[:n_select_calls] if p == s.placement]
        assert np.allclose(s.round_s, [np.mean(mine[2 * r] + mine[2 * r + 1]) for r in range(4)])


def test_statistics_and_gap():
    env, sides = setup(noise_s=0.004)
    res = head_to_head(env, sides, FIXED, rng=np.random.default_rng(2))
    e = res.entry("rl")
    xs = np.array(e.confirm_s)
    assert e.mean_s == pytest.approx(xs.mean()) and e.std_s == pytest.approx(xs.std(ddof=1))
    assert e.sem_s == pytest.approx(xs.std(ddof=1) / math.sqrt(8))
    o = res.best_other
    assert res.gap_se == pytest.approx((o.mean_s - e.mean_s) / math.hypot(e.sem_s, o.sem_s))
    assert res.gap_se > 5
    back = HeadToHead.from_dict(res.to_dict())
    assert back == res and "standard errors" in res._repr_html_()
    assert res.verdict().startswith("RL wins") and f"{res.gap_se:.1f} standard errors" in res.verdict()
    assert res.verdict(min_se=res.gap_se + 1).startswith("no clear winner")
    assert HeadToHead(res.entries, res.selection, 4, 8, 10, "x", rl_side="single_gpu").verdict().startswith("RL loses")


def test_shuffled_order_is_seeded_and_oom_is_charged():
    env1, sides = setup(oom=[(0, 1, 1, 2)])
    r1 = head_to_head(env1, sides, FIXED, rng=np.random.default_rng(5))
    env2, _ = setup(oom=[(0, 1, 1, 2)])
    r2 = head_to_head(env2, sides, FIXED, rng=np.random.default_rng(5))
    assert r1 == r2
    env3, _ = setup(oom=[(0, 1, 1, 2)])
    head_to_head(env3, sides, FIXED, rng=np.random.default_rng(6))
    assert [p for _, p, _ in env1.ledger] != [p for _, p, _ in env3.ledger]
    sel = {s.label: s for s in r1.selection}
    assert sel["top1"].oom and sel["top1"].round_s == (10.0,) * 4


def test_time_round_pools_samples():
    env, _ = setup(samples=3)
    t, oom = time_round(env, (0, 0, 0, 0), 7)  # needs 3 calls
    assert not oom and len(env.ledger) == 3
    assert t == pytest.approx(np.mean([x for _, _, xs in env.ledger for x in xs][:7]))


def test_phase_timing():
    env, _ = setup()
    pt = phase_timing(env, [("best GPU", (0,) * 4), ("winner", (0, 1, 1, 1))], n_steps=3)
    assert pt.phase_s[1]["optimizer"] == pytest.approx(0.015)
    assert "forward" in pt._repr_html_()


def test_bad_input():
    env, sides = setup()
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="empty candidate list"):
        head_to_head(env, {**sides, "human_2gpu": []}, rng=rng)
    with pytest.raises(ValueError, match="rng"):
        head_to_head(env, sides)
    with pytest.raises(ValueError, match="rl_side"):
        head_to_head(env, {"single_gpu": sides["single_gpu"]}, rng=rng)
    with pytest.raises(ValueError, match="placement has 3 entries"):
        head_to_head(env, {"rl": [("x", (0, 1, 1))]}, rng=rng)
    with pytest.raises(ValueError, match="empty"):
        phase_timing(env, [])
