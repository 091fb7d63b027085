"""Per-layer profiles as data: what the cost model needs to know about a model and a cluster.

Three sources fill the same dataclasses: the constants published with the Galvatron artifact
(``data/galvatron/*.json``, each with its source, loaded here); an analytic profile computed from a model's
shape and a hardware profile of ``lib.hardware`` (``analytic.py``, which imports these dataclasses; this module
imports nothing of it); and a measured profile (``runtime/profiler.py``).
Units: MB = 2^20 bytes, ms.

Used in: book/galvatron/02_the_cost_model.ipynb, 03_the_search.ipynb.
"""

from __future__ import annotations

import glob
import json
import os
from dataclasses import dataclass, field, replace

DATA_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "..", "data", "galvatron")


@dataclass(frozen=True)
class LayerProfile:
    """One layer type: memory and time per sample, and the shapes that size its messages."""

    name: str
    param_mb: float                      # fp32 parameters of one layer, MB
    act_mb_per_sample: dict              # TP degree -> activation MB kept per sample (profiled per degree)
    fwd_ms_per_sample: float             # forward time of one sample on one GPU, ms
    seq_len: int
    hidden: int
    tp_allreduces: int = 4               # TP all-reduces per layer (fwd + bwd); 6 with cross-attention
    decoder: bool = False                # decoder layers overlap only 2/3 of backward with DP all-reduce
    ckpt_act_mb_per_sample: float | None = None  # kept per sample under checkpointing (default: boundary)
    boundary_mb_per_sample: float = 2.0  # Slice-Gather message per sample; the artifact hard-codes 2 MB
    act_bytes: int = 4                   # bytes per activation element in TP and P2P messages (artifact: fp32)

    def act_mb(self, tp: int) -> float:
        """Activation MB per sample at TP degree ``tp``; beyond the profiled degrees, a + b/tp fitted to
        the two largest profiled degrees (activations have a replicated part that TP does not split)."""
        acts = {int(k): float(v) for k, v in self.act_mb_per_sample.items()}
        if tp in acts:
            return acts[tp]
        ks = sorted(acts)
        if tp < ks[0] or len(ks) < 2:
            raise ValueError(f"no activation profile for tp={tp} in layer {self.name!r}; have {ks}")
        t1, t2 = ks[-2], ks[-1]
        b = (acts[t1] - acts[t2]) / (1 / t1 - 1 / t2)
        a = acts[t2] - b / t2
        return max(a + b / tp, 0.0)

    def ckpt_act_mb(self) -> float:
        if self.ckpt_act_mb_per_sample is not None:
            return self.ckpt_act_mb_per_sample
        return self.seq_len * self.hidden * self.act_bytes / 2**20

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        d["act_mb_per_sample"] = {str(k): v for k, v in self.act_mb_per_sample.items()}
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "LayerProfile":
        d = dict(d)
        d.pop("count", None)
        d["act_mb_per_sample"] = {int(k): float(v) for k, v in d["act_mb_per_sample"].items()}
        return cls(**d)


@dataclass(frozen=True)
class ModelProfile:
    """A model: its layer types with counts, plus the memory kept outside the layers ("other")."""

    name: str
    layer_types: tuple                   # tuple of LayerProfile
    layer_counts: tuple                  # layers of each type, in model order
    other_model_states_mb: float         # embeddings, heads: parameters + grads + Adam states, MB
    other_act_mb_per_sample: float
    context_mb: float = 1024.0           # CUDA/PyTorch context per GPU
    extra_overhead_ms: float = 0.0       # per 24 layers, added to data-parallel shapes (artifact)
    source: str = ""

    def __post_init__(self):
        if len(self.layer_types) != len(self.layer_counts) or not self.layer_types:
            raise ValueError(f"need one count per layer type; got {len(self.layer_types)} types, "
                             f"{len(self.layer_counts)} counts")

    @property
    def n_layers(self) -> int:
        return int(sum(self.layer_counts))

    @property
    def uniform(self) -> bool:
        return len(self.layer_types) == 1

    def layers(self) -> list:
        """The layer profile of every layer, in order."""
        return [lt for lt, n in zip(self.layer_types, self.layer_counts) for _ in range(n)]

    def layer_type_index(self) -> list[int]:
        return [i for i, n in enumerate(self.layer_counts) for _ in range(n)]

    def with_layers(self, n_layers: int) -> "ModelProfile":
        """Same layer type, ``n_layers`` layers (uniform models only); used for search-time scaling."""
        if not self.uniform:
            raise ValueError(f"with_layers needs a single-layer-type model; {self.name!r} has {len(self.layer_types)}")
        return replace(self, name=f"{self.name}@{n_layers}L", layer_counts=(int(n_layers),))

    def to_dict(self) -> dict:
        return {"kind": "model", "name": self.name,
                "layer_types": [dict(lt.to_dict(), count=n) for lt, n in zip(self.layer_types, self.layer_counts)],
                "other_model_states_mb": self.other_model_states_mb,
                "other_act_mb_per_sample": self.other_act_mb_per_sample, "context_mb": self.context_mb,
                "extra_overhead_ms": self.extra_overhead_ms, "source": self.source}

    @classmethod
    def from_dict(cls, d: dict) -> "ModelProfile":
        lts = tuple(LayerProfile.from_dict(x) for x in d["layer_types"])
        return cls(name=d["name"], layer_types=lts, layer_counts=tuple(int(x["count"]) for x in d["layer_types"]),
                   other_model_states_mb=float(d["other_model_states_mb"]),
                   other_act_mb_per_sample=float(d["other_act_mb_per_sample"]),
                   context_mb=float(d.get("context_mb", 1024.0)), extra_overhead_ms=float(d.get("extra_overhead_ms", 0)),
                   source=d.get("source", ""))


@dataclass(frozen=True)
class ClusterProfile:
    """Communication of a cluster: all-reduce ms per MB of message by (pp, group size, consecutive ids)."""

    name: str
    n_gpus: int
    gpus_per_node: int
    allreduce_ms_per_mb: dict = field(default_factory=dict)   # "pp_size_consec" -> ms/MB (exact keys)
    intra_node_ms_per_mb: dict = field(default_factory=dict)  # "size_consec" -> ms/MB, any pp, inside a node
    inter_node_ms_per_mb: float | None = None                 # a group that crosses nodes
    p2p_ms_per_mb: float | None = None                        # pipeline send/recv; None: no P2P term (VLDB)
    overlap_coe: float = 1.3                                  # slowdown of overlapped compute and comm
    time_inflation: float = 1.1                               # artifact's empirical x1.1 on every time
    source: str = ""

    def allreduce_coe(self, pp: int, size: int, consecutive: bool) -> float:
        """ms per MB of all-reduce message for a group of ``size`` GPUs in a stage of ``n_gpus/pp``.

        A group spanning its whole stage counts as consecutive. Lookup order: the exact published key, then
        our fallback rule (inside a node: the single-node coefficient of that size; across nodes: one
        inter-node coefficient)."""
        if size <= 1:
            return 0.0
        stage = self.n_gpus // pp
        if size >= stage:
            consecutive = True
        c = int(bool(consecutive))
        key = f"{pp}_{size}_{c}"
        if key in self.allreduce_ms_per_mb:
            return float(self.allreduce_ms_per_mb[key])
        span = size if consecutive else stage
        if span > self.gpus_per_node:
            if self.inter_node_ms_per_mb is None:
                raise ValueError(f"cluster {self.name!r} has no coefficient for {key} and no inter-node fallback")
            return float(self.inter_node_ms_per_mb)
        for k in (f"{size}_{c}", f"{size}_1", f"{size}_0"):
            if k in self.intra_node_ms_per_mb:
                return float(self.intra_node_ms_per_mb[k])
        for k in (f"1_{size}_{c}", f"1_{size}_1"):
            if k in self.allreduce_ms_per_mb:
                return float(self.allreduce_ms_per_mb[k])
        raise ValueError(f"cluster {self.name!r} has no all-reduce coefficient for pp={pp}, size={size}, "
                         f"consecutive={bool(c)}; keys: {sorted(self.allreduce_ms_per_mb)}")

    def with_overlap(self, overlap_coe: float) -> "ClusterProfile":
        return replace(self, overlap_coe=float(overlap_coe))

    def multi_node(self, n_nodes: int, inter_node_ms_per_mb: float, name: str | None = None) -> "ClusterProfile":
        """``n_nodes`` copies of this single-node cluster joined by a slower network (synthetic)."""
        if self.n_gpus != self.gpus_per_node:
            raise ValueError(f"multi_node needs a single-node cluster; {self.name!r} has {self.n_gpus} GPUs "
                             f"and {self.gpus_per_node} per node")
        intra = {k.split("_", 1)[1]: v for k, v in self.allreduce_ms_per_mb.items() if k.startswith("1_")}
        intra.update(self.intra_node_ms_per_mb)
        return replace(self, name=name or f"{self.name}x{n_nodes}", n_gpus=self.n_gpus * n_nodes,
                       allreduce_ms_per_mb={}, intra_node_ms_per_mb=intra,
                       inter_node_ms_per_mb=float(inter_node_ms_per_mb),
                       source=f"synthetic: {n_nodes} x ({self.name}) with inter-node {inter_node_ms_per_mb} ms/MB; "
                              f"intra-node from: {self.source}")

    def to_dict(self) -> dict:
        return {"kind": "cluster", **self.__dict__}

    @classmethod
    def from_dict(cls, d: dict) -> "ClusterProfile":
        d = {k: v for k, v in d.items() if k not in ("kind", "units")}
        return cls(**d)


def _load_all(kind: str) -> dict:
    out = {}
    for path in sorted(glob.glob(os.path.join(DATA_DIR, f"{kind}_*.json"))):
        with open(path) as f:
            d = json.load(f)
        out[d["name"]] = d
    return out


def model_names() -> list[str]:
    """Names of the published model profiles in ``data/galvatron``."""
    return sorted(_load_all("model"))


def cluster_names() -> list[str]:
    return sorted(_load_all("cluster"))


def load_model(name: str) -> ModelProfile:
    """A published model profile by name (e.g. ``"bert-huge-32"``). Unknown names: ValueError."""
    allm = _load_all("model")
    if name not in allm:
        raise ValueError(f"unknown model {name!r}; known models: {sorted(allm)}")
    return ModelProfile.from_dict(allm[name])


def load_cluster(name: str) -> ClusterProfile:
    """A cluster communication profile by name (e.g. ``"rtx-titan-8"``). Unknown names: ValueError."""
    allc = _load_all("cluster")
    if name not in allc:
        raise ValueError(f"unknown cluster {name!r}; known clusters: {sorted(allc)}")
    return ClusterProfile.from_dict(allc[name])


def published_cluster(n_gpus: int) -> ClusterProfile:
    """The RTX TITAN cluster profile for 8 or 16 GPUs, or a synthetic multi-node one for 32, 64, ..."""
    from .strategies import check_power_of_two

    check_power_of_two(n_gpus)
    if n_gpus <= 8:
        base = load_cluster("rtx-titan-8")
        if n_gpus == 8:
            return base
        intra = {k.split("_", 1)[1]: v for k, v in base.allreduce_ms_per_mb.items() if k.startswith("1_")}
        return replace(base, name=f"rtx-titan-{n_gpus} (subset of rtx-titan-8)", n_gpus=n_gpus,
                       allreduce_ms_per_mb={}, intra_node_ms_per_mb=intra,
                       source=f"synthetic: {n_gpus} GPUs of the 8-GPU box, single-node coefficients; {base.source}")
    if n_gpus == 16:
        return load_cluster("rtx-titan-16")
    c16 = load_cluster("rtx-titan-16")
    return load_cluster("rtx-titan-8").multi_node(n_gpus // 8, c16.inter_node_ms_per_mb,
                                                  name=f"rtx-titan-{n_gpus} (synthetic)")
