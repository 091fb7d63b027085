"""The one slow GPU: the step, backup, failure and checkpoint model, with its exact expected values.

A synchronous step ends when the last GPU has finished and all have synchronised, so at scale a rare slow GPU
becomes a constant tax; failures throw the run back to its last checkpoint. This module holds the model's
parameters, the draws that sample a step at any cluster size in a few operations (the slowest of N is drawn from
the distribution of the maximum), and the exact expectations (quadrature + renewal-reward). numpy only.
The event simulation of a training run lives in ``lib/straggler/simulate.py``, the figures in
``lib/straggler/figures.py``; ``python -m lib.straggler`` prints the five-rows comparison (``lib/straggler/cli.py``).

Sources: Meta, "The Llama 3 Herd of Models" (2024): 419 unexpected interruptions in 54 days on 16,384 GPUs;
Chen et al., "Revisiting Distributed Synchronous SGD" (2016): backup workers; Young (1974) and Daly (2006): the
checkpoint interval. Used in: book/stragglers/01_the_one_slow_gpu.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from functools import lru_cache

import numpy as np

#: Meta's Llama 3 figure: 419 unexpected interruptions in 54 days on 16,384 GPUs -> hours between failures of one GPU.
LLAMA3_GPUS, LLAMA3_DAYS, LLAMA3_INTERRUPTIONS = 16_384, 54, 419
PER_GPU_MTBF_H = LLAMA3_DAYS * 24 * LLAMA3_GPUS / LLAMA3_INTERRUPTIONS  # 50,677.0 h


@dataclass(frozen=True)
class StepModel:
    """One synchronous step: compute ``compute_s`` plus an exponential delay of mean ``jitter * compute_s``; with
    probability ``p_slow`` a GPU is slow and takes ``slow_factor`` times (base + its delay); then ``sync_s``.
    Used in: book/stragglers/01_the_one_slow_gpu."""

    compute_s: float = 1.0
    jitter: float = 0.01
    p_slow: float = 1e-4
    slow_factor: float = 1.5
    sync_s: float = 0.1

    def __post_init__(self):
        _check(self.compute_s > 0, "compute_s", self.compute_s, "> 0")
        _check(self.jitter > 0, "jitter", self.jitter, "> 0")
        _check(0 <= self.p_slow < 1, "p_slow", self.p_slow, "in [0, 1)")
        _check(self.slow_factor >= 1, "slow_factor", self.slow_factor, ">= 1")
        _check(self.sync_s >= 0, "sync_s", self.sync_s, ">= 0")

    @property
    def ideal_step_s(self) -> float:
        return self.compute_s + self.sync_s

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "StepModel":
        return cls(**{f.name: d[f.name] for f in fields(cls) if f.name in d})


@dataclass(frozen=True)
class FailureModel:
    """Failures and checkpoints: per-GPU MTBF (hours), checkpoint write and restart (minutes), run length (days).
    Used in: book/stragglers/01_the_one_slow_gpu."""

    per_gpu_mtbf_h: float = PER_GPU_MTBF_H
    checkpoint_min: float = 1.0
    restart_min: float = 5.0
    run_days: float = 14.0

    def __post_init__(self):
        _check(self.per_gpu_mtbf_h > 0, "per_gpu_mtbf_h", self.per_gpu_mtbf_h, "> 0")
        _check(self.checkpoint_min >= 0, "checkpoint_min", self.checkpoint_min, ">= 0")
        _check(self.restart_min >= 0, "restart_min", self.restart_min, ">= 0")
        _check(self.run_days > 0, "run_days", self.run_days, "> 0")

    def cluster_mtbf_min(self, n_gpus: int, n_backup: int = 0) -> float:
        """Mean minutes between failures of a cluster of ``n_gpus + n_backup`` GPUs (backups fail too)."""
        _check_gpus(n_gpus, n_backup)
        return self.per_gpu_mtbf_h * 60.0 / (n_gpus + n_backup)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "FailureModel":
        return cls(**{f.name: d[f.name] for f in fields(cls) if f.name in d})


def _check(ok: bool, name: str, value, allowed: str) -> None:
    if not ok:
        raise ValueError(f"{name} must be {allowed}; got {value!r}")


def _check_gpus(n_gpus, n_backup: int = 0) -> None:
    _check(isinstance(n_gpus, (int, np.integer)) and n_gpus >= 1, "n_gpus", n_gpus, "an integer >= 1")
    _check(isinstance(n_backup, (int, np.integer)) and n_backup >= 0, "n_backup", n_backup, "an integer >= 0")


def backup_count(n_gpus: int, share: float = 0.02) -> int:
    """Backup GPUs for a backup ``share`` of ``n_gpus``: ceil(share * n_gpus) (1 for 8 GPUs, 328 for 16,384)."""
    _check_gpus(n_gpus)
    _check(math.isfinite(share) and share >= 0, "backup share", share, ">= 0")
    _check(share * n_gpus <= 1e12, "backup share", share, "at most 1e12 GPUs in all")  # float -> int stays exact
    return int(math.ceil(round(share * n_gpus, 9)))


# ----------------------------------------------------------------------------------------------- draws
def max_of_exponentials(n, u):
    """Inverse-CDF draw of the maximum of ``n`` unit exponentials from uniforms ``u``: -ln(1 - u^(1/n)).
    ``n`` may be an array; entries with n == 0 give 0."""
    n = np.asarray(n, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        x = -np.log(-np.expm1(np.log(u) / np.maximum(n, 1.0)))
    return np.where(n > 0, x, 0.0)


def sample_steps(n_gpus: int, n_backup: int, n_steps: int, rng: np.random.Generator,
                 model: StepModel = StepModel()) -> np.ndarray:
    """``n_steps`` step times (s) at any cluster size, a few operations per step (the maxima are drawn directly).

    Healthy maximum over ``n_gpus``; slow GPUs S ~ Poisson((n_gpus + n_backup) p); the step waits for the
    slowest of the (S - n_backup)+ slow GPUs the backups cannot cover."""
    _check_gpus(n_gpus, n_backup)
    m = model
    healthy = m.compute_s * (1 + m.jitter * max_of_exponentials(n_gpus, rng.random(n_steps)))
    n_slow = rng.poisson((n_gpus + n_backup) * m.p_slow, n_steps)
    waited = np.maximum(n_slow - n_backup, 0)
    slow = m.slow_factor * m.compute_s * (1 + m.jitter * max_of_exponentials(waited, rng.random(n_steps)))
    return np.where(waited > 0, np.maximum(healthy, slow), healthy) + m.sync_s


# ----------------------------------------------------------------------------------------------- exact steps
@lru_cache(maxsize=4096)
def harmonic(n: int) -> float:
    """H_n = sum_{i<=n} 1/i (exact sum up to 10^6, then the asymptotic series)."""
    if n <= 1_000_000:
        return float(np.sum(1.0 / np.arange(n, 0, -1, dtype=float)))
    return math.log(n) + 0.5772156649015329 + 1 / (2 * n) - 1 / (12 * n**2) + 1 / (120 * n**4)


@lru_cache(maxsize=8)
def _leggauss(n: int):
    return np.polynomial.legendre.leggauss(n)


def _gauss_grid(breaks, nodes_per_panel: int = 16):
    """Composite Gauss-Legendre nodes and weights over the pieces between sorted ``breaks``."""
    xs, ws = [], []
    x0, w0 = _leggauss(nodes_per_panel)
    for a, b in zip(breaks[:-1], breaks[1:]):
        if b <= a:
            continue
        panels = max(1, int(math.ceil((b - a) / 2.0)))  # panels of width <= 2: the integrands vary on scale ~1
        edges = np.linspace(a, b, panels + 1)
        half = np.diff(edges) / 2
        xs.append(((edges[:-1] + half)[:, None] + half[:, None] * x0[None, :]).ravel())
        ws.append((half[:, None] * w0[None, :]).ravel())
    return np.concatenate(xs), np.concatenate(ws)


def _z_grid(n_gpus: int, k: int, m: StepModel):
    """Quadrature grid in z, where x = F T_c (1 + J z) is a step time at or above the slow base F T_c."""
    h_k, h_n = harmonic(k), harmonic(n_gpus)
    z_h = max(0.0, (h_n - (m.slow_factor - 1) / m.jitter) / m.slow_factor)  # where H's mass sits, in z
    top = max(h_k, z_h) + 60.0
    return _gauss_grid(sorted({0.0, h_k, z_h, top}))


def _log_cdfs(n_gpus: int, k: int, z, m: StepModel):
    """log F_H and log F_k at x(z): both maxima below x."""
    zh = (m.slow_factor - 1) / m.jitter + m.slow_factor * z  # (x / T_c - 1) / J
    return n_gpus * np.log1p(-np.exp(-zh)), k * np.log1p(-np.exp(-np.maximum(z, 1e-300)))


@lru_cache(maxsize=65536)
def expected_max_s(n_gpus: int, k: int, model: StepModel = StepModel()) -> float:
    """E[max(H, S_k)] in seconds: healthy maximum over ``n_gpus`` and slowest of ``k`` slow GPUs (no sync)."""
    m = model
    if k == 0:
        return m.compute_s * (1 + m.jitter * harmonic(n_gpus))
    z, w = _z_grid(n_gpus, k, m)
    log_fh, log_fk = _log_cdfs(n_gpus, k, z, m)
    tail = -np.expm1(log_fh + log_fk)  # 1 - F_H F_k
    return m.slow_factor * m.compute_s * (1 + m.jitter * float(np.dot(w, tail)))


def _slow_count_pmf(lam: float, n_backup: int):
    """Poisson(lam) probabilities for s = 0 .. b + lam + 12 sqrt(lam) + 30 (the tail beyond is negligible)."""
    s = np.arange(int(n_backup + lam + 12 * math.sqrt(lam) + 30) + 1)
    if lam == 0:
        return s, (s == 0).astype(float)
    lg = np.array([math.lgamma(v + 1) for v in s])
    return s, np.exp(s * math.log(lam) - lam - lg)


def expected_step_s(n_gpus: int, n_backup: int = 0, model: StepModel = StepModel()) -> float:
    """E[step] (s) = T_sync + sum_s P(S = s) E[max(H, S_{(s-b)+})], S ~ Poisson((N + b) p)."""
    _check_gpus(n_gpus, n_backup)
    s, pmf = _slow_count_pmf((n_gpus + n_backup) * model.p_slow, n_backup)
    waited = np.maximum(s - n_backup, 0)
    e_max = {k: expected_max_s(n_gpus, int(k), model) for k in np.unique(waited)}
    return model.sync_s + float(sum(p * e_max[int(k)] for p, k in zip(pmf, waited)))


def p_wait(n_gpus: int, n_backup: int = 0, model: StepModel = StepModel()) -> float:
    """Share of steps that wait for at least one slow GPU: sum_{s > b} P(S = s) P(S_{s-b} > H)."""
    _check_gpus(n_gpus, n_backup)
    s, pmf = _slow_count_pmf((n_gpus + n_backup) * model.p_slow, n_backup)
    total = 0.0
    for p, k in zip(pmf, s - n_backup):
        if k <= 0 or p == 0:
            continue
        z, w = _z_grid(n_gpus, int(k), model)
        log_fh, log_fk = _log_cdfs(n_gpus, int(k), z, model)
        dens_k = k * np.exp(-z + (k - 1) * np.log1p(-np.exp(-np.maximum(z, 1e-300))))  # density of X_k
        p_h_above = float(np.dot(w, dens_k * -np.expm1(log_fh)))  # P(H > S_k)
        total += p * (1.0 - min(max(p_h_above, 0.0), 1.0))
    # the truncated Poisson sum and the quadrature are each exact to ~1e-13; at a million GPUs, where nearly
    # every step waits, that rounding lands just above 1: a probability is clamped to [0, 1]
    return min(max(total, 0.0), 1.0)


def step_efficiency(n_gpus: int, n_backup: int = 0, model: StepModel = StepModel()) -> float:
    """Ideal step / E[step] x N / (N + b): the backup GPUs are charged as cost."""
    return model.ideal_step_s / expected_step_s(n_gpus, n_backup, model) * n_gpus / (n_gpus + n_backup)


# ----------------------------------------------------------------------------------------------- checkpoints
def _check_interval(interval_min, mtbf_min, checkpoint_min=0.0, restart_min=0.0):
    _check(np.all(np.asarray(interval_min) > 0), "interval_min", interval_min, "> 0")
    _check(mtbf_min > 0 and math.isfinite(mtbf_min), "mtbf_min", mtbf_min, "> 0 and finite")
    _check(checkpoint_min >= 0, "checkpoint_min", checkpoint_min, ">= 0")
    _check(restart_min >= 0, "restart_min", restart_min, ">= 0")


def expected_segment_min(interval_min, mtbf_min, checkpoint_min=1.0, restart_min=5.0):
    """E[T] (min): expected wall time to get one segment (interval + checkpoint) saved: (M + R)(e^(a/M) - 1)."""
    _check_interval(interval_min, mtbf_min, checkpoint_min, restart_min)
    a = np.asarray(interval_min, dtype=float) + checkpoint_min
    return (mtbf_min + restart_min) * np.expm1(a / mtbf_min)


def checkpoint_shares(interval_min, mtbf_min, checkpoint_min=1.0, restart_min=5.0) -> dict:
    """Expected shares of wall time: ``kept`` (training that survived), ``checkpoint`` (writing, completed or
    interrupted) and ``lost`` (thrown-away work plus restarts). Interrupted writes count in two shares."""
    _check_interval(interval_min, mtbf_min, checkpoint_min, restart_min)
    tau = np.asarray(interval_min, dtype=float)
    x, y = checkpoint_min / mtbf_min, (tau + checkpoint_min) / mtbf_min
    scale = mtbf_min / (mtbf_min + restart_min)
    with np.errstate(over="ignore"):  # a segment of hundreds of MTBFs: e^(a/M) overflows, its share -> 0
        e_t = (mtbf_min + restart_min) * np.expm1(y)
        kept, done = tau / e_t, (tau + checkpoint_min) / e_t
    # M (e^x - 1) / E[T] written as e^(x - y) (1 - e^-x) / (1 - e^-y): finite where e^x itself overflows
    ckpt = scale * np.exp(x - y) * -np.expm1(-x) / -np.expm1(-y) if checkpoint_min > 0 else 0.0 * y
    return {"kept": kept, "checkpoint": ckpt, "lost": 1.0 - done}


def expected_failures(run_min: float, mtbf_min: float, restart_min: float = 5.0) -> float:
    """Expected failures in ``run_min`` minutes of wall time: T_run / (M + R)."""
    _check_interval(1.0, mtbf_min, 0.0, restart_min)
    return run_min / (mtbf_min + restart_min)


def young_daly_min(mtbf_min: float, checkpoint_min: float = 1.0) -> float:
    """The Young-Daly interval sqrt(2 delta M) (min)."""
    _check_interval(1.0, mtbf_min, checkpoint_min)
    return math.sqrt(2 * checkpoint_min * mtbf_min)


def lambert_w0(x: float) -> float:
    """Principal branch W0 of the Lambert W function for x >= -1/e (Halley's iteration)."""
    _check(x >= -1 / math.e - 1e-15, "x", x, ">= -1/e")
    if x < -0.25:  # near the branch point: series in p = sqrt(2 (e x + 1))
        p = math.sqrt(max(2 * (math.e * x + 1), 0.0))
        w = -1 + p - p * p / 3 + 11 / 72 * p**3
    else:
        w = math.log1p(x) if x < 3 else math.log(x) - math.log(math.log(x))
    for _ in range(50):
        ew = math.exp(w)
        f = w * ew - x
        if w == -1.0 or f == 0.0:
            break
        step = f / (ew * (w + 1) - (w + 2) * f / (2 * w + 2))
        w -= step
        if abs(step) <= 1e-15 * (1 + abs(w)):
            break
    return w


def optimal_interval_min(mtbf_min: float, checkpoint_min: float = 1.0) -> float:
    """Exact best interval tau* = M (1 + W0(-e^(-1 - delta/M))), the maximiser of the kept share (R only scales it).

    Near the branch point 1 + W0 loses digits, so the root of (1 - t) e^(t + d) = 1 is polished by Newton."""
    _check_interval(1.0, mtbf_min, checkpoint_min)
    d = checkpoint_min / mtbf_min
    if d == 0:
        return 0.0
    if d < 1e-12:  # 1 + W0 cancels to 0 here; the Young-Daly series is exact to double precision
        return mtbf_min * (math.sqrt(2 * d) - 2 * d / 3)
    if d > 30:  # 1 - t = e^(-t - d) rounds to e^(-1 - d): the root is 1 to double precision
        return mtbf_min * -math.expm1(-1 - d)
    t = 1 + lambert_w0(-math.exp(-1 - d))
    for _ in range(5):  # g(t) = ln(1 - t) + t + d, g'(t) = -t / (1 - t)
        if not 0 < t < 1:
            break
        t -= (math.log1p(-t) + t + d) / (-t / (1 - t))
    return mtbf_min * t


# ----------------------------------------------------------------------------------------------- another rule
def expected_step_drop_slowest_s(n_gpus: int, n_backup: int = 0, model: StepModel = StepModel()) -> float:
    """E[step] (s) if the step closes as soon as ``n_gpus`` of the ``n_gpus + n_backup`` GPUs have reported,
    dropping the ``n_backup`` slowest whoever they are (the rule of Chen et al.), not the rule the chapter models.

    With S ~ Poisson((N + b) p) slow GPUs: if S <= b the step waits for the (b - S + 1)-th slowest of the
    N + b - S healthy GPUs, E = T_c (1 + J (H_{N+b-S} - H_{b-S})); if S > b it waits for the (S - b)-th
    fastest slow GPU, E = F T_c (1 + J (H_S - H_b)) (a healthy GPU is never that late: it would need J z > F - 1,
    probability about N e^(-(F-1)/J)). Used in: the exercises of book/stragglers/01_the_one_slow_gpu."""
    _check_gpus(n_gpus, n_backup)
    m, b = model, int(n_backup)
    if b == 0:
        return expected_step_s(n_gpus, 0, model)
    s, pmf = _slow_count_pmf((n_gpus + b) * m.p_slow, b)
    total = 0.0
    for p, k in zip(pmf, s):
        k = int(k)
        if k <= b:
            z = harmonic(n_gpus + b - k) - (harmonic(b - k) if b - k > 0 else 0.0)
            total += p * m.compute_s * (1 + m.jitter * z)
        else:
            total += p * m.slow_factor * m.compute_s * (1 + m.jitter * (harmonic(k) - harmonic(b)))
    return m.sync_s + total


def step_efficiency_drop_slowest(n_gpus: int, n_backup: int = 0, model: StepModel = StepModel()) -> float:
    """Ideal step / E[step] x N / (N + b) under the drop-the-b-slowest rule (backups charged as cost)."""
    return (model.ideal_step_s / expected_step_drop_slowest_s(n_gpus, n_backup, model)
            * n_gpus / (n_gpus + n_backup))
