"""Named cost rules: every modelling choice on which two versions of Galvatron's search differ.

The formulas of ``cost.py`` and the loops of ``engine.py`` are shared; a frozen :class:`CostRules` names the
choices between them. Two presets:

``GALVATRON2`` (``"galvatron2"``, the default everywhere)
    The choices this book made before the presets existed, mostly following Galvatron-2 (PKU-DAIR/Hetu-Galvatron).
    With it every search gives exactly the numbers it gave before.

``VLDB2023`` (``"vldb2023"``)
    The published VLDB artifact (``anonymous-cs-system/Galvatron``, commit 2a09c265: ``utils/cost_model.py``,
    ``utils/dp_utils.py`` and the per-model ``<model>/search_layerwise_hp.py``). With it our search reproduces
    the artifact's: ``tests/galvatron/search/test_artifact_exactness.py`` checks it against an independent
    re-implementation of the artifact (``tests/galvatron/search/artifact_oracle.py``).

The departures, field by field (``galvatron2`` value -> ``vldb2023`` value):

``chunks``: micro-batches per iteration of a pipelined strategy. ``"galvatron2"``: min(8, ceil(B pp/N / 4)),
    one count for every strategy of a pipeline degree. ``"artifact"``: the artifact's ``optimal_chunk_func`` of
    the model's own script, a function of the local batch b = B/dp and of the strategy, so strategies of one
    plan may differ and some counts are fractional (BERT: b/4 for TP x PP shapes without DP, b/2 if b < 6,
    else b/8 + 2; ViT: 1 if b = 8 else 2; T5: 1 if b = 2, 3 at pp = 8, else 2; Swin: 1 / 2 / 3 / 4 for
    b <= 8 / < 32 / <= 96 / larger). ``"bert"``, ``"vit"``, ``"t5"``, ``"swin"`` pick one of those directly.
    At B = 8 and pp = 2, ``galvatron2`` gives 1 micro-batch (so a pipeline never pays off there) where the
    BERT rule gives 2 for a TP2 x DP2 stage.
``stage_budgets`` (heterogeneous models only; uniform ones replicate one stage): ``"context-later"``: stage 0
    loses the "other" memory and every later stage a CUDA context (``context_mb``, 1 GB). ``"full"``: later
    stages keep the whole budget, as in the artifact.
``division_input`` (heterogeneous models): what the memory-balanced stage division is fed. ``"first-strategy"``:
    the "other" memory under the first strategy of the pipeline degree and per-layer minimum memory rounded up
    to whole MB, and a greedy that keeps one layer for every earlier stage. ``"pure-dp"``: the "other" memory
    under pure DP over all GPUs, unrounded layer memory, and the artifact's greedy (which moves one layer into an
    empty stage 0). Where that greedy leaves a later stage empty (Swin at pp = 8 and more), the artifact's DP
    would fail; we fall back to the greedy that keeps one layer for every stage.
``mem_bins_max``: the DP table's memory bins. An int n: 1 MB bins up to n MB, coarser above so there are at
    most n (``galvatron2``: 16,384, so bins are 2 MB at 20 GB). ``None``: always 1 MB, as in the artifact.
``leftover_dp``: a pipelined DP shape without TP (2-1-4, 4-1-2) whose all-reduce outlasts the backward it
    overlaps. ``"per-stage"``: the leftover all-reduce is paid once per stage (x pp). ``"once"``: the
    artifact's rule, paid once for DP (still x pp for SDP).
``decoder_pp_overlap``: the share of a decoder layer's backward that overlaps its all-reduce in a pipelined
    TP x DP shape (2-2-2). ``galvatron2`` 2/3 (as at pp = 1), the artifact 1/2 (it has no decoder case there).
``sdp_gather_factor`` and ``sdp_gather_per_chunk``: SDP's extra forward all-gather, factor x the all-reduce
    time, once per iteration (both presets: 0.5, once; Galvatron-2's code re-gathers per micro-batch).
``sdp_mem_bias``: SDP model states are 4P/tp x (1/dp + bias) (both presets 0.025; Hetu-dist and Galvatron-2 use
    0.003).
``p2p``: the pipeline's point-to-point term. ``"cluster"``: added when the cluster profile has a coefficient
    (``p2p_ms_per_mb``), optionally per pipeline degree through ``p2p_ms_per_mb_by_pp``. ``"none"``: never, as
    in the 8-GPU artifact.

A third preset, ``PRACTICE`` (``"practice"``), adds the mechanisms of today's training systems, each a named
switch (``MECHANISMS``, in the order an ablation turns them on), all off in ``galvatron2`` and ``vldb2023``
so that both stay what they were: the embedding and output head priced where they live
(``embedding_and_head``), mixed precision (``mixed_precision``, ``grad_reduce_bytes``), fused
attention (``fused_attention``), 1F1B and interleaved pipeline schedules (``pipeline_schedules``), ZeRO
stages 1-3 with overlapped collectives (``zero_stages``), sequence parallelism and selective recompute
(``sequence_parallel``, ``selective_recompute``), context parallelism (``context_parallel``), a
hierarchical network (``hierarchical_network``, ``oversubscription``, ``pod_nodes``), any degrees and
uneven stages (``any_degrees``), shape-dependent compute efficiency (``shape_efficiency``), micro-batch
size as a search dimension (``micro_batch_search``) and the attention kernel's own efficiency
(``attention_efficiency``). Three more fields say what a job's software stack does (``STACK_FIELDS``:
``tp_comm_overlap``, TP messages overlapped with the GEMMs; ``flat_zero3_collectives``, ZeRO-3's collectives
as flat rings at the port's speed; ``queued_collectives``, per-micro-batch ZeRO collectives that run on under
the next micro-batch's compute, as Meta's FSDP does for Llama 3; and ``STACK_LIMITS``, what a stack could not
do, which the search leaves out); they are off in every preset and set per run by ``validate.run_rules``
from the run's source and its stack (``data/stacks/``). Two candidate mechanisms (``CANDIDATE_FIELDS``:
``wave_quantization``, tile and wave quantization of every GEMM, ``quantization.py``; ``measured_collectives``,
the fabric's published achieved bandwidth by nodes spanned, ``fabrics.py``) are built and tested but off in
every preset, ``practice`` included, because on the published runs they do not yet earn their place
(``validate --with NAME`` turns one on).
They are read by ``cost.step_estimate`` (a whole step of a uniform Transformer) and ``practice_search.py``,
never by the layer-wise model and search above, so ``PRESETS`` (the two presets the paper's search takes) is unchanged; ``get_rules`` knows all three
(``ALL_PRESETS``). With every switch off, ``cost.step_estimate`` gives the layer-wise model's step time and
memory of a uniform layout under either preset (``tests/galvatron/search/test_practice_mechanisms.py``).

A bad value raises ``ValueError`` naming the field. ``get_rules("vldb2023")`` returns a preset by name.

Used in: book/galvatron/03_the_search.ipynb (and, through ``search(..., rules=...)``, every search).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

CHUNK_RULES = ("galvatron2", "artifact", "bert", "vit", "t5", "swin")
STAGE_BUDGETS = ("context-later", "full")
DIVISION_INPUTS = ("first-strategy", "pure-dp")
LEFTOVER_DP = ("per-stage", "once")
#: How a stated fabric's published points are read (``cost.network_of``): ``"file"``, as the fabric's file says
#: (``fabrics.shortfall``); ``"bandwidth"`` or ``"latency"`` whatever it says: a what-if (chapter 9 prices the
#: Ultra-Scale Playbook's runs both ways).
FABRIC_READINGS = ("file", "bandwidth", "latency")
P2P = ("cluster", "none")


def _artifact_model_rule(model_name: str) -> str:
    for key in ("bert", "vit", "t5", "swin"):
        if model_name.lower().startswith(key):
            return key
    raise ValueError(f"chunks='artifact' has no rule for model {model_name!r}: the artifact has one for "
                     f"bert, vit, t5 and swin; set chunks to one of {CHUNK_RULES}")


@dataclass(frozen=True)
class CostRules:
    """The modelling choices that differ between Galvatron versions (see the module docstring)."""

    name: str = "custom"
    chunks: str = "galvatron2"
    micro_bsz: int = 4                 # galvatron2 rule: samples per micro-batch on one GPU
    max_chunks: int = 8                # galvatron2 rule: at most this many micro-batches
    stage_budgets: str = "context-later"
    division_input: str = "first-strategy"
    mem_bins_max: int | None = 16384
    leftover_dp: str = "per-stage"
    decoder_pp_overlap: float = 2.0 / 3.0
    sdp_gather_factor: float = 0.5
    sdp_gather_per_chunk: bool = False
    sdp_mem_bias: float = 0.025
    p2p: str = "cluster"
    p2p_ms_per_mb_by_pp: tuple = ()    # ((pp, ms per MB), ...): overrides the cluster's coefficient
    # The mechanisms of practice (see MECHANISMS; all off in galvatron2 and vldb2023). Only
    # cost.step_estimate and practice_search read them: the layer-wise cost model above never does.
    mixed_precision: bool = False
    fused_attention: bool = False
    pipeline_schedules: bool = False
    zero_stages: bool = False
    sequence_parallel: bool = False
    selective_recompute: bool = False
    context_parallel: bool = False
    hierarchical_network: bool = False
    any_degrees: bool = False
    shape_efficiency: bool = False
    micro_batch_search: bool = False
    attention_efficiency: bool = False
    embedding_and_head: bool = False
    tp_comm_overlap: bool = False
    flat_zero3_collectives: bool = False
    without_sequence_parallel: bool = False
    without_selective_recompute: bool = False
    without_zero: bool = False
    without_sharded_gradients: bool = False
    without_context_parallel: bool = False
    without_uneven_stages: bool = False
    without_fused_attention: bool = False
    without_interleaving: bool = False
    without_tensor_parallel: bool = False
    without_pipeline: bool = False
    without_op_recompute: bool = False
    queued_collectives: bool = False
    exposed_param_gather: bool = False
    tp_backward_waits: bool = False
    tp_overlap_own_shard: bool = False
    stages_by_cost: bool = False
    fp16_gradients: bool = False
    one_param_gather: bool = False
    keeps_stage_outputs: bool = False
    keeps_16bit_grads: bool = False
    dp_bucket_params: int = 0          # stack numbers (STACK_NUMBERS): the DP collectives' buckets
    dp_bucket_per_rank: int = 0
    dp_bucket_layers: int = 0
    wave_quantization: bool = False
    measured_collectives: bool = False
    grad_reduce_bytes: int = 4         # mixed precision: gradients accumulated and reduced in fp32
    oversubscription: float = 1.0      # hierarchical network: port bandwidth divided above a pod
    pod_nodes: int = 0                 # nodes per pod (0: no pod level)
    fabric_reading: str = "file"       # a stated fabric's loss below its line rate (FABRIC_READINGS)

    def __post_init__(self):
        def choice(field, allowed):
            v = getattr(self, field)
            if v not in allowed:
                raise ValueError(f"CostRules.{field} must be one of {allowed}; got {v!r}")

        def number(field, lo, hi, integer=False, lo_open=False):
            v = getattr(self, field)
            ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            ok = ok and (v > lo if lo_open else v >= lo) and v <= hi and (not integer or int(v) == v)
            if not ok:
                kind = "an integer" if integer else "a finite number"
                low = f"> {lo}" if lo_open else f">= {lo}"
                raise ValueError(f"CostRules.{field} must be {kind} {low} and <= {hi}; got {v!r}")

        if not isinstance(self.name, str):
            raise ValueError(f"CostRules.name must be a string; got {self.name!r}")
        choice("chunks", CHUNK_RULES)
        choice("stage_budgets", STAGE_BUDGETS)
        choice("division_input", DIVISION_INPUTS)
        choice("leftover_dp", LEFTOVER_DP)
        choice("p2p", P2P)
        choice("fabric_reading", FABRIC_READINGS)
        number("micro_bsz", 1, 1 << 20, integer=True)
        number("max_chunks", 1, 1 << 20, integer=True)
        if self.mem_bins_max is not None:
            number("mem_bins_max", 1, 1 << 30, integer=True)
        number("decoder_pp_overlap", 0.0, 1.0)
        number("sdp_gather_factor", 0.0, 10.0)
        number("sdp_mem_bias", 0.0, 1.0)
        if not isinstance(self.sdp_gather_per_chunk, bool):
            raise ValueError(f"CostRules.sdp_gather_per_chunk must be True or False; "
                             f"got {self.sdp_gather_per_chunk!r}")
        for f in MECHANISM_FIELDS + STACK_FIELDS + CANDIDATE_FIELDS:
            if not isinstance(getattr(self, f), bool):
                raise ValueError(f"CostRules.{f} must be True or False; got {getattr(self, f)!r}")
        if self.grad_reduce_bytes not in (2, 4) or isinstance(self.grad_reduce_bytes, bool):
            raise ValueError(f"CostRules.grad_reduce_bytes must be 2 or 4; got {self.grad_reduce_bytes!r}")
        for f in STACK_NUMBERS:
            number(f, 0, 1 << 40, integer=True)
        number("oversubscription", 1.0, 1e3)
        number("pod_nodes", 0, 1 << 30, integer=True)
        pairs = self.p2p_ms_per_mb_by_pp
        if not isinstance(pairs, tuple) or not all(
                isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], int) and not isinstance(p[0], bool)
                and p[0] >= 2 and isinstance(p[1], (int, float)) and not isinstance(p[1], bool)
                and math.isfinite(p[1]) and p[1] >= 0 for p in pairs):
            raise ValueError(f"CostRules.p2p_ms_per_mb_by_pp must be a tuple of (pp >= 2, ms per MB >= 0) "
                             f"pairs; got {pairs!r}")

    def with_(self, **changes) -> "CostRules":
        """A copy with some fields changed (named ``custom`` unless ``name`` is given)."""
        changes.setdefault("name", "custom")
        return replace(self, **changes)

    # ------------------------------------------------------------------------------------------ chunks
    def chunks_for(self, model_name: str, global_bsz: int, s, n_gpus: int) -> float:
        """Micro-batches of one iteration for a layer under strategy ``s`` (``s.pp``, ``s.tp``, ``s.dp``).
        1 without PP; may be fractional under the artifact's rules (as in the artifact)."""
        if s.pp == 1:
            return 1
        rule = self.chunks
        if rule == "galvatron2":
            per_gpu = global_bsz * s.pp / n_gpus
            return int(min(self.max_chunks, max(1, math.ceil(per_gpu / self.micro_bsz - 1e-9))))
        if rule == "artifact":
            rule = _artifact_model_rule(model_name)
        b = global_bsz / s.dp
        if rule == "bert":
            if s.dp == 1 and s.tp > 1:     # the artifact's shapes 2-4-1 and 4-2-1
                return b / 4
            return b / 2 if b < 6 else b / 8 + 2
        if rule == "vit":
            return 1 if b == 8 else 2
        if rule == "t5":
            return 1 if b == 2 else (3 if s.pp == 8 else 2)
        # swin
        if b <= 8:
            return 1
        return 2 if b < 32 else (3 if b <= 96 else 4)

    def plan_chunks(self, model_name: str, global_bsz: int, strategies, n_gpus: int) -> int:
        """The whole number written into a plan: the largest count of its layers, as an integer (the Hetu
        artifact's ``max(int(chunks))``); 1 without PP."""
        if strategies[0].pp == 1:
            return 1
        return max(1, max(int(self.chunks_for(model_name, global_bsz, s, n_gpus)) for s in strategies))

    def p2p_coe(self, cluster, pp: int):
        """ms per MB of a pipeline send at degree ``pp``, or None for no P2P term."""
        if self.p2p == "none" or pp == 1:
            return None
        by_pp = dict(self.p2p_ms_per_mb_by_pp)
        if pp in by_pp:
            return float(by_pp[pp])
        return cluster.p2p_ms_per_mb

    def mem_step_mb(self, budget_mb: float) -> int:
        """Width of the DP's memory bins (MB) for a budget."""
        if self.mem_bins_max is None:
            return 1
        return max(1, math.ceil(budget_mb / self.mem_bins_max))


#: The twelve mechanisms of practice, in the order the ablation switches them on: (name, CostRules fields it
#: switches, what it changes). Switched off, each leaves its term as the previous model had it.
MECHANISMS = (
    ("embedding and head", ("embedding_and_head",),
     "the embedding and output head priced where they live: the head's matmuls on the last stage, their "
     "parameters in the first and last stages' model states and gradient traffic, fp32 logits of one "
     "micro-batch on the last stage, a 1 GiB reserve on every GPU (cost.py); off: the paper's \"other\" "
     "memory on every stage (whole embeddings, fp32 logits of the local batch, a 1 GiB context) and no "
     "time"),
    ("mixed precision", ("mixed_precision",),
     "16-bit weights, activations and messages; fp32 master weights and Adam states (precision.py)"),
    ("fused attention", ("fused_attention",),
     "no s x s scores kept for backward; a causal kernel skips the masked half (activations.py)"),
    ("pipeline schedules", ("pipeline_schedules",),
     "1F1B and interleaved 1F1B: their bubble, micro-batches in flight, sends once per micro-batch "
     "(schedules.py); off: GPipe as the layer-wise model prices it (its bubble on every layer: the average "
     "stage's step), every micro-batch held, its sends (per layer x pp, / 24; none under p2p='none')"),
    ("ZeRO stages", ("zero_stages",),
     "ZeRO-1/2/3 memory and reduce-scatter / all-gather, overlapped with compute (zero.py); off: plain DP "
     "or ZeRO-3 as the paper's SDP, the all-reduce overlapping the layer-wise share of the backward at "
     "kappa 1.3 in every stage (leftover_dp, sdp_gather_factor, sdp_mem_bias)"),
    ("sequence parallelism and selective recompute", ("sequence_parallel", "selective_recompute"),
     "activations of the TP-replicated parts split over TP; attention recomputed instead of kept "
     "(activations.py); off: recompute is all or nothing, as the paper's CKPT (one more forward, no TP "
     "messages or working memory for it)"),
    ("context parallelism", ("context_parallel",), "ring attention over cp ranks (activations.py)"),
    ("hierarchical network", ("hierarchical_network",),
     "NVLink inside a node, each GPU's port between nodes, hierarchical rings, link latency "
     "(collectives.py); off: one flat ring at the slowest hop, bandwidth only (the paper's ms per MB)"),
    ("any degrees and uneven stages", ("any_degrees",),
     "degrees that are not powers of two; lighter first and last stages (layout.py)"),
    ("shape-dependent efficiency", ("shape_efficiency",),
     "compute efficiency from the matmul width, fitted per GPU type (efficiency.py); off: a flat 0.7"),
    ("micro-batch search", ("micro_batch_search",),
     "micro-batch size and gradient accumulation searched, only micro-batches in flight held; off: "
     "Galvatron-2's 4 samples per micro-batch"),
    ("attention kernel efficiency", ("attention_efficiency",),
     "the s x s attention core at the fraction of peak its fused kernel is quoted to reach on the GPU type "
     "(FlashAttention-2: 50% on A100, 35% on H100; data/hardware/gpus/), not at the GEMMs' rate"),
)
MECHANISM_FIELDS = tuple(f for _, fs, _ in MECHANISMS for f in fs)
#: What a job's software stack does, not a mechanism the cost model gains: off in every preset (the
#: default of the stacks: Megatron-Core's ``--tp-comm-overlap`` is off unless given), set per run from its
#: source by ``validate.run_rules``. ``tp_comm_overlap``: with sequence parallelism, the TP all-gathers and
#: reduce-scatters pipelined with the GEMMs around them (only what outlasts them stays exposed).
#: ``flat_zero3_collectives``: ZeRO-3's parameter all-gathers and gradient reduce-scatters over a group that
#: spans nodes run as one flat ring at each GPU's port speed, not hierarchically (``data/stacks/``: the
#: DeepSpeed ZeRO-3 of SC'21's Table 2).
#: What a stack cannot do (``STACK_LIMITS``; off in every preset and in today's stacks): the search leaves
#: such layouts out, and pricing reads only ``without_fused_attention``. ``without_sequence_parallel``, ``without_selective_recompute``:
#: Megatron-LM before Korthikanti et al. (2022) had neither; ``without_zero``: no ZeRO stage (Megatron-LM's
#: distributed optimizer came in 2022), so ``zero`` is 0; ``without_context_parallel``: no context parallelism
#: (Megatron-Core's came in 2024); ``without_uneven_stages``: every stage and chunk holds the same number of
#: layers (no uneven stages, no embedding-only or head-only chunk, as in Llama 3). A run trained in 2021 is
#: re-planned with what it had. One limit is priced too: ``without_fused_attention``, attention as separate
#: kernels before FlashAttention (2022): the s x s scores are kept for backward, and the attention core runs
#: at the GEMMs' rate over the whole square, as if ``fused_attention`` and ``attention_efficiency`` were off.
#: ``without_sharded_gradients``: ZeRO-1 at most (optimizer states sharded; no ZeRO-2 or ZeRO-3), as nanotron's
#: ZeroDistributedOptimizer; ``without_interleaving``: 1F1B without virtual stages (``vp`` is 1), as DeepSpeed's
#: pipeline engine runs;
#: ``without_tensor_parallel``, ``without_pipeline``: ``tp`` or ``pp`` is 1 (FSDP alone, as llm-foundry);
#: ``without_op_recompute``: no op-level checkpointing (recompute ``"op"``, torchtitan's: every other
#: projection's output kept, ``activations.py``), which only torchtitan offers.
STACK_LIMITS = ("without_sequence_parallel", "without_selective_recompute", "without_zero",
                "without_sharded_gradients",
                "without_context_parallel", "without_uneven_stages", "without_fused_attention",
                "without_interleaving", "without_tensor_parallel", "without_pipeline", "without_op_recompute")
#: ``queued_collectives``: the per-micro-batch data-parallel collectives (ZeRO-2's gradient reduce-scatter,
#: ZeRO-3's gathers) queue on their own stream and may run on under the next micro-batch's compute; only the
#: last micro-batch's tail, and a queue that grows faster than compute drains it, are exposed. Off (every
#: stack but Meta's): each one must finish inside its own micro-batch's forward or backward, as when the
#: framework waits for it at the end of every backward call (PyTorch FSDP's post-backward callback). On for
#: ``meta-llama3``: the Llama 3 paper (section 3.3.2) says its FSDP "can tolerate longer network latency by
#: asynchronously prefetching sharded model weights and reducing gradients".
#: ``exposed_param_gather``: ZeRO-1 and ZeRO-2 gather the updated weights at the end of the optimizer step and
#: the step waits for that all-gather (DeepSpeed's ``stage_1_and_2.py`` ``step()``, nanotron's
#: ``ZeroDistributedOptimizer.step()``); off: the gather runs bucket by bucket under the next step's first
#: forward (Megatron-Core's ``--overlap-param-gather``, FSDP's pre-forward gathers with prefetching).
#: ``tp_backward_waits``: the backward's TP collectives are issued after the GEMMs that produce their input
#: and waited for at once (nanotron's linear layers without ``tp_linear_async_communication``), so none
#: hides under the weight-gradient GEMMs, and with sequence parallelism each column-parallel layer gathers
#: its input again (``tp_recompute_allgather``); off: Megatron-LM's sequence-parallel linear layers, whose
#: backward reduce-scatters run under the weight-gradient GEMMs (Korthikanti et al. 2022). A run that states
#: the TP overlap (``tp_comm_overlap``) waits for neither.
#: ``tp_overlap_own_shard``: what the TP overlap hides when a run turns it on (``tp_comm_overlap``): only the
#: GEMM on a rank's own shard runs under an all-gather, and the forward's reduce-scatters wait (nanotron's
#: ``tp_linear_async_communication``: ``_ColumnLinearAsyncCommunication`` multiplies its own slice while the
#: input gathers, ``_RowLinearAsyncCommunication`` reduce-scatters synchronously in forward and gathers the
#: output gradient under its own slice's GEMM in backward; the column layer's backward gathers under the
#: input-gradient GEMM and reduce-scatters under the weight-gradient GEMM). Off: Megatron-core's
#: ``--tp-comm-overlap``, which pipelines every chunk of every TP collective with its GEMM.
#: ``stages_by_cost``: pipeline stages split by a cost per block, the output head's included
#: (``layout.stage_layers_by_cost``: nanotron's ``build_model``), not by layer count.
#: ``fp16_gradients``: a run in fp16 accumulates and reduces its gradients in fp16, 2 bytes each, as
#: DeepSpeed's fp16 engine does (its ZeRO-1/2 optimizer reduces the 16-bit ``param.grad``); off: in fp32
#: (``grad_reduce_bytes``), as Megatron-LM does under bf16 and the planner assumes for every run. Only
#: fp16 runs change: bf16 runs accumulate in fp32 either way (DeepSpeed's BF16_Optimizer).
#: ``one_param_gather``: the optimizer step's gather of the updated weights (``exposed_param_gather``) is one
#: collective on one flattened buffer, paying its latency once, not one per bucket of the stack's
#: ``STACK_NUMBERS`` (nanotron's ``all_gather_coalesced`` flattens every shard into one ``dist.all_gather``).
#: ``keeps_stage_outputs``: a pipeline stage keeps each in-flight micro-batch's output tensor (the activation it
#: sent on) until that micro-batch's backward, one more boundary tensor per micro-batch in flight (DeepSpeed's
#: ``PipelineEngine``: ``pipe_buffers['outputs']``; ``torch.distributed.pipelining``: ``fwd_cache``); off: the
#: output's data is freed once sent (Megatron-LM's ``deallocate_pipeline_outputs``, since December 2021).
#: ``keeps_16bit_grads``: where gradients accumulate in fp32, the 16-bit ``param.grad`` the backward writes
#: stays allocated beside them, 2 more bytes per parameter, not sharded, under ZeRO 0 or 1 (DeepSpeed's
#: ``BF16_Optimizer``, which zeroes it rather than freeing it; ZeRO-2/3 take DeepSpeed's ZeRO optimizer); off: it
#: is added into the fp32 buffer and freed, or never made (Megatron-LM's fused weight-gradient accumulation into
#: ``main_grad``).
STACK_FIELDS = ("tp_comm_overlap", "flat_zero3_collectives", "queued_collectives", "exposed_param_gather",
                "tp_backward_waits", "tp_overlap_own_shard", "stages_by_cost", "fp16_gradients",
                "one_param_gather", "keeps_stage_outputs", "keeps_16bit_grads") + STACK_LIMITS
#: What a stack does, as numbers (0 in every preset): how it splits a stage's data-parallel collectives (the
#: gradient all-reduce or reduce-scatter, ZeRO's weight gathers, once a step or every micro-batch) into buckets. A bucket
#: holds max(``dp_bucket_params``, ``dp_bucket_per_rank`` x the dp x cp ranks, ``dp_bucket_layers`` x one
#: layer's parameters) of the stage's parameters on one GPU (Megatron-Core: max(40M, 1M x dp); PyTorch DDP:
#: 25 MB of gradients; FSDP: one Transformer block). Each bucket pays the collective's latency, and the last
#: one (the first, for a gather) cannot start before its window ends (begins), so at least one bucket is
#: exposed. All three 0: one collective per stage, hidden as far as its window allows (the rule before
#: buckets).
STACK_NUMBERS = ("dp_bucket_params", "dp_bucket_per_rank", "dp_bucket_layers")


def stack_allows(rules: CostRules, field: str, value) -> bool:
    """Whether a stack with ``rules``' limits (``STACK_LIMITS``) can run config field ``field`` at ``value``: the
    one reading of the limits on ``zero``, ``recompute``, ``sequence_parallel`` and ``vp``, for the search
    (``practice_search.layouts``) and for a published run's fills (``fills.candidates``)."""
    if field == "zero":
        return not ((rules.without_zero and value > 0) or (rules.without_sharded_gradients and value > 1))
    if field == "recompute":
        return not ((rules.without_selective_recompute and value == "selective")
                    or (rules.without_op_recompute and value == "op"))
    if field == "sequence_parallel":
        return not (rules.without_sequence_parallel and value)
    if field == "vp":
        return not (rules.without_interleaving and value > 1)
    raise ValueError(f"stack_allows: field must be one of zero, recompute, sequence_parallel, vp; got {field!r}")
#: Candidate mechanisms: built and tested, but off in every preset (``practice`` included) until they earn
#: their place on the published runs; ``validate --with NAME`` switches one on for a run of the report.
#: ``wave_quantization``: every GEMM of a layer at the GPU's fitted efficiency times its tile- and
#: wave-quantization factor (``quantization.py``: tiles of the GPU's ``gemm_tile`` in waves of its ``sms``).
#: ``measured_collectives``: the hierarchical network's collectives at the bus bandwidth and latency that
#: published collective benchmarks measured for the fabric, as functions of ranks and nodes
#: (``data/hardware/fabrics/fabrics.json``, ``fabrics.py``), instead of the datasheet's x ``link_efficiency``.
CANDIDATE_FIELDS = ("wave_quantization", "measured_collectives")

GALVATRON2 = CostRules(name="galvatron2")
VLDB2023 = CostRules(name="vldb2023", chunks="artifact", stage_budgets="full", division_input="pure-dp",
                     mem_bins_max=None, leftover_dp="once", decoder_pp_overlap=0.5, p2p="none")
PRESETS = {"galvatron2": GALVATRON2, "vldb2023": VLDB2023}
#: ``practice``: the galvatron2 choices plus every mechanism of MECHANISMS. It prices a whole step of a
#: uniform Transformer (cost.step_estimate); the layer-wise search of engine.py keeps the two presets above.
PRACTICE = GALVATRON2.with_(name="practice", **{f: True for f in MECHANISM_FIELDS})
ALL_PRESETS = {**PRESETS, "practice": PRACTICE}

#: (field, what it decides) for the table that sets the two presets side by side.
FIELD_NOTES = (
    ("chunks", "micro-batches per iteration of a pipelined strategy"),
    ("stage_budgets", "memory of pipeline stages after the first (heterogeneous models)"),
    ("division_input", "what the memory-balanced stage division is fed (heterogeneous models)"),
    ("mem_bins_max", "memory bins of the DP (None: always 1 MB)"),
    ("leftover_dp", "leftover all-reduce of 2-1-4 and 4-1-2 when it outlasts the backward"),
    ("decoder_pp_overlap", "backward share overlapped in a pipelined TP x DP decoder layer"),
    ("sdp_gather_factor", "SDP's extra all-gather, x the all-reduce time"),
    ("sdp_gather_per_chunk", "SDP all-gather once per micro-batch"),
    ("sdp_mem_bias", "SDP model states: 1/dp + this"),
    ("p2p", "pipeline point-to-point term"),
)


def get_rules(rules) -> CostRules:
    """A CostRules from itself, a preset name or None (the default, ``galvatron2``)."""
    if rules is None:
        return GALVATRON2
    if isinstance(rules, CostRules):
        return rules
    if isinstance(rules, str) and rules in ALL_PRESETS:
        return ALL_PRESETS[rules]
    raise ValueError(f"rules must be a CostRules or one of {sorted(ALL_PRESETS)}; got {rules!r}")


def differences(a: CostRules, b: CostRules) -> list[tuple]:
    """(field, what it decides, a's value, b's value) for every field in which two rule sets differ."""
    out = []
    for field, what in FIELD_NOTES:
        va, vb = getattr(a, field), getattr(b, field)
        if va != vb:
            out.append((field, what, va, vb))
    return out
