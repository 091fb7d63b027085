"""The placement game's contract: a placement in, one timed training step out.

Every executor (``torch_env.TorchPlacementEnv`` on real devices, ``sim_env.SimPlacementEnv`` on a hardware
profile) implements :class:`PlacementEnv` and returns a :class:`Measurement`, so the placer, the trainer and
the evaluation never know which one they talk to. Used in: Part I, chapters 1-3.
"""

from __future__ import annotations

import contextlib

from dataclasses import asdict, dataclass, field
from typing import Protocol, Sequence, runtime_checkable

#: A placement that runs out of memory is charged this many seconds (the write-up's rule).
OOM_PENALTY_S: float = 10.0
#: The write-up's timing protocol: 2 warm-up steps, then the median of 5 timed steps.
WARMUP_STEPS: int = 2
TIMED_STEPS: int = 5

PHASES: tuple[str, ...] = ("forward", "backward", "optimizer")


@dataclass(frozen=True)
class Measurement:
    """One placement measured (or simulated).

    step_s: the reward-relevant step time in seconds (``OOM_PENALTY_S`` when out of memory).
    oom: whether the placement ran out of memory on some device.
    peak_mem_bytes: per-device peak memory, one entry per device of the environment.
    phase_s: per-phase times, keys from ``PHASES`` (empty when not measured, e.g. after OOM).
    source: where the number came from, e.g. ``"measured on cuda:0-3 (Tesla T4)"`` or
        ``"simulated: 4xT4-pcie"``; the book prints it beside every number.
    samples_s: the individual timed steps behind ``step_s`` (empty for a noiseless simulation).
    """

    step_s: float
    oom: bool
    peak_mem_bytes: tuple[int, ...]
    phase_s: dict = field(default_factory=dict)
    source: str = ""
    samples_s: tuple[float, ...] = ()

    def to_dict(self) -> dict:
        d = asdict(self)
        d["peak_mem_bytes"] = list(self.peak_mem_bytes)
        d["samples_s"] = list(self.samples_s)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Measurement":
        return cls(
            step_s=float(d["step_s"]),
            oom=bool(d["oom"]),
            peak_mem_bytes=tuple(int(x) for x in d["peak_mem_bytes"]),
            phase_s=dict(d.get("phase_s", {})),
            source=str(d.get("source", "")),
            samples_s=tuple(float(x) for x in d.get("samples_s", ())),
        )

    @classmethod
    def out_of_memory(cls, n_devices: int, source: str, peak_mem_bytes: Sequence[int] | None = None) -> "Measurement":
        """The charged measurement of a placement that did not fit."""
        peaks = tuple(peak_mem_bytes) if peak_mem_bytes is not None else (0,) * n_devices
        return cls(step_s=OOM_PENALTY_S, oom=True, peak_mem_bytes=peaks, source=source)


@runtime_checkable
class PlacementEnv(Protocol):
    """What the placer sees: how many nodes, how many devices, and a step time for a placement."""

    n_nodes: int
    n_devices: int

    def measure(self, placement: Sequence[int]) -> Measurement:
        """Time one training step with node ``i`` on device ``placement[i]``."""
        ...

    def describe(self) -> str:
        """A one-line provenance label: measured on which devices, or simulated with which profile."""
        ...


def validate_placement(placement: Sequence[int], n_nodes: int, n_devices: int) -> tuple[int, ...]:
    """Check a placement's length and device indices; return it as a tuple of ints.

    Raises ``ValueError`` naming the problem and the allowed values.
    """
    try:
        p = tuple(int(d) for d in placement)
    except (TypeError, ValueError) as e:
        raise ValueError(f"a placement is a sequence of device indices; got {placement!r}") from e
    if p != tuple(placement) or any(d is True or d is False for d in placement):  # 1.5 -> 1, True -> 1
        i, d = next((i, d) for i, (d, q) in enumerate(zip(placement, p)) if d != q or isinstance(d, bool))
        raise ValueError(f"placement[{i}] = {d!r} is not an integer device index")
    if len(p) != n_nodes:
        raise ValueError(f"placement has {len(p)} entries; this model has {n_nodes} nodes (one device per node)")
    bad = [(i, d) for i, d in enumerate(p) if not 0 <= d < n_devices]
    if bad:
        i, d = bad[0]
        raise ValueError(
            f"placement[{i}] = {d} is out of range: devices are 0..{n_devices - 1} ({len(bad)} bad entries)"
        )
    return p


def check_mem_cap(mem_cap):
    """``mem_cap`` as a float in (0, 1], or None; anything else (booleans included) is a ValueError."""
    if mem_cap is None:
        return None
    if isinstance(mem_cap, bool) or not isinstance(mem_cap, (int, float)) or not 0 < mem_cap <= 1:
        raise ValueError(f"mem_cap={mem_cap!r} is outside (0, 1]: it is a fraction of each device's memory "
                         "(or None for no cap)")
    return float(mem_cap)


@contextlib.contextmanager
def phases_synchronised(env):
    """Inside the block, ``env`` synchronises every device between forward, backward and optimizer (the
    write-up's per-phase table); the plain step, which is what rewards and the head-to-head time, is restored."""
    if not hasattr(env, "set_sync_phases"):
        yield env
        return
    before = env.sync_phases
    env.set_sync_phases(True)
    try:
        yield env
    finally:
        env.set_sync_phases(before)
