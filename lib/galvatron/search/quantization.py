"""Tile and wave quantization of GEMMs: the share of a GPU's streaming multiprocessors a matmul keeps busy.

A GEMM that writes an ``m x n`` output is cut into output tiles of ``tm x tn`` (one thread block each, one
block per SM at a time); the GPU runs them in waves of ``S`` (its SM count). A matrix whose sides are not
multiples of the tile pads its edge tiles (*tile quantization*); a tile count just above a multiple of ``S``
runs a last wave that leaves most SMs idle (*wave quantization*). NVIDIA's "Matrix Multiplication Background
User's Guide" (DU-09799-001, 2023, section 3) describes both with a 128 x 128 tile on the A100's 108 SMs.

    tiles  = ceil(m / tm) x ceil(n / tn)
    waves  = ceil(tiles / S)
    eff    = (m n / (tm tn)) / (waves x S)        (useful tile area over the tile slots the waves occupy)

``eff`` is 1 for a GEMM whose sides are tile multiples and whose tile count is a multiple of ``S``. The
model prices one layer's GEMMs (forward, and the backward's data- and weight-gradient GEMMs, whose outputs
have other shapes: ``gemms_factor``) at the GPU's efficiency (``efficiency.py``) times this factor. The
efficiency constants used with the switch on are fitted with it on, to the same runs as the plain ones
(``efficiency_wave_quantized`` in the GPU's file; ``benchmarks/fit_efficiency.py --with wave_quantization``),
since the plain fit already absorbs the average quantization of the runs it was fitted to.
It ignores split-K, stream-K and cuBLAS's choice among tile shapes (which soften the effect): an upper bound
on what quantization costs. The SM count and tile are data (``data/hardware/gpus/<gpu>.json``: ``sms``,
``gemm_tile``, with sources). Used in: ``cost.step_estimate`` under ``rules.wave_quantization``.
"""

from __future__ import annotations

import math


def gemm_efficiency(m: int, n: int, sms: int, tile=(128, 128)) -> float:
    """Useful share of the SM-tile slots a GEMM with an ``m x n`` output occupies (see the module docstring)."""
    tm, tn = tile
    if m < 1 or n < 1 or sms < 1 or tm < 1 or tn < 1:
        raise ValueError(f"gemm_efficiency needs m, n, sms and the tile >= 1; got m={m}, n={n}, sms={sms}, "
                         f"tile={tile}")
    tiles = math.ceil(m / tm) * math.ceil(n / tn)
    waves = math.ceil(tiles / sms)
    return (m * n / (tm * tn)) / (waves * sms)


def layer_gemms(tokens: int, hidden: int, kv_hidden: int, ffn: int, tp: int, gated: bool) -> list:
    """The forward GEMMs of one Transformer layer on one tensor-parallel rank, as (m, n, k): QKV projection,
    attention output projection, MLP up (gate and up fused when gated) and down projection. ``m`` = tokens of
    the micro-batch; the column-parallel GEMMs split ``n`` over tp, the row-parallel ones ``k``."""
    return [(tokens, (hidden + 2 * kv_hidden) // tp, hidden),
            (tokens, hidden, hidden // tp),
            (tokens, (2 if gated else 1) * ffn // tp, hidden),
            (tokens, hidden, ffn // tp)]


def gemms_factor(gemms, sms: int, tile=(128, 128)) -> tuple[float, float]:
    """(forward, backward) FLOP-weighted efficiency of a list of (m, n, k) forward GEMMs: the forward's
    outputs are m x n; the backward runs a data-gradient GEMM (output m x k) and a weight-gradient GEMM
    (output k x n) of the same FLOPs each. Weighted harmonically (time = FLOPs / efficiency)."""
    fwd_f = fwd_t = bwd_f = bwd_t = 0.0
    for m, n, k in gemms:
        f = float(m) * n * k
        fwd_f += f
        fwd_t += f / gemm_efficiency(m, n, sms, tile)
        bwd_f += 2 * f
        bwd_t += f / gemm_efficiency(m, k, sms, tile) + f / gemm_efficiency(k, n, sms, tile)
    return fwd_f / fwd_t, bwd_f / bwd_t
