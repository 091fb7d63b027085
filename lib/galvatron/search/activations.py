"""Activation memory of one Transformer layer, attention FLOPs, and context parallelism's messages.

Activations kept for backward by one layer for a micro-batch of ``b`` sequences of ``s`` tokens, hidden ``h``,
``a`` heads, tensor-parallel degree ``t`` (Korthikanti et al. 2022, "Reducing Activation Recomputation in
Large Transformer Models", Table 2; 16-bit activations, bytes):

========================================= ==========================
no recompute, no sequence parallelism     s b h (10 + 24/t + 5 a s / (h t))
sequence parallelism                      s b h (34/t + 5 a s / (h t))
selective recompute (and SP)              s b h 34/t
full recompute                            2 s b h  (2 s b h / t with SP): the layer's input only
========================================= ==========================

The 24 of ``24/t`` is 8 (attention's split tensors) + 16 (the MLP at 4h); an MLP of width ``f`` counts 4f/h
instead, 6f/h with a gated (SwiGLU) MLP (as ``analytic.TransformerShape`` does). The ``5 a s^2 b / t`` bytes
are the softmax's output (2 a s^2 b, what its backward needs), the dropout's mask (a s^2 b) and the dropout's
output (2 a s^2 b, the input of the product with V): fused attention (FlashAttention) keeps none of them, and
selective recompute recomputes them. Context parallelism over ``cp`` ranks splits the sequence: every term is
for the ``s / cp`` local tokens (scores ``5 a (s/cp) s b / t``). A model trained without dropout (Llama) keeps
no dropout masks and no dropout output, since the product with V reads the softmax's output itself: 8 instead
of 10 s b h, and 2 instead of 5 a s^2 b.

Op-level selective checkpointing (``"op"``, torchtitan's ``selective_ac_option = "op"``,
torchtitan's ``_apply_ac_to_transformer_block``, "saves output of all compute ops, except every second mm": the output
of every other matrix multiply, of the attention kernel and of the collectives, and recomputes the rest) keeps
the layer's input, the outputs of the 1st, 3rd, 5th ... projections in their order (Q, K, V, out; the MLP's
gate, up and down projections, or its two without a gate) and the attention output (``op_kept_widths``);
backward recomputes the other projections (``op_recompute_share`` of the GEMMs' forward) and every
element-wise op, but not attention.

Attention FLOPs per token, forward: 4 s h (QK^T and the weighted sum, 2 FLOPs a multiply-add); a fused
causal kernel skips the masked half (``causal_skip``). Ring attention (Liu et al. 2023) passes each rank's K and
V blocks around the ``cp`` ring: cp - 1 sends of 2 b (s/cp) h_kv values forward, twice that backward (K, V and
their gradients), hidden under the attention compute of the step. Used in: ``cost.py`` (``step_estimate``).
"""

from __future__ import annotations

RECOMPUTE = ("none", "selective", "op", "full")


def _projections(h: int, kv: int, ffn: int, gated: bool) -> list[tuple[int, int, bool]]:
    """A layer's matrix multiplies in their forward order: (input width, output width, whether the output is
    split over TP ranks without sequence parallelism: column-parallel)."""
    mlp = [(h, ffn, True), (h, ffn, True), (ffn, h, False)] if gated else [(h, ffn, True), (ffn, h, False)]
    return [(h, h, True), (h, kv, True), (h, kv, True), (h, h, False)] + mlp


def tp_linear_shares(h: int, kv: int, ffn: int, gated: bool) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(column-parallel, row-parallel) linear layers of one layer as shares of its projection FLOPs, with the
    query/key/value projections fused into one column layer and the MLP's input projections (gate and up)
    into another, as nanotron and Megatron-LM build them: ((qkv, mlp in), (attention out, mlp out))."""
    p = [a * b for a, b, _ in _projections(h, kv, ffn, gated)]
    total = sum(p)
    qkv, out, mlp_in, mlp_out = sum(p[:3]), p[3], sum(p[4:-1]), p[-1]
    return (qkv / total, mlp_in / total), (out / total, mlp_out / total)


def op_kept_widths(h: int, kv: int, ffn: int, gated: bool, t: int = 1, sp: bool = False) -> float:
    """Values per token one layer keeps under op-level checkpointing (``"op"``): its input, every other
    projection's output (the 1st, 3rd, ...), the attention output. A column-parallel output is split over the
    ``t`` TP ranks; the input and a row-parallel output only with sequence parallelism."""
    row = 1 / t if sp else 1.0
    kept = h * row + h / t                                            # the input, the attention output
    for i, (_, out, col) in enumerate(_projections(h, kv, ffn, gated)):
        if i % 2 == 0:
            kept += out / t if col else out * row
    return kept


def op_recompute_share(h: int, kv: int, ffn: int, gated: bool) -> float:
    """The share of a layer's projection FLOPs that op-level checkpointing recomputes: the projections it does
    not keep (the 2nd, 4th, ...)."""
    p = _projections(h, kv, ffn, gated)
    return sum(a * b for i, (a, b, _) in enumerate(p) if i % 2 == 1) / sum(a * b for a, b, _ in p)


def layer_activation_bytes(s: int, b: int, h: int, a: int, ffn: int, t: int = 1, *, gated: bool = False,
                           sp: bool = False, recompute: str = "none", fused_attention: bool = False,
                           cp: int = 1, act_bytes: int = 2, kv_hidden: int | None = None,
                           dropout: bool = True) -> float:
    """Bytes one layer keeps for backward per micro-batch (see the module docstring)."""
    if recompute not in RECOMPUTE:
        raise ValueError(f"recompute must be one of {RECOMPUTE}; got {recompute!r}")
    if min(s, b, h, a, t, cp) < 1:
        raise ValueError(f"s, b, h, a, t and cp must be >= 1; got {(s, b, h, a, t, cp)!r}")
    sl = s / cp
    sbh = sl * b * h
    scale = act_bytes / 2
    if recompute == "full":
        return 2 * sbh / (t if sp else 1) * scale
    kv = h if kv_hidden is None else kv_hidden
    if recompute == "op":
        return 2 * sl * b * op_kept_widths(h, kv, ffn, gated, t, sp) * scale
    split = 4 + 4 * kv / h + 4 * ffn / h * (1.5 if gated else 1.0)     # Q, out-proj input; K, V; the MLP
    whole = 10 if dropout else 8                 # norms' inputs, attention and MLP inputs, two dropout masks
    body = sbh * (whole + split) / t if sp else sbh * (whole + split / t)
    keep_scores = not fused_attention and recompute == "none"
    scores = (5 if dropout else 2) * a * sl * s * b / t if keep_scores else 0.0  # softmax out (+ mask, out)
    return (body + scores) * scale


def attention_flops_per_token(s: int, h: int, causal_skip: bool = False) -> float:
    """Forward FLOPs per token of the attention core (scores and their use): 4 s h, half with ``causal_skip``."""
    return 4.0 * s * h * (0.5 if causal_skip else 1.0)


def ring_attention_bytes(s: int, b: int, kv_hidden: int, cp: int, msg_bytes: int = 2) -> dict:
    """Bytes each rank sends around the context-parallel ring for one layer and micro-batch: ``fwd`` and
    ``bwd`` totals, and ``steps`` (cp - 1 sends each way)."""
    if cp <= 1:
        return {"fwd": 0.0, "bwd": 0.0, "steps": 0}
    block = 2 * b * (s / cp) * kv_hidden * msg_bytes     # this rank's K and V
    return {"fwd": (cp - 1) * block, "bwd": 2 * (cp - 1) * block, "steps": cp - 1}
