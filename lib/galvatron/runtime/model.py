"""The Transformer the runtime trains: GPT blocks written as functions of a parameter dict.

Written functionally so one block function serves the single-process reference (tp = 1, full weights) and
every tensor-parallel shard (n_head/tp heads, 4d/tp MLP columns): the shard is the same function with smaller
weights plus Megatron's f/g around it. Used in: book/galvatron/04_from_plan_to_run.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F

from .tp import CopyToTP, ReduceFromTP, shard_cols, shard_rows

BLOCK_PARAMS = ("ln1_w", "ln1_b", "qkv_w", "qkv_b", "proj_w", "proj_b",
                "ln2_w", "ln2_b", "fc_w", "fc_b", "out_w", "out_b")


@dataclass(frozen=True)
class ModelConfig:
    """A small GPT: ``n_layer`` blocks of width ``d_model`` with ``n_head`` heads, causal, untied head."""

    vocab: int = 64
    seq_len: int = 16
    d_model: int = 32
    n_head: int = 4
    n_layer: int = 2

    def __post_init__(self):
        if self.d_model % self.n_head:
            raise ValueError(f"n_head={self.n_head} must divide d_model={self.d_model}")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "ModelConfig":
        return cls(**{k: int(d[k]) for k in cls.__dataclass_fields__ if k in d})

    def block_param_count(self) -> int:
        d = self.d_model
        return 12 * d * d + 13 * d

    def other_param_count(self) -> int:
        d, V, T = self.d_model, self.vocab, self.seq_len
        return V * d + T * d + 2 * d + V * d


def init_params(cfg: ModelConfig, seed: int) -> dict:
    """Full (unsharded) parameters: ``{"embed": {...}, "blocks": [...], "head": {...}}``, reproducible."""
    g = torch.Generator().manual_seed(seed)
    d, V = cfg.d_model, cfg.vocab

    def n(*shape, std=0.02):
        return torch.randn(*shape, generator=g) * std

    blocks = []
    for _ in range(cfg.n_layer):
        blocks.append({
            "ln1_w": 1 + n(d, std=0.1), "ln1_b": n(d), "qkv_w": n(3 * d, d), "qkv_b": n(3 * d),
            "proj_w": n(d, d), "proj_b": n(d), "ln2_w": 1 + n(d, std=0.1), "ln2_b": n(d),
            "fc_w": n(4 * d, d), "fc_b": n(4 * d), "out_w": n(d, 4 * d), "out_b": n(d),
        })
    embed = {"wte": n(V, d, std=0.5), "wpe": n(cfg.seq_len, d, std=0.1)}
    head = {"lnf_w": 1 + n(d, std=0.1), "lnf_b": n(d), "lm_w": n(V, d, std=0.2)}
    return {"embed": embed, "blocks": blocks, "head": head}


def tp_shard(block: dict, t: int, T: int) -> dict:
    """TP rank ``t`` of ``T``: q/k/v rows and fc rows split (column parallel), proj/out columns split (row)."""
    return {
        "ln1_w": block["ln1_w"], "ln1_b": block["ln1_b"],
        "qkv_w": shard_rows(block["qkv_w"], t, T, 3), "qkv_b": shard_rows(block["qkv_b"], t, T, 3),
        "proj_w": shard_cols(block["proj_w"], t, T), "proj_b": block["proj_b"],
        "ln2_w": block["ln2_w"], "ln2_b": block["ln2_b"],
        "fc_w": shard_rows(block["fc_w"], t, T), "fc_b": shard_rows(block["fc_b"], t, T),
        "out_w": shard_cols(block["out_w"], t, T), "out_b": block["out_b"],
    }


def block_forward(x: torch.Tensor, p: dict, n_head_local: int, tp_group=None) -> torch.Tensor:
    """One pre-LN block on ``x`` [b, T, d]; ``p`` may be a TP shard holding ``n_head_local`` heads."""
    b, T, d = x.shape
    h = F.layer_norm(x, (d,), p["ln1_w"], p["ln1_b"])
    h = CopyToTP.apply(h, tp_group) if tp_group is not None else h
    q, k, v = F.linear(h, p["qkv_w"], p["qkv_b"]).chunk(3, dim=-1)
    hd = q.shape[-1] // n_head_local
    q, k, v = (t.view(b, T, n_head_local, hd).transpose(1, 2) for t in (q, k, v))
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    y = F.linear(y.transpose(1, 2).reshape(b, T, -1), p["proj_w"])
    y = ReduceFromTP.apply(y, tp_group) if tp_group is not None else y
    x = x + y + p["proj_b"]
    h = F.layer_norm(x, (d,), p["ln2_w"], p["ln2_b"])
    h = CopyToTP.apply(h, tp_group) if tp_group is not None else h
    h = F.gelu(F.linear(h, p["fc_w"], p["fc_b"]))
    y = F.linear(h, p["out_w"])
    y = ReduceFromTP.apply(y, tp_group) if tp_group is not None else y
    return x + y + p["out_b"]


def embed_forward(idx: torch.Tensor, p: dict) -> torch.Tensor:
    return p["wte"][idx] + p["wpe"][: idx.shape[1]]


def head_loss_sum(x: torch.Tensor, targets: torch.Tensor, p: dict) -> torch.Tensor:
    """Summed (not averaged) cross-entropy of the rows held here; the caller divides by the global count."""
    h = F.layer_norm(x, (x.shape[-1],), p["lnf_w"], p["lnf_b"])
    logits = F.linear(h, p["lm_w"])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="sum")


def make_batch(cfg: ModelConfig, global_bsz: int, seed: int, step: int = 0):
    """Inputs and next-token targets [B, T] for ``step``, identical on every rank."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + step)
    tok = torch.randint(0, cfg.vocab, (global_bsz, cfg.seq_len + 1), generator=g)
    return tok[:, :-1], tok[:, 1:]


def reference_step(cfg: ModelConfig, params: dict, global_bsz: int, seed: int, lr: float, steps: int = 1,
                   device="cpu"):
    """Single-process SGD steps on the whole batch, on ``device``: returns (losses, updated full params).

    A rank that checks a plan on a GPU computes the reference on its own GPU: on the CPU, a model of GPU size
    takes minutes (a 630M-parameter model at 512 tokens did not finish in 4 minutes on 16 cores)."""
    def own(v):
        return v.detach().to(device).clone().requires_grad_()

    P = {
        "embed": {k: own(v) for k, v in params["embed"].items()},
        "blocks": [{k: own(v) for k, v in b.items()} for b in params["blocks"]],
        "head": {k: own(v) for k, v in params["head"].items()},
    }
    flat = list(P["embed"].values()) + [t for b in P["blocks"] for t in b.values()] + list(P["head"].values())
    losses = []
    for step in range(steps):
        idx, tgt = (t.to(device) for t in make_batch(cfg, global_bsz, seed, step))
        x = embed_forward(idx, P["embed"])
        for b in P["blocks"]:
            x = block_forward(x, b, cfg.n_head)
        loss = head_loss_sum(x, tgt, P["head"]) / tgt.numel()
        for t in flat:
            t.grad = None
        loss.backward()
        with torch.no_grad():
            for t in flat:
                t -= lr * t.grad
        losses.append(float(loss.detach()))
    detached = {
        "embed": {k: v.detach() for k, v in P["embed"].items()},
        "blocks": [{k: v.detach() for k, v in b.items()} for b in P["blocks"]],
        "head": {k: v.detach() for k, v in P["head"].items()},
    }
    return losses, detached


def param_mb(n_params: int, bytes_per: int = 4) -> float:
    return n_params * bytes_per / 2 ** 20


__all__ = ["ModelConfig", "init_params", "tp_shard", "block_forward", "embed_forward", "head_loss_sum",
           "make_batch", "reference_step", "BLOCK_PARAMS", "param_mb"]
