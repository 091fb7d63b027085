"""Tests for lib/galvatron/search/rules.py: presets, validation naming the field, the chunk rules, and that
each departure changes what it should (and galvatron2 is the default)."""

import math

import pytest

from lib.galvatron.search.cost import default_chunks, layer_memory_mb, layer_time_terms
from lib.galvatron.search.engine import evaluate_plan, search
from lib.galvatron.search.profiles import load_model, published_cluster
from lib.galvatron.search.rules import GALVATRON2, PRESETS, VLDB2023, CostRules, differences, get_rules
from lib.galvatron.search.strategies import Strategy, generate

C8 = published_cluster(8)
BERT = load_model("bert-huge-32")


def shape(code, n=8):
    return next(s for s in generate(n) if s.code == code)


@pytest.mark.parametrize("field, value", [
    ("chunks", "gpipe"), ("chunks", None), ("stage_budgets", "half"), ("division_input", 3),
    ("leftover_dp", "twice"), ("p2p", True), ("micro_bsz", 0), ("micro_bsz", 2.5), ("max_chunks", -1),
    ("mem_bins_max", 0), ("mem_bins_max", 1.5), ("decoder_pp_overlap", 1.5), ("decoder_pp_overlap", math.nan),
    ("sdp_gather_factor", -0.1), ("sdp_gather_factor", math.inf), ("sdp_mem_bias", 2.0),
    ("sdp_mem_bias", True), ("sdp_gather_per_chunk", 1), ("p2p_ms_per_mb_by_pp", ((1, 0.1),)),
    ("p2p_ms_per_mb_by_pp", ((2, -1.0),)), ("p2p_ms_per_mb_by_pp", [(2, 0.1)]), ("name", 5),
])
def test_bad_value_names_the_field(field, value):
    with pytest.raises(ValueError, match=rf"CostRules\.{field} .*{value!r}"[:60].replace("(", r"\(")
                       .replace(")", r"\)").replace("[", r"\[").replace("]", r"\]")):
        CostRules(**{field: value})
    with pytest.raises(ValueError, match=f"CostRules.{field}"):
        VLDB2023.with_(**{field: value})


def test_presets_and_lookup():
    assert get_rules(None) is GALVATRON2 and get_rules("vldb2023") is VLDB2023 and get_rules(VLDB2023) is VLDB2023
    assert set(PRESETS) == {"galvatron2", "vldb2023"}
    with pytest.raises(ValueError, match="rules must be"):
        get_rules("vldb")
    fields = [d[0] for d in differences(GALVATRON2, VLDB2023)]
    assert fields == ["chunks", "stage_budgets", "division_input", "mem_bins_max", "leftover_dp",
                      "decoder_pp_overlap", "p2p"]
    assert differences(GALVATRON2, CostRules()) == []
    with pytest.raises(ValueError, match="no rule for model 'gpt'"):
        VLDB2023.chunks_for("gpt", 8, shape("2-1-4"), 8)


@pytest.mark.parametrize("B", [8, 16, 24, 64, 200])
def test_galvatron2_chunks_are_the_default_rule(B):
    for s in generate(8):
        assert GALVATRON2.chunks_for("bert-huge-32", B, s, 8) == default_chunks(B, s.pp, 8)


def test_artifact_chunk_rules():
    ch = VLDB2023.chunks_for
    assert ch("bert-huge-32", 8, shape("2-2*-2"), 8) == 2          # b = 4 < 6: b/2
    assert ch("bert-huge-32", 8, shape("2-1-4"), 8) == 1           # b = 2
    assert ch("bert-huge-32", 48, shape("2-1-4"), 8) == 12 / 8 + 2  # b = 12: fractional
    assert ch("bert-huge-32", 8, shape("2-4-1"), 8) == 2           # TP x PP without DP: b/4
    assert ch("bert-huge-32", 8, shape("1-1-8"), 8) == 1
    assert ch("vit-huge-32", 32, shape("2-1-4"), 8) == 1 and ch("vit-huge-32", 40, shape("2-1-4"), 8) == 2
    assert ch("t5-large-48", 8, shape("2-1-4"), 8) == 1 and ch("t5-large-48", 16, shape("8-1-1"), 8) == 3
    assert [ch("swin-huge-32", B, shape("2-1-4"), 8) for B in (32, 40, 128, 400)] == [1, 2, 3, 4]
    # the plan's whole number: the largest count of its layers
    assert VLDB2023.plan_chunks("bert-huge-32", 48, [shape("2-1-4")], 8) == 3
    assert GALVATRON2.with_(chunks="bert").chunks_for("anything", 8, shape("2-2*-2"), 8) == 2


def test_leftover_dp_once_is_cheaper_only_when_comm_outlasts_backward():
    lay = BERT.layer_types[0]
    s = shape("4-1-2")
    for B in (8, 512):
        a = layer_time_terms(lay, s, B, C8, 2, BERT.extra_overhead_ms, GALVATRON2)
        b = layer_time_terms(lay, s, B, C8, 2, BERT.extra_overhead_ms, GALVATRON2.with_(leftover_dp="once"))
        if a["dp_allreduce_ms"] > a["bwd_ms"]:
            assert b["total_s"] < a["total_s"]
        else:
            assert b["total_s"] == a["total_s"]
    # SDP keeps the leftover x pp, as in the artifact
    sf = shape("4-1-2f")
    assert layer_time_terms(lay, sf, 8, C8, 2, 100, GALVATRON2)["total_s"] == \
        layer_time_terms(lay, sf, 8, C8, 2, 100, GALVATRON2.with_(leftover_dp="once"))["total_s"]


def test_other_fields_change_what_they_name():
    lay = BERT.layer_types[0]
    sf = shape("2-1-4f")
    base = layer_time_terms(lay, sf, 16, C8, 3, 100, GALVATRON2)
    per = layer_time_terms(lay, sf, 16, C8, 3, 100, GALVATRON2.with_(sdp_gather_per_chunk=True))
    assert per["sdp_ms"] == pytest.approx(3 * base["sdp_ms"])
    zero = layer_time_terms(lay, sf, 16, C8, 3, 100, GALVATRON2.with_(sdp_gather_factor=0.0))
    assert zero["sdp_ms"] == 0 and zero["total_s"] < base["total_s"]
    assert layer_memory_mb(lay, sf, 16, GALVATRON2.with_(sdp_mem_bias=0.003)) < layer_memory_mb(lay, sf, 16)
    p2p = GALVATRON2.with_(p2p_ms_per_mb_by_pp=((2, 0.5),))
    assert layer_time_terms(lay, sf, 16, C8, 3, 100, p2p)["p2p_ms"] > 0 == base["p2p_ms"]
    assert layer_time_terms(lay, sf, 16, C8, 3, 100, p2p.with_(p2p="none"))["p2p_ms"] == 0
    t5 = load_model("t5-large-48").layer_types[1]
    s222 = shape("2-2*-2")
    # the share only matters when the all-reduce outlasts the overlapped backward (small local batches)
    half = layer_time_terms(t5, s222, 8, C8, 2, 60, VLDB2023)["total_s"]
    two_thirds = layer_time_terms(t5, s222, 8, C8, 2, 60, VLDB2023.with_(decoder_pp_overlap=2 / 3))["total_s"]
    assert half > two_thirds
    assert GALVATRON2.mem_step_mb(20 * 1024) == 2 and VLDB2023.mem_step_mb(20 * 1024) == 1


def test_default_rules_are_galvatron2_and_plans_re_estimate_under_their_rules():
    a = search(BERT, C8, 12)
    b = search(BERT, C8, 12, rules="galvatron2")
    assert a.plan == b.plan and a.throughput == b.throughput
    for gb in (8, 16):
        v = search(BERT, C8, gb, rules=VLDB2023)
        again = evaluate_plan(v.plan, BERT, C8, rules=VLDB2023)
        assert again["iter_s"] == pytest.approx(v.plan.est_iter_s, rel=1e-12)
        assert again["mem_mb"] <= gb * 1024


def test_stage_budgets_full_gives_later_stages_more_memory():
    t5 = load_model("t5-large-48")
    tight = search(t5, C8, 12, rules=VLDB2023.with_(stage_budgets="context-later"), pp_degrees=[2])
    full = search(t5, C8, 12, rules=VLDB2023, pp_degrees=[2])
    assert full.max_feasible_bsz >= tight.max_feasible_bsz
    assert full.throughput >= tight.throughput - 1e-12
    assert Strategy.from_shape(1, 1, 8).code == "1-1-8"


def test_pure_python_dp_equals_dp_solve_on_random_instances():
    import numpy as np

    from lib.galvatron.search.dynamic_program import brute_force, dp_solve, dp_solve_python

    rng = np.random.default_rng(7)
    for _ in range(60):
        L, S = rng.integers(1, 5), rng.integers(1, 5)
        t = rng.random((L, S))
        m = rng.integers(0, 20, (L, S)).astype(float)
        r = rng.random((L, S, S)) * (rng.random((L, S, S)) < 0.6)
        r[0] = 0.0
        budget = int(rng.integers(0, 60))
        a, b, ref = dp_solve(t, m, r, budget), dp_solve_python(t, m, r, budget), brute_force(t, m, r, budget)
        assert a.feasible == b.feasible == ref.feasible
        if ref.feasible:
            assert b.cost_s == pytest.approx(ref.cost_s, abs=1e-12) == a.cost_s
            assert b.mem_mb <= budget


def test_artifact_greedy_division_and_its_fallback():
    from lib.galvatron.search.engine import greedy_division_artifact

    assert greedy_division_artifact([10.0] * 8, 0.0, 2) == (4, 4)
    assert greedy_division_artifact([1.0] * 4 + [100.0] * 4, 500.0, 2) == (1, 7)  # stage 0 borrows one
    with pytest.raises(ValueError, match="empty stage"):
        greedy_division_artifact([300.0, 1.0, 1.0, 1.0], 0.0, 4)
    swin = load_model("swin-huge-32")
    res = search(swin, published_cluster(64), 16, rules=VLDB2023, pp_degrees=[8], batch_sizes=[64])
    assert res.feasible and min(res.plan.stage_sizes()) >= 1
