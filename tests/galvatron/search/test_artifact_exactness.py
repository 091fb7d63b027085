"""Our search under the ``vldb2023`` rules against an independent re-implementation of the VLDB artifact's
search (``artifact_oracle.py``): the same global batch, pipeline degree, micro-batch count and per-layer plan,
and throughput within 0.1 %. Our side runs on ``data/galvatron`` (which rounds a few activation constants);
the oracle on the artifact's own digits.

The oracle is itself checked against the artifact's published output: with the camera-ready constants of
``Hsword/Hetu`` (commit 3757771, ``tools/Galvatron/bert/search_layerwise_hp_8gpus.py``: extra overhead 0,
other memory 790 MB + 300 MB per sample) it reproduces the plan files that repository ships,
``galvatron_config_8gpus_1280hidden_32layers_8G_full.json`` and ``..._12G_full.json`` (quoted below).
"""

import dataclasses
import functools

import pytest

from lib.galvatron.search.engine import search
from lib.galvatron.search.profiles import load_model, published_cluster
from lib.galvatron.search.rules import GALVATRON2, VLDB2023

from . import artifact_oracle as oracle

C8 = published_cluster(8)


@functools.lru_cache(maxsize=None)
def artifact(name, gb):
    return oracle.search(name, gb * 1024)


def ours(model, gb, rules=VLDB2023):
    return search(model, C8, gb, rules=rules)


def check_same(res, ref):
    assert res.feasible == (ref is not None)
    if ref is None:
        return
    plan = res.plan
    assert plan.global_bsz == ref["global_bsz"]
    assert plan.pp_deg == ref["pp"]
    assert plan.chunks == ref["chunks"]
    assert [s.code for s in plan.strategies()] == ref["plan"]
    assert res.throughput == pytest.approx(ref["throughput"], rel=1e-3)


CASES = [("bert-huge-32", gb) for gb in (8, 12, 16, 20)] + [("vit-huge-32", 8), ("vit-huge-32", 12)] + \
    [("t5-large-48", gb) for gb in (8, 12, 16)]


@pytest.mark.parametrize("name, gb", CASES)
def test_vldb2023_search_equals_the_artifacts(name, gb):
    ref = artifact(name, gb)
    check_same(ours(load_model(name), gb), ref)


def test_bert_8gb_plan_is_pipelined_under_the_artifacts_rules_only():
    """The issue that named the rules: on the artifact's constants its search picks pp = 2 at 8, 12 and 16 GB;
    the galvatron2 rules pick pp = 1 there, with a lower estimate by the artifact's own formulas."""
    bert = load_model("bert-huge-32")
    for gb in (8, 12, 16):
        v, g = ours(bert, gb), ours(bert, gb, GALVATRON2)
        assert v.plan.pp_deg == 2 and g.plan.pp_deg == 1
        assert artifact("bert-huge-32", gb)["throughput"] >= v.throughput * (1 - 1e-3)


# The two plan files shipped with the camera-ready artifact (Hsword/Hetu 3757771, tools/Galvatron/bert/configs),
# quoted: pp degree, global batch, chunks, then per layer (TP degree, consecutive flag, SDP flag).
PUBLISHED = {
    8: dict(pp=2, global_bsz=8, chunks=2,
            layers=[(2, 1, 1 if i in (15, 31) else 0) for i in range(32)]),
    12: dict(pp=1, global_bsz=16, chunks=1,
             layers=[(2, 1, 0 if i < 16 else 1) for i in range(32)]),
}


def _camera_ready_oracle():
    m = dict(oracle.MODELS["bert-huge-32"])
    lay = dict(m["layers"][0][0], eo=0)
    m.update(layers=[(lay, 32)], other_states=790, other_act=300)
    oracle.MODELS.setdefault("bert-huge-32-camera-ready", m)
    return "bert-huge-32-camera-ready"


def _camera_ready_ours():
    b = load_model("bert-huge-32")
    # same name, so the artifact's BERT micro-batch rule applies
    return dataclasses.replace(b, extra_overhead_ms=0.0, other_model_states_mb=790.0, other_act_mb_per_sample=300.0)


def _layers_of(codes):
    out = []
    for c in codes:
        pp, tp, dp = c.split("-")
        out.append((int(tp.rstrip("*")), 0 if dp.endswith("*") else 1, 1 if "f" in dp else 0))
    return out


@pytest.mark.parametrize("gb", [8, 12])
def test_oracle_and_ours_reproduce_the_published_plan_files(gb):
    want = PUBLISHED[gb]
    ref = artifact(_camera_ready_oracle(), gb)
    assert (ref["pp"], ref["global_bsz"], ref["chunks"]) == (want["pp"], want["global_bsz"], want["chunks"])
    assert _layers_of(ref["plan"]) == want["layers"]
    res = ours(_camera_ready_ours(), gb)
    check_same(res, ref)
    p = res.plan
    assert list(zip(p.tp_sizes_enc, p.tp_consecutive_flags, p.dp_types_enc)) == want["layers"]


def test_data_constants_are_the_artifacts_to_their_rounding():
    for name in ("bert-huge-32", "vit-huge-32", "t5-large-48"):
        m, ref = load_model(name), oracle.MODELS[name]
        assert m.other_model_states_mb == ref["other_states"] and m.other_act_mb_per_sample == ref["other_act"]
        for lt, (lay, n) in zip(m.layer_types, ref["layers"]):
            assert m.layer_counts[m.layer_types.index(lt)] == n
            assert lt.param_mb == lay["P"] and lt.fwd_ms_per_sample == pytest.approx(lay["fwd"], rel=1e-12)
            assert lt.seq_len == lay["seq"] and lt.hidden == lay["hidden"] and lt.decoder == lay["dec"]
            for tp, a in lay["act"].items():
                assert lt.act_mb(tp) == pytest.approx(a, abs=0.05)
        assert m.extra_overhead_ms == ref["layers"][0][0]["eo"]
