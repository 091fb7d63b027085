"""Tests for lib/galvatron/search/analytic.py: a profile from a model's shape and a hardware profile, against the
published sizes and the hardware's own link speeds."""

import pytest

import lib.hardware as hw
from lib.galvatron.search.analytic import analytic_profile
from lib.galvatron.search.profiles import load_model


def test_analytic_profile_matches_published_bert_sizes():
    model, cluster = analytic_profile("bert-huge-32", "8xH100-nvlink", dtype="fp32")
    ours, pub = model.layer_types[0], load_model("bert-huge-32").layer_types[0]
    # sizes come from the shape alone: within 15% of the profiled RTX TITAN numbers
    assert ours.param_mb == pytest.approx(pub.param_mb, rel=0.05)
    for tp in (1, 2, 4, 8):
        assert ours.act_mb(tp) == pytest.approx(pub.act_mb(tp), rel=0.15)
    assert cluster.n_gpus == 8 and cluster.time_inflation == 1.0


def test_analytic_comm_from_hardware():
    prof = hw.load("8xH100-nvlink")
    _, cluster = analytic_profile("llama-7b", prof)
    expect = 2**20 / prof.link(0, 1).bw_bytes_per_s * 1e3
    assert cluster.allreduce_coe(1, 8, True) == pytest.approx(expect)
    assert cluster.allreduce_coe(2, 2, False) == pytest.approx(expect)
    t4 = hw.load("4xT4-pcie")
    _, c4 = analytic_profile("gpt2-xl", t4, dtype="fp16")
    if t4.topology["kind"] == "shared-bus":
        assert c4.allreduce_coe(1, 2, True) == pytest.approx(4 * 2**20 / t4.link(0, 1).bw_bytes_per_s * 1e3)


def test_analytic_bad_inputs():
    with pytest.raises(ValueError, match="unknown model shape"):
        analytic_profile("llama-700b", "8xH100-nvlink")
    with pytest.raises(ValueError, match="unknown hardware profile"):
        analytic_profile("llama-7b", "16xB200")
    with pytest.raises(ValueError, match="dtype"):
        analytic_profile("llama-7b", "8xH100-nvlink", dtype="int4")


def test_analytic_profile_answers_for_every_hardware_profile():
    for name in hw.names():
        dev = hw.load(name).devices[0]
        model, cluster = analytic_profile("gpt2-xl", name)       # default: the best dtype the device has
        chosen = model.name.split(", ")[-1].rstrip(")")
        assert chosen in dev.peak_flops, (name, model.name)
        assert chosen == "bf16" or "bf16" not in dev.peak_flops
    assert analytic_profile("gpt2-xl", "4xT4-pcie")[0].name == "gpt2-xl (analytic, fp16)"   # T4: no bf16
    with pytest.raises(ValueError, match=r"'4xT4-pcie'.*no bf16.*\['fp16', 'fp32'\]"):
        analytic_profile("gpt2-xl", "4xT4-pcie", dtype="bf16")


def test_llama3_shapes_have_their_parameter_counts():
    from lib.galvatron.search.analytic import SHAPES
    for name, billions in (("llama3-8b", 8.0), ("llama3-70b", 70.6), ("llama3-405b", 405.9)):
        assert SHAPES[name].n_params() / 1e9 == pytest.approx(billions, rel=0.01), name
    gqa = SHAPES["llama3-70b"]
    assert gqa.kv_hidden == 1024 and gqa.layer_params() < gqa.hidden * (4 * gqa.hidden + 3 * gqa.ffn)


def test_groups_that_cross_nodes_pay_the_fabric():
    c = hw.load_cluster("h100-cluster", 4)
    _, cl = analytic_profile("llama3-8b", c)
    nvlink = 2**20 / c.node.link(0, 1).bw_bytes_per_s * 1e3
    fabric = 2**20 / c.fabric_link().bw_bytes_per_s * 1e3
    assert fabric > 5 * nvlink
    assert cl.allreduce_coe(1, 8, True) == pytest.approx(nvlink)     # TP 8 inside a node
    assert cl.allreduce_coe(4, 8, True) == pytest.approx(nvlink)     # a stage of one node
    assert cl.allreduce_coe(1, 16, True) == pytest.approx(fabric)    # TP 16 spans two nodes
    assert cl.allreduce_coe(1, 4, False) == pytest.approx(fabric)    # DP 4 strided over the 32 GPUs
    assert cl.allreduce_coe(1, 32, True) == pytest.approx(fabric)    # DP over every node
    assert cl.p2p_ms_per_mb == pytest.approx(fabric)
    _, one = analytic_profile("llama3-8b", c.with_nodes(1))
    assert one.allreduce_coe(1, 8, True) == pytest.approx(nvlink) and one.p2p_ms_per_mb == pytest.approx(nvlink)


def test_embedding_shards():
    m1, _ = analytic_profile("llama3-8b", hw.load_cluster("h100-cluster", 1))
    m8, _ = analytic_profile("llama3-8b", hw.load_cluster("h100-cluster", 1), embedding_shards=8)
    assert m8.other_model_states_mb == pytest.approx(m1.other_model_states_mb / 8)
    with pytest.raises(ValueError, match="embedding_shards"):
        analytic_profile("llama3-8b", "8xH100-nvlink", embedding_shards=0)
