"""Each mechanism of ``practice`` against a hand calculation, and each switch off giving the previous numbers
(lib/galvatron/search/{collectives,precision,zero,activations,schedules,layout,efficiency}.py and
cost.step_estimate)."""

import math
from dataclasses import replace

import pytest

from lib.galvatron.search import activations as act
from lib.galvatron.search import collectives as col
from lib.galvatron.search import schedules as sch
from lib.galvatron.search import zero as zr
from lib.galvatron.search.analytic import SHAPES, TransformerShape, analytic_profile
from lib.galvatron.search.cost import (_dp_exposed, _dp_exposed_layerwise, layer_memory_mb, layer_time_s,
                                       network_of, other_memory_mb, step_estimate)
from lib.galvatron.search.efficiency import efficiency, load_gpu
from lib.galvatron.search.engine import evaluate_plan
from lib.galvatron.search.layout import Job, ParallelConfig, stage_layers
from lib.galvatron.search.plan import Plan
from lib.galvatron.search.precision import bytes_per_value
from lib.galvatron.search.profiles import ClusterProfile
from lib.galvatron.search.rules import (GALVATRON2, MECHANISM_FIELDS, MECHANISMS, PRACTICE, STACK_FIELDS,
                                        VLDB2023, get_rules)
from lib.galvatron.search.strategies import Strategy

H100 = load_gpu("h100-sxm-80gb")
A100 = load_gpu("a100-sxm-80gb")
GPT = TransformerShape("gpt-13b", 40, 5120, 40, 2048, vocab=51200)


def job(shape=GPT, n=64, B=128, gpu=H100, port=50.0):
    return Job(shape=shape, gpu=gpu, n_gpus=n, gpus_per_node=8, port_gb_s=port, global_batch=B)


def off(*fields):
    return PRACTICE.with_(name="practice-off", **{f: False for f in fields})


# ---------------------------------------------------------------------------------------------- collectives
def test_ring_all_reduce_by_hand():
    # 2 (n-1)/n S / bw + 2 (n-1) alpha: n = 4, 1 GB at 100 GB/s, 5 us
    assert col.ring_s("all-reduce", 1e9, 4, 1e11, 5e-6) == pytest.approx(2 * 0.75 * 0.01 + 6 * 5e-6)
    assert col.ring_s("reduce-scatter", 1e9, 4, 1e11) == pytest.approx(0.0075)
    assert col.ring_s("all-gather", 1e9, 1, 1e11) == 0.0
    with pytest.raises(ValueError, match="kind must be one of"):
        col.ring_s("broadcast", 1.0, 2, 1.0)


def test_hierarchical_and_flat_rings_by_hand():
    net = col.Network(gpus_per_node=8, nvlink_bw=400e9, port_bw=40e9, nvlink_latency=0, port_latency=0)
    S = 8e9
    # 16 ranks one apart: 8 per node on 2 nodes. RS inside (7/8 S / nv), AR of S/8 across (2 1/2 S/8 / port),
    # AG inside (7/8 S / nv)
    hand = 2 * 7 / 8 * S / 400e9 + 2 * 0.5 * (S / 8) / 40e9
    assert col.group_s("all-reduce", S, 16, 1, net) == pytest.approx(hand)
    # the previous rule: one ring at the port's speed
    assert col.group_s("all-reduce", S, 16, 1, net, hierarchical=False) == pytest.approx(2 * 15 / 16 * S / 40e9)
    # a DP group of TP-8 ranks: one per node, the port only
    assert col.group_s("reduce-scatter", S, 4, 8, net) == pytest.approx(0.75 * S / 40e9)
    # inside a node: NVLink
    assert col.group_s("all-reduce", S, 8, 1, net) == pytest.approx(2 * 7 / 8 * S / 400e9)
    over = col.Network(8, 400e9, 40e9, 0, 0, oversubscription=2.0, pod_nodes=2)
    assert col.group_s("reduce-scatter", S, 4, 8, over) == pytest.approx(2 * 0.75 * S / 40e9)
    assert col.group_s("reduce-scatter", S, 2, 8, over) == pytest.approx(0.5 * S / 40e9)   # inside a pod


# ---------------------------------------------------------------------------------------- precision and ZeRO
def test_bytes_per_parameter():
    mixed, fp32 = bytes_per_value(True, grad_bytes=2), bytes_per_value(False)
    assert mixed.states == 16 and fp32.states == 16 and mixed.message == 2 and fp32.message == 4
    assert bytes_per_value(True).states == 18      # fp32 gradients (Megatron-LM's bf16 default)
    with pytest.raises(ValueError, match="grad_bytes"):
        bytes_per_value(True, grad_bytes=3)


def test_zero_bytes_per_parameter_by_hand():
    # the ZeRO paper's mixed precision: 2 + 2 + 12 bytes; ZeRO-2 on 64 ranks: 2 + 14/64
    assert zr.state_bytes_per_param(2, 64, 2, 2, 12) == pytest.approx(2 + 14 / 64)
    assert zr.state_bytes_per_param(1, 64, 2, 2, 12) == pytest.approx(4 + 12 / 64)
    assert zr.state_bytes_per_param(3, 64, 2, 2, 12) == pytest.approx(16 / 64)
    assert zr.state_bytes_per_param(0, 64, 2, 2, 12) == 16
    with pytest.raises(ValueError, match="zero stage"):
        zr.state_bytes_per_param(4, 2, 2, 2, 12)
    c1, c3 = zr.collectives(1, 10.0, 2, 4), zr.collectives(3, 10.0, 2, 4)
    assert c1["per_step"] == [("reduce-scatter", 40.0, "bwd"), ("all-gather", 20.0, "fwd")]
    assert len(c3["per_micro_batch"]) == 3 and c3["per_step"] == []


# -------------------------------------------------------------------------------------------- activations
S, B, HID, A, T = 2048, 1, 12288, 96, 8


def sbh():
    return S * B * HID


def test_korthikanti_table_2_by_hand():
    kw = dict(s=S, b=B, h=HID, a=A, ffn=4 * HID, t=T)
    scores = 5 * A * S / (HID * T)
    assert act.layer_activation_bytes(**kw) == pytest.approx(sbh() * (10 + 24 / T + scores))
    assert act.layer_activation_bytes(**kw, sp=True) == pytest.approx(sbh() * (34 / T + scores))
    assert act.layer_activation_bytes(**kw, sp=True, recompute="selective") == pytest.approx(sbh() * 34 / T)
    assert act.layer_activation_bytes(**kw, recompute="full") == pytest.approx(2 * sbh())
    assert act.layer_activation_bytes(**kw, sp=True, recompute="full") == pytest.approx(2 * sbh() / T)
    assert act.layer_activation_bytes(**kw, sp=True, fused_attention=True) == pytest.approx(sbh() * 34 / T)
    # no dropout: two masks fewer; GQA: K and V 1/8 wide
    assert act.layer_activation_bytes(**kw, sp=True, fused_attention=True, dropout=False) == pytest.approx(
        sbh() * 32 / T)
    assert act.layer_activation_bytes(**kw, sp=True, fused_attention=True, kv_hidden=HID // 8) == pytest.approx(
        sbh() * (10 + 4 + 0.5 + 16) / T)
    # context parallelism: half the tokens per rank
    assert act.layer_activation_bytes(**kw, sp=True, fused_attention=True, cp=2) == pytest.approx(sbh() * 17 / T)


def test_kept_scores_without_dropout_are_the_softmax_output_alone_by_hand():
    # Korthikanti et al.: softmax output 2 a s^2 b + dropout mask a s^2 b + dropout output 2 a s^2 b = 5 a s^2 b.
    # Without dropout the product with V reads the softmax output itself: 2 a s^2 b, not 4.
    kw = dict(s=S, b=B, h=HID, a=A, ffn=4 * HID, t=T, sp=True)
    scores = lambda **k: act.layer_activation_bytes(**kw, **k) - act.layer_activation_bytes(
        **kw, fused_attention=True, **k)
    assert scores() == pytest.approx(5 * A * S * S * B / T)
    assert scores(dropout=False) == pytest.approx(2 * A * S * S * B / T)
    # at s = 2048, a = 96, b = 1, t = 8: 2 x 96 x 2048^2 / 8 = 100,663,296 bytes per layer per GPU
    assert scores(dropout=False) == pytest.approx(100_663_296)


def test_analytic_profile_uses_the_same_formula():
    sh = SHAPES["gpt2-xl"]
    for t in (1, 2, 4):
        assert act.layer_activation_bytes(sh.seq_len, 1, sh.hidden, sh.n_heads, sh.ffn, t) == pytest.approx(
            sh.layer_act_bytes_per_sample(t))


def test_attention_flops_and_ring_attention_bytes():
    assert act.attention_flops_per_token(2048, 1024) == 4 * 2048 * 1024
    assert act.attention_flops_per_token(2048, 1024, causal_skip=True) == 2 * 2048 * 1024
    r = act.ring_attention_bytes(8192, 1, 1024, 4)
    assert r["steps"] == 3 and r["fwd"] == pytest.approx(3 * 2 * 2048 * 1024 * 2) and r["bwd"] == 2 * r["fwd"]


# ---------------------------------------------------------------------------------------------- schedules
def test_1f1b_bubble_and_micro_batches_in_flight_by_hand():
    assert sch.bubble_fraction("1f1b", 4, 8) == pytest.approx(3 / 8)
    assert sch.bubble_fraction("interleaved", 4, 8, vp=2) == pytest.approx(3 / 16)
    assert [sch.in_flight("1f1b", 4, 8, r) for r in range(4)] == [4, 3, 2, 1]
    assert sch.in_flight("1f1b", 4, 2, 0) == 2                 # fewer micro-batches than stages
    assert sch.in_flight("gpipe", 4, 8, 3) == 8
    # interleaved, pp 4, vp 2, stage 0: 2 (pp - 1) + (vp - 1) pp + 1 = 11 chunks of half the stage
    assert sch.in_flight("interleaved", 4, 8, 0, vp=2) == pytest.approx(5.5)
    assert sch.step_s("1f1b", [1.0] * 4, 8) == pytest.approx(8 + 3)
    assert sch.step_s("interleaved", [1.0] * 4, 8, vp=2) == pytest.approx(8 + 1.5)
    assert sch.step_s("1f1b", [1.0, 2.0], 4) == pytest.approx(1 + 4 * 2)
    assert sch.exposed_p2p_s("1f1b", 4, 8, 0.01) == pytest.approx(2 * 11 * 0.01)
    assert sch.exposed_p2p_s("interleaved", 4, 8, 0.01, vp=2) == pytest.approx(2 * 3 * 0.01)
    with pytest.raises(ValueError, match="interleaved"):
        sch.bubble_fraction("1f1b", 4, 8, vp=2)


def test_uneven_stages():
    assert stage_layers(126, 16) == [7] + [8] * 14 + [7]
    assert stage_layers(126, 16, uneven=False) == [8] * 14 + [7] * 2
    assert stage_layers(105, 35) == [3] * 35 and sum(stage_layers(100, 9)) == 100
    assert stage_layers(100, 9)[-1] <= stage_layers(100, 9)[1]


def test_shape_efficiency():
    assert efficiency(H100, 4096, shaped=False) == 0.7
    p, k = H100.peak_fraction, H100.knee
    assert efficiency(H100, 4096) == pytest.approx(p * 4096 / (4096 + k))
    assert efficiency(A100, 25600) > efficiency(A100, 2304)


# ------------------------------------------------------------------- the composition, and switches turned off
def test_presets_keep_every_mechanism_off():
    for r in (GALVATRON2, VLDB2023):
        assert not any(getattr(r, f) for f in MECHANISM_FIELDS)
    assert all(getattr(PRACTICE, f) for f in MECHANISM_FIELDS) and get_rules("practice") is PRACTICE
    assert len(MECHANISMS) == 12
    # a stack's fields are off in every preset, practice included (set per run by validate.run_rules)
    assert not any(getattr(r, f) for r in (GALVATRON2, VLDB2023, PRACTICE) for f in STACK_FIELDS)
    with pytest.raises(ValueError, match="CostRules.fused_attention"):
        PRACTICE.with_(fused_attention=1)


def test_everything_off_gives_the_analytic_profile_numbers():
    """With every mechanism off, a layer's forward time, activations and model states are analytic.py's."""
    sh = SHAPES["llama-7b"]
    model, _ = analytic_profile(sh, "8xH100-nvlink", dtype="bf16")
    lp = model.layer_types[0]
    j = job(sh, n=8, B=8)
    none = off(*MECHANISM_FIELDS)
    for t in (1, 2, 4):
        e = step_estimate(j, ParallelConfig(tp=t, dp=8 // t, micro_batch=1), none)
        assert e["fwd_s"] * 1e3 == pytest.approx(lp.fwd_ms_per_sample / t)
        assert e["activation_bytes_per_layer"] / 2**20 == pytest.approx(lp.act_mb_per_sample[t])
    e = step_estimate(j, ParallelConfig(tp=1, dp=8), none)
    assert e["schedule"] == "gpipe" and e["efficiency"] == 0.7
    # the model states inside the estimate: the peak less the local batch's activations and the "other"
    # memory, against analytic.py's 4 x param_mb per layer
    acts = sh.n_layers * e["micro_batches"] * e["activation_bytes_per_layer"]
    other = other_memory_mb(model, Strategy.from_shape(1, 1, 8), 8) * 2**20
    assert (e["peak_bytes"] - acts - other) / 2**20 == pytest.approx(sh.n_layers * 4 * lp.param_mb, rel=1e-12)


def layerwise(j, cfg, rules):
    """The layer-wise model's (step seconds, peak bytes) of a uniform layout of ``j``: ``layer_time_s`` and
    ``layer_memory_mb`` over every layer plus ``other_memory_mb``, for the profile the job implies
    (analytic.py's layer at flat efficiency 0.7 on the job's GPU; ms per MB = 1 / the achievable bandwidth of
    NVLink inside a node, of the port across nodes)."""
    sh, n, gpn = j.shape, j.n_gpus, j.gpus_per_node
    model, _ = analytic_profile(sh, "8xH100-nvlink", dtype="bf16")
    lp = replace(model.layer_types[0],
                 fwd_ms_per_sample=sh.layer_fwd_flops_per_sample() / (j.gpu.flops("bf16") * 0.7) * 1e3)
    model = replace(model, layer_types=(lp,))
    net = network_of(j, off(*MECHANISM_FIELDS))
    intra, inter = 2**20 / net.nvlink_bw * 1e3, 2**20 / net.port_bw * 1e3
    cluster = ClusterProfile(
        name="job", n_gpus=n, gpus_per_node=gpn, overlap_coe=1.3, time_inflation=1.0,
        intra_node_ms_per_mb={f"{g}_{c}": intra for g in (2, 4, 8) for c in (0, 1)},
        inter_node_ms_per_mb=inter, p2p_ms_per_mb=intra if n // cfg.pp < gpn else inter)
    s = Strategy.from_shape(cfg.pp, cfg.tp, cfg.dp, sdp=cfg.zero == 3, ckpt=cfg.recompute == "full")
    chunks = j.global_batch // (cfg.dp * cfg.micro_batch) if cfg.pp > 1 else 1
    B, L = j.global_batch, sh.n_layers
    division = tuple(stage_layers(L, cfg.pp, uneven=False))     # Galvatron's division: the first stages fuller
    step = L * layer_time_s(lp, s, B, cluster, chunks, 0.0, rules)
    peak_mb = max(division) * layer_memory_mb(lp, s, B, rules) + other_memory_mb(model, s, B)
    plan = Plan.from_strategies([s] * L, B, chunks, pp_division=division)
    if rules.chunks == "galvatron2":    # the engine's own evaluation of the plan (memory in whole MB)
        ev = evaluate_plan(plan, model, cluster, rules)
        assert ev["iter_s"] == pytest.approx(step, rel=1e-12)
        assert 0 <= ev["mem_mb"] - peak_mb <= max(division)
    return step, peak_mb * 2**20


LAYOUTS = [dict(tp=tp, pp=pp, recompute=rc, zero=z)
           for tp in (1, 2, 4) for pp in (1, 2, 4) for rc in ("none", "full") for z in (0, 3)]


@pytest.mark.parametrize("preset", [GALVATRON2, VLDB2023], ids=lambda r: r.name)
@pytest.mark.parametrize("n, B", [(8, 16), (16, 64)])
def test_everything_off_matches_the_layerwise_model(preset, n, B):
    """Every switch off: the step and the fullest stage's memory of a uniform layout are the layer-wise
    model's under either preset (its leftover_dp, p2p, sdp_* fields), on one node and on two."""
    sh = SHAPES["llama-7b"]
    j = job(sh, n=n, B=B)
    rules = preset.with_(name=f"{preset.name} estimated")
    worst = 0.0
    for lay in LAYOUTS:
        dp = n // (lay["tp"] * lay["pp"])
        if dp < 1:
            continue
        cfg = ParallelConfig(dp=dp, micro_batch=2 if B // dp >= 4 else 1, **lay)
        e = step_estimate(j, cfg, rules)
        step, peak = layerwise(j, cfg, preset)
        assert e["step_s"] == pytest.approx(step, rel=1e-9), (lay, e["step_s"] / step - 1)
        assert e["peak_bytes"] == pytest.approx(peak, rel=1e-9), (lay, e["peak_bytes"] / peak - 1)
        worst = max(worst, abs(e["step_s"] / step - 1), abs(e["peak_bytes"] / peak - 1))
    assert worst < 1e-9


@pytest.mark.parametrize("preset", [GALVATRON2, VLDB2023], ids=lambda r: r.name)
@pytest.mark.parametrize("layers, pp", [(30, 4), (31, 2), (27, 8)])
def test_everything_off_matches_the_layerwise_model_on_uneven_stages(preset, layers, pp):
    """Layers not divisible by pp: the layer-wise model charges GPipe's bubble on every layer, so the step is
    the average stage's, not the slowest's; the fullest stage (Galvatron's division) sets the memory."""
    sh = replace(SHAPES["llama-7b"], n_layers=layers)
    j = job(sh, n=16, B=64)
    rules = preset.with_(name=f"{preset.name} estimated")
    for tp, rc, z in [(1, "none", 0), (2, "full", 0), (1, "full", 3)]:
        cfg = ParallelConfig(tp=tp, pp=pp, dp=16 // (tp * pp), micro_batch=1, recompute=rc, zero=z)
        e = step_estimate(j, cfg, rules)
        step, peak = layerwise(j, cfg, preset)
        assert e["step_s"] == pytest.approx(step, rel=1e-9), (tp, rc, z, e["step_s"] / step - 1)
        assert e["peak_bytes"] == pytest.approx(peak, rel=1e-9), (tp, rc, z, e["peak_bytes"] / peak - 1)


def test_layerwise_gpipe_by_hand():
    """Stages of 3, 3 and 2 layer-times, 4 micro-batches: (4 + 3 - 1) x 8/3 = 16, where the slowest-stage
    formula gives 4 x 3 + 3 + 2 = 17; equal stages agree with it."""
    assert sch.layerwise_gpipe_s([3.0, 3.0, 2.0], 4) == pytest.approx(16.0)
    assert sch.step_s("gpipe", [3.0, 3.0, 2.0], 4) == pytest.approx(17.0)
    assert sch.layerwise_gpipe_s([2.5] * 4, 6) == pytest.approx(sch.step_s("gpipe", [2.5] * 4, 6))


def test_the_presets_differ_where_the_layerwise_model_does():
    """vldb2023 has no P2P term and pays a pipelined pure-DP stage's leftover all-reduce once."""
    j = job(SHAPES["llama-7b"], n=16, B=8)
    cfg = ParallelConfig(tp=1, pp=2, dp=8, micro_batch=1)
    g2, v = step_estimate(j, cfg, GALVATRON2), step_estimate(j, cfg, VLDB2023)
    assert g2["p2p_s"] > 0 and v["p2p_s"] == 0 and v["dp_s"] < g2["dp_s"]


CFG = ParallelConfig(tp=4, pp=4, dp=4, vp=2, micro_batch=1, sequence_parallel=True, zero=1, recompute="selective")


@pytest.mark.parametrize("name, fields, _", MECHANISMS)
def test_each_switch_changes_its_own_terms(name, fields, _):
    j = job()
    cfg = CFG.with_(cp=2, dp=2) if fields == ("context_parallel",) else CFG
    on = step_estimate(j, cfg, PRACTICE)
    if fields == ("context_parallel",):
        with pytest.raises(ValueError, match="context_parallel"):
            step_estimate(j, cfg, off(*fields))
        return
    e = step_estimate(j, cfg, off(*fields))
    if fields == ("mixed_precision",):
        assert e["fwd_s"] == on["fwd_s"] and e["peak_bytes"] > on["peak_bytes"] and e["dp_s"] >= on["dp_s"]
    elif fields == ("fused_attention",):
        sh = j.shape
        extra = 1 * sh.seq_len * 2 * sh.seq_len * sh.hidden / 4            # the masked half, per TP rank
        assert e["fwd_s"] - on["fwd_s"] == pytest.approx(extra / (H100.flops("bf16") * H100.attention_fraction))
    elif fields == ("pipeline_schedules",):
        assert (on["schedule"], e["schedule"], e["vp"]) == ("interleaved", "gpipe", 1)
        # GPipe as the layer-wise model prices it: (m + pp - 1) average stage times (the head makes the last
        # stage the slowest: the slowest-stage formula would be longer); every micro-batch held
        m, pp = on["micro_batches"], 4
        assert e["pipeline_s"] == pytest.approx((m + pp - 1) * sum(e["stage_s"]) / pp)
        assert e["pipeline_s"] < m * max(e["stage_s"]) + sum(e["stage_s"]) - max(e["stage_s"])
        assert e["peak_bytes"] > on["peak_bytes"]
    elif fields == ("zero_stages",):
        assert (on["zero"], e["zero"]) == (1, 0) and e["peak_bytes"] > on["peak_bytes"]
    elif fields == ("sequence_parallel", "selective_recompute"):
        assert (e["sequence_parallel"], e["recompute"]) == (False, "full") and e["recompute_s"] > on["recompute_s"]
    elif fields == ("hierarchical_network",):
        assert e["dp_s"] >= on["dp_s"] and e["fwd_s"] == on["fwd_s"]
    elif fields == ("any_degrees",):
        j2 = job(TransformerShape("odd", 30, 4096, 32, 2048), n=32, B=64)
        c2 = ParallelConfig(tp=8, pp=4, dp=1, micro_batch=1)
        assert step_estimate(j2, c2, PRACTICE)["stage_layers"] == [7, 8, 8, 7]
        assert step_estimate(j2, c2, off(*fields))["stage_layers"] == [8, 8, 7, 7]
    elif fields == ("shape_efficiency",):
        assert e["efficiency"] == 0.7 and on["efficiency"] == pytest.approx(efficiency(H100, GPT.hidden))
        gemm_on, gemm_off = on["fwd_s"] - on["attention_s"], e["fwd_s"] - e["attention_s"]
        assert gemm_off * 0.7 == pytest.approx(gemm_on * on["efficiency"])
        assert e["attention_s"] == on["attention_s"]           # the attention kernel keeps its own rate
    elif fields == ("attention_efficiency",):
        # by hand: one micro-batch of 2048 tokens, causal half of 4 s h FLOPs per token, over tp = 4
        flops = 2048 * (4 * 2048 * GPT.hidden / 2) / 4
        assert on["attention_s"] == pytest.approx(flops / (989.5e12 * 0.35))
        assert e["attention_s"] == pytest.approx(flops / (989.5e12 * on["efficiency"]))
        assert e["fwd_s"] - e["attention_s"] == pytest.approx(on["fwd_s"] - on["attention_s"])
        # off: the previous formula, to the bit
        sh = j.shape
        tokens = CFG.micro_batch * sh.seq_len
        rate = H100.flops("bf16") * e["efficiency"]
        assert e["fwd_s"] == tokens * (2.0 * sh._matmul_params() + 2 * sh.seq_len * sh.hidden) / 4 / rate

    elif fields == ("micro_batch_search",):
        assert e == on             # a search dimension only: the estimate of a given layout is unchanged


def _tp_by_hand(j, cfg, fwd, attn, overlap):
    """Tensor-parallel seconds of one layer and micro-batch with SP and selective recompute: 2 collectives
    forward (exposed), 2 backward (hidden under the weight-gradient half of the backward with SP); with
    overlap, each direction hidden under its GEMMs (forward: fwd - attn, backward: twice that)."""
    from lib.galvatron.search.cost import network_of

    one = col.group_s("all-reduce", cfg.micro_batch * j.shape.seq_len * j.shape.hidden * 2, cfg.tp, 1,
                      network_of(j, PRACTICE))
    if overlap:
        return max(0.0, 2 * one - (fwd - attn)) + max(0.0, 2 * one - 2 * (fwd - attn))
    return 2 * one + max(0.0, 2 * one - fwd)


OVERLAP = PRACTICE.with_(name="practice+tp-overlap", tp_comm_overlap=True)


def test_tp_overlap_by_hand():
    """Off (practice): the previous TP terms; on: each direction hidden under its GEMMs (here entirely)."""
    j = job()
    on, e = step_estimate(j, CFG, OVERLAP), step_estimate(j, CFG, PRACTICE)
    assert e["tp_s"] == pytest.approx(_tp_by_hand(j, CFG, e["fwd_s"], e["attention_s"], overlap=False))
    assert on["tp_s"] == pytest.approx(_tp_by_hand(j, CFG, on["fwd_s"], on["attention_s"], overlap=True))
    assert on["tp_s"] < e["tp_s"] and on["fwd_s"] == e["fwd_s"]
    assert {k: v for k, v in on.items() if k not in ("tp_s", "stage_s", "pipeline_s", "step_s",
                                                       "tokens_per_s_per_gpu", "tflops_per_gpu")} == \
        {k: v for k, v in e.items() if k not in ("tp_s", "stage_s", "pipeline_s", "step_s",
                                                  "tokens_per_s_per_gpu", "tflops_per_gpu")}


def test_tp_overlap_by_hand_when_the_messages_outlast_the_gemms():
    """A slow NVLink (1 GB/s) makes the TP collectives longer than the GEMMs: only the excess stays."""
    slow = H100.__class__(**{**H100.__dict__, "nvlink_bw": 1e9})
    j = job(gpu=slow)
    on, e = step_estimate(j, CFG, OVERLAP), step_estimate(j, CFG, PRACTICE)
    assert on["tp_s"] == pytest.approx(_tp_by_hand(j, CFG, on["fwd_s"], on["attention_s"], overlap=True))
    assert 0 < on["tp_s"] < e["tp_s"]
    # without sequence parallelism there is nothing to pipeline: the switch changes nothing
    no_sp = CFG.with_(sequence_parallel=False)
    assert step_estimate(j, no_sp, OVERLAP)["tp_s"] == step_estimate(j, no_sp, PRACTICE)["tp_s"]


def test_the_layerwise_search_refuses_a_stack_field():
    from lib.galvatron.search.engine import _layerwise

    with pytest.raises(ValueError, match="tp_comm_overlap"):
        _layerwise(GALVATRON2.with_(tp_comm_overlap=True))


def test_step_estimate_errors_name_the_field():
    with pytest.raises(ValueError, match="tp x cp x dp x pp = 32 but the job has 64"):
        step_estimate(job(), ParallelConfig(tp=8, pp=4, dp=1), PRACTICE)
    with pytest.raises(ValueError, match="global_batch=128 is not a whole number"):
        step_estimate(job(), ParallelConfig(tp=1, pp=1, dp=64, micro_batch=4), PRACTICE)
    with pytest.raises(ValueError, match="ParallelConfig.recompute"):
        ParallelConfig(recompute="some")


def test_mixed_precision_off_is_sixteen_bytes_per_parameter_again():
    """fp32 weights and gradients (4 + 4) and 8 bytes of Adam, ZeRO-1 sharding the optimizer over dp = 8,
    against 2 + 4 + 12/8 under mixed precision; plain DP: 16 bytes against 18."""
    j = job()
    params = GPT.n_layers * GPT.layer_params() / 8 + 2 * GPT.vocab * GPT.hidden / 8    # layers, embedding, head
    for zero, old, new in ((1, 4 + 4 + 8 / 8, 2 + 4 + 12 / 8), (0, 16, 18)):
        cfg = ParallelConfig(tp=8, pp=1, dp=8, micro_batch=1, sequence_parallel=True, zero=zero)
        on, e = step_estimate(j, cfg, PRACTICE), step_estimate(j, cfg, off("mixed_precision"))
        assert e["peak_bytes"] - on["peak_bytes"] == pytest.approx(params * (old - new))


def test_pipeline_schedules_off_is_the_per_layer_send_again():
    """The layer-wise P2P rule: 2 sends of the whole boundary activation per layer, x pp, every
    micro-batch, never overlapped, / 24 (the dummy model's layers; here every stage boundary crosses nodes:
    the port); none under p2p="none" (vldb2023)."""
    j = job()
    cfg = ParallelConfig(tp=8, pp=4, dp=2, micro_batch=1)
    e = step_estimate(j, cfg, off("pipeline_schedules"))
    send = GPT.seq_len * GPT.hidden * 2 / (50e9 * H100.link_efficiency) + H100.port_latency_s
    assert e["p2p_s"] == pytest.approx(4 * 2 * 40 * e["micro_batches"] * send / 24)
    assert step_estimate(j, cfg, off("pipeline_schedules").with_(p2p="none"))["p2p_s"] == 0.0
    on = step_estimate(j, cfg, PRACTICE)
    ag = col.ring_s("all-gather", GPT.seq_len * GPT.hidden * 2, 8, H100.nvlink_bw * H100.link_efficiency,
                    H100.nvlink_latency_s)
    assert on["p2p_s"] == pytest.approx(2 * (on["micro_batches"] + 3) * (send - GPT.seq_len * GPT.hidden * 2 * 7 / 8
                                                                         / (50e9 * H100.link_efficiency) + ag))


def test_context_parallel_ring_hides_under_attention_or_pays_the_port():
    long = TransformerShape("long", 32, 4096, 32, 131072, ffn_hidden=14336, gated_mlp=True, n_kv_heads=8)
    j = job(long, n=64, B=64)
    inside = step_estimate(j, ParallelConfig(tp=2, cp=4, dp=8, micro_batch=1, sequence_parallel=True), PRACTICE)
    assert inside["cp_s"] == 0.0                    # 128K tokens: the attention outlasts every K/V pass
    short = TransformerShape("short", 32, 8192, 64, 2048, n_kv_heads=64)
    j2 = job(short, n=64, B=64)
    cfg = ParallelConfig(tp=8, cp=8, dp=1, micro_batch=1, sequence_parallel=True)
    e = step_estimate(j2, cfg.with_(dp=1), PRACTICE)
    ring = act.ring_attention_bytes(2048, 1, 8192, 8)
    hop = ring["fwd"] / 7 / (50e9 * H100.link_efficiency) + H100.port_latency_s      # across nodes
    # the attention core of 2048 / cp tokens over tp = 8, at the attention kernel's own rate
    attn = 2048 / 8 * (2 * 2048 * 8192) / 8 / (H100.flops("bf16") * H100.attention_fraction)
    assert e["attention_s"] == pytest.approx(attn)
    assert e["cp_s"] == pytest.approx(max(0, 7 * hop - attn) + max(0, 14 * hop - 2 * attn))
    assert e["cp_s"] > 0


def test_selective_recompute_working_memory_by_hand():
    """Backward under selective recompute re-creates only the attention scores of one layer (Korthikanti et
    al. 2022, section 5), not the whole layer: none at all with fused attention, whose kernel recomputes
    them itself. GPT-13B at TP 4 with SP, no pipeline: 40 layers in flight, one micro-batch of 2048."""
    j, t, L = job(), 4, GPT.n_layers
    cfg = ParallelConfig(tp=t, pp=1, dp=16, micro_batch=1, sequence_parallel=True, zero=1)
    one = GPT.seq_len * 1 * GPT.hidden                               # s b h, micro-batch 1
    keep = one * 34 / t                                            # SP + selective: Table 2
    scores = 5 * GPT.n_heads * GPT.seq_len ** 2 * 1 / t              # 5 a s^2 b / t, 16-bit
    # fused attention (practice): selective keeps what no recompute keeps and re-creates nothing
    none, sel = (step_estimate(j, cfg.with_(recompute=r), PRACTICE) for r in ("none", "selective"))
    assert sel["activation_bytes_per_layer"] == pytest.approx(keep)
    assert sel["peak_bytes"] == pytest.approx(none["peak_bytes"])
    # scores kept (fused attention off): no recompute holds them for all 40 layers, selective for the one
    # layer its backward is working on
    unfused = off("fused_attention")
    none, sel = (step_estimate(j, cfg.with_(recompute=r), unfused) for r in ("none", "selective"))
    assert none["activation_bytes_per_layer"] == pytest.approx(keep + scores)
    assert none["peak_bytes"] - sel["peak_bytes"] == pytest.approx((L - 1) * scores)
    # full recompute keeps each layer's input (2 s b h / t with SP) and re-creates one whole layer
    full = step_estimate(j, cfg.with_(recompute="full"), unfused)
    assert none["peak_bytes"] - full["peak_bytes"] == pytest.approx(
        L * (keep + scores) - L * 2 * one / t - (keep + scores))


# ------------------------------------------------------------------ each switch off, by hand, at step level
def test_dp_exposed_by_hand_for_each_zero_stage_and_with_the_switch_off():
    """1e9 parameters on 8 ranks of one node (100 GB/s, no latency), 4 micro-batches of 10 ms forward and
    20 ms backward: reduce-scatter of 4 GB 35 ms, all-gather of 2 GB 17.5 ms, all-reduce of 4 GB 70 ms."""
    net = col.Network(gpus_per_node=8, nvlink_bw=100e9, port_bw=10e9, nvlink_latency=0, port_latency=0)
    P, fwd, bwd, m = 1e9, 0.010, 0.020, 4

    def exposed(stage):
        return _dp_exposed(zr.collectives(stage, P, 2, 4), fwd, bwd, m, 8, 1, net, True)

    rs, ag, ar = 0.035, 0.0175, 0.070
    # ZeRO-1: both once a step, each under one micro-batch's window
    assert exposed(1) == pytest.approx((rs - bwd) + (ag - fwd))
    # ZeRO-2: the gather once a step, the reduce-scatter every micro-batch
    assert exposed(2) == pytest.approx((ag - fwd) + m * (rs - bwd))
    # ZeRO-3: a gather before forward, a gather and a reduce-scatter in backward, every micro-batch
    assert exposed(3) == pytest.approx(m * ((ag - fwd) + (ag + rs - bwd)))
    # plain DP: the all-reduce under one micro-batch's backward
    assert exposed(0) == pytest.approx(ar - bwd)
    # ZeRO stages off, the layer-wise rule: the whole backward (80 ms) overlaps the all-reduce at kappa 1.3;
    # with TP at dp = 2 only half of it (40 ms); a pipelined pure-DP stage under vldb2023 pays its leftover
    # / pp; SDP adds half an all-reduce
    G = m * bwd
    assert _dp_exposed_layerwise(ar, G, 8, 1, 1, False, 1, GALVATRON2) == pytest.approx(0.3 * ar)
    assert _dp_exposed_layerwise(ar, G, 2, 2, 1, False, 1, GALVATRON2) == pytest.approx(ar + 0.3 * G / 2 - G / 2)
    big = 0.2
    assert _dp_exposed_layerwise(big, G, 8, 1, 2, False, 4, VLDB2023) == pytest.approx(0.3 * G + (big - G) / 2)
    assert _dp_exposed_layerwise(big, G, 8, 1, 2, False, 4, GALVATRON2) == pytest.approx(big + 0.3 * G - G)
    assert _dp_exposed_layerwise(ar, G, 8, 1, 2, True, 4, GALVATRON2) == pytest.approx(0.3 * ar + 0.5 * ar)


def test_sequence_parallel_and_selective_recompute_off_is_the_papers_ckpt():
    """Full recompute with the switch off: one more forward and nothing else (no TP messages, no working
    memory); with it on (and SP not used), 2 more TP all-reduces and one layer's activations to rebuild."""
    j = job()
    cfg = ParallelConfig(tp=8, pp=1, dp=8, micro_batch=1, recompute="full")
    on = step_estimate(j, cfg, PRACTICE)
    e = step_estimate(j, cfg, off("sequence_parallel", "selective_recompute"))
    tp_one = col.ring_s("all-reduce", GPT.seq_len * GPT.hidden * 2, 8, H100.nvlink_bw * H100.link_efficiency,
                        H100.nvlink_latency_s)
    assert e["recompute_s"] == e["fwd_s"] == on["fwd_s"]
    assert e["tp_s"] == pytest.approx(4 * tp_one) and on["tp_s"] == pytest.approx(6 * tp_one)
    whole = act.layer_activation_bytes(GPT.seq_len, 1, GPT.hidden, GPT.n_heads, GPT.ffn, 8,
                                       fused_attention=True)
    assert e["activation_bytes_per_layer"] == on["activation_bytes_per_layer"] == pytest.approx(
        2 * GPT.seq_len * GPT.hidden)            # the layer's input, 2 bytes, whole on each rank
    assert on["peak_bytes"] - e["peak_bytes"] == pytest.approx(whole)


def test_hierarchical_network_off_prices_dp_on_the_flat_ring_without_latency():
    """TP 8 x DP 8 on 64 GPUs: each DP group has one GPU per node; a flat ring over the 8 ports (no latency)
    against the same ring with 2 x 7 port latencies. ZeRO-0: one all-reduce under one micro-batch's
    backward."""
    j = job(port=5.0)
    cfg = ParallelConfig(tp=8, pp=1, dp=8, micro_batch=1, sequence_parallel=True)
    P = GPT.n_layers * GPT.layer_params() / 8 + 2 * GPT.vocab * GPT.hidden / 8
    port = 5e9 * H100.link_efficiency
    flat = 2 * 7 / 8 * P * 4 / port
    for rules, latency in ((off("hierarchical_network"), 0.0), (PRACTICE, 14 * H100.port_latency_s)):
        e = step_estimate(j, cfg, rules)
        window = GPT.n_layers * (e["bwd_s"] + e["recompute_s"])
        assert e["dp_s"] == pytest.approx(flat + latency - window)


def test_micro_batch_search_off_holds_every_micro_batch_without_pipelines():
    """pp = 1 and GPipe: with the micro-batch search a step holds one micro-batch's activations (gradient
    accumulation), without it Galvatron-2's rule holds all m."""
    j = job()
    cfg = ParallelConfig(tp=8, pp=1, dp=8, micro_batch=1, sequence_parallel=True)
    with_mbs = step_estimate(j, cfg, off("pipeline_schedules"))
    without = step_estimate(j, cfg, off("pipeline_schedules", "micro_batch_search"))
    m, a = with_mbs["micro_batches"], with_mbs["activation_bytes_per_layer"]
    assert m == 16 and without["peak_bytes"] - with_mbs["peak_bytes"] == pytest.approx(
        (m - 1) * GPT.n_layers * a)


def test_mixed_precision_off_gathers_zero1_parameters_in_four_bytes():
    """ZeRO-1 on a slow port (every collective outlasts its window): the parameter all-gather moves 4 bytes a
    parameter without mixed precision, 2 with it; the gradient reduce-scatter 4 bytes in both."""
    j = job(port=2.0)
    cfg = ParallelConfig(tp=8, pp=1, dp=8, micro_batch=1, sequence_parallel=True, zero=1)
    P = GPT.n_layers * GPT.layer_params() / 8 + 2 * GPT.vocab * GPT.hidden / 8
    port = 2e9 * H100.link_efficiency

    def ring(nbytes):                  # a reduce-scatter or an all-gather over the 8 ports
        return 7 / 8 * nbytes / port + 7 * H100.port_latency_s

    for rules, gather_bytes in ((PRACTICE, 2), (off("mixed_precision"), 4)):
        e = step_estimate(j, cfg, rules)
        fwd_window = GPT.n_layers * e["fwd_s"]
        bwd_window = GPT.n_layers * (e["bwd_s"] + e["recompute_s"])
        assert e["dp_s"] == pytest.approx(ring(P * 4) - bwd_window + ring(P * gather_bytes) - fwd_window)


def test_zero1_moves_six_bytes_per_parameter_against_dps_eight_by_hand():
    # bf16 weights (p = 2), fp32 gradients (g = 4, Megatron-LM's rule for bf16): plain DP all-reduces the
    # gradients, 2 x 4 = 8 bytes per parameter through the ring; ZeRO-1 reduce-scatters them (4) and
    # all-gathers the weights (2): 6. On 8 ranks at 1 byte/s, x (8 - 1)/8: 7 s against 5.25 s per parameter.
    from lib.galvatron.search import collectives as co
    from lib.galvatron.search import zero

    def seconds(stage):
        return sum(co.ring_s(kind, nbytes, 8, 1.0) for kind, nbytes, _ in zero.collectives(stage, 1, 2, 4)["per_step"])

    assert seconds(0) == pytest.approx(7.0) and seconds(1) == pytest.approx(5.25)
    assert seconds(1) / seconds(0) == pytest.approx(6 / 8)
    # with p = g (the ZeRO paper's 2 and 2) the two cost the same
    same = [sum(co.ring_s(k, b, 8, 1.0) for k, b, _ in zero.collectives(s, 1, 2, 2)["per_step"]) for s in (0, 1)]
    assert same[0] == pytest.approx(same[1])
