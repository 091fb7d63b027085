"""The profiler: exact parameter and activation sizes, and a measured profile the search can read."""

import json

import pytest
import torch

from lib.galvatron.runtime.profiler import measure_layer, profile_machine, saved_bytes, write_profile
from lib.galvatron.runtime.model import ModelConfig


def test_saved_bytes_counts_what_autograd_keeps():
    x = torch.randn(100, 10, requires_grad=True)
    w = torch.randn(10, 10, requires_grad=True)
    # x @ w saves x and w (both inputs of the matmul): 4 * (1000 + 100) bytes
    assert saved_bytes(lambda: x @ w) == 4 * (1000 + 100)


def test_layer_sizes_are_exact_and_tp_shrinks_activations():
    cfg = ModelConfig(d_model=32, n_head=4, seq_len=16)
    m = measure_layer(cfg, batch=4, reps=2)
    assert m["param_mb"] == pytest.approx((12 * 32 * 32 + 13 * 32) * 4 / 2**20)
    act = m["act_mb_per_sample"]
    assert sorted(act) == [1, 2, 4]
    assert act[1] > act[2] > act[4] > 0
    # The TP-split part halves; a replicated part (LayerNorm inputs, residual) stays:
    # act[1] - act[2] = 2 x (act[2] - act[4])
    assert (act[1] - act[2]) == pytest.approx(2 * (act[2] - act[4]), rel=0.05)
    assert m["fwd_ms_per_sample"] > 0


@pytest.mark.timeout(120)
def test_measured_profile_round_trips_into_the_search(tmp_path, monkeypatch):
    from lib.galvatron.search.profiles import ClusterProfile, ModelProfile
    from lib.galvatron.search.engine import search

    cfg = ModelConfig(d_model=32, n_layer=2, seq_len=16)
    model, cluster, raw = profile_machine(cfg, 2, 8, reps=3)
    assert set(cluster.allreduce_ms_per_mb) == {"1_2_1"} and cluster.allreduce_ms_per_mb["1_2_1"] > 0
    assert cluster.p2p_ms_per_mb > 0 and cluster.overlap_coe >= 1.0
    paths = write_profile(model, cluster, str(tmp_path))
    m2 = ModelProfile.from_dict(json.load(open(paths[0])))
    c2 = ClusterProfile.from_dict(json.load(open(paths[1])))
    assert m2 == model and c2 == cluster
    # and by name, the way the search's callers find profiles in data/galvatron
    from lib.galvatron.search import profiles

    monkeypatch.setattr(profiles, "DATA_DIR", str(tmp_path))
    assert profiles.load_model(model.name) == model and profiles.load_cluster(cluster.name) == cluster
    assert profiles.model_names() == [model.name]
    res = search(m2, c2, budget_gb=1.0, batch_sizes=[8])
    assert res.feasible and res.plan.world_size == 2
