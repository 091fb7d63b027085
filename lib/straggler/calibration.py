"""The constants behind the production switches (:mod:`lib.straggler.switches`), each computed from
``data/production/`` and reported with the observations it was fitted to, or with the source it is quoted from.

- per-GPU MTBF by generation: H100 from Llama 3 (the page's own figure), A100 from Kokolis et al.'s RSC-1 rate
  of 6.50 failures per 1,000 node-days (quoted in the observation ``rsc1-16k-ettr-60min``);
- the size law's exponent alpha and A100 intercept: least squares of log(1 / MTTF) on log N over Kokolis et
  al.'s measured MTTFs (``FIT_MTTF``);
- failure shares by cause: Llama 3's Table 5 counts (``data/production/model/llama3_table5.json``);
- the straggler distribution: S = 1 + X with X log-normal(mu, sigma), solved so that P(S >= 1.1) and the
  wasted share of GPU-hours E[1 - 1/S] equal Lin et al.'s two figures (``FIT_STRAGGLERS``): two constants,
  two figures, so the fit is exact on them and judged only by held-out figures.

numpy only. Used in: :mod:`lib.straggler.predict` and book/stragglers/01_the_one_slow_gpu.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path

import numpy as np

from lib.straggler.model import PER_GPU_MTBF_H

DATA = Path(__file__).resolve().parents[2] / "data" / "production"
CALIBRATION = DATA / "calibration.json"
HELDOUT = DATA / "heldout.json"
TABLE5 = DATA / "model" / "llama3_table5.json"

#: Kokolis et al., sec. IV: RSC-1 sees 6.50 failures per 1,000 node-days (8 A100 per node); RSC-2 2.34.
RSC1_FAILURES_PER_1000_NODE_DAYS, GPUS_PER_NODE = 6.50, 8
A100_MTBF_H = 1000 * GPUS_PER_NODE / RSC1_FAILURES_PER_1000_NODE_DAYS * 24  # 29,538 h per GPU
#: Per-GPU MTBF (hours) by the ``cluster.gpu`` label; any other label gets the page's (Llama 3's H100) rate.
GPU_MTBF_H = {"h100-sxm-80gb": PER_GPU_MTBF_H, "a100-sxm-80gb": A100_MTBF_H}
#: The reference size of each generation's rate under the power law: the size it was measured at.
RATE_REF_GPUS = {"h100-sxm-80gb": 16_384}

#: The observations each fitted constant is fitted to (all in ``calibration.json``).
FIT_MTTF = ("rsc1-8gpu-mttf", "rsc1-1024gpu-mttf", "rsc1-4k-mttf")
FIT_STRAGGLERS = ("bytedance-straggler-jobs", "bytedance-straggler-waste")

#: The growing restart (assumed from Kokolis et al.'s stated u0 of 5-20 min, not fitted): 5 min at one node,
#: 20 min at RSC-1's 16,000 GPUs, linear in log N between and beyond.
RESTART_SMALL = (8, 5.0)
RESTART_LARGE = (16_000, 20.0)


def _observations(path=CALIBRATION) -> dict:
    with open(path, encoding="utf-8") as f:
        return {o["name"]: o for o in json.load(f)["observations"]}


@lru_cache(maxsize=1)
def size_law() -> tuple[float, float]:
    """``(alpha, log_rate_at_1)``: a job of N A100s fails log_rate_at_1 + alpha ln N (per hour, natural log),
    least squares over the measured MTTFs ``FIT_MTTF``."""
    obs = _observations()
    x = np.log([obs[n]["job"]["gpus"] for n in FIT_MTTF])
    y = -np.log([obs[n]["value"] for n in FIT_MTTF])
    alpha, intercept = np.polyfit(x, y, 1)
    return float(alpha), float(intercept)


def size_law_mtbf_min(per_gpu_mtbf_h: float, gpu: str, n_gpus: int) -> float:
    """Mean minutes between failures of a job of ``n_gpus`` under the size law: a job's rate grows as
    N^alpha (:func:`size_law`), anchored where ``per_gpu_mtbf_h`` was measured (``RATE_REF_GPUS``; 16,384,
    Llama 3's size, for a GPU type without one). Used by ``predict.mtbf_min`` and chapter 11's failure stage
    (``lib/closing/run.cluster_mtbf_min``), which needs it without ``predict``'s pydantic reader."""
    alpha, _ = size_law()
    ref = RATE_REF_GPUS.get(gpu, 16_384)
    return per_gpu_mtbf_h * 60 / ref * (ref / n_gpus) ** alpha


@lru_cache(maxsize=1)
def cause_counts() -> tuple[dict, dict]:
    """``(counts by cause, groups)``: Table 5's counts, and the groups ``"GPU (all)"``/``"hardware (all)"``
    as the sets of causes they sum."""
    with open(TABLE5, encoding="utf-8") as f:
        rows = json.load(f)["causes"]
    counts = {r["cause"]: r["count"] for r in rows}
    groups = {"GPU (all)": {r["cause"] for r in rows if r["gpu"]},
              "hardware (all)": {r["cause"] for r in rows if r["hardware"]}}
    return counts, groups


def _norm_cdf(z: float) -> float:
    return 0.5 * (1 + math.erf(z / math.sqrt(2)))


def _norm_ppf(p: float) -> float:
    lo, hi = -40.0, 40.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _norm_cdf(mid) < p else (lo, mid)
    return (lo + hi) / 2


_GH = np.polynomial.hermite_e.hermegauss(80)  # nodes and weights for E[f(Z)], Z standard normal


def lognormal_mean(f, mu: float, sigma: float) -> float:
    """E[f(X)] for X log-normal(mu, sigma), by Gauss-Hermite quadrature (80 nodes)."""
    z, w = _GH
    return float(np.dot(w, f(np.exp(mu + sigma * z))) / math.sqrt(2 * math.pi))


def _waste(mu: float, sigma: float) -> float:
    return lognormal_mean(lambda x: x / (1 + x), mu, sigma)  # E[1 - 1/S], S = 1 + X


@lru_cache(maxsize=1)
def straggler_fit() -> tuple[float, float]:
    """``(mu, sigma)`` of X in S = 1 + X: P(S >= threshold) and E[1 - 1/S] equal the two figures of
    ``FIT_STRAGGLERS`` (bisection on sigma; mu follows from the share)."""
    obs = _observations()
    share_obs, waste_obs = obs[FIT_STRAGGLERS[0]], obs[FIT_STRAGGLERS[1]]
    share, x_at = share_obs["value"], share_obs["slowdown_at_least"] - 1
    waste = 1 - 1 / waste_obs["value"]  # the observation stores 1 / (1 - waste)
    z = _norm_ppf(1 - share)  # P(ln X >= ln x_at) = share

    def mu_of(sigma):
        return math.log(x_at) - sigma * z

    lo, hi = 1e-3, 5.0
    if not (_waste(mu_of(lo), lo) - waste) * (_waste(mu_of(hi), hi) - waste) < 0:
        raise ValueError("no log-normal matches both straggler figures")
    for _ in range(200):
        mid = (lo + hi) / 2
        if (_waste(mu_of(mid), mid) - waste) * (_waste(mu_of(lo), lo) - waste) > 0:
            lo = mid
        else:
            hi = mid
    sigma = (lo + hi) / 2
    return mu_of(sigma), sigma


def fitted_constants() -> list[dict]:
    """Every constant of the production switches: name, value, unit, and ``fitted_to`` (observation names) or
    ``quoted_from`` (a source) or ``assumed`` (a stated rule)."""
    alpha, intercept = size_law()
    mu, sigma = straggler_fit()
    counts, _ = cause_counts()
    return [
        dict(name="H100 per-GPU MTBF", value=PER_GPU_MTBF_H, unit="h", switch="rates",
             fitted_to=["llama3-405b-interruptions"]),
        dict(name="A100 per-GPU MTBF", value=A100_MTBF_H, unit="h", switch="rates",
             quoted_from="Kokolis et al., sec. IV: RSC-1's 6.50 failures per 1,000 node-days"),
        dict(name="size-law exponent alpha", value=alpha, unit="", switch="size_law", fitted_to=list(FIT_MTTF)),
        dict(name="A100 MTTF of one GPU (size law)", value=math.exp(-intercept), unit="h", switch="size_law",
             fitted_to=list(FIT_MTTF)),
        dict(name="causes (Table 5 rows)", value=len(counts), unit="rows", switch="causes",
             quoted_from="Llama 3, Table 5 (counts)"),
        dict(name="straggler log-normal mu", value=mu, unit="", switch="stragglers",
             fitted_to=list(FIT_STRAGGLERS)),
        dict(name="straggler log-normal sigma", value=sigma, unit="", switch="stragglers",
             fitted_to=list(FIT_STRAGGLERS)),
        dict(name="restart at 8 / 16,000 GPUs", value=RESTART_LARGE[1], unit="min", switch="restart",
             assumed="Kokolis et al.'s stated u0 of 5-20 min: 5 at one node, 20 at 16,000 GPUs, log-linear"),
    ]


def fitted_names() -> set[str]:
    """The observations some constant was fitted to."""
    out = set()
    for c in fitted_constants():
        out.update(c.get("fitted_to", []))
    return out
