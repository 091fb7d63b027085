"""The simulator's timing noise: no two machines alike, no two measurements alike.

A simulated machine draws one speed factor per device when it is built; every measurement then draws an offset
(larger when the placement spans several devices) and a jitter per timed step, and reports the median of
``TIMED_STEPS`` steps, as the write-up's timing protocol does. Randomness comes only from the generator passed in.
Used in: Part I, chapters 1 and 3 (why best-of-many timings flatter).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np

from lib.placement.env import TIMED_STEPS


@dataclass(frozen=True)
class NoiseModel:
    """Timing noise of a real machine, for teaching why best-of-many timings flatter.

    device_speed_sd: per machine, each device's compute times are scaled by 1 + N(0, sd) (no two T4s alike).
    single_device_sd_s / multi_device_sd_s: standard deviation of a per-measurement offset, in seconds, for a
        placement on one device / on several (the write-up: single-GPU timings vary by under 1 ms; a multi-GPU
        timing can be off by 5 to 15 ms).
    step_sd_fraction: per-step jitter inside one measurement, as a fraction of that offset's sd.
    reference_profile: the machine those sizes describe (the write-up's four T4s). On another machine the
        simulator scales both sds by its single-GPU step over the reference's (same model, same settings), so
        noise is the same share of the step everywhere: an H100 step of 15 ms does not carry a T4's 5 ms.
        On the reference machine the scale is exactly 1 (its numbers are unchanged). None: never scale.
    """

    device_speed_sd: float = 0.01
    single_device_sd_s: float = 0.0003
    multi_device_sd_s: float = 0.005
    step_sd_fraction: float = 0.5
    reference_profile: str | None = "4xT4-pcie"

    def __post_init__(self):
        ref = self.reference_profile
        if ref is not None and not (isinstance(ref, str) and ref):
            raise ValueError(f"NoiseModel.reference_profile must be a profile name or None; got {ref!r}")
        for k, v in asdict(self).items():
            if k == "reference_profile":
                continue
            if not (v >= 0 and np.isfinite(v)):
                raise ValueError(f"NoiseModel.{k} must be a finite number >= 0; got {v!r}")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "NoiseModel":
        return cls(**{k: (v if k == "reference_profile" else float(v)) for k, v in d.items()})


def device_speed_factors(noise: NoiseModel | None, rng: np.random.Generator, n_devices: int) -> tuple[float, ...]:
    """One machine's per-device time multipliers, clipped to [0.5, 2] (all 1 without noise)."""
    factors = np.ones(n_devices)
    if noise is not None and noise.device_speed_sd > 0:
        factors = np.clip(1.0 + rng.normal(0.0, noise.device_speed_sd, n_devices), 0.5, 2.0)
    return tuple(float(f) for f in factors)


def jittered_steps(step_s: float, placement: Sequence[int], noise: NoiseModel,
                   rng: np.random.Generator, scale: float = 1.0) -> np.ndarray:
    """``TIMED_STEPS`` noisy timings (seconds) of a step whose noiseless time is ``step_s``; never below half.
    ``scale`` multiplies the noise model's sds (the machine's step against the reference's, see NoiseModel)."""
    if not (scale > 0 and np.isfinite(scale)):
        raise ValueError(f"scale must be a finite number > 0; got {scale!r}")
    sd = scale * (noise.single_device_sd_s if len(set(placement)) == 1 else noise.multi_device_sd_s)
    offset = rng.normal(0.0, sd)
    steps = step_s + offset + rng.normal(0.0, sd * noise.step_sd_fraction, TIMED_STEPS)
    return np.maximum(steps, 0.5 * step_s)
