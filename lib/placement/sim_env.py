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
  the cap, the measurement is the seed's 10 s out-of-memory charge.
- **Noise** (off by default): per-machine device speed factors, and per-measurement jitter that is larger when
  the placement spans several devices; the reported time is the median of ``TIMED_STEPS`` jittered steps.

Used in: Part I, chapters 1-3 (``mode="sim"``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Sequence

import numpy as np

from lib import book
from lib import hardware as hw
from lib.graph import STATE_BYTES_PER_PARAM, Graph
from lib.placement.env import TIMED_STEPS, Measurement, validate_placement

#: Kernels one node launches (forward, backward), counted from the eager implementation in ``lib/gpt.py``.
KERNELS: dict[str, tuple[int, int]] = {
    "embedding": (3, 4), "layernorm": (1, 2), "attention": (12, 20), "add": (1, 0),
    "mlp": (4, 7), "head": (1, 2), "loss": (2, 3),
}
#: Memory traffic of PyTorch's default (foreach) AdamW per fp32 parameter: about 20 passes of 4 bytes
#: (lerp of m; mul and addcmul of v; weight decay on p; sqrt, div, add for the denominator; addcdiv into p).
ADAMW_BYTES_PER_PARAM: int = 80
#: Kernel launches of one foreach AdamW step on one device (one per foreach op above).
ADAMW_KERNELS: int = 8
#: Calibration constant: the caching allocator's overhead on top of the accounted bytes (block rounding,
#: fragmentation, cuBLAS workspaces). Chosen so that the seed's experiment C holds at mem_cap 0.24 on a T4:
#: the human two-GPU split runs out of memory while the four-way layer split fits. Any value in about
#: 1.17-1.28 does; 1.2 is the middle. It multiplies ``lib.graph.peak_memory_estimate``.
ALLOC_OVERHEAD: float = 1.2


@dataclass(frozen=True)
class NoiseModel:
    """Timing noise of a real machine, for teaching why best-of-many timings flatter.

    device_speed_sd: per machine, each device's compute times are scaled by 1 + N(0, sd) (no two T4s alike).
    single_device_sd_s / multi_device_sd_s: standard deviation of a per-measurement offset, in seconds, for a
        placement on one device / on several (the seed: single-GPU timings vary by under 1 ms; a multi-GPU
        timing can be off by 5 to 15 ms).
    step_sd_fraction: per-step jitter inside one measurement, as a fraction of that offset's sd.
    """

    device_speed_sd: float = 0.01
    single_device_sd_s: float = 0.0003
    multi_device_sd_s: float = 0.005
    step_sd_fraction: float = 0.5

    def __post_init__(self):
        for k, v in asdict(self).items():
            if not (v >= 0 and np.isfinite(v)):
                raise ValueError(f"NoiseModel.{k} must be a finite number >= 0; got {v!r}")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "NoiseModel":
        return cls(**{k: float(v) for k, v in d.items()})


@dataclass(frozen=True)
class NodeProfile:
    """Per-node forward and backward times measured on a real device, replacing the roofline for that device.

    Times are for one (micro-)batch of ``batch`` sequences; ``optimizer_s_per_param`` is the measured AdamW
    time divided by the parameter count. Written by ``benchmarks/gpu_check.py``'s profiler.
    """

    graph_name: str
    batch: int
    device_name: str
    fwd_s: tuple[float, ...]
    bwd_s: tuple[float, ...]
    optimizer_s_per_param: float
    source: str = ""

    def to_dict(self) -> dict:
        d = asdict(self)
        d["fwd_s"], d["bwd_s"] = list(self.fwd_s), list(self.bwd_s)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "NodeProfile":
        return cls(str(d["graph_name"]), int(d["batch"]), str(d["device_name"]),
                   tuple(float(x) for x in d["fwd_s"]), tuple(float(x) for x in d["bwd_s"]),
                   float(d["optimizer_s_per_param"]), str(d.get("source", "")))


@dataclass(frozen=True)
class TraceEvent:
    """One box of a step's timeline: ``lane`` is a device ("gpu0") or a link channel ("bus")."""

    lane: str
    kind: str  # "forward", "backward", "copy", "optimizer"
    label: str
    micro: int
    start_s: float
    end_s: float


def _as_graph(graph_or_cfg: Any) -> Graph:
    if isinstance(graph_or_cfg, Graph):
        return graph_or_cfg
    from lib import gpt

    if isinstance(graph_or_cfg, str):
        return gpt.gpt_graph(gpt.preset(graph_or_cfg))
    if isinstance(graph_or_cfg, gpt.GPTConfig):
        return gpt.gpt_graph(graph_or_cfg)
    raise ValueError(f"expected a Graph, a GPTConfig or a preset name; got {type(graph_or_cfg).__name__}")


def _dtype_for(graph: Graph) -> str:
    return {4: "fp32", 2: "fp16"}.get(graph.dtype_bytes, "fp32")


def op_seconds(flops: float, n_bytes: float, device: hw.Device, kernels: int, dtype: str = "fp32") -> float:
    """Roofline time of one op on ``device``: the slower of compute and memory, plus launch overheads."""
    return max(flops / device.achievable_flops(dtype), n_bytes / device.achievable_mem_bw_bytes_per_s) + (
        kernels * device.launch_overhead_s
    )


def adamw_seconds(n_params: int, device: hw.Device) -> float:
    """One AdamW step over ``n_params`` fp32 parameters on ``device`` (0 when it holds none)."""
    if n_params <= 0:
        return 0.0
    return n_params * ADAMW_BYTES_PER_PARAM / device.achievable_mem_bw_bytes_per_s + ADAMW_KERNELS * device.launch_overhead_s


class SimPlacementEnv:
    """The placement game on a simulated machine: implements ``PlacementEnv``.

    graph_or_cfg: a ``Graph``, a ``GPTConfig`` or a preset name ("ci", "49m", "163m").
    profile: a ``HardwareProfile`` or a profile name (``lib.hardware.names()``).
    n_micro: micro-batches per step (must divide the batch). mem_cap: fraction of each device's usable memory
    a placement may use, in (0, 1]; None means all of it. noise: a ``NoiseModel`` or None (deterministic).
    seed: an int or a ``numpy.random.Generator`` for the noise. node_profile: measured per-node times for
    devices whose name matches ``NodeProfile.device_name``. sync_phases: synchronise every device between
    forward, backward and optimizer (as ``torch_env`` does when it times phases); off, the seed's plain step.
    alloc_overhead: multiplier on the accounted memory (``ALLOC_OVERHEAD``).
    """

    def __init__(self, graph_or_cfg, profile, n_micro: int = 1, mem_cap: float | None = None,
                 noise: NoiseModel | None = None, seed=None, node_profile: NodeProfile | None = None,
                 sync_phases: bool = False, alloc_overhead: float = ALLOC_OVERHEAD):
        self.graph = _as_graph(graph_or_cfg)
        self.profile = profile if isinstance(profile, hw.HardwareProfile) else hw.load(profile)
        if isinstance(n_micro, bool) or int(n_micro) != n_micro or n_micro < 1 or self.graph.batch % int(n_micro):
            raise ValueError(f"n_micro must be a positive integer dividing the batch {self.graph.batch}; got {n_micro!r}")
        if mem_cap is not None and not (0 < float(mem_cap) <= 1):
            raise ValueError(f"mem_cap must be in (0, 1] (a fraction of each device's memory); got {mem_cap!r}")
        if noise is not None and not isinstance(noise, NoiseModel):
            raise ValueError(f"noise must be a NoiseModel or None; got {type(noise).__name__}")
        if not 1.0 <= float(alloc_overhead) <= 4.0:
            raise ValueError(f"alloc_overhead must be in [1, 4]; got {alloc_overhead!r}")
        self.n_micro, self.mem_cap, self.noise = int(n_micro), mem_cap, noise
        self.sync_phases, self.alloc_overhead = bool(sync_phases), float(alloc_overhead)
        self.n_nodes, self.n_devices = self.graph.n_nodes, self.profile.n_devices
        self.rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        n_dev = self.n_devices
        factors = np.ones(n_dev)
        if noise is not None and noise.device_speed_sd > 0:
            factors = np.clip(1.0 + self.rng.normal(0.0, noise.device_speed_sd, n_dev), 0.5, 2.0)
        self.device_time_factors = tuple(float(f) for f in factors)
        self._precompute(node_profile)

    # ---------------------------------------------------------------------------------------------------
    def _precompute(self, node_profile: NodeProfile | None) -> None:
        g, M, n_dev, prof = self.graph, self.n_micro, self.n_devices, self.profile
        micro = g.with_batch(g.batch // M) if M > 1 else g
        dtype = _dtype_for(g)
        if node_profile is not None and (node_profile.graph_name != g.name or node_profile.batch != micro.batch
                                         or len(node_profile.fwd_s) != g.n_nodes):
            raise ValueError(f"node_profile is for {node_profile.graph_name!r} at batch {node_profile.batch}; "
                             f"this env needs {g.name!r} at micro-batch {micro.batch} with {g.n_nodes} nodes")
        fwd, bwd = [], []
        for n in micro.nodes:
            kf, kb = KERNELS[n.op]
            rf, rb = [], []
            for d, dev in enumerate(prof.devices):
                if node_profile is not None and node_profile.device_name == dev.name:
                    tf, tb = node_profile.fwd_s[n.index], node_profile.bwd_s[n.index]
                else:
                    tf = op_seconds(n.fwd_flops, n.fwd_bytes, dev, kf, dtype)
                    tb = op_seconds(n.bwd_flops, n.bwd_bytes, dev, kb, dtype)
                rf.append(tf * self.device_time_factors[d])
                rb.append(tb * self.device_time_factors[d])
            fwd.append(rf)
            bwd.append(rb)
        self._fwd_s, self._bwd_s = fwd, bwd
        self._inputs = [tuple(n.inputs) for n in g.nodes]
        host = prof.host_launch_s
        self._host_fwd = [KERNELS[n.op][0] * host for n in g.nodes]
        self._host_bwd = [KERNELS[n.op][1] * host for n in g.nodes]
        self._host_s, self._host_adam = host, ADAMW_KERNELS * host
        self._params = [n.params for n in g.nodes]
        # Copies: per node, per (src, dst) pair, the time of its (micro-batch) output over the link.
        channels = prof.channel_names() if n_dev > 1 else ()
        self._n_channels = len(channels)
        self._chan_names = channels
        self._chans = [[()] * n_dev for _ in range(n_dev)]
        copy_s = []
        links = {}
        for s in range(n_dev):
            for d in range(n_dev):
                if s != d:
                    links[s, d] = prof.link(s, d)
                    self._chans[s][d] = tuple(channels.index(c) for c in links[s, d].channels)
        for n in micro.nodes:
            row = [[0.0] * n_dev for _ in range(n_dev)]
            for (s, d), ln in links.items():
                row[s][d] = ln.copy_s(n.out_bytes)
            copy_s.append(row)
        self._copy_s = copy_s
        # AdamW seconds per parameter on each device (and a fixed launch part).
        self._adam_per_param, self._adam_fixed = [], []
        for d, dev in enumerate(prof.devices):
            if node_profile is not None and node_profile.device_name == dev.name:
                per, fixed = node_profile.optimizer_s_per_param, 0.0
            else:
                per = ADAMW_BYTES_PER_PARAM / dev.achievable_mem_bw_bytes_per_s
                fixed = ADAMW_KERNELS * dev.launch_overhead_s
            self._adam_per_param.append(per * self.device_time_factors[d])
            self._adam_fixed.append(fixed * self.device_time_factors[d])
        # Memory: the same figures as lib.graph.peak_memory_estimate, kept as plain lists.
        self._mem_static = [STATE_BYTES_PER_PARAM * n.params + n.saved_bytes for n in g.nodes]
        self._mem_big = [(n.out_bytes + n.transient_bytes) // M for n in g.nodes]
        self._mem_recv = [n.out_bytes // M for n in g.nodes]
        self._edges = g.edges()
        usable = [dev.usable_mem_bytes for dev in prof.devices]
        cap = 1.0 if self.mem_cap is None else float(self.mem_cap)
        self.cap_bytes = tuple(int(u * cap) for u in usable)
        self.source = book.simulated(prof.name)

    # ---------------------------------------------------------------------------------------------------
    def peak_memory(self, placement: Sequence[int]) -> tuple[int, ...]:
        """Per-device peak bytes of one step under ``placement`` (see the module docstring)."""
        p = validate_placement(placement, self.n_nodes, self.n_devices)
        return self._peak_memory(p)

    def memory_breakdown(self, placement: Sequence[int]) -> dict[str, tuple[int, ...]]:
        """The parts of each device's peak, in bytes; they add up to :meth:`peak_memory`."""
        p = validate_placement(placement, self.n_nodes, self.n_devices)
        n_dev, g = self.n_devices, self.graph
        parts = {k: [0] * n_dev for k in ("model states", "saved activations", "received copies",
                                          "largest output + transient", "allocator overhead")}
        for n in g.nodes:
            d = p[n.index]
            parts["model states"][d] += STATE_BYTES_PER_PARAM * n.params
            parts["saved activations"][d] += n.saved_bytes
            big = parts["largest output + transient"]
            big[d] = max(big[d], self._mem_big[n.index])
        for q, c in self._edges:
            if p[q] != p[c]:
                parts["received copies"][p[c]] += self._mem_recv[q]
        peaks = self._peak_memory(p)
        for d in range(n_dev):
            parts["allocator overhead"][d] = peaks[d] - sum(parts[k][d] for k in list(parts)[:4])
        return {k: tuple(v) for k, v in parts.items()}

    def _peak_memory(self, p) -> tuple[int, ...]:
        n_dev = self.n_devices
        mem, big = [0] * n_dev, [0] * n_dev
        static, mbig = self._mem_static, self._mem_big
        for i, d in enumerate(p):
            mem[d] += static[i]
            if mbig[i] > big[d]:
                big[d] = mbig[i]
        recv = self._mem_recv
        for q, c in self._edges:
            if p[q] != p[c]:
                mem[p[c]] += recv[q]
        f = self.alloc_overhead
        return tuple(int((a + b) * f) for a, b in zip(mem, big))

    def _simulate(self, p, trace: list | None = None) -> tuple[float, float, float]:
        """Run the step's program once; return (forward end, backward end, step end) in seconds.

        ``free[d]``: when device d's stream has done all work issued so far; ``chan[c]``: the same for a link
        channel; ``h``: the host's clock (it issues forward work and the optimizer; in backward, autograd gives
        every device its own issuing thread, ``hd[d]``).
        """
        n_dev, M, N = self.n_devices, self.n_micro, self.n_nodes
        free = [0.0] * n_dev
        chan = [0.0] * self._n_channels
        fwd, bwd, inputs, copy_s, chans = self._fwd_s, self._bwd_s, self._inputs, self._copy_s, self._chans
        hf, hb, hs = self._host_fwd, self._host_bwd, self._host_s
        h = 0.0
        order = range(N)
        for m in range(M):
            for i in order:
                d = p[i]
                for q in inputs[i]:
                    s = p[q]
                    if s != d:  # copy q's output s -> d before node i runs
                        h += hs
                        t = free[s] if free[s] > free[d] else free[d]
                        if h > t:
                            t = h
                        cs = chans[s][d]
                        for c in cs:
                            if chan[c] > t:
                                t = chan[c]
                        e = t + copy_s[q][s][d]
                        free[s] = free[d] = e
                        for c in cs:
                            chan[c] = e
                        if trace is not None:
                            self._trace_copy(trace, q, i, s, d, m, t, e, "activation")
                h += hf[i]
                t = free[d] if free[d] > h else h
                free[d] = t + fwd[i][d]
                if trace is not None:
                    trace.append(TraceEvent(f"gpu{d}", "forward", self.graph.nodes[i].name, m, t, free[d]))
        fwd_end = max(free)
        if self.sync_phases:
            h = fwd_end if fwd_end > h else h
            free = [fwd_end] * n_dev
        hd = [h] * n_dev
        rev = range(N - 1, -1, -1)
        for m in range(M - 1, -1, -1):
            for i in rev:
                d = p[i]
                hd[d] += hb[i]
                t = free[d] if free[d] > hd[d] else hd[d]
                free[d] = t + bwd[i][d]
                if trace is not None:
                    trace.append(TraceEvent(f"gpu{d}", "backward", self.graph.nodes[i].name, m, t, free[d]))
                for q in inputs[i]:
                    s = p[q]
                    if s != d:  # the gradient of q's output goes back d -> s
                        hd[d] += hs
                        if hd[d] > hd[s]:
                            hd[s] = hd[d]
                        t = free[s] if free[s] > free[d] else free[d]
                        if hd[d] > t:
                            t = hd[d]
                        cs = chans[d][s]
                        for c in cs:
                            if chan[c] > t:
                                t = chan[c]
                        e = t + copy_s[q][d][s]
                        free[s] = free[d] = e
                        for c in cs:
                            chan[c] = e
                        if trace is not None:
                            self._trace_copy(trace, q, i, d, s, m, t, e, "gradient")
        bwd_end = max(free)
        h = max(hd)
        if self.sync_phases:
            h = bwd_end if bwd_end > h else h
            free = [bwd_end] * n_dev
        params = [0] * n_dev
        for i, d in enumerate(p):
            params[d] += self._params[i]
        for d in range(n_dev):
            if params[d]:
                h += self._host_adam
                t = free[d] if free[d] > h else h
                free[d] = t + self._adam_fixed[d] + params[d] * self._adam_per_param[d]
                if trace is not None:
                    trace.append(TraceEvent(f"gpu{d}", "optimizer", "AdamW", -1, t, free[d]))
        return fwd_end, bwd_end, max(free)

    def _trace_copy(self, trace, q, i, s, d, m, t, e, what):
        lanes = [self._chan_names[c] for c in self._chans[s][d]] or ["copy"]
        label = f"{what} of {self.graph.nodes[q].name} gpu{s}->gpu{d}"
        for lane in lanes:
            trace.append(TraceEvent(lane, "copy", label, m, t, e))

    # ---------------------------------------------------------------------------------------------------
    def measure(self, placement: Sequence[int]) -> Measurement:
        """Simulate one step (with noise: the median of ``TIMED_STEPS`` jittered steps)."""
        p = validate_placement(placement, self.n_nodes, self.n_devices)
        peaks = self._peak_memory(p)
        caps = self.cap_bytes
        for d in range(self.n_devices):
            if peaks[d] > caps[d]:
                return Measurement.out_of_memory(self.n_devices, self.source, peaks)
        f, b, s = self._simulate(p)
        phases = {"forward": f, "backward": b - f, "optimizer": s - b}
        if self.noise is None:
            return Measurement(s, False, peaks, phases, self.source, ())
        nz = self.noise
        sd = nz.single_device_sd_s if len(set(p)) == 1 else nz.multi_device_sd_s
        offset = self.rng.normal(0.0, sd)
        steps = s + offset + self.rng.normal(0.0, sd * nz.step_sd_fraction, TIMED_STEPS)
        steps = np.maximum(steps, 0.5 * s)
        return Measurement(float(np.median(steps)), False, peaks, phases, self.source,
                           tuple(float(x) for x in steps))

    def trace(self, placement: Sequence[int]) -> list[TraceEvent]:
        """The noiseless timeline of one step: every op, copy and AdamW update with its start and end."""
        p = validate_placement(placement, self.n_nodes, self.n_devices)
        events: list[TraceEvent] = []
        self._simulate(p, events)
        return events

    def describe(self) -> str:
        cap = "no cap" if self.mem_cap is None else f"memory cap {self.mem_cap:g}"
        noise = "noise off" if self.noise is None else "noise on"
        return f"{self.source} ({self.graph.name}, n_micro={self.n_micro}, {cap}, {noise})"

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
