"""Tests for lib/galvatron/search/cost.py: every term against hand computation from the spec's formulas."""

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from lib.galvatron.search.cost import (TIE_BREAK_S, cost_tables, default_chunks, layer_memory_mb, layer_time_s,
                                       layer_time_terms, other_memory_mb, overlap_ms, overlap_ms_stepwise, transition_s)
from lib.galvatron.search.profiles import load_model, published_cluster
from lib.galvatron.search.strategies import Strategy, generate

BERT = load_model("bert-huge-32")
LAYER = BERT.layer_types[0]
C8 = published_cluster(8)
S = Strategy.from_shape


@settings(max_examples=200, deadline=None)
@given(msg=st.floats(0.01, 1e4), dc=st.floats(0.01, 2), bwd=st.floats(0.01, 1e4), kappa=st.floats(1.0, 2.0))
def test_overlap_closed_form_equals_stepwise(msg, dc, bwd, kappa):
    closed = float(overlap_ms(msg * dc, bwd, kappa))
    assert closed == pytest.approx(overlap_ms_stepwise(msg, dc, bwd, kappa), rel=1e-9)
    assert max(msg * dc, bwd) - 1e-9 <= closed <= msg * dc + bwd + 1e-9
    assert float(overlap_ms(msg * dc, bwd, 1.0)) == pytest.approx(max(msg * dc, bwd))


def test_memory_by_hand():
    B = 16
    assert layer_memory_mb(LAYER, S(1, 1, 8), B) == pytest.approx(4 * 76.98 + 94.07 * 2)
    assert layer_memory_mb(LAYER, S(1, 1, 8, sdp=True), B) == pytest.approx(4 * 76.98 * (1 / 8 + 0.025) + 94.07 * 2)
    assert layer_memory_mb(LAYER, S(1, 4, 2), B) == pytest.approx(4 * 76.98 / 4 + 31.754 * 8)
    # PP does not divide per-layer memory: the stage keeps its whole local batch (GPipe)
    assert layer_memory_mb(LAYER, S(8, 1, 1), B) == pytest.approx(4 * 76.98 + 94.07 * 16)
    ck = layer_memory_mb(LAYER, S(1, 1, 8, ckpt=True), B)
    assert ck == pytest.approx(4 * 76.98 + 512 * 1280 * 4 / 2**20 * 2)
    assert other_memory_mb(BERT, S(1, 1, 8), B) == pytest.approx(793 + 313 * 16 / 8 + 1024)


def test_pure_dp_time_by_hand():
    B = 8
    fct = 55 / 24 * 1 * 24
    msg = 2 * 7 / 8 * 76.98 * 24
    expect_ms = fct + max(msg * 0.21530878, 2 * fct) + 0.3 * min(msg * 0.21530878, 2 * fct) + 100
    assert layer_time_s(LAYER, S(1, 1, 8), B, C8, 1, 100) == pytest.approx(expect_ms * 0.0011 / 24)
    # SDP adds half an all-reduce (the forward all-gather)
    got = layer_time_s(LAYER, S(1, 1, 8, sdp=True), B, C8, 1, 100)
    assert got == pytest.approx((expect_ms + 0.5 * msg * 0.21530878) * 0.0011 / 24)


def test_tp_and_half_overlap_shape_by_hand():
    B = 16
    b, tp, dp = 8, 4, 2
    fct = 55 / 24 * b / tp * 24
    bct = 2 * fct
    dmsg = 2 * (dp - 1) / dp * 76.98 / tp * 24
    tmsg = 2 * (tp - 1) / tp * (b * 512 * 1280 * 4 * 4 / 2**20) * 24
    s = S(1, 4, 2, tp_consec=True)                  # TP4 inner (consecutive): TP key 4_1, DP key 2_0
    tc, dc = 0.226519097, 0.271614583
    ov = max(dmsg * dc, bct / 2) + 0.3 * min(dmsg * dc, bct / 2)
    expect = fct + bct / 2 + ov + tmsg * tc + 100
    assert layer_time_s(LAYER, s, B, C8, 1, 100) == pytest.approx(expect * 0.0011 / 24)
    assert layer_time_s(LAYER, S(1, 8, 1), B, C8, 1, 100) == pytest.approx(
        (55 / 24 * 16 / 8 * 24 * 3 + 2 * 7 / 8 * (16 * 512 * 1280 * 16 / 2**20) * 24 * 0.21530878) * 0.0011 / 24)


def test_pipeline_bubble():
    B, pp, m = 32, 8, 4
    t = layer_time_terms(LAYER, S(8, 1, 1), B, C8, chunks=m)
    assert t["bubble_factor"] == pytest.approx((pp + m - 1) / (pp * m))
    comp = 55 / 24 * B * 24 * 3
    assert t["total_s"] == pytest.approx(comp * (pp + m - 1) / (pp * m) * 0.0011 / 24)
    many = layer_time_terms(LAYER, S(8, 1, 1), B, C8, chunks=10**6)
    assert many["total_s"] == pytest.approx(comp / pp * 0.0011 / 24, rel=1e-5)
    assert default_chunks(8, 1, 8) == 1 and default_chunks(64, 2, 8) == 4 and default_chunks(4096, 8, 8) == 8


def test_overlap_ablation_never_slower():
    fast = C8.with_overlap(1.0)
    for s in generate(8):
        for B in (8, 64):
            assert layer_time_s(LAYER, s, B, fast, 2, 100) <= layer_time_s(LAYER, s, B, C8, 2, 100) + 1e-15


def test_transitions():
    B = 16
    c4 = published_cluster(4)
    # TP4 -> DP4 on 4 GPUs: the DP rank already holds its slice: no communication (paper, section 4)
    assert transition_s(LAYER, S(1, 4, 1), S(1, 1, 4), B, c4) == 0.0
    assert transition_s(LAYER, S(1, 4, 2), S(1, 1, 8), B, C8) == 0.0
    # a larger TP degree gathers the boundary activation over the new TP group
    got = transition_s(LAYER, S(1, 1, 8), S(1, 2, 4, tp_consec=True), B, C8)
    assert got == pytest.approx((2 - 1) / 2 * (2 * B / 4) * 0.277994792 * 1e-3)
    # same TP degree, different placement: gather too; same strategy: free
    assert transition_s(LAYER, S(1, 2, 4, tp_consec=True), S(1, 2, 4, tp_consec=False), B, C8) > 0
    for s in generate(8):
        assert transition_s(LAYER, s, s, B, C8) == 0.0
    # tie-break: SDP -> DP between otherwise equal strategies
    a, b = S(1, 2, 4, sdp=True), S(1, 2, 4, sdp=False)
    assert transition_s(LAYER, a, b, B, C8) == pytest.approx(TIE_BREAK_S)
    assert transition_s(LAYER, b, a, B, C8) == 0.0


def test_cost_tables_consistent():
    strats = [s for s in generate(8) if s.pp == 1]
    t, m, r = cost_tables(BERT, strats, 16, C8, 1)
    assert t.shape == (32, 11) and m.shape == (32, 11) and r.shape == (32, 11, 11)
    assert np.all(r[0] == 0)
    assert t[5, 3] == pytest.approx(layer_time_s(LAYER, strats[3], 16, C8, 1, 100))
    assert r[7, 0, 4] == pytest.approx(transition_s(LAYER, strats[0], strats[4], 16, C8))


def test_rejects_unpruned_and_wrong_size():
    mixed = Strategy(1, (("dp", 2), ("sdp", 4)))
    with pytest.raises(ValueError, match="pruned"):
        layer_memory_mb(LAYER, mixed, 8)
    with pytest.raises(ValueError, match="GPUs"):
        layer_time_s(LAYER, S(1, 1, 16), 16, C8)


def test_tp_and_p2p_messages_use_the_activation_dtype():
    # TP all-reduces and pipeline sends carry activations: 2 bytes each under bf16, not the artifact's fp32 4.
    from lib.galvatron.search.analytic import analytic_profile

    m32, c32 = analytic_profile("gpt2-xl", "8xH100-nvlink", dtype="fp32")
    m16, c16 = analytic_profile("gpt2-xl", "8xH100-nvlink", dtype="bf16")
    l32, l16 = m32.layer_types[0], m16.layer_types[0]
    for s in (S(1, 8, 1), S(2, 2, 2, tp_consec=True)):
        t32, t16 = layer_time_terms(l32, s, 16, c32, 2), layer_time_terms(l16, s, 16, c16, 2)
        assert t16["tp_ms"] == pytest.approx(t32["tp_ms"] / 2)
        if s.pp > 1:
            assert t16["p2p_ms"] == pytest.approx(t32["p2p_ms"] / 2) and t16["p2p_ms"] > 0
    # the published (fp32) profiles keep the artifact's 4 bytes
    assert LAYER.act_bytes == 4
