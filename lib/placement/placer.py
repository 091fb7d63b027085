"""The placer of Mirhoseini et al. (2017): an LSTM encoder over the nodes, an attentive LSTM decoder over devices.

Each item to place (a node, or a co-location group of nodes) is described by three things, as in the paper:
its op type (a learned embedding; a group uses the mean embedding of its nodes' types), its output shape
(log-scaled dimensions) and its adjacency (which items feed it and which it feeds, as relative offsets).
An encoder LSTM reads the items in chain order. A decoder LSTM walks the same sequence; at step t it sees the
device it chose at step t-1 (a learned "go" embedding at t = 0) and the encoder state of item t, attends
over *all* encoder states (additive attention, vᵀ tanh(W₁·enc + W₂·h)) and outputs logits over the devices
from [h; context]. Sampling K placements runs the K decoders as one batch.

Defaults follow the 2018 authors' released code (``hierarchical_controller.py``), the only code of that group
that is public: hidden size 512, Glorot-uniform initialisation of every weight matrix, LSTM forget-gate bias
1.0, temperature 1. Its ``tanh_constant`` (logits squashed to tanh · 1) is *not* the default: with 4 devices it
caps a decision's probability at e / (e + 3/e) = 0.71, so 8 identical samples of one decision have probability
at most 0.0654 and of 40 decisions below 10^-47: the write-up's collapse could not happen. ``logit_tanh``
switches it on.
``init="torch"`` gives PyTorch's default initialisation (uniform ±1/√fan_in, forget bias 0), one of the
choices chapter 2's study changes. Used in: Part I, chapters 2-3.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
from torch import nn

from lib.graph import OP_TYPES
from lib.graph import expand as expand_groups

#: Output-shape dimensions kept per item (the paper pads to a fixed length).
MAX_DIMS = 4
#: Relative offsets (±1 .. ±ADJ_WINDOW) encoded one-hot in the adjacency features.
ADJ_WINDOW = 4
#: Initialisations: "glorot" (the 2018 authors' code: Glorot-uniform matrices, zero biases, forget bias
#: ``forget_bias``) or "torch" (PyTorch's defaults).
INITS = ("glorot", "torch")


def check_groups(groups: Sequence[Sequence[int]], n_nodes: int) -> tuple[tuple[int, ...], ...]:
    """Check that ``groups`` partition ``range(n_nodes)``; return them as tuples of ints."""
    gs = tuple(tuple(int(i) for i in g) for g in groups)
    if not gs or any(len(g) == 0 for g in gs):
        raise ValueError(f"groups must be non-empty tuples of node indices; got {groups!r}")
    flat = sorted(i for g in gs for i in g)
    if flat != list(range(n_nodes)):
        raise ValueError(
            f"groups must cover every node 0..{n_nodes - 1} exactly once; got {len(flat)} entries "
            f"covering {len(set(flat))} distinct nodes"
        )
    return gs


def expand(item_placement: Sequence[int], groups: Sequence[Sequence[int]] | None, n_nodes: int) -> tuple[int, ...]:
    """Item devices -> per-node devices: the placement itself for nodes, ``lib.graph.expand`` for groups."""
    if groups is None:
        if len(item_placement) != n_nodes:
            raise ValueError(f"placement has {len(item_placement)} entries; expected {n_nodes}")
        return tuple(int(d) for d in item_placement)
    return expand_groups(item_placement, groups, n_nodes)


@dataclass(frozen=True)
class PlacerInputs:
    """The per-item features the placer reads (numpy arrays, one row per item in chain order).

    op_mix: (n_items, n_op_types) fraction of the item's nodes of each op type (one-hot for a single node).
    numeric: (n_items, n_numeric) output-shape dims (log1p/10, padded with 0), log1p(numel)/20, log1p(size),
        and the adjacency block: for offsets -W..-1 "item i+off feeds i", for 1..W "i feeds item i+off",
        then the number of farther inputs and consumers.
    """

    op_types: tuple[str, ...]
    op_mix: np.ndarray
    numeric: np.ndarray
    names: tuple[str, ...]

    @property
    def n_items(self) -> int:
        return int(self.op_mix.shape[0])

    @classmethod
    def from_graph(cls, graph, groups: Sequence[Sequence[int]] | None = None, op_types: Sequence[str] | None = None):
        """Features of ``graph``'s nodes, or of its co-location ``groups`` (each group: its nodes' mixture
        of op types, the output shape of its last node, and group-to-group adjacency)."""
        nodes = list(graph.nodes)
        n = len(nodes)
        gs = check_groups(groups, n) if groups is not None else tuple((i,) for i in range(n))
        types = tuple(op_types) if op_types is not None else tuple(OP_TYPES)
        col = {t: j for j, t in enumerate(types)}
        item_of = {}
        for gi, g in enumerate(gs):
            for i in g:
                item_of[i] = gi
        n_items = len(gs)
        op_mix = np.zeros((n_items, len(types)))
        numeric = np.zeros((n_items, MAX_DIMS + 2 + 2 * ADJ_WINDOW + 2))
        for gi, g in enumerate(gs):
            for i in g:
                if nodes[i].op not in col:
                    raise ValueError(f"node {nodes[i].name!r} has op {nodes[i].op!r}; known op types: {types}")
                op_mix[gi, col[nodes[i].op]] += 1.0 / len(g)
            shape = tuple(nodes[max(g)].out_shape)[:MAX_DIMS]
            numeric[gi, : len(shape)] = np.log1p(np.asarray(shape, dtype=float)) / 10.0
            numeric[gi, MAX_DIMS] = np.log1p(float(np.prod(shape)) if shape else 1.0) / 20.0
            numeric[gi, MAX_DIMS + 1] = np.log1p(len(g))
        base = MAX_DIMS + 2
        for i, nd in enumerate(nodes):
            for p in nd.inputs:
                a, b = item_of[int(p)], item_of[i]  # item a feeds item b
                if a == b:
                    continue
                off = a - b  # negative for a producer earlier in the chain
                for src, o in ((b, off), (a, -off)):
                    if 1 <= abs(o) <= ADJ_WINDOW:
                        k = (o + ADJ_WINDOW) if o < 0 else (ADJ_WINDOW + o - 1)
                        numeric[src, base + k] = 1.0
                    else:
                        numeric[src, base + 2 * ADJ_WINDOW + (0 if o < 0 else 1)] += 1.0
        names = tuple("+".join(nodes[i].name for i in g) for g in gs)
        return cls(op_types=types, op_mix=op_mix, numeric=numeric, names=names)


@dataclass
class Samples:
    """K decoded placements (item devices) with their log-probabilities and entropies (summed over steps)."""

    actions: torch.Tensor  # (K, n_items) int64
    log_prob: torch.Tensor  # (K,) differentiable
    entropy: torch.Tensor  # (K,) differentiable: sum over steps of the per-step entropy


class Placer(nn.Module):
    """Seq2seq placer: ``sample(K, generator)``, ``evaluate(actions)``, ``greedy()``. Used in: Part I, ch. 2-3."""

    def __init__(
        self,
        inputs: PlacerInputs,
        n_devices: int,
        hidden: int = 512,
        op_embed: int = 16,
        dev_embed: int = 16,
        logit_tanh: float | None = None,
        init: str = "glorot",
        forget_bias: float = 1.0,
        temperature: float = 1.0,
    ):
        super().__init__()
        if n_devices < 1:
            raise ValueError(f"n_devices must be >= 1; got {n_devices}")
        if hidden < 1 or op_embed < 1 or dev_embed < 1:
            raise ValueError(f"sizes must be >= 1; got hidden={hidden}, op_embed={op_embed}, dev_embed={dev_embed}")
        if init not in INITS:
            raise ValueError(f"init must be one of {INITS}; got {init!r}")
        if not temperature > 0:
            raise ValueError(f"temperature must be > 0; got {temperature!r}")
        self.temperature = float(temperature)
        self.n_devices = int(n_devices)
        self.n_items = inputs.n_items
        self.logit_tanh = logit_tanh
        self.register_buffer("op_mix", torch.tensor(inputs.op_mix, dtype=torch.float32), persistent=False)
        self.register_buffer("numeric", torch.tensor(inputs.numeric, dtype=torch.float32), persistent=False)
        self.op_embedding = nn.Linear(inputs.op_mix.shape[1], op_embed, bias=False)  # mixture @ E
        self.encoder = nn.LSTM(op_embed + inputs.numeric.shape[1], hidden, batch_first=True)
        self.dev_embedding = nn.Embedding(n_devices + 1, dev_embed)  # index n_devices = "go"
        self.decoder = nn.LSTMCell(dev_embed + hidden, hidden)
        self.attn_enc = nn.Linear(hidden, hidden, bias=False)  # W1
        self.attn_dec = nn.Linear(hidden, hidden, bias=False)  # W2
        self.attn_v = nn.Linear(hidden, 1, bias=False)
        self.out = nn.Linear(2 * hidden, n_devices)
        if init == "glorot":
            self._glorot(float(forget_bias))

    @torch.no_grad()
    def _glorot(self, forget_bias: float) -> None:
        """The 2018 code's initialisation: every matrix Glorot-uniform, biases 0, LSTM forget gates ``forget_bias``
        (PyTorch's LSTM has two bias vectors; the forget bias goes in one of them, gate order i, f, g, o)."""
        for name, p in self.named_parameters():
            if p.ndim >= 2:
                nn.init.xavier_uniform_(p)
            else:
                nn.init.zeros_(p)
                if name.startswith(("encoder.bias_ih", "decoder.bias_ih")):
                    h = p.shape[0] // 4
                    p[h:2 * h] = forget_bias

    def encode(self):
        x = torch.cat([self.op_embedding(self.op_mix), self.numeric], dim=-1).unsqueeze(0)
        enc, (h, c) = self.encoder(x)
        return enc[0], h[0, 0], c[0, 0]  # (T, H), (H,), (H,)

    def _decode(self, k: int, actions=None, greedy=False, generator=None) -> Samples:
        enc, h0, c0 = self.encode()
        enc_proj = self.attn_enc(enc)  # (T, H)
        h, c = h0.expand(k, -1).contiguous(), c0.expand(k, -1).contiguous()
        prev = torch.full((k,), self.n_devices, dtype=torch.long)
        chosen, logp_sum, ent_sum = [], torch.zeros(k), torch.zeros(k)
        for t in range(self.n_items):
            inp = torch.cat([self.dev_embedding(prev), enc[t].expand(k, -1)], dim=-1)
            h, c = self.decoder(inp, (h, c))
            scores = self.attn_v(torch.tanh(enc_proj.unsqueeze(0) + self.attn_dec(h).unsqueeze(1))).squeeze(-1)
            ctx = torch.softmax(scores, dim=-1) @ enc  # (K, H)
            logits = self.out(torch.cat([h, ctx], dim=-1))
            if self.temperature != 1.0:
                logits = logits / self.temperature
            if self.logit_tanh is not None:
                logits = self.logit_tanh * torch.tanh(logits)
            logp = torch.log_softmax(logits, dim=-1)
            if actions is not None:
                a = actions[:, t]
            elif greedy:
                a = logp.argmax(dim=-1)
            else:
                a = torch.multinomial(logp.exp().detach(), 1, generator=generator).squeeze(1)
            logp_sum = logp_sum + logp.gather(1, a.unsqueeze(1)).squeeze(1)
            ent_sum = ent_sum - (logp.exp() * logp).sum(dim=-1)
            chosen.append(a)
            prev = a
        return Samples(actions=torch.stack(chosen, dim=1), log_prob=logp_sum, entropy=ent_sum)

    def sample(self, k: int, generator: torch.Generator | None = None) -> Samples:
        """Sample ``k`` placements (one batched decoder pass) with log-probabilities and entropies."""
        if k < 1:
            raise ValueError(f"k (samples per update) must be >= 1; got {k}")
        return self._decode(k, generator=generator)

    def evaluate(self, actions) -> Samples:
        """Log-probabilities and entropies of given placements (teacher forcing)."""
        a = torch.as_tensor(np.asarray(actions), dtype=torch.long)
        if a.ndim != 2 or a.shape[1] != self.n_items:
            raise ValueError(f"actions must have shape (K, {self.n_items}); got {tuple(a.shape)}")
        if a.numel() and (a.min() < 0 or a.max() >= self.n_devices):
            raise ValueError(f"device indices must be in 0..{self.n_devices - 1}")
        return self._decode(a.shape[0], actions=a)

    @torch.no_grad()
    def greedy(self) -> tuple[int, ...]:
        """The placer's favourite: the most likely device at every step (greedy decoding)."""
        return tuple(int(d) for d in self._decode(1, greedy=True).actions[0])
