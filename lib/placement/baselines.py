"""Hand-made placements of the GPT chain: what the RL placer is compared with.

- single device: everything on one GPU (the write-up takes the best of 4);
- the human two-GPU split: blocks 1-3 (with the embedding) on one GPU, blocks 4-6 with the final norm, head
  and loss on another (the write-up's wording), tried on the write-up's three GPU pairs;
- a k-way layer split: contiguous runs of blocks per device, as even as possible (6 blocks on 4 devices: 2, 2,
  1, 1), the embedding with the first and the final norm, head and loss with the last;
- a k-stage pipeline: contiguous stages cut only between co-location groups (never between the head and the
  loss, which would copy the logits), chosen to minimise the largest stage's FLOPs (forward + backward), found
  exactly by dynamic programming.
Every function returns a placement: one device index per node. Used in: Part I, chapters 1-3.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from lib.graph import Graph, Node, colocate

#: The write-up's three GPU pairs for the two-GPU split (adjacent pairs of a 4-GPU machine).
HUMAN_PAIRS: tuple[tuple[int, int], ...] = ((0, 1), (1, 2), (2, 3))

Labelled = list[tuple[str, tuple[int, ...]]]


def _check_devices(devices: Sequence[int], n_devices: int | None, need: int | None = None) -> tuple[int, ...]:
    devs = tuple(int(d) for d in devices)
    if need is not None and len(devs) != need:
        raise ValueError(f"need {need} devices; got {list(devs)}")
    if len(set(devs)) != len(devs):
        raise ValueError(f"devices must be distinct; got {list(devs)}")
    if any(d < 0 or (n_devices is not None and d >= n_devices) for d in devs):
        hi = "" if n_devices is None else f"..{n_devices - 1}"
        raise ValueError(f"device index out of range in {list(devs)}: devices are 0{hi}")
    return devs


def _layer_of(node: Node) -> int | None:
    """The transformer block of a node (``block3.mlp`` -> 3); ``None`` for the embedding and the tail."""
    if node.name.startswith("block"):
        return int(node.name.split(".")[0][len("block"):])
    return None


def n_layers(graph: Graph) -> int:
    layers = [l for l in map(_layer_of, graph.nodes) if l is not None]
    if not layers:
        raise ValueError(f"graph {graph.name!r} has no 'block<i>.' nodes: these baselines place GPT chains")
    return max(layers) + 1


def single_device(graph: Graph, device: int, n_devices: int | None = None) -> tuple[int, ...]:
    """Every node on ``device``."""
    (d,) = _check_devices([device], n_devices)
    return (d,) * graph.n_nodes


def layer_split(graph: Graph, devices: Sequence[int], n_devices: int | None = None) -> tuple[int, ...]:
    """Contiguous runs of blocks on ``devices`` in order, as even as possible (earlier devices get the extra
    block); the embedding joins the first device, the final norm, head and loss the last."""
    devs = _check_devices(devices, n_devices)
    L = n_layers(graph)
    if not 1 <= len(devs) <= L:
        raise ValueError(f"a layer split needs 1..{L} devices; got {list(devs)}")
    sizes = [len(c) for c in np.array_split(np.arange(L), len(devs))]
    stage_of_layer = np.repeat(np.arange(len(devs)), sizes)
    out, current = [], devs[0]
    for n in graph.nodes:
        l = _layer_of(n)
        if l is not None:
            current = devs[int(stage_of_layer[l])]
        out.append(current)  # the embedding keeps the first device; the tail keeps the last block's
    return tuple(out)


def human_split(graph: Graph, dev_a: int, dev_b: int, n_devices: int | None = None) -> tuple[int, ...]:
    """The write-up's human split: first half of the blocks (and the embedding) on ``dev_a``, the rest and the
    head on ``dev_b``."""
    return layer_split(graph, (dev_a, dev_b), n_devices)


def node_cost_flops(node: Node) -> float:
    """Default stage cost of a node: forward plus backward FLOPs."""
    return node.fwd_flops + node.bwd_flops


def balanced_cuts(costs: Sequence[float], n_stages: int) -> tuple[int, ...]:
    """Split ``costs`` into ``n_stages`` non-empty contiguous runs minimising the largest run's sum.

    Returns the stage index of every item. Exact (dynamic programming, O(n^2 k)); ties keep earlier cuts late.
    """
    n = len(costs)
    if not 1 <= n_stages <= n:
        raise ValueError(f"n_stages={n_stages} must be in 1..{n} (one stage per item at most)")
    prefix = np.concatenate([[0.0], np.cumsum(np.asarray(costs, dtype=float))])
    INF = float("inf")
    best = np.full((n_stages + 1, n + 1), INF)  # best[k][j]: first j items in k stages
    arg = np.zeros((n_stages + 1, n + 1), dtype=int)
    best[0][0] = 0.0
    for k in range(1, n_stages + 1):
        for j in range(k, n + 1):
            for i in range(k - 1, j):
                v = max(best[k - 1][i], prefix[j] - prefix[i])
                if v < best[k][j]:
                    best[k][j], arg[k][j] = v, i
    stage, j = [0] * n, n
    for k in range(n_stages, 0, -1):
        i = arg[k][j]
        stage[i:j] = [k - 1] * (j - i)
        j = i
    return tuple(stage)


def pipeline(graph: Graph, devices: Sequence[int], n_devices: int | None = None,
             cost: Callable[[Node], float] = node_cost_flops) -> tuple[int, ...]:
    """A ``len(devices)``-stage pipeline: cuts between co-location groups, balanced on ``cost`` per stage."""
    devs = _check_devices(devices, n_devices)
    groups = colocate(graph)
    stage = balanced_cuts([sum(cost(graph.nodes[i]) for i in g) for g in groups], len(devs))
    out = [0] * graph.n_nodes
    for s, g in zip(stage, groups):
        for i in g:
            out[i] = devs[s]
    return tuple(out)


# --- the lists the evaluation uses (lib.placement.evaluate.seed_sides) ---

def single_devices(graph: Graph, n_devices: int) -> Labelled:
    """Everything on one device, for each device."""
    return [(f"single GPU {d}", single_device(graph, d, n_devices)) for d in range(n_devices)]


def human_two_gpu(graph: Graph, n_devices: int, pairs: Sequence[tuple[int, int]] = HUMAN_PAIRS) -> Labelled:
    """The human two-GPU split on each pair (the write-up's three pairs by default) that fits ``n_devices``."""
    return [(f"human 2-GPU split on {a},{b}", human_split(graph, a, b, n_devices))
            for a, b in pairs if max(a, b) < n_devices]


def fixed_baselines(graph: Graph, n_devices: int) -> Labelled:
    """The fixed hand-made placements: a four-way layer split, two- and four-stage pipelines (those that fit)."""
    out: Labelled = []
    if n_devices >= 4 and n_layers(graph) >= 4:
        out.append(("4-way layer split", layer_split(graph, (0, 1, 2, 3), n_devices)))
    for k in (2, 4):
        if n_devices >= k and len(colocate(graph)) >= k:
            out.append((f"{k}-stage pipeline", pipeline(graph, tuple(range(k)), n_devices)))
    return out


def all_baselines(graph: Graph, n_devices: int) -> dict[str, tuple[int, ...]]:
    """Every baseline above by label."""
    return dict(single_devices(graph, n_devices) + human_two_gpu(graph, n_devices) + fixed_baselines(graph, n_devices))
