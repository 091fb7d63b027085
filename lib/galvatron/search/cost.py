"""Memory and time of one layer under one strategy, and the Slice-Gather cost between two layers.

The formulas follow the Galvatron VLDB artifact as written down in the spec (sections 2.3-2.5): memory in MB,
time computed in ms for a dummy 24-layer model, then x 1.1 (empirical inflation) / 1000 / 24 -> seconds per
layer. Backward = 2 x forward; the data-parallel all-reduce overlaps backward, and both slow down by the
overlap coefficient kappa (1.3; 1.0 for the ablation). Pipelines pay the GPipe bubble (pp + m - 1)/(pp m) on
compute. Numpy only.

Every choice on which Galvatron versions differ is a field of a ``CostRules`` (``rules.py``), passed as
``rules=``; the default, ``galvatron2``, keeps this book's original choices, and ``vldb2023`` reproduces the
VLDB artifact's ``utils/cost_model.py``. Two of them live here: for pipelined DP shapes (2-1-4, 4-1-2) whose
communication exceeds the backward it overlaps, ``galvatron2`` counts the leftover all-reduce per stage
(x pp) where the artifact counts it once for DP; and for a pipelined TP x DP decoder layer (2-2-2)
``galvatron2`` overlaps 2/3 of the backward where the artifact overlaps 1/2. The others (SDP's all-gather and
memory bias, the P2P term, the micro-batch count) are read from the rules too.

Used in: book/galvatron/02_the_cost_model.ipynb, 03_the_search.ipynb.
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import lru_cache

import numpy as np

from . import activations as act
from . import collectives as col
from . import fabrics as fb
from . import schedules as sch
from . import quantization as qz
from . import zero as zr
from .efficiency import efficiency
from .layout import LayoutError, check_layout, chunk_layers, stage_layers, stage_layers_by_cost
from .precision import bytes_per_value
from .profiles import ClusterProfile, LayerProfile, ModelProfile
from .rules import CostRules, get_rules
from .strategies import Strategy

DUMMY_LAYERS = 24          # the artifact times a 24-layer dummy model and divides at the end
TIE_BREAK_S = 1e-4         # prefer not switching SDP -> DP (or to CKPT) between otherwise equal strategies


def _check(s: Strategy, cluster: ClusterProfile | None = None):
    if s.mixed_dp_sdp:
        raise ValueError(f"the cost model covers pruned strategies only (no DP and SDP in one tree); got {s.name}")
    if cluster is not None and s.n_gpus != cluster.n_gpus:
        raise ValueError(f"strategy {s.code} uses {s.n_gpus} GPUs but cluster {cluster.name!r} has {cluster.n_gpus}")


def layer_memory_mb(layer: LayerProfile, s: Strategy, global_bsz: float, rules: CostRules | None = None) -> float:
    """Per-GPU memory of one layer: 4 x P/tp model states (x (1/dp + bias) under SDP, bias 0.025 in both
    presets) + activations of the local batch B/dp (a GPipe stage keeps the whole local batch). MB."""
    _check(s)
    states = 4.0 * layer.param_mb / s.tp
    if s.sdp:
        states *= 1.0 / s.dp + get_rules(rules).sdp_mem_bias
    act = layer.ckpt_act_mb() if s.ckpt else layer.act_mb(s.tp)
    return states + act * global_bsz / s.dp


def other_memory_mb(model: ModelProfile, s_first: Strategy, global_bsz: float) -> float:
    """Memory outside the layers (embeddings, heads, CUDA context), with the first strategy of the PP group."""
    return (model.other_model_states_mb + model.other_act_mb_per_sample * global_bsz / (s_first.tp * s_first.dp)
            + model.context_mb)


def overlap_ms(comm_ms, bwd_ms, kappa: float = 1.3):
    """Time of backward overlapped with an all-reduce, both slowed by ``kappa`` while they overlap:
    max(C, G) + (kappa - 1) min(C, G). kappa = 1 gives max(C, G)."""
    comm_ms, bwd_ms = np.asarray(comm_ms, float), np.asarray(bwd_ms, float)
    return np.maximum(comm_ms, bwd_ms) + (kappa - 1.0) * np.minimum(comm_ms, bwd_ms)


def overlap_ms_stepwise(msg_mb: float, dc: float, bwd_ms: float, kappa: float = 1.3) -> float:
    """The same quantity computed the artifact's way (overlapped part + the rest at normal speed)."""
    a, c = msg_mb * dc * kappa, bwd_ms * kappa
    if a > c:
        return c + (msg_mb - c / (kappa * dc)) * dc
    return a + (bwd_ms - a / kappa)


def default_chunks(global_bsz: int, pp: int, n_gpus: int, micro_bsz: int = 4, max_chunks: int = 8) -> int:
    """Micro-batches per iteration (Galvatron-2's default rule): 1 without PP, else
    min(max_chunks, ceil((B / (dp tp)) / micro_bsz)). Every strategy of one PP degree has dp tp = n_gpus/pp,
    so the count is the same for all layers of a plan."""
    if pp == 1:
        return 1
    per_gpu = global_bsz * pp / n_gpus
    return int(min(max_chunks, max(1, math.ceil(per_gpu / micro_bsz - 1e-9))))


def _coes(s: Strategy, cluster: ClusterProfile):
    tc = cluster.allreduce_coe(s.pp, s.tp, s.tp_consec)
    dc = cluster.allreduce_coe(s.pp, s.dp, (not s.tp_consec) or s.tp == 1)
    return tc, dc


def _dp_overlap(dp_comm, bwd, dp: int, tp: int, pp: int, sdp: bool, decoder: bool, kappa: float,
                rules: CostRules) -> tuple[float, float]:
    """The layer-wise rule for a data-parallel all-reduce of ``dp_comm`` against a backward of ``bwd`` (any
    one unit): (``frac``, the share of the backward it overlaps: 1; with TP 2/3 for a decoder without PP,
    ``rules.decoder_pp_overlap`` with PP, 1/2 for other layers at dp = 2; the overlapped time at ``kappa``)."""
    frac = 1.0
    if tp > 1:
        if decoder:
            frac = 2.0 / 3.0 if pp == 1 else rules.decoder_pp_overlap
        else:
            frac = 0.5 if dp == 2 else 1.0
    ov = float(overlap_ms(dp_comm, frac * bwd, kappa))
    if pp > 1 and tp == 1 and rules.leftover_dp == "once" and not sdp and dp_comm > bwd:
        # the artifact overlaps per stage (bwd/pp against comm/pp, x pp) but pays the leftover once
        ov = kappa * bwd + (dp_comm - bwd) / pp
    return frac, ov


def _sdp_gather(allreduce, chunks, rules: CostRules):
    """The layer-wise model's SDP gather: ``sdp_gather_factor`` x the all-reduce, per micro-batch with
    ``sdp_gather_per_chunk``."""
    return rules.sdp_gather_factor * allreduce * (chunks if rules.sdp_gather_per_chunk else 1)


def layer_time_terms(layer: LayerProfile, s: Strategy, global_bsz: float, cluster: ClusterProfile,
                     chunks: float = 1, extra_overhead_ms: float = 0.0, rules: CostRules | None = None) -> dict:
    """Every term of one layer's time (ms per 24 dummy layers) and the total in seconds per layer.
    ``chunks``: micro-batches (fractional under the artifact's rules); ``rules``: see ``rules.py``."""
    _check(s, cluster)
    rules = get_rules(rules)
    kappa = cluster.overlap_coe
    pp, tp, dp = s.pp, s.tp, s.dp
    b = global_bsz / dp
    fct = layer.fwd_ms_per_sample * b / tp * DUMMY_LAYERS
    bct = 2.0 * fct + (fct if s.ckpt else 0.0)          # CKPT recomputes the forward before backward
    dp_msg = 2.0 * (dp - 1) / dp * layer.param_mb / tp * DUMMY_LAYERS
    tp_msg = (2.0 * (tp - 1) / tp * (b * layer.seq_len * layer.hidden * layer.tp_allreduces * layer.act_bytes
                                     / 2**20) * DUMMY_LAYERS)
    tc, dc = _coes(s, cluster)
    tp_ms = tp_msg * tc
    eo = extra_overhead_ms if dp > 1 else 0.0
    dp_comm = dp_msg * dc
    if dp == 1:
        overall, hidden_bwd = fct + bct + tp_ms, bct
        exposed = 0.0
    else:
        frac, ov = _dp_overlap(dp_comm, bct, dp, tp, pp, s.sdp, layer.decoder, kappa, rules)
        overall = fct + (1 - frac) * bct + ov + tp_ms + eo
        hidden_bwd = frac * bct
        exposed = ov - frac * bct
    if pp > 1:
        compute = fct + bct + tp_ms
        comm = overall - compute
        bubble = (pp + chunks - 1) / (pp * chunks)
        result = compute * bubble + comm
    else:
        bubble = 1.0
        result = overall
    sdp_ms = _sdp_gather(dp_msg * dc, chunks, rules) if s.sdp else 0.0
    p2p_ms = 0.0
    p2p_coe = rules.p2p_coe(cluster, pp)
    if pp > 1 and p2p_coe is not None:
        p2p_ms = pp * 2 * b * layer.seq_len * layer.hidden * layer.act_bytes / 2**20 * p2p_coe
    result += sdp_ms + p2p_ms
    scale = cluster.time_inflation * 1e-3 / DUMMY_LAYERS
    return {"fwd_ms": fct, "bwd_ms": bct, "dp_allreduce_ms": dp_comm, "dp_exposed_ms": exposed,
            "overlapped_bwd_ms": hidden_bwd, "tp_ms": tp_ms, "sdp_ms": sdp_ms, "p2p_ms": p2p_ms,
            "extra_overhead_ms": eo, "bubble_factor": bubble, "total_ms_24": result, "total_s": result * scale}


def layer_time_s(layer: LayerProfile, s: Strategy, global_bsz: float, cluster: ClusterProfile,
                 chunks: float = 1, extra_overhead_ms: float = 0.0, rules: CostRules | None = None) -> float:
    """Seconds one layer adds to an iteration of global batch ``global_bsz`` under strategy ``s``."""
    return layer_time_terms(layer, s, global_bsz, cluster, chunks, extra_overhead_ms, rules)["total_s"]


def transition_s(prev_layer: LayerProfile, a: Strategy, b: Strategy, global_bsz: float,
                 cluster: ClusterProfile) -> float:
    """Slice-Gather cost from a layer under ``a`` to the next under ``b``: an all-gather of the boundary
    activation over ``b``'s TP group when ``b`` needs data ``a`` does not hold locally; slicing is free."""
    _check(a, cluster)
    _check(b, cluster)
    stage_a = cluster.n_gpus // a.pp
    flags_differ = a.tp_consec != b.tp_consec
    gather = (b.tp > a.tp or (b.tp == a.tp and b.tp > 1 and flags_differ)
              or (b.tp < a.tp and b.tp > 1 and flags_differ and a.tp < stage_a))
    cost = 0.0
    if gather:
        coe = cluster.allreduce_coe(b.pp, b.tp, b.tp_consec)
        cost = (b.tp - 1) / b.tp * (prev_layer.boundary_mb_per_sample * global_bsz / b.dp) * coe * 1e-3
    same = (a.pp, a.tp, a.dp, a.tp_consec) == (b.pp, b.tp, b.dp, b.tp_consec)
    if same and a.ckpt == b.ckpt and a.sdp and not b.sdp:
        cost += TIE_BREAK_S
    if same and a.sdp == b.sdp and not a.ckpt and b.ckpt:
        cost += TIE_BREAK_S
    return cost


def cost_tables(model: ModelProfile, strategies: list, global_bsz: float, cluster: ClusterProfile,
                chunks=1, layers: list | None = None, rules: CostRules | None = None):
    """Per-layer tables for the dynamic program over ``layers`` (default: all of ``model``'s layers):
    time_s (L, S), mem_mb (L, S) and trans_s (L, S, S), where trans_s[i, a, b] is paid entering layer i
    under b from layer i-1 under a (zero for i = 0). ``chunks``: one count for every strategy, or a
    sequence with one count per strategy."""
    layers = model.layers() if layers is None else layers
    L, S = len(layers), len(strategies)
    per_s = list(chunks) if isinstance(chunks, (list, tuple, np.ndarray)) else [chunks] * S
    if len(per_s) != S:
        raise ValueError(f"chunks has {len(per_s)} counts for {S} strategies")
    per_type = {}
    for lt in {id(x): x for x in layers}.values():
        t = [layer_time_s(lt, s, global_bsz, cluster, c, model.extra_overhead_ms, rules)
             for s, c in zip(strategies, per_s)]
        m = [layer_memory_mb(lt, s, global_bsz, rules) for s in strategies]
        r = [[transition_s(lt, a, b, global_bsz, cluster) for b in strategies] for a in strategies]
        per_type[id(lt)] = (t, m, r)
    time_s = np.array([per_type[id(lt)][0] for lt in layers], dtype=float).reshape(L, S)
    mem_mb = np.array([per_type[id(lt)][1] for lt in layers], dtype=float).reshape(L, S)
    trans_s = np.zeros((L, S, S))
    for i in range(1, L):
        trans_s[i] = per_type[id(layers[i - 1])][2]
    return time_s, mem_mb, trans_s


# ------------------------------------------------------------------------------------------------------------
# A whole step of a uniform Transformer under the mechanisms of practice (rules.MECHANISMS).
#
# The layer-wise functions above are the paper's model, for its search (engine.py). What follows prices one
# training step of a job whose layers are all alike (``layout.Job``) under one layout (``layout.ParallelConfig``),
# composing one module per family of mechanisms: precision.py (bytes), activations.py (memory, attention),
# schedules.py (pipeline), zero.py (data-parallel states and collectives), collectives.py (the network),
# efficiency.py (compute speed) and layout.py (stages). Each switch of ``rules`` that is off leaves its term
# as the layer-wise model above has it: with every switch off, a uniform layout (every layer the same tp,
# dp or SDP, pp and checkpointing) costs what ``layer_time_s`` and ``layer_memory_mb`` summed over its layers
# (plus ``other_memory_mb``) give under ``galvatron2`` or ``vldb2023``, for the profile the job implies: flat
# efficiency 0.7, ms per MB = 1 / achievable bandwidth, kappa 1.3, 1 GiB context, no latency
# (tests/galvatron/search/test_practice_mechanisms.py). The presets' search-time fields (chunks,
# stage_budgets, division_input, mem_bins_max) do not apply: a layout states its micro-batches, and a
# uniform model's stages are even. Analytic layers are not ``decoder`` layers, so decoder_pp_overlap does
# not apply either. Units: bytes, FLOPs, seconds.
# ------------------------------------------------------------------------------------------------------------

#: Memory no model term accounts for: the CUDA context (about 0.5 GB) and NCCL's buffers (an assumption,
#: not a measured figure; the allocator's fragmentation is not counted). The paper's ``context_mb`` is the
#: same 1 GiB (analytic.py's default).
RESERVE_BYTES = 2**30
#: The layer-wise model's slowdown of a backward and an all-reduce that overlap (analytic.py's default).
OVERLAP_COE = 1.3


def network_of(job, rules: CostRules | None = None):
    """The job's ``collectives.Network``: achievable NVLink and port bandwidth of its GPU type."""
    rules = get_rules(rules)
    g = job.gpu
    # without the hierarchical network, bandwidth only: the layer-wise model's ms per MB has no latency
    lat = rules.hierarchical_network
    net = col.Network(gpus_per_node=job.gpus_per_node, nvlink_bw=g.nvlink_bw * g.link_efficiency,
                      port_bw=job.port_gb_s * 1e9 * g.link_efficiency,
                      nvlink_latency=g.nvlink_latency_s if lat else 0.0,
                      port_latency=g.port_latency_s if lat else 0.0,
                      oversubscription=rules.oversubscription, pod_nodes=rules.pod_nodes)
    fabric = job.fabric or (fb.fabric_for(g.name) if rules.measured_collectives else "")
    if fabric and rules.hierarchical_network:
        # the fabric's published achieved bandwidth by nodes spanned, of the line rate (fabrics.py), the
        # node's published NVLink all-reduce bus bandwidth, NCCL's tree latency for inter-node all-reduces:
        # for a job that states its fabric, and for every job under the candidate measured_collectives
        net = replace(net, port_bw=job.port_gb_s * 1e9,
                      port_fraction_points=fb.fraction_points(fabric),
                      port_fraction_points_gather=fb.fraction_points(fabric, "gather"),
                      nvlink_allreduce_bw=fb.nvlink_allreduce_bw(g.name), tree_allreduce=True)
        reading = fb.shortfall(fabric) if rules.fabric_reading == "file" else rules.fabric_reading
        if reading == "latency":
            net = latency_network(net, fabric)
    return net


@lru_cache(maxsize=64)
def latency_network(net, fabric: str):
    """``net`` on a fabric read by latency (``fabrics.shortfall``): the port at the fraction of the line rate
    its fewest-nodes all-reduce point achieved, for every kind and node count, and what each point loses
    below that as NCCL's per-step ring latency (``collectives.latency_from_points``), for all-reduce and for
    all-gather / reduce-scatter apart."""
    first = fb.fraction_points(fabric)[:1]
    net = replace(net, port_fraction_points=first, port_fraction_points_gather=(), tree_allreduce=False)
    size = fb.message_bytes(fabric)
    return replace(net,
                   port_latency_points=col.latency_from_points(
                       "all-reduce", fb.busbw_points(fabric), size, net),
                   port_latency_points_gather=col.latency_from_points(
                       "all-gather", fb.busbw_points(fabric, "gather"), size, net))


def effective_layout(cfg, rules: CostRules | None = None) -> tuple:
    """(schedule, vp, zero, sequence_parallel, recompute) that ``rules`` can price for ``cfg``: without
    pipeline schedules everything is GPipe (one chunk); without ZeRO stages 1 and 2 are plain data parallel;
    without sequence parallelism SP is off; without selective recompute it is full recompute (all or
    nothing). Context parallelism without its switch is an error."""
    rules = get_rules(rules)
    if cfg.cp > 1 and not rules.context_parallel:
        raise LayoutError(f"cp={cfg.cp} needs rules with context_parallel on ({rules.name} has it off)")
    if rules.pipeline_schedules:
        schedule, vp = ("interleaved" if cfg.vp > 1 else "1f1b"), cfg.vp
    else:
        schedule, vp = "gpipe", 1
    zero = cfg.zero if rules.zero_stages or cfg.zero in (0, 3) else 0
    sp = cfg.sequence_parallel and rules.sequence_parallel and cfg.tp > 1
    recompute = cfg.recompute
    if recompute in ("selective", "op") and not rules.selective_recompute:
        recompute = "full"
    return schedule, vp, zero, sp, recompute


def block_costs(sh) -> tuple[float, float]:
    """(a layer's, the output head's) cost by nanotron's formula (``get_block_compute_costs``): 4 h^2 + 3 ffn h
    and vocab x h."""
    h = sh.hidden
    return 4 * h * h + 3 * sh.ffn * h, sh.vocab * h


def stages_of(sh, pp: int, vp: int, rules: CostRules) -> list[int]:
    """Layers on each pipeline stage of a model of shape ``sh``: split by cost where the stack does
    (``rules.stages_by_cost``, without interleaving; ``block_costs``), else by count (``layout.stage_layers``).
    LayoutError where the cost split empties a stage."""
    if rules.stages_by_cost and pp > 1 and vp == 1:
        return stage_layers_by_cost(sh.n_layers, pp, *block_costs(sh))
    return stage_layers(sh.n_layers, pp, uneven=rules.any_degrees)


def dp_buckets(stage_params: float, layer_params: float, d: int, rules: CostRules) -> int:
    """How many buckets a stage of ``stage_params`` parameters per GPU splits its data-parallel collectives
    into over ``d`` ranks, by the stack's numbers (``rules.STACK_NUMBERS``): a bucket holds
    max(dp_bucket_params, dp_bucket_per_rank x d, dp_bucket_layers x ``layer_params``). 0: no bucket rule
    (all three 0), one collective per stage."""
    size = max(rules.dp_bucket_params, rules.dp_bucket_per_rank * d, rules.dp_bucket_layers * layer_params)
    return max(1, math.ceil(stage_params / size - 1e-9)) if size > 0 and stage_params > 0 else 0


def _dp_exposed(colls, mb_fwd, mb_bwd, m, d, tp, net, hier, queued: bool = False, buckets: int = 0,
                one_gather: bool = False) -> float:
    """Seconds the data-parallel / ZeRO collectives of one stage add to a step with ZeRO stages on: the
    once-a-step ones hide under one micro-batch's forward or backward (``mb_fwd``, ``mb_bwd``), or under none
    (phase "step": a weight gather the optimizer step waits for, ``rules.exposed_param_gather``), the
    per-micro-batch ones under each of the ``m``. ``queued`` (the stack field ``rules.queued_collectives``): the
    per-micro-batch ones may run on under the next micro-batch's compute, so the queue costs only what it
    outgrows a micro-batch's forward and backward by, m - 1 times, and the last one's tail. Without ZeRO
    stages: ``_dp_exposed_layerwise``. ``buckets`` (``dp_buckets``; 0: one collective): every collective
    runs as that many equal buckets, each paying the collective's latency, and at least one bucket of each
    phase is exposed (the last gradient bucket is ready only when its backward ends; the first weight bucket
    is needed before its forward starts). ``one_gather`` (the stack field ``rules.one_param_gather``): the
    step's weight gather (phase "step") is one collective, not ``buckets``."""
    if d == 1:
        return 0.0
    n = max(1, buckets)
    t_step, t_mb = {"fwd": 0.0, "bwd": 0.0, "step": 0.0}, {"fwd": 0.0, "bwd": 0.0}
    for kind, nbytes, phase in colls["per_step"]:
        b = 1 if one_gather and phase == "step" else n
        t_step[phase] += b * col.group_s(kind, nbytes / b, d, tp, net, hier)
    for kind, nbytes, phase in colls["per_micro_batch"]:
        t_mb[phase] += n * col.group_s(kind, nbytes / n, d, tp, net, hier)
    windows = (("fwd", mb_fwd), ("bwd", mb_bwd))

    def exposed(t, window):           # what outlasts the window; with buckets, at least one bucket
        return max(t / n if buckets else 0.0, t - window)

    once = t_step["step"] + sum(exposed(t_step[p], w) for p, w in windows)
    if not queued:
        return once + m * sum(exposed(t_mb[p], w) for p, w in windows)
    backlog = max(0, m - 1) * max(0.0, t_mb["fwd"] + t_mb["bwd"] - (mb_fwd + mb_bwd))
    return once + backlog + sum(exposed(t_mb[p], w) for p, w in windows)


def _layerwise_p2p_s(pp: int, n_layers: int, m: int, send_s: float) -> float:
    """The layer-wise model's pipeline sends (``layer_time_terms``' ``p2p_ms``), without pipeline schedules:
    per layer of ``n_layers`` and micro-batch of ``m``, 2 sends of ``send_s`` x pp, never overlapped; its
    terms are per ``DUMMY_LAYERS`` layers and the send is not multiplied by them, so each layer pays
    1 / ``DUMMY_LAYERS`` of its sends."""
    return 0.0 if pp == 1 else pp * 2 * n_layers * m * send_s / DUMMY_LAYERS


def _dp_exposed_layerwise(allreduce_s: float, bwd_s: float, dp: int, tp: int, pp: int, sdp: bool,
                          chunks: int, rules: CostRules) -> float:
    """Seconds one stage's data-parallel all-reduce (``allreduce_s``, once a step) adds to a step under the
    layer-wise rule of ``layer_time_terms``, for a stage whose backward (recompute included, all
    micro-batches) takes ``bwd_s``: it overlaps the share ``frac`` of the backward (1; with TP, 1/2 at
    dp = 2: analytic layers are not decoder layers) at kappa 1.3; under ``leftover_dp="once"`` a pipelined
    pure-DP stage pays its leftover all-reduce / pp; SDP adds ``sdp_gather_factor`` x the all-reduce (per
    micro-batch with ``sdp_gather_per_chunk``). Used when ZeRO stages are off."""
    if dp == 1:
        return 0.0
    frac, ov = _dp_overlap(allreduce_s, bwd_s, dp, tp, pp, sdp, False, OVERLAP_COE, rules)
    return ov - frac * bwd_s + (_sdp_gather(allreduce_s, chunks, rules) if sdp else 0.0)


def model_flops_per_token(sh) -> float:
    """Model FLOPs of one trained token of shape ``sh``, as model FLOPs utilisation counts them (Chowdhery et
    al. 2022): 6 x parameters + the attention scores' 12 x layers x s x h (no causal saving, no recompute)."""
    return 6.0 * sh.n_params() + 3.0 * sh.n_layers * act.attention_flops_per_token(sh.seq_len, sh.hidden)


def step_estimate(job, cfg, rules: CostRules | None = None) -> dict:
    """Time and memory of one training step of ``job`` under layout ``cfg``: a dict with ``step_s``,
    ``tokens_per_s_per_gpu``, ``tflops_per_gpu`` (6 N + attention, model FLOPs), ``peak_bytes`` (the
    fullest stage), ``fits`` and every term (``pipeline_s``, ``p2p_s``, ``dp_s``, per-layer ``fwd_s`` ...)."""
    rules = get_rules(rules)
    sh, gpu = job.shape, job.gpu
    schedule, vp, zero, sp, recompute = effective_layout(cfg, rules)
    # uneven interleaving (layout.chunk_layers) comes with uneven stages: any_degrees
    uneven_chunks = rules.any_degrees and vp > 1
    m = check_layout(job, cfg, spare_chunks=2 if uneven_chunks else 0)
    # a stack that keeps fp16 gradients in fp16 (rules.fp16_gradients: DeepSpeed's fp16 engine) holds and
    # reduces 2 bytes a gradient in an fp16 run; otherwise fp32 main gradients (grad_reduce_bytes)
    grad_bytes = 2 if rules.fp16_gradients and job.dtype == "fp16" else rules.grad_reduce_bytes
    by = bytes_per_value(rules.mixed_precision, grad_bytes, act_bytes=2)
    net = network_of(job, rules)
    hier = rules.hierarchical_network
    tp, pp, dp, cp, mb = cfg.tp, cfg.pp, cfg.dp, cfg.cp, cfg.micro_batch
    h, s, L = sh.hidden, sh.seq_len, sh.n_layers
    if uneven_chunks:
        chunks = chunk_layers(L, pp, vp)
        layers = [sum(c) for c in chunks]
    else:
        layers = stages_of(sh, pp, vp, rules)
        if vp > 1 and any(n % vp for n in layers):
            raise LayoutError(f"vp={vp} must divide every stage's layers {sorted(set(layers))}")
        chunks = [[n // vp] * vp for n in layers]
    uneven = uneven_chunks and any(len(set(c)) > 1 for c in chunks)   # only chunk_layers makes them differ

    # compute: one layer, one micro-batch
    rate = gpu.flops(job.dtype) * efficiency(gpu, h, shaped=rules.shape_efficiency,
                                            quantized=rules.wave_quantization)
    tokens = mb * s / cp
    fused = rules.fused_attention and not rules.without_fused_attention   # a stack before FlashAttention
    attn_tok = act.attention_flops_per_token(s, h, causal_skip=fused)
    if rules.attention_efficiency and not rules.without_fused_attention:
        # the s^2 attention core runs in its own fused kernel, at the fraction of peak that kernel is quoted
        # to reach on this GPU type (data/hardware/gpus/: attention_fraction), not at the GEMMs' rate
        attn_fwd = tokens * attn_tok / tp / (gpu.flops(job.dtype) * gpu.attention_fraction)
        fwd = tokens * 2.0 * sh._matmul_params() / tp / rate + attn_fwd
    else:
        fwd = tokens * (2.0 * sh._matmul_params() + attn_tok) / tp / rate
        attn_fwd = tokens * attn_tok / tp / rate
    bwd = 2.0 * fwd
    q_head = (1.0, 1.0)
    if rules.wave_quantization:
        # every GEMM at the fitted rate times its tile- and wave-quantization factor (quantization.py); the
        # backward's GEMMs have other output shapes, so their own factor
        gemms = qz.layer_gemms(int(tokens), h, sh.kv_hidden, sh.ffn, tp, sh.gated_mlp)
        q_fwd, q_bwd = qz.gemms_factor(gemms, gpu.sms, gpu.gemm_tile)
        gemm_fwd = fwd - attn_fwd
        fwd = gemm_fwd / q_fwd + attn_fwd
        bwd = 2.0 * gemm_fwd / q_bwd + 2.0 * attn_fwd
        q_head = qz.gemms_factor([(int(tokens), max(1, sh.vocab // tp), h)], gpu.sms, gpu.gemm_tile)
    # op-level checkpointing (torchtitan's "op") recomputes every other projection, not attention
    if recompute == "op":
        recomp = (fwd - attn_fwd) * act.op_recompute_share(h, sh.kv_hidden, sh.ffn, sh.gated_mlp)
    else:
        recomp = {"none": 0.0, "selective": attn_fwd, "full": fwd}[recompute]
    # tensor parallelism: 2 all-reduces forward, 2 backward, 2 more in a full recompute (SP: an all-gather
    # and a reduce-scatter each, the same bytes). Forward ones wait; with sequence parallelism the backward
    # ones overlap the weight-gradient matmuls (half the backward: one forward's time), as Megatron-LM's
    # sequence-parallel linear layers do (Korthikanti et al. 2022). Without selective recompute, full
    # recompute is the paper's CKPT: its forward's compute only
    full_rc = recompute == "full" and rules.selective_recompute
    tp_one = col.group_s("all-reduce", tokens * h * by.activation, tp, 1, net, hier)
    tp_fwd = (2 + (2 if full_rc else 0)) * tp_one
    tp_bwd = max(0.0, 2 * tp_one - fwd) if sp else 2 * tp_one
    if rules.tp_backward_waits and sp and not rules.tp_comm_overlap:
        # a stack that waits for each backward TP collective (rules.tp_backward_waits: nanotron's synchronous
        # linear layers) hides none under the weight-gradient GEMMs, and each of the two column-parallel
        # layers gathers its sequence-parallel input again for its weight gradient
        tp_bwd = 2 * tp_one + 2 * col.group_s("all-gather", tokens * h * by.activation, tp, 1, net, hier)
    if rules.tp_comm_overlap and sp and rules.tp_overlap_own_shard:
        # nanotron's async TP (rules.tp_overlap_own_shard): a column layer's forward gather runs under the GEMM
        # of the rank's own slice only; the row layers' forward reduce-scatters wait; in backward the column
        # layer gathers under its input-gradient GEMM and reduce-scatters under its weight-gradient GEMM, the
        # row layer gathers the output gradient under its own slice's GEMM. A full recompute repeats the forward
        act_bytes = tokens * h * by.activation
        ag = col.group_s("all-gather", act_bytes, tp, 1, net, hier)
        rs = col.group_s("reduce-scatter", act_bytes, tp, 1, net, hier)
        gemm_fwd = fwd - attn_fwd
        cols, rows = act.tp_linear_shares(h, sh.kv_hidden, sh.ffn, sh.gated_mlp)
        tp_fwd = (sum(max(0.0, ag - gemm_fwd * c / tp) for c in cols) + len(rows) * rs) * (2 if full_rc else 1)
        tp_bwd = (sum(max(0.0, ag - gemm_fwd * c) + max(0.0, rs - gemm_fwd * c) for c in cols)
                  + sum(max(0.0, ag - gemm_fwd * r / tp) for r in rows))
    elif rules.tp_comm_overlap and sp:
        # Megatron-core's --tp-comm-overlap splits each all-gather / reduce-scatter into chunks pipelined
        # with the GEMM that consumes or produces it: only what outlasts the layer's GEMMs stays exposed
        gemm_fwd = fwd - attn_fwd
        tp_fwd = max(0.0, tp_fwd - gemm_fwd - (gemm_fwd if full_rc else 0.0))
        tp_bwd = max(0.0, 2 * tp_one - 2.0 * gemm_fwd)
    tp_s = tp_fwd + tp_bwd
    # context parallelism: ring attention's K/V passes, hidden under the attention compute where they can be;
    # a ring whose cp ranks (tp apart) span nodes goes at the port's speed
    cp_s = 0.0
    if cp > 1:
        ring = act.ring_attention_bytes(s, mb, sh.kv_hidden, cp, by.activation)
        hop = col.group_s("send", ring["fwd"] / ring["steps"], cp, tp, net, hier)
        cp_s = max(0.0, ring["steps"] * hop - attn_fwd) + max(0.0, 2 * ring["steps"] * hop - 2 * attn_fwd)
    layer_s = fwd + bwd + recomp + tp_s + cp_s
    head_s = 0.0
    if rules.embedding_and_head:
        head_s = 3.0 * tokens * 2.0 * h * sh.vocab / tp / rate    # output head forward + backward
        if rules.wave_quantization:
            head_s = head_s / 3.0 / q_head[0] + head_s * 2.0 / 3.0 / q_head[1]
    stage_s = [n * layer_s + (head_s if i == pp - 1 else 0.0) for i, n in enumerate(layers)]

    # pipeline: where every stage's chunks are alike, the even formula; else each chunk priced, the head
    # on the last chunk of the last stage (schedules.chunked_step_s)
    m_eff = m
    if not rules.pipeline_schedules:    # the layer-wise model's GPipe: its bubble on every layer
        pipe_s = sch.layerwise_gpipe_s(stage_s, m_eff)
    elif not uneven:
        pipe_s = sch.step_s(schedule, stage_s, m_eff, vp)
    else:
        chunk_s = [[n * layer_s + (head_s if (i, j) == (pp - 1, vp - 1) else 0.0) for j, n in enumerate(c)]
                   for i, c in enumerate(chunks)]
        pipe_s = sch.chunked_step_s(schedule, chunk_s, m_eff)
    boundary = tokens * h * by.activation
    stride = job.n_gpus // pp
    if rules.pipeline_schedules:
        # each TP rank sends its 1/tp slice and the receivers all-gather it over NVLink (Narayanan et al.
        # 2021, section 4.1; with SP the tensor is already split)
        send_s = col.group_s("send", boundary / tp, 2, stride, net, hier) if pp > 1 else 0.0
        if pp > 1 and not sp:
            send_s += col.group_s("all-gather", boundary, tp, 1, net, hier)
        p2p_s = sch.exposed_p2p_s(schedule, pp, m_eff, send_s, vp)
    else:
        # the layer-wise term (layer_time_terms): the preset's ms per MB for this pp if it gives one
        coe = dict(rules.p2p_ms_per_mb_by_pp).get(pp)
        if coe is not None:
            send_s = boundary / 2**20 * coe * 1e-3
        else:
            send_s = col.group_s("send", boundary, 2, stride, net, hier) if pp > 1 else 0.0
        p2p_s = 0.0 if rules.p2p == "none" else _layerwise_p2p_s(pp, sum(layers), m_eff, send_s)

    # data parallelism and ZeRO over the dp x cp ranks that hold the same weights
    d = dp * cp
    layer_params = sh.layer_params() / tp
    # vocabulary-parallel embedding / head; without their switch, the paper's "other" memory holds them
    emb_params = sh.vocab * h / tp if rules.embedding_and_head else 0.0
    stage_params = [n * layer_params + (emb_params if i == 0 else 0.0) + (emb_params if i == pp - 1 else 0.0)
                    for i, n in enumerate(layers)]
    dp_s = {}
    for i, P in enumerate(stage_params):
        key = (layers[i], i == 0, i == pp - 1)
        if key in dp_s:
            continue
        if rules.zero_stages:
            # a stack whose ZeRO-3 collectives run as flat rings (rules.STACK_FIELDS) moves each GPU's
            # whole buffer through its own port, however many GPUs of a node share the group
            flat = rules.flat_zero3_collectives and zero == 3
            colls = zr.collectives(zero, P, by.param, by.grad, gather_after_step=rules.exposed_param_gather)
            dp_s[key] = _dp_exposed(colls, layers[i] * fwd,
                                    layers[i] * (bwd + recomp), m, d, tp, net, hier and not flat,
                                    queued=rules.queued_collectives,
                                    buckets=dp_buckets(P, layer_params, d, rules),
                                    one_gather=rules.one_param_gather)
        else:
            ar = col.group_s("all-reduce", P * by.grad, d, tp, net, hier)
            dp_s[key] = _dp_exposed_layerwise(ar, m * layers[i] * (bwd + recomp), d, tp, pp, zero == 3,
                                              m if pp > 1 else 1, rules)
    if rules.zero_stages:
        dp_exposed = max(dp_s.values())
    else:   # the layer-wise model adds every layer's exposed all-reduce: every stage's
        dp_exposed = sum(dp_s[(n, i == 0, i == pp - 1)] for i, n in enumerate(layers))
    step = pipe_s + p2p_s + dp_exposed

    # memory of every stage
    a_layer = act.layer_activation_bytes(s, mb, h, sh.n_heads, sh.ffn, tp, gated=sh.gated_mlp, sp=sp,
                                         recompute=recompute, fused_attention=fused, cp=cp,
                                         act_bytes=by.activation, kv_hidden=sh.kv_hidden,
                                         dropout=job.dropout)
    a_work = 0.0
    if recompute != "none" and rules.selective_recompute:
        # backward re-creates what the recompute dropped, one layer at a time: under full recompute the
        # whole layer's activations; under selective recompute only the attention scores it did not keep
        # (Korthikanti et al. 2022, section 5: none of them with fused attention, whose kernel recomputes
        # the scores block by block itself), i.e. the layer without recompute less what selective keeps;
        # under op-level checkpointing likewise the layer less what it keeps
        a_work = act.layer_activation_bytes(s, mb, h, sh.n_heads, sh.ffn, tp, gated=sh.gated_mlp, sp=sp,
                                            recompute="none", fused_attention=rules.fused_attention, cp=cp,
                                            act_bytes=by.activation, kv_hidden=sh.kv_hidden,
                                            dropout=job.dropout)
        if recompute in ("selective", "op"):
            a_work -= a_layer
    per_param = zr.state_bytes_per_param(zero, d, by.param, by.grad, by.optimizer)
    if rules.keeps_16bit_grads and rules.mixed_precision and by.grad == 4 and zero <= 1:
        # the 16-bit param.grad beside the fp32 accumulation, on every rank (not sharded); DeepSpeed takes its
        # BF16 optimizer only without ZeRO or with stage 1 (engine._do_optimizer_sanity_check), its ZeRO-2/3
        # optimizer otherwise
        per_param += 2.0
    if zero == 3 and not rules.zero_stages and d > 1:
        per_param = by.states * (1.0 / d + rules.sdp_mem_bias)        # the paper's SDP (none at d = 1)
    if rules.embedding_and_head:
        last_extra = tokens * sh.vocab / tp * 4.0                    # fp32 logits of one micro-batch
        every_extra = RESERVE_BYTES
    else:
        # the paper's "other" memory (other_memory_mb, analytic.py) on every stage: whole embedding, head
        # and position embedding, fp32 logits and their gradient of the pipeline's local batch, context
        last_extra = 0.0
        every_extra = (by.states * (2 * sh.vocab * h + s * h)
                       + 2 * s * sh.vocab * 4.0 * job.global_batch / (tp * dp * cp) + RESERVE_BYTES)
    peaks = []
    for i, P in enumerate(stage_params):
        if rules.pipeline_schedules or rules.micro_batch_search:
            flight = sch.in_flight(schedule, pp, m_eff, i, vp) if pp > 1 or rules.pipeline_schedules else 1.0
        else:
            flight = float(m_eff)                                    # GPipe keeps the whole local batch
        gathered = 2 * layer_params * by.param if zero == 3 and rules.zero_stages else 0.0
        held = flight * layers[i]
        if pp > 1 and uneven and len(set(chunks[i])) > 1:  # uneven chunks: the layers of the chunks in flight
            held = sch.layers_in_flight(schedule, chunks[i], pp, m_eff, i)
        # a stack that keeps each in-flight micro-batch's stage output until its backward: one boundary
        # tensor (1/tp of it under sequence parallelism) per chunk in flight, except the loss the model's
        # last chunk ends in
        outputs = 0.0
        if rules.keeps_stage_outputs and pp > 1:
            outputs = flight * (vp if i < pp - 1 else vp - 1) * boundary / (tp if sp else 1)
        peaks.append(P * per_param + held * a_layer + a_work + gathered + outputs
                     + (last_extra if i == pp - 1 else 0.0) + every_extra)
    peak = max(peaks)
    tok = job.global_batch * s / step / job.n_gpus
    return {"step_s": step, "tokens_per_s_per_gpu": tok, "tflops_per_gpu": tok * model_flops_per_token(sh) / 1e12,
            "peak_bytes": peak, "peak_gb": peak / 1e9, "fits": bool(peak <= gpu.usable_mem_bytes),
            "stage_peak_bytes": peaks, "micro_batches": m, "schedule": schedule, "vp": vp, "zero": zero,
            "sequence_parallel": sp, "recompute": recompute, "stage_layers": layers,
            "chunk_layers": chunks,
            "pipeline_s": pipe_s, "p2p_s": p2p_s, "dp_s": dp_exposed, "fwd_s": fwd, "bwd_s": bwd,
            "recompute_s": recomp, "tp_s": tp_s, "cp_s": cp_s, "head_s": head_s, "stage_s": stage_s,
            "efficiency": rate / gpu.flops(job.dtype), "activation_bytes_per_layer": a_layer,
            "attention_s": attn_fwd}
