"""Tile and wave quantization of GEMMs (lib/galvatron/search/quantization.py) against hand calculations, and
its switch (rules.wave_quantization, a candidate: off in every preset) in cost.step_estimate."""

from dataclasses import replace

import pytest

from lib.galvatron.search import quantization as qz
from lib.galvatron.search.analytic import TransformerShape
from lib.galvatron.search.cost import step_estimate
from lib.galvatron.search.efficiency import efficiency, load_gpu
from lib.galvatron.search.layout import Job, ParallelConfig
from lib.galvatron.search.rules import ALL_PRESETS, CANDIDATE_FIELDS, PRACTICE, CostRules

A100 = load_gpu("a100-sxm-80gb")
H100 = load_gpu("h100-sxm-80gb")
WQ = PRACTICE.with_(name="practice+wq", wave_quantization=True)


def test_gpu_data_has_sms_and_tile_with_sources():
    assert (A100.sms, H100.sms) == (108, 132)
    assert A100.gemm_tile == H100.gemm_tile == (128, 128)
    with pytest.raises(ValueError, match="GpuSpec.sms"):
        replace(A100, sms=0)


def test_gemm_efficiency_by_hand():
    # 10 x 10 = 100 full tiles on 108 SMs: one wave, 8 SMs idle
    assert qz.gemm_efficiency(1280, 1280, 108) == pytest.approx(100 / 108)
    # exactly 108 full tiles: no loss
    assert qz.gemm_efficiency(128 * 12, 128 * 9, 108) == 1.0
    # BLOOM-200B's QKV on one TP-8 rank, one 2048-token micro-batch: n = 3 x 14400 / 8 = 5400 is 42.19 tiles,
    # padded to 43; 16 x 43 = 688 tiles run 7 waves of 108; useful 16 x 42.1875 = 675 tile areas of 756
    assert qz.gemm_efficiency(2048, 5400, 108) == pytest.approx(675 / 756)
    # 133 tiles on the H100's 132 SMs: a second wave with one tile
    assert qz.gemm_efficiency(128 * 133, 128, 132) == pytest.approx(133 / 264)
    # a 256 x 128 tile: 4 x 8 = 32 tiles of 1000 x 1000 (edge tiles padded): 1e6 / 32768 useful of 108
    assert qz.gemm_efficiency(1000, 1000, 108, (256, 128)) == pytest.approx(1e6 / 32768 / 108)
    with pytest.raises(ValueError, match="gemm_efficiency"):
        qz.gemm_efficiency(0, 5, 108)


def test_layer_gemms_and_backward_shapes_by_hand():
    g = qz.layer_gemms(2048, 14400, 14400, 57600, 8, gated=False)
    assert g == [(2048, 5400, 14400), (2048, 14400, 1800), (2048, 7200, 14400), (2048, 14400, 7200)]
    # one GEMM: forward output m x n; backward a data gradient m x k and a weight gradient k x n
    m, n, k = 1280, 1280, 128 * 12
    f, b = qz.gemms_factor([(m, n, k)], 108)
    assert f == pytest.approx(100 / 108)
    e_mk, e_kn = qz.gemm_efficiency(m, k, 108), qz.gemm_efficiency(k, n, 108)
    assert b == pytest.approx(2 / (1 / e_mk + 1 / e_kn))


def test_candidate_off_in_every_preset():
    assert "wave_quantization" in CANDIDATE_FIELDS
    assert not any(getattr(r, f) for r in ALL_PRESETS.values() for f in CANDIDATE_FIELDS)
    with pytest.raises(ValueError, match="wave_quantization"):
        CostRules(wave_quantization=1)


def _job(shape, gpu=A100):
    return Job(shape=shape, gpu=gpu, n_gpus=8, gpus_per_node=8, port_gb_s=25.0, global_batch=8)


def test_step_with_every_factor_one_only_changes_the_constants():
    # h = 108 x 128 and 108 x 128 tokens: every forward, data- and weight-gradient GEMM has a multiple of
    # 108 full tiles, so each factor is 1 and the switch changes only the fitted constants it uses
    sh = TransformerShape("square", 2, 13824, 108, 13824, vocab=128 * 300)
    job, cfg = _job(sh), ParallelConfig(dp=8, micro_batch=1)
    assert qz.gemms_factor(qz.layer_gemms(13824, 13824, 13824, 4 * 13824, 1, False), 108) == (1.0, 1.0)
    gpu = replace(A100, quantized=(A100.peak_fraction, A100.knee))
    a = step_estimate(_job(sh, gpu), cfg, PRACTICE)
    b = step_estimate(_job(sh, gpu), cfg, WQ)
    assert b["step_s"] == pytest.approx(a["step_s"], rel=1e-12)
    assert step_estimate(job, cfg, WQ)["efficiency"] == pytest.approx(efficiency(A100, 13824, quantized=True))


def test_step_slower_by_the_gemm_factor_by_hand():
    # BLOOM-200B's layer on a TP-8 rank: the forward GEMMs slow by 1 / q_fwd, the backward by 1 / q_bwd,
    # attention unchanged (same constants on both sides)
    sh = TransformerShape("bloom-200b", 8, 14400, 96, 2048, vocab=250880)
    gpu = replace(A100, quantized=(A100.peak_fraction, A100.knee))
    cfg = ParallelConfig(tp=8, micro_batch=1)
    job = Job(shape=sh, gpu=gpu, n_gpus=8, gpus_per_node=8, port_gb_s=25.0, global_batch=1)
    a, b = step_estimate(job, cfg, PRACTICE), step_estimate(job, cfg, WQ)
    qf, qb = qz.gemms_factor(qz.layer_gemms(2048, 14400, 14400, 57600, 8, False), 108)
    assert 0.85 < qf < 0.95 and qb < 1
    gemm = a["fwd_s"] - a["attention_s"]
    assert b["fwd_s"] == pytest.approx(gemm / qf + a["attention_s"])
    assert b["bwd_s"] == pytest.approx(2 * gemm / qb + 2 * a["attention_s"])
    assert b["step_s"] > a["step_s"]
