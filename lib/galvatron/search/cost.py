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

import numpy as np

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
        frac = 1.0
        if tp > 1:
            if layer.decoder:
                frac = 2.0 / 3.0 if pp == 1 else rules.decoder_pp_overlap
            else:
                frac = 0.5 if dp == 2 else 1.0
        ov = float(overlap_ms(dp_comm, frac * bct, kappa))
        if pp > 1 and tp == 1 and rules.leftover_dp == "once" and not s.sdp and dp_comm > bct:
            # the artifact overlaps per stage (bct/pp against comm/pp, x pp) but pays the leftover once
            ov = kappa * bct + (dp_comm - bct) / pp
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
    sdp_ms = 0.0
    if s.sdp:
        sdp_ms = rules.sdp_gather_factor * dp_msg * dc * (chunks if rules.sdp_gather_per_chunk else 1)
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
