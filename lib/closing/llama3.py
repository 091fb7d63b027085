"""What the Llama 3 paper reports about its 405B pre-training run, quoted with its section or table, and the
two figures this book derives from them. Nothing here is computed by the book's models.

Source: Llama Team, AI @ Meta, "The Llama 3 Herd of Models" (2024), arXiv:2407.21783.
Used in: book/closing/01_one_run.
"""

from __future__ import annotations

from lib.galvatron.search.cost import model_flops_per_token as cost_model_flops_per_token
from lib.galvatron.search.analytic import SHAPES

#: "higher than 90% effective training time" (§3.3.4, Reliability and Operational Challenges): quoted.
LLAMA3_EFFECTIVE_TRAINING = 0.90
#: GPUs of the 405B run's main stage (§3.3.1, Table 4): quoted.
LLAMA3_GPUS = 16_384
#: Tokens per step at 16,384 GPUs: 16M, 2,048 sequences of 8,192 tokens (Table 4): quoted.
LLAMA3_TOKENS_PER_STEP = 2048 * 8192
#: BF16 model TFLOP/s per GPU by GPU count (Table 4: 430 on 8,192; 400 on 16,384; 380 with 131K context):
#: quoted. The 8K-context rows only.
LLAMA3_TFLOPS = {8192: 430.0, 16_384: 400.0}
#: The 4D layout of Table 4 at 8K context: TP 8, CP 1, PP 16, DP = GPUs / 128: quoted.
LLAMA3_TP, LLAMA3_PP = 8, 16
#: Where each quoted figure comes from, as the chapter cites it.
SOURCES = {
    "effective": "§3.3.4", "gpus": "§3.3.1 and Table 4", "tflops": "Table 4", "plan": "Table 4",
    "tokens": "Table 4", "storage": "§3.3.1", "interruptions": "§3.3.4, Table 5",
}


def llama3_dp(n_gpus: int) -> int:
    """Meta's data-parallel degree on ``n_gpus``: GPUs / (TP 8 x PP 16) (Table 4's layout)."""
    if not isinstance(n_gpus, int) or n_gpus % (LLAMA3_TP * LLAMA3_PP):
        raise ValueError(f"n_gpus must be a multiple of {LLAMA3_TP * LLAMA3_PP} for Meta's TP 8 x PP 16 layout; "
                         f"got {n_gpus!r}")
    return n_gpus // (LLAMA3_TP * LLAMA3_PP)


def model_flops_per_token(model: str) -> float:
    """Model FLOPs of one trained token, as model FLOPs utilisation counts them (Chowdhery et al. 2022, the
    convention of Table 4's TFLOP/s): 6 x parameters + the attention scores' 12 x layers x s x h (no causal
    saving, no recomputation). Llama 3 405B: 2.16e16 per 8,192-token sequence (NVIDIA DGXC's formula gives
    2.17e16, ``data/published_runs/``); ``cost.step_estimate``'s ``tflops_per_gpu`` counts the same."""
    if model not in SHAPES:
        raise ValueError(f"model must be one of {sorted(SHAPES)}; got {model!r}")
    return cost_model_flops_per_token(SHAPES[model])


def step_at_tflops_s(model: str, tokens_per_step: int, n_gpus: int, tflops_per_gpu: float) -> float:
    """Seconds per step at a throughput of ``tflops_per_gpu`` model TFLOP/s per GPU: model FLOPs per token
    (``model_flops_per_token``) x tokens / (GPUs x FLOP/s). Derived from a quoted throughput, so the step is
    estimated, not quoted."""
    if model not in SHAPES:
        raise ValueError(f"model must be one of {sorted(SHAPES)}; got {model!r}")
    if not tflops_per_gpu > 0:
        raise ValueError(f"tflops_per_gpu must be > 0; got {tflops_per_gpu!r}")
    return model_flops_per_token(model) * tokens_per_step / (n_gpus * tflops_per_gpu * 1e12)


def llama3_step_s(n_gpus: int = LLAMA3_GPUS) -> float:
    """Llama 3 405B's step implied by its quoted throughput at ``n_gpus`` (8,192 or 16,384), 16M tokens a step:
    about 6.8 s at 16,384 GPUs (estimated from quoted figures)."""
    if n_gpus not in LLAMA3_TFLOPS:
        raise ValueError(f"n_gpus must be one of {sorted(LLAMA3_TFLOPS)} (Table 4's 8K-context rows); "
                         f"got {n_gpus!r}")
    return step_at_tflops_s("llama3-405b", LLAMA3_TOKENS_PER_STEP, n_gpus, LLAMA3_TFLOPS[n_gpus])
