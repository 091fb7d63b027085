"""The model's prediction for each published observation of ``data/production/``, under a set of switches
(:mod:`lib.straggler.switches`), and the errors by kind.

What each kind predicts (M: the job's mean time between failures, R: its restart, delta: its checkpoint write,
tau: its checkpoint interval, all in minutes):

- ``interruptions``: the expected failures in ``job.days`` of wall time, T / (M + R) (the failure clock pauses
  while restarting, as in the page's model);
- ``mttf_hours``: M / 60;
- ``ettr``: the expected kept share at tau, tau / ((M + R)(e^((tau + delta)/M) - 1));
- ``cause_share``: the cause's share of failures (``causes=llama3`` only; the page's model has no causes);
- ``straggler_share``: of jobs slowed by at least s (``slowdown_at_least``): the page's model gives every job of
  N GPUs the same slowdown E[step] / ideal step, so 0 or 1; ``stragglers=fitted`` gives P(1 + X >= s). Without
  s: the share of steps that wait for a slow GPU (the page's P(wait));
- ``straggler_slowdown``: the page's E[step] / ideal step at N GPUs; ``stragglers=fitted``: E[1 + X] (``jobs``)
  or 1 / (1 - E[1 - 1/(1 + X)]) (``gpu_hours``).

Defaults for what a source does not state (``DEFAULTS``, listed per observation in ``filled``): the job has
1,024 GPUs (a mid-size job of the studies; a job may be far smaller than its cluster); the checkpoint write
takes 1 min and the restart 5 min (the page's); the checkpoint interval is the exact best for the job's M and
delta; a GPU type the model does not know takes Llama 3's H100 rate (the page's).

Errors: a share's error is predicted - published (in share units); every other kind's is predicted / published
- 1 (relative). Used in: ``python -m lib.straggler production`` and book/stragglers/01_the_one_slow_gpu.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import median

from lib.straggler import calibration as cal
from lib.straggler.model import (FailureModel, PER_GPU_MTBF_H, StepModel, checkpoint_shares, expected_failures,
                                 expected_step_s, optimal_interval_min, p_wait)
from lib.straggler.production import KINDS, SHARE_KINDS, Observation
from lib.straggler.switches import PAGE, Switches

DEFAULT_JOB_GPUS = 1024
PAGE_FAILURE = FailureModel()
DEFAULTS = {"job.gpus": DEFAULT_JOB_GPUS,
            "checkpoint_min": PAGE_FAILURE.checkpoint_min, "restart_min": PAGE_FAILURE.restart_min,
            "checkpoint_interval_min": "the exact best interval for the job's MTBF",
            "gpu": "Llama 3's H100 rate for a GPU type the model does not know"}


@dataclass(frozen=True)
class Prediction:
    """One observation beside its prediction; ``predicted`` is None where the switches have no such model."""

    name: str
    kind: str
    published: float
    predicted: float | None
    error: float | None
    file: str = ""
    filled: tuple = field(default_factory=tuple)

    def to_dict(self) -> dict:
        return {"name": self.name, "kind": self.kind, "published": self.published, "predicted": self.predicted,
                "error": self.error, "file": self.file, "filled": list(self.filled)}


def job_gpus(o: Observation, filled: list) -> int:
    if o.job.gpus is not None:
        return o.job.gpus
    filled.append(f"job.gpus={DEFAULT_JOB_GPUS}")
    return DEFAULT_JOB_GPUS


def mtbf_min(gpu: str, n_gpus: int, sw: Switches = PAGE) -> float:
    """Mean minutes between failures of a job of ``n_gpus`` GPUs of type ``gpu`` under the switches."""
    if n_gpus < 1:
        raise ValueError(f"n_gpus must be >= 1; got {n_gpus!r}")
    per_gpu_h = cal.GPU_MTBF_H.get(gpu, PER_GPU_MTBF_H) if sw.rates == "generation" else PER_GPU_MTBF_H
    if sw.size_law == "inverse":
        return per_gpu_h * 60 / n_gpus
    if sw.rates == "generation" and gpu == "a100-sxm-80gb":  # the fit's own generation: its own line
        alpha, intercept = cal.size_law()
        return 60 * math.exp(-(intercept + alpha * math.log(n_gpus)))
    return cal.size_law_mtbf_min(per_gpu_h, gpu, n_gpus)


def restart_min(o: Observation, n_gpus: int, sw: Switches, filled: list) -> float:
    if o.job.restart_min is not None:
        return o.job.restart_min
    if sw.restart == "growing":
        (n0, r0), (n1, r1) = cal.RESTART_SMALL, cal.RESTART_LARGE
        r = max(r0, r0 + (r1 - r0) * math.log(n_gpus / n0) / math.log(n1 / n0))
    else:
        r = PAGE_FAILURE.restart_min
    filled.append(f"restart_min={r:.3g}")
    return r


def _gpu(o: Observation, sw: Switches, filled: list) -> str:
    if sw.rates == "generation" and o.cluster.gpu not in cal.GPU_MTBF_H:
        filled.append("gpu rate=H100 (Llama 3)")
    return o.cluster.gpu


def cause_share(cause: str) -> float:
    """The share of failures with root cause ``cause`` (a Table 5 row or a group of rows)."""
    counts, groups = cal.cause_counts()
    total = sum(counts.values())
    if cause in groups:
        return sum(counts[c] for c in groups[cause]) / total
    if cause not in counts:
        raise ValueError(f"cause {cause!r} is not in Llama 3's Table 5; causes: {', '.join(counts)}, "
                         f"{', '.join(groups)}")
    return counts[cause] / total


def page_slowdown(n_gpus: int, step: StepModel = StepModel()) -> float:
    """The page's expected step over the ideal step at ``n_gpus`` without backups."""
    return expected_step_s(n_gpus, 0, step) / step.ideal_step_s


def predict(o: Observation, sw: Switches = PAGE, file: str = "") -> Prediction:
    """The model's prediction for ``o`` under ``sw``, with its error and the defaults it filled."""
    filled: list = []
    k = o.kind
    value = None
    if k in ("interruptions", "mttf_hours", "ettr"):
        n = job_gpus(o, filled)
        m = mtbf_min(_gpu(o, sw, filled), n, sw)
        if k == "mttf_hours":
            value = m / 60
        else:
            r = restart_min(o, n, sw, filled)
            if k == "interruptions":
                value = expected_failures(o.job.days * 24 * 60, m, r)
            else:
                delta = o.job.checkpoint_min
                if delta is None:
                    delta = PAGE_FAILURE.checkpoint_min
                    filled.append(f"checkpoint_min={delta:g}")
                tau = o.job.checkpoint_interval_min
                if tau is None:
                    tau = optimal_interval_min(m, delta) if delta > 0 else 1.0
                    filled.append(f"checkpoint_interval_min={tau:.3g}")
                value = float(checkpoint_shares(tau, m, delta, r)["kept"])
    elif k == "cause_share":
        value = cause_share(o.cause) if sw.causes == "llama3" else None
    elif k == "straggler_share":
        n = job_gpus(o, filled)
        if o.slowdown_at_least is None:
            value = p_wait(n)
        elif sw.stragglers == "fitted":
            mu, sigma = cal.straggler_fit()
            x = o.slowdown_at_least - 1
            value = 1.0 if x <= 0 else 1 - cal._norm_cdf((math.log(x) - mu) / sigma)
        else:
            value = 1.0 if page_slowdown(n) >= o.slowdown_at_least else 0.0
    elif k == "straggler_slowdown":
        n = job_gpus(o, filled)
        if sw.stragglers == "fitted":
            mu, sigma = cal.straggler_fit()
            if o.averaged == "gpu_hours":
                value = 1 / (1 - cal.lognormal_mean(lambda x: x / (1 + x), mu, sigma))
            else:
                value = 1 + cal.lognormal_mean(lambda x: x, mu, sigma)
        else:
            value = page_slowdown(n)
    else:  # pragma: no cover - the schema admits only KINDS
        raise ValueError(f"kind {k!r}; kinds: {', '.join(KINDS)}")
    return Prediction(o.name, k, o.value, value, error(k, value, o.value), file, tuple(filled))


def error(kind: str, predicted: float | None, published: float) -> float | None:
    """predicted - published for shares, predicted / published - 1 otherwise (None without a prediction)."""
    if predicted is None:
        return None
    if kind in SHARE_KINDS:
        return round(predicted - published, 9)
    return round(predicted / published - 1, 9)


def by_kind(predictions) -> dict:
    """``{kind: {"median_abs_error", "max_abs_error", "n"}}`` over the predictions that have one."""
    out = {}
    for kind in KINDS:
        errs = [abs(p.error) for p in predictions if p.kind == kind and p.error is not None]
        if errs:
            out[kind] = {"median_abs_error": median(errs), "max_abs_error": max(errs), "n": len(errs)}
    return out


def predict_all(pairs, sw: Switches = PAGE) -> list[Prediction]:
    """``predict`` over ``(path, observation)`` pairs (``production.load_many``)."""
    return [predict(o, sw, path) for path, o in pairs]
