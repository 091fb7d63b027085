"""The planner under ``practice``: every layout of a uniform Transformer job that the rules allow, priced by
``cost.step_estimate``, and the fastest one that fits in memory.

The search space is bounded so that 16,384 GPUs take seconds, not hours:

- ``tp`` divides the GPUs of a node (tensor parallelism stays inside a node) and the attention heads;
- ``cp`` (context parallelism, with its switch) is 1, 2, 4 or 8 and divides the sequence;
- ``pp`` is any divisor of the remaining GPUs up to the layer count (with ``any_degrees``; powers of two
  otherwise), with uneven stages where it does not divide the layers; ``dp`` is what is left;
- ``micro_batch`` is 1, 2, 4 or 8 sequences (with ``micro_batch_search``; Galvatron-2's 4 otherwise, or
  fewer where the local batch is smaller), and must divide the local batch: the global batch is the user's;
- ``vp`` is 1, 2 or 4 where it divides every stage's layers (with pipeline schedules); with uneven stages
  (``any_degrees``) also where it does not, and 8, up to ``pp vp = layers + 2`` (``layout.chunk_layers``:
  chunks of unequal layers, an embedding-only and a head-only chunk at the ends, as in Llama 3);
- ``zero`` is 0-3 (0 or 3 without ZeRO stages); ``recompute`` none, selective and op (with its switch; op only where the stack offers it) or full;
  sequence parallelism is on whenever tp > 1 (with its switch): it saves memory and costs nothing;
- a stack's limits (``rules.STACK_LIMITS``, ``data/stacks/``) leave out what the stack could not do: no
  sequence parallelism, no selective recompute, no ZeRO stage, no context parallelism, stages and chunks
  of unequal layers, no interleaved chunks, no tensor parallelism or no pipeline.

``search_practice(job, rules)`` returns the best ``(config, estimate)`` and how many layouts it priced;
``None`` as config when nothing fits. Used in: ``lib/galvatron/validate.py``.
"""

from __future__ import annotations

from .activations import RECOMPUTE
from .cost import stages_of, step_estimate
from .layout import LayoutError, ParallelConfig, stage_layers
from .rules import CostRules, get_rules, stack_allows

MICRO_BATCHES = (1, 2, 4, 8)
CP_DEGREES = (1, 2, 4, 8)
VP_DEGREES = (1, 2, 4)
VP_DEGREES_UNEVEN = (1, 2, 4, 8)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _pow2(n: int) -> bool:
    return n & (n - 1) == 0


def layouts(job, rules: CostRules | None = None):
    """Every ParallelConfig of the bounded space (see the module docstring) for ``job`` under ``rules``."""
    rules = get_rules(rules)
    sh, n, B = job.shape, job.n_gpus, job.global_batch
    tps = [t for t in _divisors(job.gpus_per_node) if n % t == 0 and sh.n_heads % t == 0
           and (t == 1 or not rules.without_tensor_parallel)]
    cps = ([c for c in CP_DEGREES if sh.seq_len % c == 0] if rules.context_parallel
           and not rules.without_context_parallel else [1])
    even = rules.without_uneven_stages
    zeros = tuple(z for z in ((0, 1, 2, 3) if rules.zero_stages else (0, 3)) if stack_allows(rules, "zero", z))
    recomputes = tuple(r for r in (RECOMPUTE if rules.selective_recompute else ("none", "full"))
                       if stack_allows(rules, "recompute", r))
    with_sp = rules.sequence_parallel and stack_allows(rules, "sequence_parallel", True)
    for tp in tps:
        for cp in cps:
            if (n // tp) % cp:
                continue
            rest = n // (tp * cp)
            for pp in _divisors(rest):
                if pp > sh.n_layers or (not rules.any_degrees and not (_pow2(pp) and _pow2(tp))):
                    continue
                if (even and sh.n_layers % pp) or (pp > 1 and rules.without_pipeline):
                    continue
                dp = rest // pp
                if B % dp:
                    continue
                local = B // dp
                if rules.micro_batch_search:
                    mbs = [mb for mb in MICRO_BATCHES if local % mb == 0]
                else:
                    mbs = [max(mb for mb in MICRO_BATCHES if mb <= rules.micro_bsz and local % mb == 0)]
                layers = stage_layers(sh.n_layers, pp, uneven=rules.any_degrees)
                if rules.stages_by_cost and pp > 1:
                    try:
                        stages_of(sh, pp, 1, rules)
                    except LayoutError:       # the stack's split by cost leaves a stage empty
                        continue
                vps = [1]
                interleaves = rules.pipeline_schedules and pp > 1 and stack_allows(rules, "vp", 2)
                if interleaves and even:
                    vps = [v for v in range(1, VP_DEGREES_UNEVEN[-1] + 1) if (sh.n_layers // pp) % v == 0]
                elif interleaves and rules.any_degrees:
                    vps = [v for v in VP_DEGREES_UNEVEN if pp * v <= sh.n_layers + 2]
                elif interleaves:
                    vps = [v for v in VP_DEGREES if all(x % v == 0 for x in layers)]
                for mb in mbs:
                    for vp in vps:
                        for zero in zeros:
                            for rc in recomputes:
                                yield ParallelConfig(tp=tp, pp=pp, dp=dp, cp=cp, vp=vp, micro_batch=mb,
                                                     sequence_parallel=with_sp and tp > 1,
                                                     zero=zero, recompute=rc)


def search_practice(job, rules: CostRules | None = "practice", prune: bool = True) -> tuple:
    """(best config or None, its estimate or None, layouts priced): the highest tokens/s/GPU that fits.
    Layouts that differ only in recompute come in the order none, selective, op, full (each smaller than the
    one before and, but for op against selective at sequences long enough for attention to outweigh half the
    projections, slower): once one fits, the later ones are not priced.

    ``prune`` skips what cannot win, without changing the answer: layouts that differ only in ZeRO stage and
    recompute share their pipeline, and recompute only lengthens it, so the first of them (ZeRO 0, no
    recompute) bounds them all: the step is at least its ``pipeline_s + p2p_s`` (the pipeline's sends do not
    depend on either; the data-parallel term only adds), so no layout of the group beats
    ``global_batch x seq_len / (pipeline_s + p2p_s) / GPUs`` tokens/s/GPU.
    When that bound is no more than the best so far, the rest of the group is skipped (the search keeps the
    first of equal layouts, so a tie cannot win either). ``prune=False`` prices every layout."""
    top, count = search_top(job, rules, 1, prune=prune)
    return (*top[0], count) if top else (None, None, count)


def search_top(job, rules: CostRules | None = "practice", k: int = 5, prune: bool = True) -> tuple:
    """([(config, estimate)] of the ``k`` fastest layouts that fit, fastest first; layouts priced): the
    search of ``search_practice`` keeping ``k`` instead of one. Layouts that differ only in recompute count
    once, at the fastest recompute that fits (a slower recompute of the same layout is no alternative). The
    same pruning as :func:`search_practice` holds with the k-th best as the bar (a group whose bound cannot beat
    it is skipped; ``prune=False`` prices every layout); ties keep the layout met first."""
    import heapq

    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be an integer >= 1; got {k!r}")
    rules = get_rules(rules)
    heap, count, fitted = [], 0, None           # heap of (tokens/s, -count when priced, config, estimate)
    group, skip = None, False
    for cfg in layouts(job, rules):
        key = (cfg.tp, cfg.pp, cfg.dp, cfg.cp, cfg.vp, cfg.micro_batch, cfg.sequence_parallel)
        if key != group:
            group, skip = key, False
        if skip:
            continue
        base = (key, cfg.zero)
        if base == fitted:
            continue
        est = step_estimate(job, cfg, rules)
        count += 1
        if est["fits"]:
            fitted = base
            item = (est["tokens_per_s_per_gpu"], -count, cfg, est)
            if len(heap) < k:
                heapq.heappush(heap, item)
            elif item[:2] > heap[0][:2]:
                heapq.heapreplace(heap, item)
        if prune and cfg.zero == 0 and cfg.recompute == "none" and len(heap) == k:
            bound = job.global_batch * job.shape.seq_len / (est["pipeline_s"] + est["p2p_s"]) / job.n_gpus
            skip = bound <= heap[0][0]
    best = sorted(heap, key=lambda x: x[:2], reverse=True)
    return [(c, e) for _, _, c, e in best], count
