"""Reference answers to the exercises of "From the paper to practice" (the book's chapter 9), computed with
the library; see lib/exercises.py. No number is typed in: each answer is a function of no arguments that
calls ``lib.galvatron.search`` (the practice mechanisms), ``lib.galvatron.practice_report`` (the
calibration set of ``data/published_runs/``) or ``lib.galvatron.plausibility`` (a lead's range under the
stated error). This module never imports ``lib.exercises``.

Used in: the exercises at the end of book/galvatron/05_from_paper_to_practice.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from .practice_report import calibration_runs, leave_one_out, most_needed, picks
from .plausibility import lead_range, stated_error
from .published import to_job
from .search.activations import layer_activation_bytes
from .search.cost import step_estimate
from .search.precision import bytes_per_value
from .search.schedules import bubble_fraction
from .search.zero import state_bytes_per_param

#: Llama 3 405B's 8,192-GPU run (Table 4 of its paper, quoted): 64 data-parallel ranks, 16 stages,
#: 16 micro-batches of one sequence per pipeline at 16,384 GPUs.
LLAMA_DP, LLAMA_PP, LLAMA_M = 64, 16, 16
#: GPT-3 175B's layer (Brown et al. 2020): 2,048 tokens, hidden 12,288, 96 heads; TP 8, one sequence.
GPT3 = dict(s=2048, b=1, h=12288, a=96, ffn=4 * 12288, t=8)
#: The run of exercises 5 and 7 (exercise 5: practice without ZeRO stages 1 and 2).
PICK_RUN = "sc21-gpt-18.4b"
#: The run of exercise 6, whose interleaving (vp) its source leaves unstated.
FILL_RUN = "llama3-405b-16384-8192"


def zero2_bytes_llama() -> float:
    """Model-state bytes per parameter under ZeRO-2 over 64 ranks, Megatron-LM's mixed precision (2-byte
    weights, 4-byte fp32 gradients, 12 bytes of master weights and Adam moments)."""
    b = bytes_per_value(True)
    return state_bytes_per_param(2, LLAMA_DP, b.param, b.grad, b.optimizer)


def interleaved_bubble() -> float:
    """Bubble over ideal compute of interleaved 1F1B with 16 stages, 16 micro-batches and 2 chunks."""
    return bubble_fraction("interleaved", LLAMA_PP, LLAMA_M, 2)


def gpt3_selective_mb() -> float:
    """MB one GPT-3 layer keeps for one sequence with TP 8, sequence parallelism and selective recompute."""
    g = GPT3
    return layer_activation_bytes(g["s"], g["b"], g["h"], g["a"], g["ffn"], g["t"], sp=True,
                                  recompute="selective") / 1e6


@lru_cache(maxsize=1)
def _loo():
    return leave_one_out(calibration_runs())


def most_needed_mechanism() -> str:
    """The mechanism whose removal from practice raises the calibration set's median |error| the most."""
    return most_needed(_loo())


@lru_cache(maxsize=1)
def _pick_today():
    from .stacks import DEFAULT_STACK

    run = _run(PICK_RUN)
    return picks([run.model_copy(update={"stack": DEFAULT_STACK})], [PICK_RUN])[PICK_RUN]


def pick_today_tokens() -> float:
    """Exercise 5: the planner's best tokens/s/GPU for the SC'21 18.4B run re-planned with today's
    Megatron-LM (the default stack) instead of its own, 2021's."""
    return _pick_today()["est_pick"]["tokens_per_s_per_gpu"]


def _run(name):
    return next(r for r in calibration_runs() if r.name == name)


def fill_gain() -> float:
    """Exercise 6: the estimated tokens/s/GPU of Llama 3's 16,384-GPU layout with its unstated fields filled
    by search (``validate``'s fill: vp 8), over the same layout at vp 1 (plain 1F1B, the old default)."""
    from .validate import estimate_run, run_rules

    run = _run(FILL_RUN)
    est = estimate_run(run, "practice")
    plain = step_estimate(to_job(run), replace(est["config"], vp=1), run_rules(run, "practice"))
    return est["tokens_per_s_per_gpu"] / plain["tokens_per_s_per_gpu"]


@lru_cache(maxsize=1)
def _pick():
    return picks(calibration_runs(), [PICK_RUN])[PICK_RUN]


def pick_lead_low() -> float:
    """Exercise 7: the low end of the SC'21 18.4B pick's estimated lead over the published layout when each
    estimate may be off by the stated error of the run's GPU type (``plausibility.lead_range``)."""
    p = _pick()
    return lead_range(p["est_pick"]["tokens_per_s_per_gpu"], p["est_published"]["tokens_per_s_per_gpu"],
                      stated_error(pick_gpu()))["low"]


def pick_gpu() -> str:
    """The GPU type of exercise 7's run (SC'21 18.4B: A100)."""
    return next(r for r in calibration_runs() if r.name == PICK_RUN).cluster.gpu


ANSWERS: dict[str, dict] = {
    "ch9.1": dict(answer=zero2_bytes_llama, what="ZeRO-2 bytes per parameter over 64 ranks",
                  unit="bytes", rel_tol=1e-3, stated=2.25),
    "ch9.2": dict(answer=interleaved_bubble, what="interleaved bubble, pp 16, m 16, vp 2", unit="",
                  rel_tol=1e-3, stated=0.47),
    "ch9.3": dict(answer=gpt3_selective_mb, what="GPT-3 layer, TP 8 + SP + selective recompute",
                  unit="MB", rel_tol=1e-2, stated=107),
    "ch9.4": dict(answer=most_needed_mechanism, what="the mechanism the fit needs most",
                  stated="pipeline schedules"),
    "ch9.5": dict(answer=pick_today_tokens, what="best pick with today's Megatron-LM, SC'21 18.4B",
                  unit="tokens/s/GPU", rel_tol=1e-2, stated="1,418"),
    "ch9.6": dict(answer=fill_gain, what="Llama 3 at 16,384 GPUs: filled vp over vp 1, estimated",
                  unit="x", rel_tol=1e-2, stated=1.69),
    "ch9.7": dict(answer=pick_lead_low, what="low end of the SC'21 18.4B pick's lead under the A100's stated "
                  "error", unit="", rel_tol=0.03, stated="+16%"),
}
