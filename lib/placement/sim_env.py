"""An event-driven simulator of one training step under a placement, from a graph and a hardware profile.

The model, in the order a step runs (everything per micro-batch when ``n_micro > 1``, GPipe fill and drain):

- **Streams.** Each device has one FIFO stream; work is issued in program order (forward node by node for
  micro-batch 0, 1, ...; then backward in reverse node order for micro-batch M-1, ..., 0; then AdamW). An op
  starts when its device's stream is free and the host has issued it (``host_launch_s`` per kernel; in
  backward each device has its own issuing thread, as in autograd). With ``sync_phases`` every device is
  synchronised between forward, backward and optimizer.
- **Copies** follow PyTorch's cross-device ``copy_`` (``aten/src/ATen/native/cuda/Copy.cu``): the copy runs on
  the source stream after a two-way barrier, so it starts when the source *and* destination streams are both
  free and every channel of its link is free, lasts ``latency + bytes / bandwidth``, and both streams wait for
  it. A forward copy is made per consuming node (as ``GPTChain.forward`` does); a gradient goes back the same
  way right after the consumer's backward.
- **Per-op time** is a roofline: ``max(FLOPs / achievable FLOP/s, bytes / achievable bandwidth) + kernels x
  launch overhead``, or the times of a :class:`NodeProfile` measured on a real device when one is given.
- **AdamW** runs per device over the parameters living there, after that device's last backward op, so the
  devices update in parallel. Its traffic is ``ADAMW_BYTES_PER_PARAM`` bytes per parameter.
- **Memory** per device: 16 bytes per parameter (weights, gradients, two Adam moments), every saved activation
  of its nodes (fill and drain keeps all micro-batches'), one copy of every tensor it receives, and the largest
  output + transient of its nodes for one micro-batch (the 823 MB logits, their softmax and gradient): the
  formula of ``lib.graph.peak_memory_estimate``, times ``ALLOC_OVERHEAD`` for the caching allocator. Above
  the cap, the measurement is the write-up's 10 s out-of-memory charge.
- **Noise** (off by default): per-machine device speed factors, and per-measurement jitter that is larger when
  the placement spans several devices; the reported time is the median of ``TIMED_STEPS`` jittered steps.

The parts live in their own modules: the memory model in ``memory.py`` (shared with ``torch_env``), the
noise in ``sim_noise.py``, the per-op times and the event engine in ``sim_engine.py``; this module is the
environment that puts them together, and re-exports their public names. Used in: Part I, chapters 1-3
(``mode="sim"``).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from lib import book
from lib import hardware as hw
from lib.cli_errors import UserError
from lib.graph import Graph
from lib.placement.env import Measurement, check_mem_cap, validate_placement
from lib.placement.memory import ALLOC_OVERHEAD, MemoryModel, cap_bytes, check_alloc_overhead
from lib.placement.sim_engine import (ADAMW_BYTES_PER_PARAM, ADAMW_KERNELS, KERNELS, NodeProfile, StepEngine,
                                      TraceEvent, adamw_seconds, op_seconds)
from lib.placement.sim_mechanisms import Mechanisms
from lib.placement.sim_mechanisms import describe as describe_mechanisms
from lib.placement.sim_noise import NoiseModel, device_speed_factors, jittered_steps

__all__ = ["ADAMW_BYTES_PER_PARAM", "ADAMW_KERNELS", "ALLOC_OVERHEAD", "KERNELS", "Mechanisms", "NodeProfile",
           "NoiseModel", "SimPlacementEnv", "TraceEvent", "adamw_seconds", "calibrate_flops_efficiency", "op_seconds"]


def _as_graph(graph_or_cfg: Any) -> Graph:
    if isinstance(graph_or_cfg, Graph):
        return graph_or_cfg
    from lib import gpt

    if isinstance(graph_or_cfg, str):
        return gpt.gpt_graph(gpt.preset(graph_or_cfg))
    if isinstance(graph_or_cfg, gpt.GPTConfig):
        return gpt.gpt_graph(graph_or_cfg)
    raise ValueError(f"expected a Graph, a GPTConfig or a preset name; got {type(graph_or_cfg).__name__}")


class SimPlacementEnv:
    """The placement game on a simulated machine: implements ``PlacementEnv``.

    graph_or_cfg: a ``Graph``, a ``GPTConfig`` or a preset name ("ci", "49m", "163m").
    profile: a ``HardwareProfile`` or a profile name (``lib.hardware.names()``).
    n_micro: micro-batches per step (must divide the batch). mem_cap: fraction of each device's usable memory
    a placement may use, in (0, 1]; None means all of it. noise: a ``NoiseModel`` or None (deterministic).
    seed: an int or a ``numpy.random.Generator`` for the noise. node_profile: measured per-node times for
    devices whose name matches ``NodeProfile.device_name``. sync_phases: synchronise every device between
    forward, backward and optimizer (as ``torch_env`` does when it times phases); off, the write-up's plain step.
    alloc_overhead: multiplier on the accounted memory (``ALLOC_OVERHEAD``). mechanisms: the optional terms of
    ``lib.placement.sim_mechanisms`` (None: all off, the base model).
    """

    def __init__(self, graph_or_cfg, profile, n_micro: int = 1, mem_cap: float | None = None,
                 noise: NoiseModel | None = None, seed=None, node_profile: NodeProfile | None = None,
                 sync_phases: bool = False, alloc_overhead: float = ALLOC_OVERHEAD,
                 mechanisms: Mechanisms | None = None):
        self.graph = _as_graph(graph_or_cfg)
        self.profile = profile if isinstance(profile, hw.HardwareProfile) else hw.load(profile)
        if isinstance(n_micro, bool) or int(n_micro) != n_micro or n_micro < 1 or self.graph.batch % int(n_micro):
            raise ValueError(f"n_micro must be a positive integer dividing the batch {self.graph.batch}; got {n_micro!r}")
        mem_cap = check_mem_cap(mem_cap)
        if noise is not None and not isinstance(noise, NoiseModel):
            raise ValueError(f"noise must be a NoiseModel or None; got {type(noise).__name__}")
        self.alloc_overhead = check_alloc_overhead(alloc_overhead)
        self.n_micro, self.mem_cap, self.noise, self.sync_phases = int(n_micro), mem_cap, noise, bool(sync_phases)
        self.n_nodes, self.n_devices = self.graph.n_nodes, self.profile.n_devices
        self.rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        self.device_time_factors = device_speed_factors(noise, self.rng, self.n_devices)
        if node_profile is not None and all(d.name != node_profile.device_name for d in self.profile.devices):
            raise UserError(f"node_profile was measured on {node_profile.device_name!r}, but the profile "
                             f"{self.profile.name!r} has {sorted({d.name for d in self.profile.devices})}")
        self.node_profile = node_profile
        self.mechanisms = mechanisms if mechanisms is not None else Mechanisms()
        self.engine = StepEngine(self.graph, self.profile, self.n_micro, node_profile, self.device_time_factors,
                                 self.sync_phases, self.mechanisms)
        self.memory = MemoryModel(self.graph, self.n_devices, self.n_micro, self.alloc_overhead)
        self.cap_bytes = tuple(cap_bytes(dev.usable_mem_bytes, mem_cap) for dev in self.profile.devices)
        self.source = book.simulated(self.profile.name)
        self.noise_scale = self._noise_scale()

    def _noise_scale(self) -> float:
        """This machine's single-GPU step over the noise model's reference machine's (1 there, or without
        noise): the timing noise is sized as a share of the step (``NoiseModel.reference_profile``)."""
        ref = None if self.noise is None else self.noise.reference_profile
        if ref is None or ref == self.profile.name:
            return 1.0
        single = (0,) * self.n_nodes
        own = SimPlacementEnv(self.graph, self.profile, self.n_micro, mechanisms=self.mechanisms)
        other = SimPlacementEnv(self.graph, ref, self.n_micro, mechanisms=self.mechanisms)
        return float(own.engine.simulate(single)[2] / other.engine.simulate(single)[2])

    def peak_memory(self, placement: Sequence[int]) -> tuple[int, ...]:
        """Per-device peak bytes of one step under ``placement`` (see ``lib.placement.memory``)."""
        return self.memory.peaks(validate_placement(placement, self.n_nodes, self.n_devices))

    def memory_breakdown(self, placement: Sequence[int]) -> dict[str, tuple[int, ...]]:
        """The parts of each device's peak, in bytes; they add up to :meth:`peak_memory`."""
        return self.memory.breakdown(validate_placement(placement, self.n_nodes, self.n_devices))

    def measure(self, placement: Sequence[int]) -> Measurement:
        """Simulate one step (with noise: the median of ``TIMED_STEPS`` jittered steps)."""
        p = validate_placement(placement, self.n_nodes, self.n_devices)
        peaks = self.memory.peaks(p)
        caps = self.cap_bytes
        for d in range(self.n_devices):
            if peaks[d] > caps[d]:
                return Measurement.out_of_memory(self.n_devices, self.source, peaks)
        f, b, s = self.engine.simulate(p)
        phases = {"forward": f, "backward": b - f, "optimizer": s - b}
        if self.noise is None:
            return Measurement(s, False, peaks, phases, self.source, ())
        steps = jittered_steps(s, p, self.noise, self.rng, self.noise_scale)
        step = float(np.median(steps))
        phases = {k: v * step / s for k, v in phases.items()} if s > 0 else phases  # the jitter, shared out
        return Measurement(step, False, peaks, phases, self.source, tuple(float(x) for x in steps))

    def noiseless_s(self, placement: Sequence[int]) -> float | None:
        """The step time of ``placement`` on this machine (its GPUs' speed factors) without timing noise;
        None when it runs out of memory."""
        p = validate_placement(placement, self.n_nodes, self.n_devices)
        if any(pk > cap for pk, cap in zip(self.memory.peaks(p), self.cap_bytes)):
            return None
        return float(self.engine.simulate(p)[2])

    def set_sync_phases(self, flag: bool) -> None:
        """Switch the per-phase barriers on or off (see ``lib.placement.env.phases_synchronised``)."""
        self.sync_phases = self.engine.sync_phases = bool(flag)

    def trace(self, placement: Sequence[int]) -> list[TraceEvent]:
        """The noiseless timeline of one step: every op, copy and AdamW update with its start and end."""
        p = validate_placement(placement, self.n_nodes, self.n_devices)
        events: list[TraceEvent] = []
        self.engine.simulate(p, events)
        return events

    def describe(self) -> str:
        cap = "no cap" if self.mem_cap is None else f"memory cap {self.mem_cap:g}"
        noise = ("noise off" if self.noise is None else "noise on" if self.noise_scale == 1.0
                 else f"noise on, scaled ×{self.noise_scale:.2f} to the step")
        nodes = "" if self.node_profile is None else f", per-node times from a measured profile: {self.node_profile.source}"
        mech = "" if self.mechanisms.is_base else f", mechanisms: {describe_mechanisms(self.mechanisms)}"
        return f"{self.source} ({self.graph.name}, n_micro={self.n_micro}, {cap}, {noise}{nodes}{mech})"

    def __repr__(self) -> str:
        return f"SimPlacementEnv({self.describe()})"


def calibrate_flops_efficiency(graph_or_cfg, profile, target_step_s: float, device: int = 0,
                               lo: float = 0.01, hi: float = 1.0, tol: float = 1e-6) -> float:
    """The ``flops_efficiency`` that makes the all-on-``device`` step take ``target_step_s`` (bisection).

    How the T4 profile's calibration constant was obtained. ValueError when no value in [lo, hi] reaches it.
    """
    prof = profile if isinstance(profile, hw.HardwareProfile) else hw.load(profile)
    graph = _as_graph(graph_or_cfg)

    def step(eff: float) -> float:
        devs = [hw.Device.from_dict({**dv.to_dict(), "flops_efficiency": eff}) for dv in prof.devices]
        env = SimPlacementEnv(graph, prof.replace(devices=devs))
        return env.measure([device] * graph.n_nodes).step_s

    if not step(hi) <= target_step_s <= step(lo):
        raise ValueError(f"target {target_step_s} s is outside [{step(hi):.4g}, {step(lo):.4g}] s reachable "
                         f"with flops_efficiency in [{lo}, {hi}]")
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        if step(mid) > target_step_s:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)
