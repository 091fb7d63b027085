"""Collectives priced by the latency-bandwidth (alpha-beta) model, on a flat link or a two-level cluster.

A ring over ``n`` ranks moves each byte ``(n - 1) / n`` times per phase: a reduce-scatter or an all-gather of
``S`` bytes takes ``(n - 1) / n * S / bw + (n - 1) * alpha``, an all-reduce (reduce-scatter then all-gather)
twice that (Patarasuk and Yuan 2009; Thakur et al. 2005). ``S`` is the whole buffer each rank holds.

On a cluster of nodes (NVLink inside a node, each GPU's own port between nodes) a group of ``k`` members per
node on ``n`` nodes is priced hierarchically, as NCCL does for large messages: a reduce-scatter inside each
node over NVLink, the inter-node ring on the 1/k shard each GPU owns (every GPU drives its own port, so the k
rings run side by side), and an all-gather inside the node. With ``hierarchical=False`` (the previous rule of
``analytic.py``) a group that spans nodes is one flat ring as fast as its slowest hop, the port.

``oversubscription`` > 1 divides the port bandwidth for groups that span more than ``pod_nodes`` nodes (a
fabric whose upper tier has less bandwidth than the sum of its ports). Under the candidate switch
``measured_collectives`` (``fabrics.py``) the port's bandwidth is its line rate times the fraction published
nccl-tests runs achieved at that many nodes, an all-reduce inside one node runs at the node's published
all-reduce bus bandwidth, and an inter-node all-reduce pays NCCL's tree latency. Units: bytes, seconds.

Used in: ``cost.py`` (``step_estimate``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from .fabrics import interpolate

KINDS = ("all-reduce", "reduce-scatter", "all-gather", "send")


@dataclass(frozen=True)
class Network:
    """Bandwidths (bytes/s, achievable) and latencies (s) of a cluster of identical nodes."""

    gpus_per_node: int
    nvlink_bw: float
    port_bw: float
    nvlink_latency: float = 3e-6
    port_latency: float = 10e-6
    oversubscription: float = 1.0
    pod_nodes: int = 0               # 0: no pod level (the whole cluster is one non-blocking fabric)
    # measured collectives (fabrics.py): the port's achieved fraction by nodes spanned ((nodes, fraction),
    # ...; empty: port_bw as given), one node's NVLink all-reduce bus bandwidth (0: nvlink_bw) and NCCL's
    # tree latency for inter-node all-reduces
    port_fraction_points: tuple = ()
    port_fraction_points_gather: tuple = ()     # all-gather and reduce-scatter where measured apart
    nvlink_allreduce_bw: float = 0.0
    tree_allreduce: bool = False
    # a fabric read by latency (fabrics.shortfall): seconds per ring step by nodes spanned ((nodes, s), ...),
    # for all-reduce and for all-gather / reduce-scatter (latency_from_points); empty: port_latency
    port_latency_points: tuple = ()
    port_latency_points_gather: tuple = ()

    def __post_init__(self):
        for f in ("gpus_per_node",):
            if int(getattr(self, f)) < 1:
                raise ValueError(f"Network.{f} must be >= 1; got {getattr(self, f)!r}")
        for f in ("nvlink_bw", "port_bw"):
            if not getattr(self, f) > 0:
                raise ValueError(f"Network.{f} must be > 0 bytes/s; got {getattr(self, f)!r}")
        if not self.oversubscription >= 1.0:
            raise ValueError(f"Network.oversubscription must be >= 1; got {self.oversubscription!r}")


def ring_s(kind: str, nbytes: float, n: int, bw: float, alpha: float = 0.0) -> float:
    """One ring collective over ``n`` ranks of a buffer of ``nbytes`` at ``bw`` bytes/s per rank."""
    if kind not in KINDS:
        raise ValueError(f"collective kind must be one of {KINDS}; got {kind!r}")
    if n <= 1 or nbytes <= 0:
        return 0.0
    if kind == "send":
        return nbytes / bw + alpha
    return phases(kind) * ((n - 1) / n * nbytes / bw + (n - 1) * alpha)


def placement(size: int, stride: int, gpus_per_node: int) -> tuple[int, int]:
    """(members per node, nodes) of a group of ``size`` ranks ``stride`` apart in rank order (Megatron's:
    TP fastest, then CP, DP, PP)."""
    if size <= 1:
        return 1, 1
    if stride >= gpus_per_node:
        return 1, size
    k = max(1, min(size, gpus_per_node // stride))
    return k, -(-size // k)


def gather_kind(kind: str) -> bool:
    return kind in ("all-gather", "reduce-scatter")


def phases(kind: str) -> int:
    """Phases of a ring collective: two for an all-reduce (reduce-scatter, then all-gather), else one."""
    return 2 if kind == "all-reduce" else 1


def bus_bytes(kind: str, nbytes: float, n: int) -> float:
    """nccl-tests' bus bytes of a collective of ``nbytes`` per rank over ``n`` ranks: what each rank moves in a
    ring, (n - 1) / n x ``nbytes`` per phase; over a time, its bus bandwidth."""
    return phases(kind) * (n - 1) / n * nbytes


def latency_from_points(kind: str, points: tuple, message_bytes: float, net: Network) -> tuple:
    """((nodes, seconds per ring step), ...) of a fabric read by latency (``fabrics.shortfall``): for each
    published point (nodes, nccl-tests bus bandwidth in bytes/s of a ``message_bytes`` collective over every
    GPU of those nodes), the time it took beyond what ``net`` prices the same collective at without
    inter-node latency, per ring step over all its ranks (2 (n - 1) for an all-reduce, n - 1 otherwise); at
    least ``net.port_latency``. So ``group_s`` reproduces each published point at its message size, and a
    larger message pays the same steps for more bytes."""
    bare = replace(net, port_latency=0.0, port_latency_points=(), port_latency_points_gather=(),
                   tree_allreduce=False)
    out = []
    for nodes, busbw in points:
        n = nodes * net.gpus_per_node
        measured = bus_bytes(kind, message_bytes, n) / busbw
        priced = group_s(kind, message_bytes, n, 1, bare)
        out.append((nodes, max(net.port_latency, (measured - priced) / ring_steps(kind, n))))
    return tuple(out)


def ring_steps(kind: str, n: int) -> int:
    """Steps of NCCL's ring over ``n`` ranks: n - 1 per phase."""
    return phases(kind) * (n - 1)


def group_s(kind: str, nbytes: float, size: int, stride: int, net: Network, hierarchical: bool = True) -> float:
    """Time of a collective of ``nbytes`` per rank over a group of ``size`` ranks ``stride`` apart."""
    k, nodes = placement(size, stride, net.gpus_per_node)
    if size <= 1:
        return 0.0
    port = net.port_bw / (net.oversubscription if net.pod_nodes and nodes > net.pod_nodes else 1.0)
    if net.port_fraction_points:
        gather = gather_kind(kind) and net.port_fraction_points_gather
        port *= interpolate(net.port_fraction_points_gather if gather else net.port_fraction_points, nodes)
    if nodes == 1:
        bw = net.nvlink_allreduce_bw if kind == "all-reduce" and net.nvlink_allreduce_bw else net.nvlink_bw
        return ring_s(kind, nbytes, size, bw, net.nvlink_latency)
    if not hierarchical:
        return ring_s(kind, nbytes, size, port, net.port_latency)
    if kind == "send":
        return ring_s("send", nbytes, 2, port, net.port_latency)
    intra_kind = {"all-reduce": ("reduce-scatter", "all-gather"), "reduce-scatter": ("reduce-scatter",),
                  "all-gather": ("all-gather",)}[kind]
    intra = sum(ring_s(x, nbytes, k, net.nvlink_bw, net.nvlink_latency) for x in intra_kind)
    steps = net.port_latency_points_gather if gather_kind(kind) else net.port_latency_points
    if steps:
        # a fabric read by latency: NCCL's ring over all ``size`` ranks waits on the inter-node hop at every
        # one of its (size - 1) steps per phase, each the published per-step latency at this many nodes
        return intra + ring_s(kind, nbytes / k, nodes, port, 0.0) + ring_steps(kind, size) * interpolate(steps, nodes)
    inter = ring_s(kind, nbytes / k, nodes, port, net.port_latency)
    if net.tree_allreduce and kind == "all-reduce" and nodes > 2:
        # NCCL's tree: the same bytes, 2 ceil(log2 nodes) hops of latency instead of the ring's 2 (nodes - 1)
        inter -= (2 * (nodes - 1) - 2 * math.ceil(math.log2(nodes))) * net.port_latency
    return intra + inter
