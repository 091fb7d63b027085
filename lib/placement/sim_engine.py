"""The simulator's event engine: per-op times from a roofline (or a measured profile) and one step's program
run on per-device streams and link channels.

See ``lib.placement.sim_env`` for the model in words (streams, copies, roofline, AdamW). This module holds its
constants, the per-op time formulas and :class:`StepEngine`, which precomputes every op's and copy's time for a
graph, a hardware profile and a micro-batch count, then replays the step's program for a placement in plain
Python (a few thousand placements a second). Used in: Part I, chapters 1-3 (``mode="sim"``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from typing import Sequence

from lib import hardware as hw
from lib.cli_errors import UserError
from lib.graph import Graph
from lib.placement.sim_mechanisms import ADAMW_COSTS, PARAM_TENSORS, Mechanisms

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

    @classmethod
    def from_report(cls, path: str, graph_name: str) -> "NodeProfile":
        """The profile ``benchmarks/gpu_check.py`` measured for the graph ``graph_name`` (e.g. ``gpt-49m``),
        from its JSON report. A dry-run report (no GPU) is refused: its times are a CPU's. Every field is
        checked with exact types and ranges first (``ValueError`` naming the file and the field)."""
        import json

        with open(path) as f:
            rep = json.load(f)
        if not isinstance(rep, dict) or rep.get("kind") != "gpu_check":
            kind = rep.get("kind") if isinstance(rep, dict) else type(rep).__name__
            raise UserError(f"{path!r} is not a gpu_check report (kind={kind!r})")
        if rep.get("dry_run"):
            raise UserError(f"{path!r} is a dry run on a CPU; its node times are not a GPU's")
        runs = rep.get("single_device", [])
        if not isinstance(runs, list) or not all(isinstance(r, dict) for r in runs):
            raise UserError(f"{path}: single_device must be a list of objects")
        found = [_checked_node_profile(r["node_profile"], f"{path}: single_device[{i}].node_profile")
                 for i, r in enumerate(runs) if "node_profile" in r]
        for d in found:
            if d["graph_name"] == graph_name:
                return cls.from_dict(d)
        raise UserError(f"{path!r} has no node profile for {graph_name!r}; it has "
                         f"{[d['graph_name'] for d in found]}")

    def scaled_to(self, batch: int) -> "NodeProfile":
        """The same profile for another batch, node times scaled linearly (an approximation: small batches
        use a GPU less well, so this flatters micro-batching). The source says so."""
        if batch < 1:
            raise ValueError(f"batch must be >= 1; got {batch}")
        if batch == self.batch:
            return self
        f = batch / self.batch
        return replace(self, batch=batch, fwd_s=tuple(t * f for t in self.fwd_s), bwd_s=tuple(t * f for t in self.bwd_s),
                       source=f"{self.source}; scaled linearly from batch {self.batch} to {batch}")


@lru_cache(maxsize=1)
def _node_profile_model():
    """The pydantic model of a report's ``node_profile`` (built on first use: the simulator itself needs no pydantic)."""
    from typing import Annotated

    from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, StrictStr

    Seconds = Annotated[StrictFloat | StrictInt, Field(ge=0, le=3600, allow_inf_nan=False)]

    class NodeProfileModel(BaseModel):
        model_config = ConfigDict(extra="forbid")
        graph_name: StrictStr
        batch: Annotated[StrictInt, Field(ge=1, le=1_000_000)]
        device_name: StrictStr
        fwd_s: Annotated[list[Seconds], Field(min_length=1, max_length=100_000)]
        bwd_s: Annotated[list[Seconds], Field(min_length=1, max_length=100_000)]
        optimizer_s_per_param: Annotated[StrictFloat | StrictInt, Field(ge=0, le=1, allow_inf_nan=False)]
        source: StrictStr = ""

    return NodeProfileModel


def _checked_node_profile(d, where: str) -> dict:
    """``d`` if it is a valid node profile (exact types, finite times in [0, 1 h], equal lengths); else a
    one-line ``ValueError`` naming ``where`` and the field."""
    from pydantic import ValidationError

    from lib.cli_errors import describe_validation_error

    if not isinstance(d, dict):
        raise UserError(f"{where}: a JSON {type(d).__name__}, not an object")
    try:
        _node_profile_model().model_validate(d)
    except ValidationError as e:
        raise UserError(describe_validation_error(e, where)) from None
    if len(d["fwd_s"]) != len(d["bwd_s"]):
        raise UserError(f"{where}: fwd_s has {len(d['fwd_s'])} times and bwd_s {len(d['bwd_s'])}; "
                         "they must match, one per node")
    return d


@dataclass(frozen=True)
class TraceEvent:
    """One box of a step's timeline: ``lane`` is a device ("gpu0") or a link channel ("bus")."""

    lane: str
    kind: str  # "forward", "backward", "copy", "optimizer"
    label: str
    micro: int
    start_s: float
    end_s: float


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


def _copy(free: list, chan: list, channels, a: int, b: int, host_s: float, dur_s: float) -> tuple[float, float]:
    """One cross-device copy between devices ``a`` and ``b``: it starts when both streams, the host and every
    channel it uses are free, and blocks both streams and those channels until it ends. Returns (start, end)."""
    t = free[a] if free[a] > free[b] else free[b]
    if host_s > t:
        t = host_s
    for c in channels:
        if chan[c] > t:
            t = chan[c]
    e = t + dur_s
    free[a] = free[b] = e
    for c in channels:
        chan[c] = e
    return t, e


class StepEngine:
    """Every op's, copy's and AdamW update's time for ``graph`` on ``profile`` with ``n_micro`` micro-batches.

    node_profile: measured per-node times for the devices whose name matches ``NodeProfile.device_name``.
    device_time_factors: per-device multipliers on compute times (a noisy machine's speeds; 1 = nominal).
    sync_phases: synchronise every device between forward, backward and optimizer.
    mechanisms: the optional terms of ``lib.placement.sim_mechanisms`` (None: all off, the base model).
    """

    def __init__(self, graph: Graph, profile: hw.HardwareProfile, n_micro: int = 1,
                 node_profile: NodeProfile | None = None, device_time_factors: Sequence[float] | None = None,
                 sync_phases: bool = False, mechanisms: Mechanisms | None = None):
        g, M, n_dev, prof = graph, int(n_micro), profile.n_devices, profile
        mech = mechanisms if mechanisms is not None else Mechanisms()
        if not isinstance(mech, Mechanisms):
            raise ValueError(f"mechanisms must be a Mechanisms or None; got {type(mech).__name__}")
        self.mechanisms = mech
        self.n_devices, self.n_micro, self.n_nodes, self.sync_phases = n_dev, M, g.n_nodes, bool(sync_phases)
        factors = tuple(device_time_factors) if device_time_factors is not None else (1.0,) * n_dev
        self.names = [n.name for n in g.nodes]
        micro = g.with_batch(g.batch // M) if M > 1 else g
        dtype = _dtype_for(g)
        if node_profile is not None and (node_profile.graph_name != g.name or node_profile.batch != micro.batch
                                         or len(node_profile.fwd_s) != g.n_nodes):
            raise UserError(f"node_profile is for {node_profile.graph_name!r} at batch {node_profile.batch}; "
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
                rf.append(tf * factors[d])
                rb.append(tb * factors[d])
            fwd.append(rf)
            bwd.append(rb)
        self.fwd_s, self.bwd_s = fwd, bwd
        self._inputs = [tuple(n.inputs) for n in g.nodes]
        host = prof.host_launch_s
        self._host_fwd = [KERNELS[n.op][0] * host for n in g.nodes]
        # gradient allocation (a mechanism): once per parameter tensor, in the last micro-batch's backward
        self._host_bwd = [KERNELS[n.op][1] * host for n in g.nodes]
        alloc = [PARAM_TENSORS[n.op] * mech.grad_alloc_host_s if n.params else 0.0 for n in g.nodes]
        self._host_alloc = alloc if any(alloc) else None
        adam_bytes, adam_kernels, adam_per_tensor = ADAMW_COSTS[mech.adamw_impl]
        self._host_s = host
        self._params = [n.params for n in g.nodes]
        self._tensors = [PARAM_TENSORS[n.op] if n.params else 0 for n in g.nodes]
        self._adam_kernels, self._adam_per_tensor = adam_kernels, adam_per_tensor
        self._host_adam = adam_kernels * host  # per device; plus adam_per_tensor launches per parameter tensor
        self._clip_barrier = mech.adamw_impl == "foreach+clip"
        self._adam_overlap, self._copy_blocks = mech.adamw_overlap, mech.copy_blocks_host
        self._power = float(mech.power_boost)
        if mech.embedding_grad_zero:  # the dense embedding gradient's zero-fill, in the embedding's backward
            for i, n in enumerate(micro.nodes):
                if n.op == "embedding" and n.params:
                    for d, dev in enumerate(prof.devices):
                        bwd[i][d] += 4.0 * n.params / dev.achievable_mem_bw_bytes_per_s * factors[d]
        # Copies: per node, per (src, dst) pair, the time of its (micro-batch) output over the link.
        channels = prof.channel_names() if n_dev > 1 else ()
        self._n_channels = len(channels)
        self._chan_names = channels
        self._chans = [[()] * n_dev for _ in range(n_dev)]
        links = {}
        for s in range(n_dev):
            for d in range(n_dev):
                if s != d:
                    links[s, d] = prof.link(s, d)
                    self._chans[s][d] = tuple(channels.index(c) for c in links[s, d].channels)
        copy_s = []
        for n in micro.nodes:
            row = [[0.0] * n_dev for _ in range(n_dev)]
            for (s, d), ln in links.items():
                row[s][d] = ln.copy_s(n.out_bytes)
            copy_s.append(row)
        self._copy_s = copy_s
        # AdamW seconds per parameter on each device (and a fixed launch part); the zero_grad memset per parameter.
        self._adam_per_param, self._adam_fixed, self._adam_per_tensor_s, self._memset_per_param = [], [], [], []
        for d, dev in enumerate(prof.devices):
            bw = dev.achievable_mem_bw_bytes_per_s
            if mech.adamw_bw_efficiency is not None:
                bw = dev.mem_bw_bytes_per_s * mech.adamw_bw_efficiency
            if node_profile is not None and node_profile.device_name == dev.name and mech.adamw_impl == "foreach" \
                    and mech.adamw_bw_efficiency is None:
                per, fixed = node_profile.optimizer_s_per_param, 0.0
            else:
                per = adam_bytes / bw
                fixed = adam_kernels * dev.launch_overhead_s
            self._adam_per_param.append(per * factors[d])
            self._adam_fixed.append(fixed * factors[d])
            self._adam_per_tensor_s.append(adam_per_tensor * dev.launch_overhead_s * factors[d])
            self._memset_per_param.append(4.0 / dev.achievable_mem_bw_bytes_per_s * factors[d]
                                          if mech.zero_grad == "memset" else 0.0)

    def simulate(self, p, trace: list | None = None) -> tuple[float, float, float]:
        """Run the step's program once; return (forward end, backward end, step end) in seconds.

        ``free[d]``: when device d's stream has done all work issued so far; ``chan[c]``: the same for a link
        channel; ``h``: the host's clock (it issues forward work and the optimizer; in backward, autograd gives
        every device its own issuing thread, ``hd[d]``). With the ``power_boost`` mechanism the program runs
        twice: the second time each device's compute is scaled by its busy fraction in the first.
        """
        if not self._power:
            return self._run(p, None, trace)[:3]
        f, b, s, busy = self._run(p, None, None)
        sc = [1.0 - self._power * (1.0 - min(1.0, busy[d] / s)) if s > 0 else 1.0 for d in range(self.n_devices)]
        return self._run(p, sc, trace)[:3]

    def _run(self, p, sc, trace):
        n_dev, M, N = self.n_devices, self.n_micro, self.n_nodes
        free = [0.0] * n_dev
        busy = [0.0] * n_dev
        chan = [0.0] * self._n_channels
        fwd, bwd, inputs, copy_s, chans = self.fwd_s, self.bwd_s, self._inputs, self._copy_s, self._chans
        hf, hb, hs = self._host_fwd, self._host_bwd, self._host_s
        blocks = self._copy_blocks
        h = 0.0
        if self._memset_per_param[0] or self._memset_per_param[-1]:  # zero_grad(set_to_none=False)
            params = [0] * n_dev
            for i, d in enumerate(p):
                params[d] += self._params[i]
            for d in range(n_dev):
                if params[d]:
                    h += hs
                    t = free[d] if free[d] > h else h
                    free[d] = t + params[d] * self._memset_per_param[d]
                    if trace is not None:
                        trace.append(TraceEvent(f"gpu{d}", "forward", "zero_grad", -1, t, free[d]))
        order = range(N)
        for m in range(M):
            for i in order:
                d = p[i]
                for q in inputs[i]:
                    s = p[q]
                    if s != d:  # copy q's output s -> d before node i runs
                        h += hs
                        t, e = _copy(free, chan, chans[s][d], s, d, h, copy_s[q][s][d])
                        if blocks and e > h:
                            h = e
                        if trace is not None:
                            self._trace_copy(trace, q, i, s, d, m, t, e, "activation")
                h += hf[i]
                t = free[d] if free[d] > h else h
                dur = fwd[i][d] if sc is None else fwd[i][d] * sc[d]
                free[d] = t + dur
                busy[d] += dur
                if trace is not None:
                    trace.append(TraceEvent(f"gpu{d}", "forward", self.names[i], m, t, free[d]))
        fwd_end = max(free)
        if self.sync_phases:
            h = fwd_end if fwd_end > h else h
            free = [fwd_end] * n_dev
        hd = [h] * n_dev
        rev = range(N - 1, -1, -1)
        alloc = self._host_alloc
        for m in range(M - 1, -1, -1):
            for i in rev:
                d = p[i]
                hd[d] += hb[i]
                if alloc is not None and m == 0:
                    hd[d] += alloc[i]
                t = free[d] if free[d] > hd[d] else hd[d]
                dur = bwd[i][d] if sc is None else bwd[i][d] * sc[d]
                free[d] = t + dur
                busy[d] += dur
                if trace is not None:
                    trace.append(TraceEvent(f"gpu{d}", "backward", self.names[i], m, t, free[d]))
                for q in inputs[i]:
                    s = p[q]
                    if s != d:  # the gradient of q's output goes back d -> s
                        hd[d] += hs
                        if hd[d] > hd[s]:
                            hd[s] = hd[d]
                        t, e = _copy(free, chan, chans[d][s], s, d, hd[d], copy_s[q][d][s])
                        if blocks:
                            if e > hd[d]:
                                hd[d] = e
                            if e > hd[s]:
                                hd[s] = e
                        if trace is not None:
                            self._trace_copy(trace, q, i, d, s, m, t, e, "gradient")
        bwd_end = max(free)
        h = max(hd)
        if self.sync_phases:
            h = bwd_end if bwd_end > h else h
            free = [bwd_end] * n_dev
        params = [0] * n_dev
        tensors = [0] * n_dev
        for i, d in enumerate(p):
            params[d] += self._params[i]
            tensors[d] += self._tensors[i]
        if self._clip_barrier:  # clip_grad_norm_'s global norm: one number from every device's gradients
            h = bwd_end if bwd_end > h else h
            free = [bwd_end if params[d] else free[d] for d in range(n_dev)]
        for d in range(n_dev):
            if params[d]:
                h += self._host_adam
                if self._adam_per_tensor:  # for-loop AdamW: the host issues every tensor's kernels
                    h += tensors[d] * self._adam_per_tensor * hs
                t = free[d] if free[d] > h else h
                free[d] = t + self._adam_fixed[d] + params[d] * self._adam_per_param[d]
                if self._adam_per_tensor:
                    free[d] += tensors[d] * self._adam_per_tensor_s[d]
                busy[d] += free[d] - t
                if not self._adam_overlap:
                    h = free[d]
                if trace is not None:
                    trace.append(TraceEvent(f"gpu{d}", "optimizer", "AdamW", -1, t, free[d]))
        return fwd_end, bwd_end, max(free), busy

    def _trace_copy(self, trace, q, i, s, d, m, t, e, what):
        lanes = [self._chan_names[c] for c in self._chans[s][d]] or ["copy"]
        label = f"{what} of {self.names[q]} gpu{s}->gpu{d}"
        for lane in lanes:
            trace.append(TraceEvent(lane, "copy", label, m, t, e))
