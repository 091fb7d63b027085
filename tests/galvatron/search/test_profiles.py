"""Tests for lib/galvatron/search/profiles.py: published constants, lookups, bad names."""

import math

import pytest

from lib.galvatron.search.profiles import (ClusterProfile, ModelProfile, load_cluster, load_model, model_names,
                                           published_cluster)


def test_published_models_present_with_source():
    assert set(model_names()) >= {"bert-huge-32", "t5-large-48", "vit-huge-32", "swin-huge-32"}
    for name in model_names():
        m = load_model(name)
        assert m.source and "Galvatron" in m.source
        assert ModelProfile.from_dict(m.to_dict()) == m


def test_spec_constants():
    bert = load_model("bert-huge-32")
    lt = bert.layer_types[0]
    assert bert.n_layers == 32 and lt.param_mb == 76.98 and lt.hidden == 1280 and lt.seq_len == 512
    assert [lt.act_mb(t) for t in (1, 2, 4, 8)] == [94.07, 52.475, 31.754, 21.612]
    assert math.isclose(lt.fwd_ms_per_sample, 55 / 24)
    assert (bert.other_model_states_mb, bert.other_act_mb_per_sample, bert.extra_overhead_ms) == (793, 313, 100)
    swin = load_model("swin-huge-32")
    assert swin.layer_counts == (2, 2, 26, 2) and [x.hidden for x in swin.layer_types] == [320, 640, 1280, 2560]
    t5 = load_model("t5-large-48")
    assert [x.tp_allreduces for x in t5.layer_types] == [4, 6] and t5.layer_types[1].decoder


def test_activation_extrapolation_is_monotone_and_exact_on_profiled():
    lt = load_model("bert-huge-32").layer_types[0]
    vals = [lt.act_mb(t) for t in (1, 2, 4, 8, 16, 32, 64)]
    assert all(a > b for a, b in zip(vals, vals[1:]))
    assert vals[4] > 0
    with pytest.raises(ValueError):
        lt.act_mb(0)


def test_cluster_coefficients():
    c = load_cluster("rtx-titan-8")
    assert c.allreduce_coe(1, 8, False) == pytest.approx(0.21530878)   # full group: no flag
    assert c.allreduce_coe(1, 4, False) == pytest.approx(0.220138889)
    assert c.allreduce_coe(1, 2, True) == pytest.approx(0.277994792)
    assert c.allreduce_coe(2, 4, True) == pytest.approx(0.230750868)
    assert c.allreduce_coe(4, 2, False) == pytest.approx(0.264908854)
    assert c.allreduce_coe(8, 1, True) == 0.0
    assert c.overlap_coe == 1.3 and c.with_overlap(1.0).overlap_coe == 1.0
    assert ClusterProfile.from_dict(c.to_dict()) == c


def test_multi_node_rule():
    c16 = published_cluster(16)
    assert c16.allreduce_coe(1, 2, False) == pytest.approx(0.861)           # quoted cross-node pair
    assert c16.allreduce_coe(2, 4, True) == pytest.approx(0.226519097)      # inside one node
    c64 = published_cluster(64)
    assert c64.n_gpus == 64 and c64.allreduce_coe(1, 64, True) == pytest.approx(0.299)
    assert c64.allreduce_coe(1, 8, True) == pytest.approx(0.21530878)
    assert published_cluster(4).allreduce_coe(1, 4, True) == pytest.approx(0.226519097)


def test_unknown_names():
    with pytest.raises(ValueError, match="unknown model 'gpt-17'.*bert-huge-32"):
        load_model("gpt-17")
    with pytest.raises(ValueError, match="unknown cluster"):
        load_cluster("nope")
    with pytest.raises(ValueError, match="power of two"):
        published_cluster(12)
