"""A parallel layout of a uniform Transformer job: the degrees (TP x CP x DP x PP), the interleaving, the
micro-batch, ZeRO stage, sequence parallelism and recompute; and the division of layers over stages.

``ParallelConfig`` is what a published run states (``lib/galvatron/published.py``) and what the practice search picks
(``practice_search.py``); ``Job`` is the model, the cluster and the user's global batch. The global batch
``B`` (sequences) is split into ``B / (dp mb)`` micro-batches per pipeline per step (gradient accumulation).

Layers over stages (``stage_layers``): ``uneven=False`` (the previous rule) gives the first ``L mod pp`` stages
one layer more. ``uneven=True`` gives every stage ``ceil(L / pp)`` and takes the ``pp ceil(L/pp) - L`` layers
too many from the last stage, then the first, then alternately inwards: the last stage also runs the output
head and the first holds the most activations in flight, so they are the ones to lighten (Llama 3's 126
layers on 16 stages: 7, 8 x 14, 7, as Meta describes in section 3.3.2 of its paper). Used in: ``cost.py``.

Layers over the chunks of an interleaved schedule (``chunk_layers``): the model is cut into ``pp vp`` slices
by the same rule, and stage ``r`` runs slices ``r, r + pp, ..., r + (vp - 1) pp`` (Megatron-LM's
interleaved assignment). With ``pp vp = L + 1`` or ``L + 2`` the first slice, then the last, is empty: a
chunk that holds only the embedding (first stage) or only the output head (last stage), which is Llama 3's
layout (section 3.3.2: one layer fewer on the first and last stages, "the first model chunk on the first
stage has only the embedding, and the last model chunk on the last stage has only output projection and
loss calculation"; 126 layers, PP 16, 128 chunks: vp 8). Where ``vp`` divides every stage's layers the
chunks are the stage's layers split evenly, as before.

Layers over stages by cost (``stage_layers_by_cost``, a stack's ``stages_by_cost``): nanotron's split. Each
block has a cost (a layer: its matmul parameters; the output head: vocabulary x hidden; the embedding: 0);
walking the blocks in order with their running total, a block goes to the current stage, and the stage is
full once the total passes its share (r + 1) / pp of the whole (``models/base.py``, ``build_model``). The
head's cost pushes layers towards the first stages.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .activations import RECOMPUTE
from .zero import STAGES


@dataclass(frozen=True)
class ParallelConfig:
    """Degrees and per-run choices of one layout (``tp cp dp pp`` GPUs)."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    cp: int = 1
    vp: int = 1                        # model chunks per pipeline stage (1: plain 1F1B)
    micro_batch: int = 1               # sequences per micro-batch
    sequence_parallel: bool = False
    zero: int = 0
    recompute: str = "none"

    def __post_init__(self):
        for f in ("tp", "pp", "dp", "cp", "vp", "micro_batch"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"ParallelConfig.{f} must be an integer >= 1; got {v!r}")
        if self.zero not in STAGES:
            raise ValueError(f"ParallelConfig.zero must be one of {STAGES}; got {self.zero!r}")
        if self.recompute not in RECOMPUTE:
            raise ValueError(f"ParallelConfig.recompute must be one of {RECOMPUTE}; got {self.recompute!r}")
        if not isinstance(self.sequence_parallel, bool):
            raise ValueError(f"ParallelConfig.sequence_parallel must be True or False; "
                             f"got {self.sequence_parallel!r}")

    @property
    def n_gpus(self) -> int:
        return self.tp * self.cp * self.dp * self.pp

    def with_(self, **changes) -> "ParallelConfig":
        return replace(self, **changes)

    def label(self) -> str:
        s = f"TP {self.tp}, PP {self.pp}, DP {self.dp}"
        if self.cp > 1:
            s += f", CP {self.cp}"
        if self.vp > 1:
            s += f", VP {self.vp}"
        s += f", mb {self.micro_batch}"
        if self.zero:
            s += f", ZeRO-{self.zero}"
        if self.sequence_parallel:
            s += ", SP"
        if self.recompute != "none":
            s += f", {self.recompute} recompute"
        return s


@dataclass(frozen=True)
class Job:
    """A training job: the model shape (``analytic.TransformerShape``), the GPU (``efficiency.GpuSpec``), the
    cluster (``n_gpus`` in nodes of ``gpus_per_node``, ``port_gb_s`` per GPU between nodes, peak) and the
    user's global batch in sequences of ``shape.seq_len`` tokens. ``fabric``: the fabric between nodes, a
    name of ``data/hardware/fabrics/fabrics.json`` whose published collective measurements price it ("": not
    stated, ``port_gb_s`` at the GPU type's link efficiency)."""

    shape: object
    gpu: object
    n_gpus: int
    gpus_per_node: int
    port_gb_s: float
    global_batch: int
    dtype: str = "bf16"
    dropout: bool = True               # dropout masks kept for backward (activations.py)
    fabric: str = ""

    def __post_init__(self):
        for f in ("n_gpus", "gpus_per_node", "global_batch"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"Job.{f} must be an integer >= 1; got {v!r}")
        if not self.port_gb_s > 0:
            raise ValueError(f"Job.port_gb_s must be > 0; got {self.port_gb_s!r}")
        if self.dtype not in ("bf16", "fp16"):
            raise ValueError(f"Job.dtype must be bf16 or fp16; got {self.dtype!r}")


class LayoutError(ValueError):
    """A parallel configuration that does not fit its job or its rules (a caller's input, named in one line);
    any other ValueError of the cost model is a bug. ``validate`` reports it as the run's config field."""


def check_layout(job: Job, cfg: ParallelConfig, spare_chunks: int = 0) -> int:
    """Micro-batches per step, after checking that ``cfg`` fits ``job``; LayoutError naming the field.
    ``spare_chunks`` (0-2): chunks that may hold no layer (the embedding's and the head's, ``chunk_layers``)."""
    sh = job.shape
    if cfg.n_gpus != job.n_gpus:
        raise LayoutError(f"tp x cp x dp x pp = {cfg.n_gpus} but the job has {job.n_gpus} GPUs")
    if sh.n_heads % cfg.tp:
        raise LayoutError(f"tp={cfg.tp} must divide the {sh.n_heads} attention heads")
    if cfg.pp * cfg.vp > sh.n_layers + spare_chunks:
        raise LayoutError(f"pp x vp = {cfg.pp * cfg.vp} exceeds the {sh.n_layers} layers"
                         + (f" + {spare_chunks} embedding/head chunks" if spare_chunks else ""))
    if sh.seq_len % cfg.cp:
        raise LayoutError(f"cp={cfg.cp} must divide the sequence length {sh.seq_len}")
    per = cfg.dp * cfg.micro_batch
    if job.global_batch % per:
        raise LayoutError(f"global_batch={job.global_batch} is not a whole number of micro-batches of "
                         f"dp x micro_batch = {per}")
    return job.global_batch // per


def stage_layers(n_layers: int, pp: int, uneven: bool = True) -> list[int]:
    """Layers on each of ``pp`` stages (see the module docstring)."""
    if pp < 1 or n_layers < pp:
        raise ValueError(f"pp must be in [1, {n_layers}] for {n_layers} layers; got {pp!r}")
    if not uneven:
        base, extra = divmod(n_layers, pp)
        return [base + (1 if i < extra else 0) for i in range(pp)]
    top = -(-n_layers // pp)
    out = [top] * pp
    surplus = top * pp - n_layers
    order, lo, hi = [], 0, pp - 1
    while lo <= hi:
        order.append(hi)
        if lo != hi:
            order.append(lo)
        lo, hi = lo + 1, hi - 1
    i = 0
    while surplus:
        out[order[i % pp]] -= 1
        surplus -= 1
        i += 1
    return out


def stage_layers_by_cost(n_layers: int, pp: int, layer_cost: float, head_cost: float) -> list[int]:
    """Layers on each of ``pp`` stages under nanotron's split by cost (see the module docstring); the head
    runs on the last stage. LayoutError where the split leaves a stage without a layer (the head's cost
    larger than a stage's share would leave the last stages empty: nanotron would build no block there)."""
    if pp < 1 or n_layers < pp:
        raise ValueError(f"pp must be in [1, {n_layers}] for {n_layers} layers; got {pp!r}")
    if not (layer_cost > 0 and head_cost >= 0):
        raise ValueError(f"layer_cost must be > 0 and head_cost >= 0; got {layer_cost!r}, {head_cost!r}")
    total = n_layers * layer_cost + head_cost
    out, rank, run = [0] * pp, 0, 0.0
    for i in range(n_layers + 1):             # the layers, then the head
        run += layer_cost if i < n_layers else head_cost
        if i < n_layers:
            out[rank] += 1
        if run > total * (rank + 1) / pp * (1 + 1e-12) and rank < pp - 1:
            rank += 1
    if min(out) == 0:
        raise LayoutError(f"pp={pp}: splitting {n_layers} layers by cost with the output head leaves "
                          f"stage {out.index(0)} without a layer")
    return out


def chunk_layers(n_layers: int, pp: int, vp: int) -> list[list[int]]:
    """Layers in each of the ``vp`` chunks of each of ``pp`` stages (see the module docstring): ``pp`` lists
    of ``vp`` counts. ``pp vp`` may exceed ``n_layers`` by at most 2 (an embedding-only first chunk and a
    head-only last chunk)."""
    if pp < 1 or vp < 1:
        raise ValueError(f"pp and vp must be >= 1; got pp={pp!r}, vp={vp!r}")
    slots = pp * vp
    if slots > n_layers + 2:
        raise ValueError(f"pp x vp = {slots} exceeds the {n_layers} layers + 2 embedding/head chunks")
    if slots <= n_layers:
        slices = stage_layers(n_layers, slots, uneven=True)
    else:                                  # one layer a slice, the last then the first left empty
        slices = [1] * slots
        slices[-1] = 0
        if slots - n_layers == 2:
            slices[0] = 0
    return [[slices[c * pp + r] for c in range(vp)] for r in range(pp)]
