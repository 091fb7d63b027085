"""A model as a chain of placeable nodes, and the paper's co-location grouping.

A :class:`Graph` describes a model once, without torch: for every node its op type, output shape, parameter
count, FLOPs, bytes moved, activation bytes kept for backward, and its input edges (residual edges included).
The real executor (``lib.placement.torch_env``) runs it, the simulator (``lib.placement.sim_env``) predicts
it, and the placer reads it. All figures are for the graph's full batch, in fp32 unless ``dtype_bytes`` says
otherwise. Used in: Part I, chapters 1-3.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Sequence

OP_TYPES: tuple[str, ...] = ("embedding", "layernorm", "attention", "add", "mlp", "head", "loss")

#: Bytes per parameter of model state with AdamW in fp32: weight, gradient, first and second moment.
STATE_BYTES_PER_PARAM: int = 16


@dataclass(frozen=True)
class Node:
    """One placeable operation.

    Byte figures are for the full batch. ``fwd_bytes``/``bwd_bytes`` are memory traffic (read + written) of an
    unfused eager implementation, for a roofline; ``fwd_weight_bytes``/``bwd_weight_bytes`` are the parts of
    them that do not depend on the batch size (weights read, weight gradients written), so that
    :meth:`Graph.with_batch` can rescale the rest.
    """

    index: int
    name: str
    op: str
    out_shape: tuple[int, ...]
    params: int
    fwd_flops: float
    bwd_flops: float
    fwd_bytes: float
    bwd_bytes: float
    out_bytes: int
    saved_bytes: int
    transient_bytes: int
    inputs: tuple[int, ...]
    fwd_weight_bytes: float = 0.0
    bwd_weight_bytes: float = 0.0

    def __post_init__(self):
        if self.op not in OP_TYPES:
            raise ValueError(f"node {self.name!r}: op {self.op!r} is not one of {OP_TYPES}")
        if any(i >= self.index or i < 0 for i in self.inputs):
            raise ValueError(f"node {self.index} ({self.name}): inputs {self.inputs} must be earlier nodes")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["out_shape"], d["inputs"] = list(self.out_shape), list(self.inputs)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Node":
        d = dict(d)
        d["out_shape"], d["inputs"] = tuple(d["out_shape"]), tuple(d["inputs"])
        return cls(**d)


@dataclass(frozen=True)
class Graph:
    """A model as a topologically ordered tuple of nodes (node ``i`` has index ``i``)."""

    name: str
    nodes: tuple[Node, ...]
    batch: int
    seq: int
    dtype_bytes: int = 4

    def __post_init__(self):
        for i, n in enumerate(self.nodes):
            if n.index != i:
                raise ValueError(f"graph {self.name!r}: node at position {i} has index {n.index}")
        if self.batch < 1 or self.seq < 1:
            raise ValueError(f"batch and seq must be >= 1; got batch={self.batch}, seq={self.seq}")

    @property
    def n_nodes(self) -> int:
        return len(self.nodes)

    @property
    def params(self) -> int:
        """Total parameter count."""
        return sum(n.params for n in self.nodes)

    def consumers(self, i: int) -> tuple[int, ...]:
        """Indices of the nodes that read node ``i``'s output (residual edges included), in order."""
        if not 0 <= i < self.n_nodes:
            raise ValueError(f"node index {i} out of range 0..{self.n_nodes - 1}")
        return tuple(n.index for n in self.nodes if i in n.inputs)

    def edges(self) -> tuple[tuple[int, int], ...]:
        """All (producer, consumer) pairs, ordered by consumer then by input position."""
        return tuple((p, n.index) for n in self.nodes for p in n.inputs)

    def with_batch(self, batch: int) -> "Graph":
        """The same model with every figure rescaled to ``batch`` sequences (e.g. one micro-batch).

        Activation figures are proportional to the batch; weight traffic and the scalar loss's output are not.
        Figures are rounded to integers where they are integers.
        """
        if int(batch) != batch or batch < 1:
            raise ValueError(f"batch must be a positive integer; got {batch!r}")
        f = batch / self.batch

        def scale(n: Node) -> Node:
            shape = n.out_shape if n.out_shape == () else (batch,) + tuple(n.out_shape[1:])
            return replace(
                n,
                out_shape=shape,
                fwd_flops=n.fwd_flops * f,
                bwd_flops=n.bwd_flops * f,
                fwd_bytes=n.fwd_weight_bytes + (n.fwd_bytes - n.fwd_weight_bytes) * f,
                bwd_bytes=n.bwd_weight_bytes + (n.bwd_bytes - n.bwd_weight_bytes) * f,
                out_bytes=n.out_bytes if n.out_shape == () else round(n.out_bytes * f),
                saved_bytes=round(n.saved_bytes * f),
                transient_bytes=round(n.transient_bytes * f),
            )

        return replace(self, nodes=tuple(scale(n) for n in self.nodes), batch=int(batch))

    def to_dict(self) -> dict:
        return {"name": self.name, "batch": self.batch, "seq": self.seq, "dtype_bytes": self.dtype_bytes,
                "nodes": [n.to_dict() for n in self.nodes]}

    @classmethod
    def from_dict(cls, d: dict) -> "Graph":
        return cls(name=d["name"], nodes=tuple(Node.from_dict(n) for n in d["nodes"]), batch=int(d["batch"]),
                   seq=int(d["seq"]), dtype_bytes=int(d.get("dtype_bytes", 4)))


def colocate(graph: Graph) -> tuple[tuple[int, ...], ...]:
    """The paper's co-location rule: an op whose output has exactly one consumer joins its consumer's group.

    Residual edges count as consumers. That is what makes the rule give the write-up's groups on a GPT: the
    embedding and every residual add feed two consumers (the next layer norm and the next add), so each ends a
    group; a block splits into {ln1, attn, add1} and {ln2, mlp, add2}; the last add2 has one consumer (the
    final norm), so the final group is {ln2, mlp, add2, ln_f, head, loss}. On the 49M GPT: 1 + 2 x 6 = 13
    groups. Returns the groups in chain order, each a sorted tuple of node indices.
    """
    parent = list(range(graph.n_nodes))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(graph.n_nodes):
        cons = graph.consumers(i)
        if len(cons) == 1:
            a, b = root(i), root(cons[0])
            if a != b:
                parent[a] = b
    groups: dict[int, list[int]] = {}
    for i in range(graph.n_nodes):
        groups.setdefault(root(i), []).append(i)
    return tuple(sorted((tuple(sorted(g)) for g in groups.values()), key=lambda g: g[0]))


def expand(group_placement: Sequence[int], groups: Sequence[Sequence[int]], n_nodes: int) -> tuple[int, ...]:
    """Turn one device per group into one device per node. Every node must be in exactly one group."""
    gp = tuple(int(d) for d in group_placement)
    if len(gp) != len(groups):
        raise ValueError(f"group placement has {len(gp)} entries; there are {len(groups)} groups")
    out = [-1] * n_nodes
    for dev, g in zip(gp, groups):
        if dev < 0:
            raise ValueError(f"device index {dev} is negative")
        for i in g:
            if not 0 <= i < n_nodes:
                raise ValueError(f"group member {i} out of range 0..{n_nodes - 1}")
            if out[i] != -1:
                raise ValueError(f"node {i} is in more than one group")
            out[i] = dev
    missing = [i for i, d in enumerate(out) if d == -1]
    if missing:
        raise ValueError(f"nodes {missing} are in no group")
    return tuple(out)


def crossing_edges(graph: Graph, placement: Sequence[int]) -> tuple[tuple[int, int], ...]:
    """The edges whose producer and consumer sit on different devices (each copies ``out_bytes``)."""
    if len(placement) != graph.n_nodes:
        raise ValueError(f"placement has {len(placement)} entries; the graph has {graph.n_nodes} nodes")
    return tuple((p, c) for p, c in graph.edges() if placement[p] != placement[c])


def peak_memory_estimate(graph: Graph, placement: Sequence[int], n_devices: int, n_micro: int = 1) -> tuple[int, ...]:
    """A simple per-device peak-memory estimate of one training step, in bytes.

    peak_d = 16 x params_d (AdamW state: weights, grads, two moments)
           + saved activations of d's nodes for the whole batch (fill-and-drain keeps every micro-batch's)
           + one copy of every tensor received over a crossing edge, for one micro-batch
           + the largest (output + transient) of d's nodes, for one micro-batch.
    It ignores allocator fragmentation and the CUDA context. Used in: Part I (OOM accounting on CPU).
    """
    if len(placement) != graph.n_nodes:
        raise ValueError(f"placement has {len(placement)} entries; the graph has {graph.n_nodes} nodes")
    if n_micro < 1 or graph.batch % n_micro:
        raise ValueError(f"n_micro={n_micro} must be >= 1 and divide the batch {graph.batch}")
    peak = [0] * n_devices
    biggest = [0] * n_devices
    for n in graph.nodes:
        d = placement[n.index]
        peak[d] += STATE_BYTES_PER_PARAM * n.params + n.saved_bytes
        biggest[d] = max(biggest[d], (n.out_bytes + n.transient_bytes) // n_micro)
    for p, c in crossing_edges(graph, placement):
        peak[placement[c]] += graph.nodes[p].out_bytes // n_micro
    return tuple(a + b for a, b in zip(peak, biggest))
