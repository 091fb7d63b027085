"""Tests for lib/galvatron/search/engine.py: DP exactness (brute force), baselines never better, bad input, Plan."""

import dataclasses
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from lib.galvatron.search.profiles import load_model, published_cluster
from lib.galvatron.search.plan import Plan
from lib.galvatron.search.dynamic_program import brute_force, dp_solve, viterbi
from lib.galvatron.search.engine import evaluate_plan, greedy_division, search
from lib.galvatron.search.strategies import SPACES

C8 = published_cluster(8)


@st.composite
def instances(draw):
    L = draw(st.integers(1, 4))
    S = draw(st.integers(1, 4))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    t = rng.random((L, S))
    m = rng.integers(0, 25, (L, S)).astype(float) + rng.random((L, S)) * draw(st.sampled_from([0.0, 0.9]))
    r = rng.random((L, S, S)) * (rng.random((L, S, S)) < 0.6)
    r[0] = 0.0
    budget = draw(st.integers(0, 100))
    return t, m, r, budget


@settings(max_examples=300, deadline=None)
@given(instances())
def test_dp_equals_brute_force(inst):
    t, m, r, budget = inst
    got, ref = dp_solve(t, m, r, budget), brute_force(t, m, r, budget)
    core = dp_solve(t, m, r, budget, shortcut=False)
    assert core.feasible == ref.feasible
    if ref.feasible:
        assert core.cost_s == pytest.approx(ref.cost_s, abs=1e-12)
    assert got.feasible == ref.feasible
    if ref.feasible:
        assert got.cost_s == pytest.approx(ref.cost_s, abs=1e-12)
        L = len(got.choice)
        recomputed = sum(t[i, s] for i, s in enumerate(got.choice)) + sum(
            r[i, got.choice[i - 1], got.choice[i]] for i in range(1, L))
        assert recomputed == pytest.approx(got.cost_s, abs=1e-12)
        assert got.mem_mb <= budget


@settings(max_examples=100, deadline=None)
@given(instances())
def test_more_memory_never_hurts(inst):
    t, m, r, budget = inst
    a, b = dp_solve(t, m, r, budget), dp_solve(t, m, r, budget + 7)
    assert b.cost_s <= a.cost_s + 1e-12


def test_viterbi_is_unconstrained_optimum():
    rng = np.random.default_rng(3)
    t, r = rng.random((4, 3)), rng.random((4, 3, 3))
    r[0] = 0
    c, ch = viterbi(t, r)
    ref = brute_force(t, np.zeros((4, 3)), r, 0)
    assert c == pytest.approx(ref.cost_s)


@pytest.mark.parametrize("name,budget", [("bert-huge-32", 8), ("bert-huge-32", 16), ("swin-huge-32", 12),
                                         ("t5-large-48", 16), ("vit-huge-32", 8)])
def test_full_space_never_worse_than_baselines(name, budget):
    model = load_model(name)
    full = search(model, C8, budget)
    for space in SPACES:
        for uniform in (False, True):
            base = search(model, C8, budget, space=space, uniform=uniform)
            assert full.throughput >= base.throughput - 1e-9, (space, uniform)
            if base.feasible:
                assert full.max_feasible_bsz >= base.max_feasible_bsz


def test_plan_estimate_matches_independent_evaluation():
    for name in ("bert-huge-32", "swin-huge-32", "t5-large-48"):
        model = load_model(name)
        res = search(model, C8, 16)
        ev = evaluate_plan(res.plan, model, C8)
        assert ev["iter_s"] == pytest.approx(res.plan.est_iter_s, rel=1e-9)
        assert ev["mem_mb"] <= 16 * 1024
        assert sum(res.plan.stage_sizes()) == model.n_layers


def test_infeasible_budget_names_the_smallest_that_fits():
    model = load_model("bert-huge-32")
    res = search(model, C8, 1.0)
    assert not res.feasible and res.plan is None and res.throughput == 0.0
    assert "no feasible plan" in res.message and f"{res.min_budget_gb:.2f} GB" in res.message
    assert search(model, C8, res.min_budget_gb + 0.01).feasible
    assert not search(model, C8, res.min_budget_gb - 0.01).feasible


def test_bad_inputs():
    model = load_model("bert-huge-32")
    with pytest.raises(ValueError, match="power of two"):
        search(model, dataclasses.replace(C8, n_gpus=12), 16)
    with pytest.raises(ValueError, match="unknown model"):
        load_model("bert-gigantic")
    with pytest.raises(ValueError, match="budget_gb"):
        search(model, C8, 0)


def test_greedy_division():
    assert greedy_division([1.0] * 8, 0.0, 2) == (4, 4)
    div = greedy_division([5, 5, 1, 1, 1, 1, 1, 1], 0.0, 2)
    assert sum(div) == 8 and div[0] >= 1
    for pp in (2, 4, 8):
        d = greedy_division([3.0] * 8, 100.0, pp)
        assert sum(d) == 8 and min(d) >= 1


# The plan searched by the artifact for BERT-Huge-32 at 8 GB (Hsword/Hetu tools/Galvatron,
# galvatron_config_8gpus_1280hidden_32layers_8G_full.json; spec section 3.5).
HETU_8G = {"pp_deg": 2, "tp_sizes_enc": ",".join(["2"] * 32), "tp_consecutive_flags": ",".join(["1"] * 32),
           "dp_types_enc": ",".join("1" if i in (15, 31) else "0" for i in range(32)), "global_bsz": 8, "chunks": 2}


def test_plan_reads_published_format_and_roundtrips():
    p = Plan.from_dict(HETU_8G, world_size=8)
    assert p.pp_deg == 2 and p.stage_sizes() == (16, 16)
    assert [s.code for s in p.strategies()][:2] == ["2-2*-2", "2-2*-2"] and p.strategies()[15].sdp
    assert Plan.from_json(p.to_json()) == p
    assert Plan.from_dict(json.loads(p.to_json())) == p
    ev = evaluate_plan(p, load_model("bert-huge-32"), C8)
    assert ev["throughput"] > 0


def test_plan_validation_errors():
    with pytest.raises(ValueError, match="missing field"):
        Plan.from_dict({k: v for k, v in HETU_8G.items() if k != "chunks"}, world_size=8)
    with pytest.raises(ValueError, match="world_size=16"):
        Plan.from_dict(dict(HETU_8G, world_size=8), world_size=16)
    with pytest.raises(ValueError, match="world_size"):
        Plan.from_dict(HETU_8G)
    with pytest.raises(ValueError, match="entries"):
        Plan.from_dict(dict(HETU_8G, dp_types_enc="0,1"), world_size=8)
    with pytest.raises(ValueError, match="exceeds world_size"):
        Plan.from_dict(dict(HETU_8G, tp_sizes_enc=",".join(["8"] * 32)), world_size=8)
    with pytest.raises(ValueError, match="pp_division"):
        Plan.from_dict(dict(HETU_8G, pp_division="10,10"), world_size=8)
    with pytest.raises(ValueError, match="not valid JSON"):
        Plan.from_json("{", world_size=8)
    with pytest.raises(ValueError, match="0 or 1"):
        Plan.from_dict(dict(HETU_8G, tp_consecutive_flags=",".join(["2"] * 32)), world_size=8)


def test_search_speed_bert_8_gpus():
    import time
    t0 = time.perf_counter()
    res = search(load_model("bert-huge-32"), C8, 16)
    assert res.feasible and time.perf_counter() - t0 < 10.0


def test_uniform_baseline_uses_one_strategy_in_every_stage():
    # A baseline system runs one strategy for the whole model. With two layer types (T5: encoder, decoder) the
    # stages differ, and choosing per stage once gave PP2 stages under different TP degrees (2-1-4 and 2-2*-2).
    t5 = load_model("t5-large-48")
    for pp in (2, 4):
        res = search(t5, C8, 16, space="3d", uniform=True, batch_sizes=[8], pp_degrees=[pp])
        assert res.feasible
        assert len({s.code for s in res.plan.strategies()}) == 1, res.plan.summary()
        assert evaluate_plan(res.plan, t5, C8)["iter_s"] == pytest.approx(res.plan.est_iter_s, rel=1e-9)
    # the smallest budget reported for an infeasible uniform search is the one that makes it feasible
    res = search(t5, C8, 1.0, space="3d", uniform=True)
    assert not res.feasible
    assert search(t5, C8, res.min_budget_gb + 0.01, space="3d", uniform=True).feasible
    assert not search(t5, C8, res.min_budget_gb - 0.01, space="3d", uniform=True).feasible


def test_stated_minimum_fits_even_where_memory_bins_are_coarse():
    """Above 16 GB the DP's memory bins are 2 MB or more; the minimum the message names must still fit."""
    t5, c16 = load_model("t5-large-48"), published_cluster(16)
    res = search(t5, c16, 0.5, space="tp")
    assert not res.feasible and res.min_budget_gb > 16
    assert search(t5, c16, res.min_budget_gb, space="tp").feasible
    assert not search(t5, c16, res.min_budget_gb - 0.01, space="tp").feasible
    assert f"{res.min_budget_gb:.2f} GB" in res.message


@pytest.mark.parametrize("kwargs, match", [
    (dict(budget_gb=math.inf), "finite number > 0"),
    (dict(budget_gb=float("nan")), "finite number > 0"),
    (dict(chunks=0), "chunks must be a positive integer"),
    (dict(batch_sizes=[]), "non-empty list of positive multiples of the GPU count 8"),
    (dict(batch_sizes=[12]), "positive multiples of the GPU count 8"),
    (dict(max_bsz=4), "8 GPUs is beyond the searched range: .* up to 4"),
    (dict(pp_degrees=[3]), r"pp_degrees \[3\] are not available"),
])
def test_bad_search_input_is_a_clear_value_error(kwargs, match):
    args = dict(budget_gb=8.0)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        search(load_model("bert-huge-32"), C8, **args)


def test_a_search_cut_short_by_max_bsz_says_so():
    bert = load_model("bert-huge-32")
    short = search(bert, C8, 16, max_bsz=16)
    full = search(bert, C8, 16)
    assert short.bsz_capped and "stopped at max_bsz=16" in short.message
    assert not full.bsz_capped and full.max_feasible_bsz > 16
    assert full.throughput >= short.throughput


def test_a_space_whose_pipelines_are_deeper_than_the_model_is_infeasible_and_says_why():
    res = search(load_model("vit-huge-32"), published_cluster(64), 16, space="pp")
    assert not res.feasible and res.min_budget_gb == math.inf
    assert "pipeline degrees [64] all exceed the 32 layers" in res.message
