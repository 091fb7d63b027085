"""Relabelling GPUs: every side chooses its GPUs on the machine where it is judged; the optimum over
contiguous group placements."""

import math
from types import SimpleNamespace

import numpy as np
import pytest

from lib.graph import colocate
from lib.placement import relabel
from lib.placement.evaluate import head_to_head, rank_devices, seed_sides
from lib.placement.optimum import contiguous_group_placements, count_contiguous, optimum
from lib.placement.sim_env import NoiseModel, SimPlacementEnv


def test_relabellings_are_distinct_and_counted():
    assert len(relabel.relabellings((2, 2, 2), 4)) == 4
    assert len(relabel.relabellings((0, 1, 1, 0), 4)) == 12
    two = relabel.relabellings((0, 1, 2, 2), 4)
    assert len(two) == 24 and two[0] == ((0, 1, 2, 3), (0, 1, 2, 2))  # as labelled comes first
    assert len({q for _, q in two}) == 24
    with pytest.raises(ValueError, match="outside 0..3"):
        relabel.relabellings((0, 4), 4)


def test_labels_round_trip_and_dedupe_across_candidates():
    name = relabel.label("top1", (2, 0, 1, 3))
    assert name == "top1 (GPUs 0123→2013)" and relabel.base_label(name) == "top1"
    assert relabel.label("top1", (0, 1, 2, 3)) == "top1"
    # top2 is a relabelling of top1: it adds nothing new
    out = relabel.relabelled([("top1", (0, 0, 1)), ("top2", (1, 1, 0))], 4)
    assert len(out) == 12 and all(relabel.base_label(n) == "top1" for n, _ in out)


def test_contiguous_count_matches_closed_form():
    assert count_contiguous(13, 4) == 7012
    for n, d in ((1, 4), (3, 2), (5, 4), (6, 3)):
        ps = contiguous_group_placements(n, d)
        assert len(ps) == len(set(ps)) == count_contiguous(n, d)
        for p in ps:  # each GPU's groups are one contiguous run
            for g in set(p):
                idx = [i for i, x in enumerate(p) if x == g]
                assert idx == list(range(idx[0], idx[-1] + 1))


def machine(seed=3, cap=None):
    """Four GPUs of different speeds and no timing noise: a deterministic judged machine."""
    quiet = NoiseModel(single_device_sd_s=0.0, multi_device_sd_s=0.0, device_speed_sd=0.02)
    return SimPlacementEnv("ci", "4xT4-pcie", noise=quiet, seed=seed, mem_cap=cap)


def test_optimum_is_no_slower_than_every_hand_placement():
    env = machine()
    groups = colocate(env.graph)
    opt = optimum(env, groups)
    assert opt.n_timed == count_contiguous(len(groups), 4) and opt.n_oom == 0
    singles = [env.noiseless_s((d,) * env.n_nodes) for d in range(4)]
    assert opt.step_s <= min(singles) and opt.polished_s <= opt.step_s
    assert env.noiseless_s(opt.placement) == opt.step_s


def run_on(placements):
    """A stand-in for a training run: its candidates are given placements."""
    return SimpleNamespace(candidates=lambda: [(f"top{i + 1}", tuple(p)) for i, p in enumerate(placements)])


def picks(env, run, relabel_on, seed=0):
    rng = np.random.default_rng(seed)
    order = rank_devices(env, 2, 2, rng) if relabel_on else None
    sides, fixed = seed_sides(run, env.graph, env.n_devices, gpu_order=order)
    return head_to_head(env, sides, fixed, rounds_select=2, rounds_confirm=2, steps_per_round=2, rng=rng)


def test_relabelled_rl_pick_is_never_slower_noiselessly():
    env = machine()
    slowest = max(range(4), key=lambda d: env.device_time_factors[d])
    others = [d for d in range(4) if d != slowest]
    n = env.n_nodes
    cands = [(slowest,) * n, (others[0],) * 2 + (slowest,) * (n - 2), (others[1],) + (slowest,) * (n - 1)]
    for seed in range(3):
        as_labelled = picks(env, run_on(cands), False, seed).entry("rl")
        relabelled = picks(env, run_on(cands), True, seed).entry("rl")
        assert relabelled.noiseless_s <= as_labelled.noiseless_s
        assert relabelled.noiseless_s < env.noiseless_s(cands[0])  # off the slowest GPU
        assert math.isclose(relabelled.mean_s, relabelled.noiseless_s, rel_tol=1e-9)  # no timing noise


def test_relabelling_changes_the_verdict():
    """A run that learned "everything on one GPU" on a machine where that GPU was fast loses to the single-GPU
    side elsewhere as labelled, and ties with it relabelled (it is then the same placement)."""
    env = machine()
    slowest = max(range(4), key=lambda d: env.device_time_factors[d])
    run = run_on([(slowest,) * env.n_nodes])
    before, after = picks(env, run, False), picks(env, run, True)
    assert before.gap_s < 0 and before.noiseless_gap_s < 0
    assert after.entry("rl").placement == after.entry("single_gpu").placement
    assert after.noiseless_gap_s >= 0 and after.noiseless_margin_s == 0.0  # the same placement as one GPU
    assert before.noiseless_margin_s < 0


def test_rank_devices_orders_the_gpus_by_speed():
    env = machine()
    order = rank_devices(env, 1, 1, np.random.default_rng(0))
    assert list(order) == sorted(range(4), key=lambda d: env.device_time_factors[d])


def test_by_speed_puts_the_busiest_gpu_on_the_fastest():
    env = machine()
    g, n = env.graph, env.n_nodes
    p = (2,) + (1,) * (n - 1)  # GPU 1 does nearly everything, GPU 2 the embedding
    perm = relabel.speed_perm(p, (3, 0, 2, 1), g)
    assert perm[1] == 3 and perm[2] == 0 and sorted(perm) == [0, 1, 2, 3]
    (name, q), = relabel.by_speed([("top1", p)], (3, 0, 2, 1), g)
    assert q == (0,) + (3,) * (n - 1) and name == "top1 (GPUs 12→30)" and relabel.base_label(name) == "top1"
    with pytest.raises(ValueError, match="permutation"):
        relabel.speed_perm(p, (0, 0, 1, 2), g)


def test_by_speed_is_close_to_the_best_relabelling_of_every_hand_placement():
    """The rule is no search, but on a machine whose GPUs differ only in speed it comes within 0.5% of the
    best of all relabellings, noiselessly, for every hand-made placement."""
    from lib.placement import baselines as bl

    env = machine()
    order = rank_devices(env, 1, 1, np.random.default_rng(0))
    for name, p in bl.human_two_gpu(env.graph, 4) + bl.fixed_baselines(env.graph, 4):
        (_, q), = relabel.by_speed([(name, p)], order, env.graph)
        best = min(env.noiseless_s(r) for _, r in relabel.relabellings(p, 4))
        assert env.noiseless_s(q) <= 1.005 * best, name


def test_every_side_chooses_its_gpus_by_the_same_rule():
    env = machine()
    order = (3, 1, 0, 2)
    sides, fixed = seed_sides(run_on([(0,) * env.n_nodes]), env.graph, env.n_devices, gpu_order=order)
    assert sides["rl"] == [("top1 (GPUs 0→3)", (3,) * env.n_nodes)]
    assert len(sides["single_gpu"]) == 4  # the single-GPU side still chooses among all four
    assert len(sides["human_2gpu"]) == 1  # the write-up's three pairs are one split on the two fastest GPUs
    assert set(sides["human_2gpu"][0][1]) == {3, 1}
    assert sides["human_2gpu"][0][0] == "human 2-GPU split on 1,3"  # the head's half is the busier
    for _, p in fixed:  # the busiest GPU of every fixed placement is the fastest
        work = relabel.device_work(p, env.graph)
        assert max(work, key=work.get) == 3
    old_sides, old_fixed = seed_sides(run_on([(0,) * env.n_nodes]), env.graph, env.n_devices)
    assert len(old_sides["human_2gpu"]) == 3 and old_sides["rl"] == [("top1", (0,) * env.n_nodes)]


def test_noiseless_time_is_logged_and_none_out_of_memory():
    env = machine(cap=0.02)
    res = picks(env, run_on([(0,) * env.n_nodes]), True)
    for e in res.entries:
        assert (e.noiseless_s is None) == e.oom
    back = type(res).from_dict(res.to_dict())
    assert [e.noiseless_s for e in back.entries] == [e.noiseless_s for e in res.entries]


def test_trained_best_is_found_through_a_relabelled_label():
    from lib.placement import report as R
    from lib.placement.evaluate import Entry

    run = SimpleNamespace(top=[((0, 0, 1), 0.2), ((1, 1, 1), 0.3)],
                          candidates=lambda: [("top1", (0, 0, 1)), ("top2", (1, 1, 1))])
    moved = Entry("rl", relabel.label("top1", (1, 0, 2, 3)), (1, 1, 0), "pick", (0.25, 0.26), False)
    assert R.trained_best_s(moved, run) == 0.2
    assert R.trained_best_s(Entry("rl", "top9", (3, 3, 3), "pick", (0.3, 0.3), False), run) is None


def test_optimum_table_shows_the_noiseless_numbers():
    from lib.placement import report as R

    env = machine()
    opt = optimum(env, colocate(env.graph))
    res = picks(env, run_on([(0,) * env.n_nodes]), True)
    t = R.optimum_table({"A": res}, {"A": opt})
    assert t.column("optimum (ms)") == [f"{opt.step_s * 1e3:.1f}"]
    assert t.column("optimum's gain") == [f"{opt.range_share:.1%}"] and 0 <= opt.range_share < 0.2
    assert opt.single_s == min(env.noiseless_s((d,) * env.n_nodes) for d in range(4))
