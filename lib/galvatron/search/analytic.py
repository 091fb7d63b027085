"""An analytic layer profile: what the cost model needs, computed from a Transformer's shape and a hardware
profile of ``lib.hardware`` instead of measured. Sizes and FLOPs from the shape, activations by Korthikanti et
al. (2022), speeds from datasheet figures times an achievable fraction. Units: MB = 2^20 bytes, ms.

Used in: book/galvatron/03_the_search.ipynb ("your model on your hardware").
"""

from __future__ import annotations

from dataclasses import dataclass

from .profiles import ClusterProfile, LayerProfile, ModelProfile


@dataclass(frozen=True)
class TransformerShape:
    """The shape of a decoder/encoder Transformer, enough for an analytic layer profile."""

    name: str
    n_layers: int
    hidden: int
    n_heads: int
    seq_len: int
    ffn_hidden: int = 0          # 0 means 4 x hidden
    vocab: int = 32000
    gated_mlp: bool = False      # SwiGLU (LLaMA): three MLP matrices instead of two
    n_kv_heads: int = 0          # grouped-query attention (Llama 3): K and V heads; 0 means n_heads
    fused_attention: bool = False  # attention that keeps no s x s scores for backward (FlashAttention)

    def __post_init__(self):
        for f in ("n_layers", "hidden", "n_heads", "seq_len", "vocab"):
            if int(getattr(self, f)) < 1:
                raise ValueError(f"TransformerShape.{f} must be >= 1; got {getattr(self, f)!r}")
        if self.hidden % self.n_heads:
            raise ValueError(f"hidden={self.hidden} must be divisible by n_heads={self.n_heads}")
        if self.n_kv_heads < 0 or (self.n_kv_heads and self.n_heads % self.n_kv_heads):
            raise ValueError(f"TransformerShape.n_kv_heads must be 0 or divide n_heads={self.n_heads}; "
                             f"got {self.n_kv_heads!r}")

    @property
    def ffn(self) -> int:
        return self.ffn_hidden or 4 * self.hidden

    @property
    def kv_hidden(self) -> int:
        """Width of the K and V projections: hidden x n_kv_heads / n_heads (hidden without GQA)."""
        return self.hidden * (self.n_kv_heads or self.n_heads) // self.n_heads

    def _matmul_params(self) -> int:
        h, f = self.hidden, self.ffn
        return 2 * h * h + 2 * h * self.kv_hidden + (3 if self.gated_mlp else 2) * h * f

    def layer_params(self) -> int:
        return self._matmul_params() + 9 * self.hidden + self.ffn   # + biases, two norms (approximately)

    def layer_fwd_flops_per_sample(self) -> float:
        """2 FLOPs per multiply-add of every matmul, plus the attention scores and their use (4 s^2 h)."""
        h, s = self.hidden, self.seq_len
        return 2.0 * s * self._matmul_params() + 4.0 * s * s * h

    def layer_act_bytes_per_sample(self, tp: int, act_bytes: int = 2) -> float:
        """Activations kept for backward (Korthikanti et al. 2022, no sequence parallelism): with 16-bit
        activations s h (10 + 24/t) + 5 a s^2 / t bytes; the MLP part scales with the FFN width. With
        ``fused_attention`` the 5 a s^2 / t bytes of scores, softmax and its dropout mask are not kept."""
        h, s, a = self.hidden, self.seq_len, self.n_heads
        split = 8 + 4 * self.ffn / h * (1.5 if self.gated_mlp else 1.0)
        scores = 0.0 if self.fused_attention else 5 * a * s * s / tp
        sixteen_bit = s * h * (10 + split / tp) + scores
        return sixteen_bit * act_bytes / 2

    def n_params(self) -> int:
        """All parameters: the layers, the token embedding and an untied output head (Llama's)."""
        return self.n_layers * self.layer_params() + 2 * self.vocab * self.hidden


SHAPES = {
    "bert-huge-32": TransformerShape("bert-huge-32", 32, 1280, 16, 512, vocab=30522),
    "gpt2-xl": TransformerShape("gpt2-xl", 48, 1600, 25, 1024, vocab=50257),
    "llama-7b": TransformerShape("llama-7b", 32, 4096, 32, 2048, ffn_hidden=11008, vocab=32000, gated_mlp=True),
    "llama-13b": TransformerShape("llama-13b", 40, 5120, 40, 2048, ffn_hidden=13824, vocab=32000, gated_mlp=True),
    # The Llama 3 Herd of Models (Meta, 2024), Table 3: layers, model dimension, FFN dimension, attention heads,
    # 8 key/value heads, vocabulary of 128K tokens (128,256 in the released tokenizer), SwiGLU; pre-training
    # sequences of 8,192 tokens (section 3.4.1). Fused attention is our assumption, not a figure of the paper.
    "llama3-8b": TransformerShape("llama3-8b", 32, 4096, 32, 8192, ffn_hidden=14336, vocab=128256,
                                  gated_mlp=True, n_kv_heads=8, fused_attention=True),
    "llama3-70b": TransformerShape("llama3-70b", 80, 8192, 64, 8192, ffn_hidden=28672, vocab=128256,
                                   gated_mlp=True, n_kv_heads=8, fused_attention=True),
    "llama3-405b": TransformerShape("llama3-405b", 126, 16384, 128, 8192, ffn_hidden=53248, vocab=128256,
                                    gated_mlp=True, n_kv_heads=8, fused_attention=True),
}


def shape_names() -> list[str]:
    return sorted(SHAPES)


# Bytes per activation element, and the order in which dtype=None picks the first one the device supports.
ACT_BYTES = {"bf16": 2, "fp16": 2, "tf32": 4, "fp32": 4}


def best_dtype(device) -> str:
    """The fastest dtype of ``ACT_BYTES`` order that ``device`` (a ``lib.hardware.Device``) has a figure for."""
    for dt in ACT_BYTES:
        if dt in device.peak_flops:
            return dt
    raise ValueError(f"device {device.name!r} has no figure for any of {list(ACT_BYTES)}; "
                     f"it has {sorted(device.peak_flops)}")


def analytic_profile(shape, hardware, dtype: str | None = None, overlap_coe: float = 1.3,
                     context_mb: float = 1024.0, embedding_shards: int = 1) -> tuple[ModelProfile, ClusterProfile]:
    """A model and cluster profile computed, not measured: layer sizes and FLOPs from ``shape`` (a
    TransformerShape or a name in SHAPES), speeds from ``hardware`` (a ``lib.hardware`` profile or its name).

    Model states are 16 bytes per parameter (fp32 master weights, gradients and Adam moments, or the mixed
    precision equivalent), activations and their TP/P2P messages use ``dtype``'s size, compute runs at the
    device's achievable FLOP/s for ``dtype``. ``dtype=None`` picks the best the device supports (bf16, else
    fp16, tf32, fp32: a T4 has no bf16) and the model's name says which. All-reduce ms/MB is 1 / link bandwidth
    (ring all-reduce); on a shared bus every GPU's traffic shares it. Used in: 03_the_search ("your model on
    your hardware").

    ``hardware`` may also be a ``lib.hardware.MultiNodeProfile`` (nodes joined by a fabric): a group that stays
    inside a node is charged at the node's link (NVLink), a group that spans nodes at the fabric's per-GPU port
    (a ring is as fast as its slowest hop), and pipeline sends at the fabric's (every stage fills whole nodes
    once the cluster has more GPUs per stage than a node has). ``embedding_shards``: the GPUs the embedding
    and output head's model states are split over (vocabulary-parallel, as Megatron-LM does); 1 keeps them
    whole on every GPU. Used in: book/closing/01_one_run.
    """
    from lib import hardware as hwlib

    if isinstance(shape, str):
        if shape not in SHAPES:
            raise ValueError(f"unknown model shape {shape!r}; known shapes: {shape_names()}")
        shape = SHAPES[shape]
    if dtype is not None and dtype not in ACT_BYTES:
        raise ValueError(f"dtype must be one of {list(ACT_BYTES)} or None (the best the device supports); "
                         f"got {dtype!r}")
    hw = hwlib.load(hardware) if isinstance(hardware, str) else hardware
    if isinstance(embedding_shards, bool) or not isinstance(embedding_shards, int) or embedding_shards < 1:
        raise ValueError(f"embedding_shards must be an integer >= 1; got {embedding_shards!r}")
    multi = isinstance(hw, hwlib.MultiNodeProfile)
    n = hw.n_gpus if multi else hw.n_devices
    dev = hw.device if multi else hw.devices[0]
    if dtype is None:
        dtype = best_dtype(dev)
    elif dtype not in dev.peak_flops:
        supported = [dt for dt in ACT_BYTES if dt in dev.peak_flops]
        raise ValueError(f"hardware profile {hw.name!r} ({dev.name}) has no {dtype} figure; it supports "
                         f"{supported}: pass one of them, or dtype=None for the best ({best_dtype(dev)})")
    act_bytes = ACT_BYTES[dtype]
    flops = dev.achievable_flops(dtype)
    tps = [2 ** k for k in range(0, n.bit_length())]
    layer = LayerProfile(
        name="block", param_mb=shape.layer_params() * 4 / 2**20,
        act_mb_per_sample={t: shape.layer_act_bytes_per_sample(t, act_bytes) / 2**20 for t in tps},
        fwd_ms_per_sample=shape.layer_fwd_flops_per_sample() / flops * 1e3,
        seq_len=shape.seq_len, hidden=shape.hidden, tp_allreduces=4,
        ckpt_act_mb_per_sample=shape.seq_len * shape.hidden * act_bytes / 2**20,
        boundary_mb_per_sample=shape.seq_len * shape.hidden * act_bytes / 2**20, act_bytes=act_bytes)
    emb_params = shape.vocab * shape.hidden * 2 + shape.seq_len * shape.hidden
    model = ModelProfile(
        name=f"{shape.name} (analytic, {dtype})", layer_types=(layer,), layer_counts=(shape.n_layers,),
        other_model_states_mb=emb_params * 16 / 2**20 / embedding_shards,
        other_act_mb_per_sample=2 * shape.seq_len * shape.vocab * 4 / 2**20,   # logits and their gradient, fp32
        context_mb=context_mb, extra_overhead_ms=0.0,
        source=f"analytic: shape {shape}, FLOPs / ({dtype} peak x efficiency of {dev.name}); "
               f"activations by Korthikanti et al. 2022")
    if multi:
        return model, _multi_node_cluster(hw, tps, overlap_coe)
    if n > 1:
        link = hw.link(0, 1)
        base = 2**20 / link.bw_bytes_per_s * 1e3               # ms per MB on one link
        shared = hw.topology.get("kind") == "shared-bus"
        coe = base * (n if shared else 1)
    else:
        base, coe = 0.0, 0.0
    cluster = ClusterProfile(
        name=hw.name, n_gpus=n, gpus_per_node=n, allreduce_ms_per_mb={},
        intra_node_ms_per_mb={f"{g}_{c}": coe for g in tps if g > 1 for c in (0, 1)},
        inter_node_ms_per_mb=None, p2p_ms_per_mb=base if n > 1 else None, overlap_coe=overlap_coe,
        time_inflation=1.0,
        source=f"analytic from lib.hardware profile {hw.name!r}: 1 / achievable link bandwidth"
               + (" x GPUs sharing the bus" if n > 1 and hw.topology.get("kind") == "shared-bus" else ""))
    return model, cluster


def ms_per_mb(link) -> float:
    """All-reduce (ring) or send ms per MB of message over ``link`` (a ``lib.hardware.Link``)."""
    return 2**20 / link.bw_bytes_per_s * 1e3


def _multi_node_cluster(hw, tps, overlap_coe: float) -> ClusterProfile:
    """The communication profile of a ``MultiNodeProfile``: NVLink inside a node, the fabric across nodes."""
    g = hw.gpus_per_node
    intra = ms_per_mb(hw.node.link(0, 1)) * (g if hw.node.topology.get("kind") == "shared-bus" else 1)
    inter = ms_per_mb(hw.fabric_link())
    return ClusterProfile(
        name=f"{hw.name} ({hw.n_nodes} x {g} GPUs)", n_gpus=hw.n_gpus, gpus_per_node=g, allreduce_ms_per_mb={},
        intra_node_ms_per_mb={f"{t}_{c}": intra for t in tps if 1 < t <= g for c in (0, 1)},
        inter_node_ms_per_mb=inter if hw.n_nodes > 1 else None,
        p2p_ms_per_mb=(inter if hw.n_nodes > 1 else intra), overlap_coe=overlap_coe, time_inflation=1.0,
        source=f"analytic from lib.hardware cluster profile {hw.name!r}: 1 / achievable bandwidth of the "
               f"node's link ({hw.node.name}) inside a node, of one GPU's fabric port across nodes")


def run_shape(name: str, model: dict) -> "TransformerShape":
    """The shape of a published run's ``model`` fields (``data/published_runs/``: layers, hidden, heads,
    kv_heads, ffn, gated_mlp, vocab, seq_len; a null ffn is 4 x hidden, a null kv_heads the heads). Checked by
    ``published.to_shape``; read raw (no pydantic) by ``plausibility.best_published_mfu``."""
    m = model
    return TransformerShape(name, m["layers"], m["hidden"], m["heads"], m["seq_len"],
                            ffn_hidden=m.get("ffn") or 4 * m["hidden"], vocab=m["vocab"],
                            gated_mlp=bool(m.get("gated_mlp")), n_kv_heads=m.get("kv_heads") or m["heads"])
