"""The GPT of the placement write-up, as a chain of placeable nodes: its config, its graph and its torch model.

The chain: embedding; per block layer norm, attention, residual add, layer norm, MLP, residual add; final
norm, head, loss (6 x n_layer + 4 nodes). Pre-norm GPT-2 blocks with biases, GELU (tanh), explicit causal
softmax attention (no fused kernel, so the memory figures below are what runs), no dropout, untied head.
The graph part is torch-free; torch is imported only inside the model part. Used in: Part I, chapters 1-3.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Sequence

from lib.graph import Graph, Node

#: FLOPs per element of the elementwise parts (documented estimates; matmuls are exactly 2*m*n*k).
LN_FLOPS, SOFTMAX_FLOPS, GELU_FLOPS, XENT_FWD_FLOPS, XENT_BWD_FLOPS = 7, 5, 8, 5, 3
INDEX_BYTES = 8  # token ids are int64


@dataclass(frozen=True)
class GPTConfig:
    """A GPT's shape and the batch it is trained on (batch_size sequences of block_size tokens)."""

    name: str
    n_layer: int
    n_head: int
    n_embd: int
    vocab_size: int
    block_size: int
    batch_size: int
    bias: bool = True

    def __post_init__(self):
        for f in ("n_layer", "n_head", "n_embd", "vocab_size", "block_size", "batch_size"):
            if int(getattr(self, f)) < 1:
                raise ValueError(f"GPTConfig.{f} must be >= 1; got {getattr(self, f)!r}")
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd={self.n_embd} must be divisible by n_head={self.n_head}")

    @property
    def n_nodes(self) -> int:
        return 6 * self.n_layer + 4

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "GPTConfig":
        return cls(**d)


PRESETS: dict[str, GPTConfig] = {
    "ci": GPTConfig("ci", n_layer=2, n_head=2, n_embd=32, vocab_size=96, block_size=16, batch_size=4),
    "49m": GPTConfig("49m", n_layer=6, n_head=6, n_embd=384, vocab_size=50257, block_size=256, batch_size=16),
    "163m": GPTConfig("163m", n_layer=12, n_head=12, n_embd=768, vocab_size=50257, block_size=256, batch_size=16),
}


def preset(name: str) -> GPTConfig:
    """The config called ``name``: ``ci`` (tiny, for tests), ``49m`` (the write-up's model) or ``163m``."""
    if name not in PRESETS:
        raise ValueError(f"unknown GPT preset {name!r}; allowed: {sorted(PRESETS)}")
    return PRESETS[name]


def block_node_names(layer: int) -> tuple[str, ...]:
    return tuple(f"block{layer}.{s}" for s in ("ln1", "attn", "add1", "ln2", "mlp", "add2"))


def node_names(cfg: GPTConfig) -> tuple[str, ...]:
    return ("embed",) + sum((block_node_names(l) for l in range(cfg.n_layer)), ()) + ("ln_f", "head", "loss")


def gpt_graph(cfg: GPTConfig) -> Graph:
    """The GPT as a :class:`Graph`: figures for the full batch of ``cfg.batch_size`` x ``cfg.block_size``.

    FLOPs: 2*m*n*k per matmul (backward = 2 x forward), plus per-element constants above for layer norm,
    softmax, GELU and cross-entropy. Bytes: each tensor read or written once per eager kernel.
    """
    B, T, d, V, H, s = cfg.batch_size, cfg.block_size, cfg.n_embd, cfg.vocab_size, cfg.n_head, 4
    N, nb = B * T, int(cfg.bias)
    act, att = N * d * s, B * H * T * T * s  # one (B,T,d) activation, one (B,H,T,T) score tensor, in bytes
    nodes: list[Node] = []

    def add(name, op, inputs, params, fwd_flops, bwd_flops, fwd_act, bwd_act, saved, transient=0, shape=None,
            fwd_w=None, bwd_w=None):
        shape = (B, T, d) if shape is None else shape
        out = s if shape == () else s * _prod(shape)
        fwd_w = params * s if fwd_w is None else fwd_w
        bwd_w = 2 * params * s if bwd_w is None else bwd_w
        nodes.append(Node(len(nodes), name, op, shape, params, float(fwd_flops), float(bwd_flops),
                          float(fwd_act + fwd_w), float(bwd_act + bwd_w), out, saved, transient,
                          tuple(inputs), float(fwd_w), float(bwd_w)))
        return len(nodes) - 1

    def layernorm(name, x):
        return add(name, "layernorm", (x,), (1 + nb) * d, LN_FLOPS * N * d, 2 * LN_FLOPS * N * d,
                   2 * act + 2 * N * s, 3 * act + 2 * N * s, act + 2 * N * s)

    x = add("embed", "embedding", (), V * d + T * d, N * d, 2 * N * d, N * INDEX_BYTES + 4 * act, 3 * act,
            N * INDEX_BYTES, fwd_w=T * d * s, bwd_w=(V * d + T * d) * s)
    for l in range(cfg.n_layer):
        ln1 = layernorm(f"block{l}.ln1", x)
        mm = 8 * N * d * d + 4 * B * T * T * d  # qkv and output projections, QK^T and AV
        elem = SOFTMAX_FLOPS * B * H * T * T + nb * 4 * N * d
        fwd_act = 12 * act + 8 * att  # x, qkv, q/k/v reads, y, proj in/out; scores, scale, mask, softmax
        a = add(f"block{l}.attn", "attention", (ln1,), 4 * d * d + nb * 4 * d, mm + elem, 2 * (mm + elem),
                fwd_act, 2 * fwd_act, 5 * act + att, transient=2 * att)
        add1 = add(f"block{l}.add1", "add", (a, x), 0, N * d, N * d, 3 * act, 3 * act, 0)
        ln2 = layernorm(f"block{l}.ln2", add1)
        mm = 16 * N * d * d
        elem = GELU_FLOPS * 4 * N * d + nb * 5 * N * d
        m = add(f"block{l}.mlp", "mlp", (ln2,), 8 * d * d + nb * 5 * d, mm + elem, 2 * (mm + elem),
                18 * act, 36 * act, 9 * act, transient=8 * act)
        x = add(f"block{l}.add2", "add", (m, add1), 0, N * d, N * d, 3 * act, 3 * act, 0)
    lnf = layernorm("ln_f", x)
    logits = N * V * s
    head = add("head", "head", (lnf,), V * d, 2 * N * d * V, 4 * N * d * V, act + logits, 2 * act + logits, act,
               shape=(B, T, V))
    add("loss", "loss", (head,), 0, XENT_FWD_FLOPS * N * V, XENT_BWD_FLOPS * N * V, 2 * logits + N * INDEX_BYTES,
        3 * logits, logits + N * INDEX_BYTES, transient=2 * logits, shape=())
    return Graph(name=f"gpt-{cfg.name}", nodes=tuple(nodes), batch=B, seq=T, dtype_bytes=s)


def _prod(xs: Sequence[int]) -> int:
    p = 1
    for x in xs:
        p *= int(x)
    return p


# ----------------------------------------------------------------------------------------------------------
# The torch model: one nn.Module per graph node, in the same order. torch is imported here only.


def build_model(cfg: GPTConfig, seed: int = 0):
    """The GPT as a ``GPTChain`` of ``cfg.n_nodes`` modules on CPU, initialised from ``seed`` (nanoGPT init).

    Used in: Part I (the real executor).
    """
    import torch

    gen = torch.Generator().manual_seed(int(seed))
    return _torch_classes()["GPTChain"](cfg, gen)


def random_batch(cfg: GPTConfig, seed: int = 0, batch: int | None = None):
    """A fixed batch of random token ids and next-token targets, shape (batch, block_size), int64, on CPU."""
    import torch

    gen = torch.Generator().manual_seed(int(seed) + 1_000_003)
    b = cfg.batch_size if batch is None else batch
    toks = torch.randint(0, cfg.vocab_size, (b, cfg.block_size + 1), generator=gen)
    return toks[:, :-1].contiguous(), toks[:, 1:].contiguous()


_CLASSES: dict = {}


def _torch_classes() -> dict:
    """Define the node modules on first use, so that importing this file does not import torch."""
    if _CLASSES:
        return _CLASSES
    import math

    import torch
    import torch.nn.functional as F
    from torch import nn

    class Embedding(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
            self.wpe = nn.Embedding(cfg.block_size, cfg.n_embd)

        def forward(self, idx):
            return self.wte(idx) + self.wpe.weight[: idx.shape[1]]  # a slice saves nothing for backward

    class Attention(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.n_head = cfg.n_head
            self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd, bias=cfg.bias)
            self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd, bias=cfg.bias)
            mask = torch.ones(cfg.block_size, cfg.block_size, dtype=torch.bool).triu(1)
            self.register_buffer("mask", mask, persistent=False)

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = self.c_attn(x).split(C, dim=2)
            q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.shape[-1]))
            att = att.masked_fill(self.mask[:T, :T], float("-inf")).softmax(dim=-1)
            y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
            return self.c_proj(y)

    class Add(nn.Module):
        def forward(self, a, b):
            return a + b

    class MLP(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd, bias=cfg.bias)
            self.c_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd, bias=cfg.bias)

        def forward(self, x):
            return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))

    class Loss(nn.Module):
        def forward(self, logits, targets):
            return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))

    class GPTChain(nn.Module):
        """``nodes[i]`` computes graph node ``i``; :meth:`forward` runs the chain with node ``i`` on ``devices[i]``."""

        def __init__(self, cfg, gen):
            super().__init__()
            self.cfg, self.graph = cfg, gpt_graph(cfg)
            mods = [Embedding(cfg)]
            for _ in range(cfg.n_layer):
                ln = lambda: nn.LayerNorm(cfg.n_embd, bias=cfg.bias)  # noqa: E731
                mods += [ln(), Attention(cfg), Add(), ln(), MLP(cfg), Add()]
            mods += [nn.LayerNorm(cfg.n_embd, bias=cfg.bias), nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False), Loss()]
            self.nodes = nn.ModuleList(mods)
            with torch.no_grad():  # nanoGPT's init, drawn from ``gen`` in parameter order
                for name, p in self.named_parameters():
                    if name.endswith("c_proj.weight"):
                        nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * cfg.n_layer), generator=gen)
                    elif p.dim() >= 2:
                        nn.init.normal_(p, 0.0, 0.02, generator=gen)
                    elif name.endswith("weight"):  # a layer norm's gain
                        nn.init.ones_(p)
                    else:  # every bias
                        nn.init.zeros_(p)

        def place(self, devices):
            """Move node ``i``'s parameters and buffers to ``devices[i]``."""
            for mod, dev in zip(self.nodes, devices):
                mod.to(dev)

        def forward(self, idx, targets, devices=None, logical=None):
            """The loss of one (micro-)batch with node ``i`` on ``devices[i]``.

            An input produced on another device is copied there (``.to``; autograd copies its gradient back).
            ``logical[i]`` is node ``i``'s logical device: when two logical devices share one physical device
            (CPU tests), a crossing edge still makes a real copy (``clone``), so the code path matches.
            """
            g = self.graph
            devices = devices or [None] * g.n_nodes
            last_use = {p: c for c in range(g.n_nodes) for p in g.nodes[c].inputs}
            outs = {}

            def fetch(p, i):
                x, dev = outs[p], devices[i]
                if dev is None:
                    return x
                if logical is not None and logical[p] != logical[i] and x.device == dev:
                    return x.clone()
                return x.to(dev)  # a no-op when x already lives on dev

            for i, (node, mod) in enumerate(zip(g.nodes, self.nodes)):
                dev = devices[i]
                args = [fetch(p, i) for p in node.inputs]
                if node.op == "embedding":
                    args = [idx if dev is None else idx.to(dev)]
                elif node.op == "loss":
                    args.append(targets if dev is None else targets.to(dev))
                outs[i] = mod(*args)
                for p in node.inputs:  # free an output once its last consumer has run
                    if last_use[p] == i:
                        del outs[p]
                if self.after_node is not None:
                    self.after_node(i)
            return outs[g.n_nodes - 1]

        after_node = None  # a hook called after each node, e.g. the executor's injected memory check

    _CLASSES.update(Embedding=Embedding, Attention=Attention, Add=Add, MLP=MLP, Loss=Loss, GPTChain=GPTChain)
    return _CLASSES
