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
